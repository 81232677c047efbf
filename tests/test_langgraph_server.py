"""LangGraph Server serves the agent's graph from ``langgraph.json``.

The end-to-end test starts LangGraph's own development server (``langgraph dev``, the
in-memory runtime from ``langgraph-cli[inmem]``) on 127.0.0.1 and calls it with
``langgraph-sdk``, as a deployment's clients would. The factory is also tested directly.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

NOTES = [
    "# Snapshots\n\nA snapshot is taken every six hours and kept for thirty days.",
    "# Vault\n\nError LF-409 means another process holds the vault lock.",
]
OTHER = ["# Canteen\n\nThe canteen opens at noon and closes at three."]


def test_langgraph_json_points_at_the_factory() -> None:
    config = json.loads((ROOT / "langgraph.json").read_text())
    module, _, attr = config["graphs"]["retrievalagent"].partition(":")
    # a module path (not a file path), so the server imports the installed package
    assert module == "retrievalagent.server"
    import retrievalagent.server as server

    assert callable(getattr(server, attr))
    assert config["dependencies"] == ["."]


# -- the factory, in process ---------------------------------------------------------------


@pytest.fixture
def served(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, minilm: Any) -> Iterator[Any]:
    import retrievalagent.server as server
    from retrievalagent import init_agent

    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("RAG_COLLECTION", "served")
    for name, docs in (("served", NOTES), ("other", OTHER)):
        with init_agent(name, embeddings=minilm) as rag:
            rag.add_documents(docs)
    yield server
    server.close_agents()


async def test_make_graph_builds_from_env_and_caches(served: Any) -> None:
    async with served.make_graph({"configurable": {}}) as graph:
        state = await graph.ainvoke({"question": "How long is a snapshot kept?"})
    async with served.make_graph({"configurable": {"thread_id": "t", "user_id": "u"}}) as again:
        assert graph is again  # one agent per collection, shared by every run
    assert graph.checkpointer is None  # LangGraph Server brings its own
    assert "thirty days" in state["answer"]

    async with served.make_graph({"configurable": {"collection": "other"}}) as other:
        assert other is not graph
        state = await other.ainvoke({"messages": [("user", "When does the canteen open?")]})
    assert "noon" in state["answer"]


def test_agent_for_reads_the_assistant_config(served: Any) -> None:
    from retrievalagent import ConfigError

    assert served.agent_for(None).collection == "served"
    assert served.agent_for({"configurable": {"collection": "other"}}).collection == "other"
    with_memory = served.agent_for({"configurable": {"memory": "true"}})
    assert with_memory.memory_backend_name == "mem0"
    assert served.agent_for({"configurable": {}}).memory is None
    assert served.agent_for({"configurable": {"memory": "off"}}).memory is None
    for unclear in (3, "maybe", "treu", None):
        with pytest.raises(ConfigError, match=r"configurable\.memory must be true or false"):
            served.agent_for({"configurable": {"memory": unclear}})


def test_unknown_collections_are_refused_and_nothing_is_created(
    served: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrievalagent import ConfigError

    data = tmp_path / "data"
    before = sorted(p.name for p in data.iterdir())
    for name in ("nope", "made-up-1", "Served"):
        with pytest.raises(ConfigError, match=rf"collection '{name}' does not exist"):
            served.agent_for({"configurable": {"collection": name}})
    with pytest.raises(ConfigError, match="collection=''"):
        served.agent_for({"configurable": {"collection": ""}})
    with pytest.raises(ConfigError, match=r"collection='\.\./x'"):
        served.agent_for({"configurable": {"collection": "../x"}})
    assert sorted(p.name for p in data.iterdir()) == before  # no folder for any of them

    # The operator's list: an existing collection it leaves out is refused too.
    monkeypatch.setenv("RAG_SERVE_COLLECTIONS", "served, archive")
    assert served.agent_for(None).collection == "served"
    with pytest.raises(ConfigError, match=r"'other' is not served here; .* archive, served"):
        served.agent_for({"configurable": {"collection": "other"}})
    monkeypatch.setenv("RAG_SERVE_COLLECTIONS", "served,../etc")
    with pytest.raises(ConfigError, match=r"RAG_SERVE_COLLECTIONS: collection='\.\./etc'"):
        served.agent_for({"configurable": {"collection": "other"}})


def test_refusals_name_no_server_path_and_echo_no_long_name(served: Any, tmp_path: Path) -> None:
    """A collection another process holds (an operator's ingest) is busy, without the
    server's data folder in what the client reads; a client's huge name is not echoed."""
    import sys

    from retrievalagent import ConfigError
    from retrievalagent.errors import IndexLockedError

    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from retrievalagent import init_agent; "
            "rag = init_agent('other'); rag.count(); print('open', flush=True); time.sleep(60)",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "open"
        with pytest.raises(IndexLockedError, match="collection 'other' is busy") as busy:
            served.agent_for({"configurable": {"collection": "other"}})
        assert str(tmp_path) not in str(busy.value)
    finally:
        holder.kill()
        holder.wait()
    with pytest.raises(ConfigError) as refused:
        served.agent_for({"configurable": {"collection": "x" * 100_000}})
    assert len(str(refused.value)) < 300
    with pytest.raises(ConfigError, match="is invalid"):
        served.agent_for({"configurable": {"collection": "served\n"}})


async def test_the_agent_cache_is_bounded_and_evicted_agents_are_closed(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RAG_SERVE_MAX_AGENTS=1: a second collection closes the first agent, but only once
    the run holding it has finished; the first collection is then opened anew."""
    from retrievalagent import VectorIndexError

    monkeypatch.setenv("RAG_SERVE_MAX_AGENTS", "1")
    question = {"question": "How long is a snapshot kept?"}
    async with served.make_graph({"configurable": {}}) as first:
        first_agent = served.agent_for(None)
        async with served.make_graph({"configurable": {"collection": "other"}}) as other:
            await other.ainvoke({"question": "When does the canteen open?"})
        # evicted by "other", still open: this run holds it
        assert "thirty days" in (await first.ainvoke(question))["answer"]
    with pytest.raises(VectorIndexError, match="not open"):
        first_agent.count()  # closed when its run ended
    async with served.make_graph({"configurable": {}}) as reopened:
        assert reopened is not first
        assert "thirty days" in (await reopened.ainvoke(question))["answer"]
    other_agent = served.agent_for({"configurable": {"collection": "other"}})
    served.agent_for(None)  # evicts "other", which no run holds: closed at once
    with pytest.raises(VectorIndexError, match="not open"):
        other_agent.count()


# -- the real server -----------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def langgraph_dev(tmp_path: Path, minilm: Any) -> Iterator[str]:
    """``langgraph dev`` on a free port, serving this repository's langgraph.json."""
    cli = shutil.which("langgraph", path=os.path.dirname(sys.executable)) or shutil.which(
        "langgraph"
    )
    if cli is None:
        message = 'langgraph-cli is not installed: pip install "langgraph-cli[inmem]"'
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    from retrievalagent import init_agent

    data = tmp_path / "data"
    for name, docs in (("docs", NOTES), ("other", OTHER)):
        with init_agent(name, embeddings=minilm, data_dir=data) as rag:
            rag.add_documents(docs)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "OPENAI_"))}
    env.update(
        RAG_DATA_DIR=str(data),
        MEM0_TELEMETRY="False",
        LANGGRAPH_CLI_NO_ANALYTICS="1",
        LANGSMITH_TRACING="false",
        LANGCHAIN_TRACING_V2="false",
        PYTHONUNBUFFERED="1",
    )
    port = _free_port()
    workdir = tmp_path / "server"
    workdir.mkdir()
    log = (tmp_path / "server.log").open("w")
    proc = subprocess.Popen(
        [
            cli,
            "dev",
            "--config",
            str(ROOT / "langgraph.json"),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-browser",
            "--no-reload",
        ],
        cwd=workdir,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        import httpx

        deadline = time.monotonic() + 90
        while True:
            if proc.poll() is not None:
                pytest.fail(
                    f"langgraph dev exited:\n{(tmp_path / 'server.log').read_text()[-4000:]}"
                )
            try:
                if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(
                    f"langgraph dev did not start:\n{(tmp_path / 'server.log').read_text()[-4000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def test_langgraph_dev_serves_the_agent(langgraph_dev: str, tmp_path: Path) -> None:
    from langgraph_sdk import get_client

    async def scenario() -> None:
        client = get_client(url=langgraph_dev)
        [assistant] = await client.assistants.search(graph_id="retrievalagent")
        thread = await client.threads.create()
        first = await client.runs.wait(
            thread["thread_id"],
            assistant["assistant_id"],
            input={"messages": [{"role": "user", "content": "How long is a snapshot kept?"}]},
            config={"configurable": {"user_id": "alice"}},
        )
        assert "thirty days" in first["answer"]
        assert first["sources"][0]["headings"] == ["Snapshots"]
        assert first["trace"][0]["node"] == "prepare"
        assert first["trace"][0]["user_id"] == "alice"

        # The server keeps the thread: the second turn sees the first.
        nodes = []
        async for part in client.runs.stream(
            thread["thread_id"],
            assistant["assistant_id"],
            input={"question": "What does LF-409 mean?"},
            stream_mode="updates",
        ):
            if part.event == "updates":
                nodes.extend(part.data)
        assert nodes[0] == "prepare" and nodes[-1] == "write_memory"
        state = await client.threads.get_state(thread["thread_id"])
        assert len(state["values"]["messages"]) == 4
        assert "vault lock" in state["values"]["answer"]

        # An assistant configured for another collection answers from it.
        other = await client.assistants.create(
            "retrievalagent", config={"configurable": {"collection": "other"}}
        )
        reply = await client.runs.wait(
            None, other["assistant_id"], input={"question": "When does the canteen open?"}
        )
        assert "noon" in reply["answer"]

        # A collection nobody indexed is refused (no folder, no agent kept for it), and so
        # is a memory choice that is neither true nor false; the client reads why.
        for config, why in (
            ({"collection": "made-up"}, "ConfigError: collection 'made-up' does not exist"),
            ({"memory": "maybe"}, "ConfigError: configurable.memory must be true or false"),
        ):
            bad = await client.assistants.create("retrievalagent", config={"configurable": config})
            thread = await client.threads.create()
            with pytest.raises(Exception, match=why):
                await client.runs.wait(
                    thread["thread_id"], bad["assistant_id"], input={"question": "What is LF-409?"}
                )
            [run] = await client.runs.list(thread["thread_id"])
            assert run["status"] == "error"
        assert not (tmp_path / "data" / "made-up").exists()

    asyncio.run(scenario())


def test_a_collection_being_opened_does_not_hold_up_runs_on_open_ones(
    served: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening an agent takes seconds; runs on collections already open go on meanwhile,
    and two first runs of one collection open it once."""
    import threading
    import time

    served.agent_for(None)  # "served" is open
    real_init, builds, started = served.init_agent, [], threading.Event()

    def slow_init(name: str, **kwargs: Any) -> Any:
        builds.append(name)
        started.set()
        time.sleep(1.5)
        return real_init(name, **kwargs)

    monkeypatch.setattr(served, "init_agent", slow_init)
    opening = [
        threading.Thread(target=served.agent_for, args=({"configurable": {"collection": "other"}},))
        for _ in range(2)
    ]
    for thread in opening:
        thread.start()
    assert started.wait(10)
    begun = time.perf_counter()
    served.agent_for(None)
    assert time.perf_counter() - begun < 0.5  # not behind the 1.5 s build
    for thread in opening:
        thread.join(30)
    assert builds == ["other"]
