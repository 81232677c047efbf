"""Run an ASGI app with uvicorn on a background thread, bound to a real TCP socket.

The socket is bound (and listening) before the thread starts, so the port is known at once
and a port that is already taken fails fast with :class:`PortInUseError`.
"""

from __future__ import annotations

import contextlib
import errno
import socket
import threading
from typing import Any

import uvicorn


class PortInUseError(OSError):
    """The requested TCP port is already bound by another process or server."""


def bind_socket(host: str, port: int) -> socket.socket:
    """Bind and listen on ``host:port`` (``port=0`` picks a free one)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    # SO_REUSEADDR only skips TIME_WAIT leftovers on POSIX; a live listener still wins.
    if hasattr(socket, "SO_REUSEADDR") and socket.SO_REUSEADDR:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno in (errno.EADDRINUSE, errno.EACCES):
            raise PortInUseError(exc.errno, f"{host}:{port} is already in use ({exc})") from exc
        raise
    sock.listen(128)
    sock.setblocking(False)
    return sock


class CloseConnections:
    """ASGI middleware: answer every HTTP request with ``Connection: close``.

    Clients then never keep a pooled connection between requests. That matters in tests:
    langchain-openai caches one ``httpx.AsyncClient`` per base URL for the whole process, and
    pytest-asyncio gives each test its own event loop, so a kept-alive connection opened in
    one test's loop gets reused (and fails with "Event loop is closed") in the next one.
    """

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_closing(message: Any) -> None:
            if message["type"] == "http.response.start":
                headers = [
                    (k, v) for k, v in message.get("headers", []) if k.lower() != b"connection"
                ]
                headers.append((b"connection", b"close"))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_closing)


class ThreadedUvicorn:
    """uvicorn serving ``app`` on ``host:port`` from a daemon thread.

    ``keep_alive=False`` (the default) closes every connection after its response; see
    :class:`CloseConnections`.
    """

    def __init__(
        self,
        app: Any,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        name: str = "asgi",
        keep_alive: bool = False,
    ):
        self.app = app if keep_alive else CloseConnections(app)
        self.host = host
        self.requested_port = port
        self.name = name
        self.port: int | None = None
        self._sock: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, timeout: float = 10.0) -> None:
        if self.running:
            return
        self._sock = bind_socket(self.host, self.requested_port)
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            access_log=False,
            lifespan="off",
            loop="asyncio",
            http="h11",
            ws="none",
            timeout_keep_alive=5,
            timeout_graceful_shutdown=1,
        )
        self._server = uvicorn.Server(config)
        self._error = None

        def run() -> None:
            try:
                assert self._server is not None and self._sock is not None
                self._server.run(sockets=[self._sock])
            except BaseException as exc:  # SystemExit from a failed startup included
                self._error = exc

        self._thread = threading.Thread(target=run, name=f"{self.name}:{self.port}", daemon=True)
        self._thread.start()
        # The socket already listens, so clients could connect right away; still wait until
        # uvicorn accepts, so that a failed startup surfaces here and not as a client timeout.
        deadline_event = threading.Event()
        waited = 0.0
        while not self._server.started:
            if self._error is not None or not self._thread.is_alive():
                self._cleanup_socket()
                raise RuntimeError(f"{self.name} server failed to start: {self._error!r}")
            if waited >= timeout:
                self.stop()
                raise TimeoutError(f"{self.name} server did not start within {timeout} s")
            deadline_event.wait(0.005)
            waited += 0.005

    def stop(self, timeout: float = 10.0) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout)
            if self._thread.is_alive() and self._server is not None:
                self._server.force_exit = True
                self._thread.join(timeout)
        self._thread = None
        self._server = None
        self._cleanup_socket()

    def _cleanup_socket(self) -> None:
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
