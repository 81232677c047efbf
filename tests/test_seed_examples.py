"""The spec page's checkpointer examples run as written.

``openai:gpt-5.4`` is served by the local OpenAI-compatible server (real HTTP) and
``http://localhost:6333`` by the Qdrant REST shim (real HTTP, qdrant-client local mode
behind it): the only stand-ins are for the hosted model's words and the Qdrant server
process. The memory and PostgreSQL examples are run in their own test modules.
"""

from __future__ import annotations

import pytest
from langgraph.checkpoint.sqlite import SqliteSaver

from tests.seed_examples import find_block, run_block
from tests.servers.openai_compat import ChatRequest


def _hosted_model(request: ChatRequest):
    if request.json_schema is not None:
        return {
            "sufficient": True,
            "confidence": 0.8,
            "memory_worth_storing": False,
            "memory_confidence": 0.0,
            "memory_fact": "",
        }
    return f"Answer to: {request.last_user_message}"


@pytest.fixture
def spec_env(openai_server, qdrant_server_6333, tmp_path, monkeypatch):
    openai_server.responder = _hosted_model
    monkeypatch.chdir(tmp_path)
    return openai_server


def test_memorysaver_example_remembers_the_first_turn(spec_env, qdrant_server_6333) -> None:
    ns = run_block(find_block("MemorySaver", "init_agent"), {})
    state, rag, config = ns["state"], ns["rag"], ns["config"]
    assert [m.content for m in state.messages] == [
        "What is hybrid search?",
        "Answer to: What is hybrid search?",
        "Give me an example.",
        "Answer to: Give me an example.",
    ]
    # the second prompt carried the first exchange as history
    second_answer_prompt = [r for r in spec_env.chat_requests if r.json_schema is None][-1]
    contents = [m["content"] for m in second_answer_prompt.messages]
    assert "What is hybrid search?" in contents and contents[-1] == "Give me an example."
    assert qdrant_server_6333.client.collection_exists("docs")  # the index lives on "the server"

    ns = run_block(find_block("thread_id", "user-bob"), ns)
    bob = rag.graph.get_state({"configurable": {"thread_id": "user-bob"}}).values
    assert bob["messages"][0].content == "Who are you?" and len(bob["messages"]) == 2
    alice = rag.graph.get_state(config).values
    assert len(alice["messages"]) == 6
    rag.close()


def test_sqlitesaver_example_persists_to_the_file(spec_env, tmp_path) -> None:
    ns = run_block(find_block("SqliteSaver", "with "), {})
    assert ns["state"].answer == "Answer to: What is hybrid search?"
    ns["rag"].close()
    assert (tmp_path / "memory.db").exists()
    with SqliteSaver.from_conn_string(str(tmp_path / "memory.db")) as saver:
        saved = saver.get_tuple({"configurable": {"thread_id": "user-alice"}})
    assert saved is not None
    assert [m.content for m in saved.checkpoint["channel_values"]["messages"]][-1] == (
        "Answer to: What is hybrid search?"
    )
