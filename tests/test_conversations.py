"""Conversations over every kind of checkpointer: turns, thread index, deletion,
regeneration, titles, the history budget, FIFO trimming and the rewrite node's history.

The ``saver`` / ``asaver`` fixtures run each test on MemorySaver, SqliteSaver and
PostgresSaver (sync) or MemorySaver, AsyncSqliteSaver and AsyncPostgresSaver (async).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langgraph.checkpoint.memory import MemorySaver
from qdrant_client import QdrantClient

from retrievalagent import ConfigError
from retrievalagent.persistence import TITLE_CHARS, question_title
from retrievalagent.types import Grade
from tests.support.chat import ScriptedChatModel, by_kind
from tests.support.persistence import SMALL_DOCS

pytestmark = pytest.mark.timeout(120)

LONG_QUESTION = "How long does a restore of a snapshot take when the database is several terabytes?"


def cfg(thread: str, user: str = "alice") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread, "user_id": user}}


def new_id() -> str:
    return uuid.uuid4().hex[:10]


def texts(messages: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in messages]


def numbered_answers() -> Callable[[str, list[BaseMessage]], str]:
    """Answers "answer #1", "answer #2", ... so each can be traced to the call that made it."""
    count = {"n": 0}

    def reply(kind: str, messages: list[BaseMessage]) -> str:
        if kind == "answer":
            count["n"] += 1
            return f"answer #{count['n']}"
        if kind == "title":
            return "Snapshot restores"
        return "snapshot"

    return reply


@pytest.fixture
def build(make_agent: Callable[..., Any]) -> Callable[..., Any]:
    def factory(checkpointer: Any, collection: str = "conv", **kwargs: Any) -> Any:
        # Qdrant local mode in memory: a real engine that opens and closes instantly
        kwargs.setdefault("qdrant_client", QdrantClient(":memory:"))
        kwargs.setdefault("thread_title", "llm")  # these tests count the title call
        rag = make_agent(collection, checkpointer=checkpointer, **kwargs)
        rag.add_documents(SMALL_DOCS)
        return rag

    return factory


# -- shared checks ------------------------------------------------------------------------------
def check_index(rag: Any, listed: list[Any], t1: str, t2: str) -> None:
    assert [t.thread_id for t in listed] == [t2, t1]  # most recently updated first
    by_id = {t.thread_id: t for t in listed}
    assert by_id[t1].title == "How are snapshots restored?"
    assert by_id[t1].message_count == 4
    assert by_id[t1].created_at < by_id[t1].updated_at
    assert by_id[t2].message_count == 2
    assert by_id[t2].title == question_title(LONG_QUESTION)
    assert len(by_id[t2].title) <= TITLE_CHARS and by_id[t2].title.endswith("…")
    assert all(t.user_id == "alice" for t in listed)
    assert by_id[t1].to_dict()["created_at"] == by_id[t1].created_at.isoformat()


def check_regenerated(model: ScriptedChatModel, history: list[BaseMessage], result: Any) -> None:
    assert result.answer == "answer #3"
    answers = model.inputs("answer")
    regen_input = texts(answers[2])
    assert "answer #1" in regen_input and "How often are snapshots taken?" in regen_input
    assert "answer #2" not in regen_input  # the replaced answer is not sent again
    assert texts(history) == [
        "How are snapshots restored?",
        "answer #1",
        "How often are snapshots taken?",
        "answer #3",
    ]
    assert isinstance(history[-1], AIMessage)


def check_after_regenerate(model: ScriptedChatModel) -> None:
    later = texts(model.inputs("answer")[3])
    assert "answer #3" in later and "answer #2" not in later


# -- sync: MemorySaver, SqliteSaver, PostgresSaver ----------------------------------------------
def test_second_turn_sees_the_first(saver: Any, build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(saver, model=model)
    thread = new_id()
    rag.invoke("How are snapshots restored?", cfg(thread))
    second = rag.invoke("How often are snapshots taken?", cfg(thread))
    sent = model.inputs("answer")[1]
    assert isinstance(sent[-1], HumanMessage)
    assert texts(sent[1:]) == [
        "How are snapshots restored?",
        "answer #1",
        "How often are snapshots taken?",
    ]
    assert second.events("generate")[0]["history_messages"] == 2
    assert [m.type for m in rag.get_history(thread)] == ["human", "ai", "human", "ai"]


def test_thread_index(saver: Any, build: Callable[..., Any]) -> None:
    rag = build(saver)
    t1, t2, t3 = new_id(), new_id(), new_id()
    rag.invoke("How are snapshots restored?", cfg(t1))
    rag.invoke("How often are snapshots taken?", cfg(t1))
    rag.invoke(LONG_QUESTION, cfg(t2))
    rag.invoke("Who is paged on replication lag?", cfg(t3, "bob"))
    check_index(rag, rag.list_threads("alice"), t1, t2)
    assert [t.thread_id for t in rag.list_threads("bob")] == [t3]
    assert {t.thread_id for t in rag.list_threads()} == {t1, t2, t3}
    assert [t.thread_id for t in rag.list_threads("alice", limit=1)] == [t2]
    assert rag.list_threads("nobody") == []
    other = build(saver, collection="other-collection")  # same checkpointer, other corpus
    assert other.list_threads("alice") == []


def test_delete_thread(saver: Any, build: Callable[..., Any]) -> None:
    rag = build(saver)
    t1, t2 = new_id(), new_id()
    rag.invoke("How are snapshots restored?", cfg(t1))
    rag.invoke("How often are snapshots taken?", cfg(t2))
    other = build(saver, collection="other-collection")
    assert other.delete_thread(t1) is False  # not that agent's thread
    assert rag.delete_thread(t1) is True
    assert [t.thread_id for t in rag.list_threads("alice")] == [t2]
    assert rag.get_history(t1) == []
    assert saver.get_tuple(cfg(t1)) is None
    assert rag.delete_thread(t1) is False
    assert len(rag.get_history(t2)) == 2


def test_regenerate_follows_the_new_branch(saver: Any, build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(saver, model=model)
    thread = new_id()
    rag.invoke("How are snapshots restored?", cfg(thread))
    rag.invoke("How often are snapshots taken?", cfg(thread))
    result = rag.regenerate({"configurable": {"thread_id": thread}})  # no user id: kept
    check_regenerated(model, rag.get_history(thread), result)
    rag.invoke("And how many can a tenant keep?", cfg(thread))
    check_after_regenerate(model)
    listed = rag.list_threads("alice")
    assert [(t.thread_id, t.message_count) for t in listed] == [(thread, 6)]


def test_regenerate_the_first_turn(saver: Any, build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(saver, model=model)
    thread = new_id()
    rag.invoke("How are snapshots restored?", cfg(thread))
    for n in (2, 3):  # twice in a row: each time from before the first answer
        again = rag.regenerate(cfg(thread))
        assert again.answer == f"answer #{n}"
        assert texts(rag.get_history(thread)) == ["How are snapshots restored?", f"answer #{n}"]
        assert texts(model.inputs("answer")[-1])[1:] == ["How are snapshots restored?"]
    (info,) = rag.list_threads("alice")
    assert (info.thread_id, info.message_count, info.title) == (thread, 2, "Snapshot restores")
    assert len(model.inputs("title")) == 1  # the title survives regeneration


def test_llm_title_costs_one_call(saver: Any, build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(saver, model=model)
    thread = new_id()
    first = rag.invoke("How are snapshots restored?", cfg(thread))
    rag.invoke("How often are snapshots taken?", cfg(thread))
    assert first.title == "Snapshot restores"
    assert len(model.inputs("title")) == 1
    assert texts(model.inputs("title")[0])[-1] == "How are snapshots restored?"
    assert rag.list_threads("alice")[0].title == "Snapshot restores"


def test_rewrite_never_repeats_a_failed_query(saver: Any, build: Callable[..., Any]) -> None:
    """The model keeps proposing the same rewrite (in another spelling); it runs once."""
    proposals = iter(["Snapshot retention policy"])

    def reply(kind: str, messages: list[BaseMessage]) -> str:
        if kind == "rewrite":  # first as new, then the same words with a full stop
            return next(proposals, "snapshot retention policy.")
        return "t" if kind == "title" else "not sure"

    model = ScriptedChatModel(
        replies=[by_kind(reply)], grades=[lambda m: Grade(sufficient=False, confidence=0.1)]
    )
    rag = build(saver, model=model, max_retries=2)
    thread = new_id()
    first = rag.invoke("How long are snapshots kept?", cfg(thread))
    assert [e.get("query") for e in first.events("rewrite")] == ["Snapshot retention policy", None]
    assert first.events("rewrite")[1]["skipped"] == "repeated_query"
    assert len(first.events("dense_search")) == 2  # the question, then the rewrite once
    assert first.rewrite_history == ["Snapshot retention policy"]

    second = rag.invoke("How long are snapshots kept?", cfg(thread))
    (event,) = second.events("rewrite")
    assert (
        event["skipped"] == "repeated_query" and event["repeated"] == "snapshot retention policy."
    )
    assert len(second.events("dense_search")) == 1  # the failed rewrite did not run again
    prompt = texts(model.inputs("rewrite")[-1])[-1]
    assert "- Snapshot retention policy" in prompt  # the model was told it was tried
    assert second.rewrite_history == ["Snapshot retention policy"]


# -- async: MemorySaver, AsyncSqliteSaver, AsyncPostgresSaver ------------------------------------
async def test_async_turns_index_and_delete(asaver: Any, build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(asaver, model=model, thread_title="question")
    t1, t2 = new_id(), new_id()
    await rag.ainvoke("How are snapshots restored?", cfg(t1))
    second = await rag.ainvoke("How often are snapshots taken?", cfg(t1))
    assert second.events("generate")[0]["history_messages"] == 2
    await rag.ainvoke(LONG_QUESTION, cfg(t2))
    check_index(rag, await rag.alist_threads("alice"), t1, t2)
    assert model.inputs("title") == []  # thread_title="question": no model call for titles
    assert [m.type for m in await rag.aget_history(t1)] == ["human", "ai", "human", "ai"]
    assert await rag.adelete_thread(t1) is True
    assert [t.thread_id for t in await rag.alist_threads("alice")] == [t2]
    assert await rag.aget_history(t1) == []
    assert await rag.adelete_thread(t1) is False


async def test_async_regenerate(asaver: Any, build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(asaver, model=model)
    thread = new_id()
    await rag.ainvoke("How are snapshots restored?", cfg(thread))
    await rag.ainvoke("How often are snapshots taken?", cfg(thread))
    result = await rag.aregenerate(cfg(thread))
    check_regenerated(model, await rag.aget_history(thread), result)
    await rag.ainvoke("And how many can a tenant keep?", cfg(thread))
    check_after_regenerate(model)
    assert len(model.inputs("title")) == 1


async def test_async_rewrite_history(asaver: Any, build: Callable[..., Any]) -> None:
    def reply(kind: str, messages: list[BaseMessage]) -> str:
        return {"rewrite": "snapshot retention policy", "title": "t"}.get(kind, "not sure")

    model = ScriptedChatModel(
        replies=[by_kind(reply)], grades=[lambda m: Grade(sufficient=False, confidence=0.1)]
    )
    rag = build(asaver, model=model, max_retries=1)
    thread = new_id()
    first = await rag.ainvoke("How long are snapshots kept?", cfg(thread))
    assert first.events("rewrite")[0]["query"] == "snapshot retention policy"
    second = await rag.ainvoke("Are snapshots deleted?", cfg(thread))
    (event,) = second.events("rewrite")
    assert event["query"] is None and len(second.events("dense_search")) == 1
    assert second.rewrite_history == ["snapshot retention policy"]


# -- history budget and FIFO (through the agent, model inputs captured) -------------------------
def _long_answers(kind: str, messages: list[BaseMessage]) -> str:
    n = sum(1 for m in messages if isinstance(m, HumanMessage))
    return f"answer {n} " + "word " * 60 if kind == "answer" else "t"


@pytest.mark.parametrize("budget", [0, 120, 400])
def test_history_budget_keeps_whole_recent_pairs(
    build: Callable[..., Any], budget: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAG_HISTORY_TOKENS", str(budget))  # the env var is what users set
    model = ScriptedChatModel(replies=[by_kind(_long_answers)])
    rag = build(MemorySaver(), model=model)
    thread = new_id()
    questions = ["How are snapshots restored?", "How often are they taken?", "How many?"]
    for q in questions:
        rag.invoke(q, cfg(thread))
    sent = model.inputs("answer")[-1][1:]  # after the system prompt
    history = sent[:-1]
    assert texts(sent)[-1] == "How many?"
    assert len(history) % 2 == 0  # whole pairs only
    for human, ai in zip(history[::2], history[1::2], strict=True):
        assert isinstance(human, HumanMessage) and isinstance(ai, AIMessage)
    from langchain_core.messages.utils import count_tokens_approximately

    assert count_tokens_approximately(history) <= budget
    kept = len(history) // 2
    assert kept == {0: 0, 120: 1, 400: 2}[budget]
    if kept == 1:  # the newest pair is the one kept
        assert texts(history)[0] == "How often are they taken?"
    assert len(rag.get_history(thread)) == 6  # the thread itself keeps everything


def test_fifo_keeps_the_newest_messages(build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(MemorySaver(), model=model, max_thread_messages=4)
    thread = new_id()
    for q in ["How are snapshots restored?", "How often are they taken?", "How many?"]:
        rag.invoke(q, cfg(thread))
    assert texts(rag.get_history(thread)) == [
        "How often are they taken?",
        "answer #2",
        "How many?",
        "answer #3",
    ]
    rag.invoke("Who is paged?", cfg(thread))
    assert "answer #1" not in texts(model.inputs("answer")[-1])  # trimmed: never sent again
    assert rag.list_threads("alice")[0].message_count == 4


# -- edges -----------------------------------------------------------------------------------------
def test_offline_title_is_the_question(build: Callable[..., Any]) -> None:
    rag = build(MemorySaver())
    thread = new_id()
    result = rag.invoke(LONG_QUESTION, cfg(thread))
    assert result.title == question_title(LONG_QUESTION)
    assert LONG_QUESTION.startswith(result.title.rstrip("…"))


def test_title_tokens_stay_out_of_the_answer_stream(build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(MemorySaver(), model=model)
    events = list(rag.stream("How are snapshots restored?", cfg(new_id())))
    tokens = "".join(e["text"] for e in events if e["type"] == "token")
    assert tokens == "answer #1"
    assert events[-1]["result"].title == "Snapshot restores"


def test_no_title_call_without_a_thread(build: Callable[..., Any]) -> None:
    model = ScriptedChatModel(replies=[by_kind(numbered_answers())])
    rag = build(None, model=model)
    rag.chat("How are snapshots restored?")
    assert model.inputs("title") == []


def test_conversations_need_a_checkpointer(build: Callable[..., Any]) -> None:
    rag = build(None)
    with pytest.raises(ConfigError, match="checkpointer"):
        rag.list_threads("alice")
    with pytest.raises(ConfigError, match="thread"):
        rag.regenerate({})


def test_regenerate_an_empty_thread_fails_clearly(build: Callable[..., Any]) -> None:
    rag = build(MemorySaver())
    with pytest.raises(ConfigError, match="no answered question"):
        rag.regenerate(cfg(new_id()))
