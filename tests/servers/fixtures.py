"""Pytest fixtures for the local test servers.

``tests/conftest.py`` imports them by name, which makes them every test's fixtures.

Each server is started once per test session (on 127.0.0.1) and reset before every test
that uses it, so tests are isolated and fast.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.servers._thread_server import PortInUseError
from tests.servers.openai_compat import OpenAICompatServer
from tests.servers.qdrant_rest import QdrantRestShim

__all__ = [
    "OPENAI_TEST_API_KEY",
    "openai_server",
    "openai_server_session",
    "qdrant_server",
    "qdrant_server_6333",
    "qdrant_server_6333_session",
    "qdrant_server_session",
]

OPENAI_TEST_API_KEY = "sk-test-local"

# Env vars that would send OpenAI-SDK-based clients somewhere else than our server.
_REDIRECTING_ENV = (
    "OPENROUTER_API_KEY",  # mem0's OpenAI LLM switches to OpenRouter when this is set
    "OPENROUTER_API_BASE",
    "AZURE_OPENAI_ENDPOINT",
    "AZURE_OPENAI_API_KEY",
    "OPENAI_ORG_ID",
    "OPENAI_ORGANIZATION",
    "OPENAI_PROJECT_ID",
)


@pytest.fixture(scope="session")
def openai_server_session() -> Iterator[OpenAICompatServer]:
    """One OpenAI-compatible server for the whole session (no env vars set)."""
    server = OpenAICompatServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def openai_server(
    openai_server_session: OpenAICompatServer, monkeypatch: pytest.MonkeyPatch
) -> Iterator[OpenAICompatServer]:
    """The OpenAI-compatible server, reset, with the environment pointing at it.

    Sets ``OPENAI_BASE_URL`` (read by the openai SDK itself and by mem0's OpenAI LLM and
    embedder), ``OPENAI_API_BASE`` (read first by langchain-openai's ``ChatOpenAI`` /
    ``OpenAIEmbeddings``, and by mem0's embedder) and ``OPENAI_API_KEY`` (every client refuses
    to start without one). Install a responder with ``openai_server.responder = ...``.
    """
    server = openai_server_session
    server.reset()
    monkeypatch.setenv("OPENAI_BASE_URL", server.base_url)
    monkeypatch.setenv("OPENAI_API_BASE", server.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_TEST_API_KEY)
    for name in _REDIRECTING_ENV:
        monkeypatch.delenv(name, raising=False)
    yield server
    server.reset()


@pytest.fixture(scope="session")
def qdrant_server_session() -> Iterator[QdrantRestShim]:
    """One Qdrant REST shim (in-memory, random port) for the whole session."""
    shim = QdrantRestShim(port=0).start()
    try:
        yield shim
    finally:
        shim.close()


@pytest.fixture
def qdrant_server(qdrant_server_session: QdrantRestShim) -> Iterator[QdrantRestShim]:
    """An empty Qdrant REST shim on a random port: ``QdrantClient(url=qdrant_server.url)``."""
    qdrant_server_session.reset()
    yield qdrant_server_session
    qdrant_server_session.reset()


@pytest.fixture(scope="session")
def qdrant_server_6333_session() -> Iterator[QdrantRestShim]:
    shim = QdrantRestShim(port=6333)
    try:
        shim.start()
    except PortInUseError as exc:
        shim.client.close()
        pytest.skip(
            f"127.0.0.1:6333 is already in use ({exc.strerror}); cannot start the Qdrant "
            "REST shim there for tests that use backend_url='http://localhost:6333'"
        )
    try:
        yield shim
    finally:
        shim.close()


@pytest.fixture
def qdrant_server_6333(qdrant_server_6333_session: QdrantRestShim) -> Iterator[QdrantRestShim]:
    """An empty Qdrant REST shim on 127.0.0.1:6333 (skips if the port is taken)."""
    qdrant_server_6333_session.reset()
    yield qdrant_server_6333_session
    qdrant_server_6333_session.reset()
