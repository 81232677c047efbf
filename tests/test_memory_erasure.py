"""Erasing memory erases the words: on mem0, nothing of a forgotten memory stays on disk,
and ``forget`` reaches every memory of a user however many there are.

Real mem0 (offline config, Qdrant local, SQLite history), real embedder.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retrievalagent.types import Grade
from tests.support.chat import ScriptedChatModel, question_of
from tests.support.memory import learned_grade, mem0_config

PRIVATE = "My divorce hearing is on 3 June and my lawyer is Ana Costa."
OTHER = "The printer on floor 2 jams on A3 paper."


def words_on_disk(root: Path, words: str) -> bool:
    """Whether any SQLite file under ``root`` holds ``words`` (mem0's history and messages, Qdrant's local points)."""
    for path in [*root.rglob("*.db"), *root.rglob("*.sqlite")]:
        with sqlite3.connect(path) as db:
            tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
            for table in tables:
                for row in db.execute(f'SELECT * FROM "{table}"'):
                    for cell in row:
                        if isinstance(cell, str) and words in cell:
                            return True
                        if isinstance(cell, bytes) and words.encode() in cell:  # pickled
                            return True
    return False


@pytest.fixture(params=["memory=True", "Memory"])
def mem0_agent(
    request: pytest.FixtureRequest, make_agent: Callable[..., Any], tmp_path: Path, minilm: Any
) -> tuple[Any, Path]:
    """An agent on the embedded mem0, or on a mem0 ``Memory`` of the user's own."""
    if request.param == "memory=True":
        return make_agent("erase", memory=True, data_dir=tmp_path / "data"), tmp_path / "data"
    from mem0 import Memory

    root = tmp_path / "own-mem0"
    return make_agent("erase", mem0_memory=Memory.from_config(mem0_config(root, minilm))), root


def test_forgetting_a_user_leaves_none_of_their_words_in_mem0s_history(
    mem0_agent: tuple[Any, Path],
) -> None:
    rag, root = mem0_agent
    rag.remember([{"role": "user", "content": PRIVATE}], user_id="alice", thread_id="private")
    rag.remember([{"role": "user", "content": OTHER}], user_id="bob", thread_id="office")
    assert words_on_disk(root, PRIVATE)  # the check can see what mem0 wrote
    assert rag.forget("alice") == 1
    assert rag.list_memories("alice") == []
    assert not words_on_disk(root, PRIVATE)
    # another user's memories, and their history, are untouched
    assert [m["text"] for m in rag.list_memories("bob")] == [f"user: {OTHER}"]
    assert words_on_disk(root, OTHER)


def test_forgetting_one_conversation_erases_its_words_and_keeps_the_rest(
    mem0_agent: tuple[Any, Path],
) -> None:
    rag, root = mem0_agent
    rag.remember([{"role": "user", "content": PRIVATE}], user_id="alice", thread_id="private")
    rag.remember([{"role": "user", "content": OTHER}], user_id="alice", thread_id="office")
    assert rag.forget("alice", thread_id="private") == 1
    assert not words_on_disk(root, PRIVATE)
    assert [m["thread_id"] for m in rag.list_memories("alice")] == ["office"]
    assert all(
        "divorce" not in hit["text"] for hit in rag.recall("divorce hearing", user_id="alice")
    )


LANGUAGES = {
    "I prefer answers in German.": "Answer in German.",
    "Please answer in French from now on.": "Answer in French.",
}


def language_grade(messages: list[Any]) -> Grade:
    """A grader that learns the language a user asks for (a preference on one subject)."""
    fact = LANGUAGES.get(question_of(messages))
    if fact is None:
        return Grade(sufficient=True, confidence=0.9)
    return learned_grade(fact, "language", "preference")


def test_a_replaced_preference_leaves_no_words_once_the_user_is_forgotten(
    make_agent: Callable[..., Any], tmp_path: Path
) -> None:
    """A newer preference replaces the older one; forgetting the user then erases both
    from disk, the replaced one included (mem0's history kept it under its old id)."""
    model = ScriptedChatModel(replies=["Noted."], grades=[language_grade])
    data = tmp_path / "data"
    rag = make_agent("erase", memory=True, data_dir=data, model=model, memory_conversations=False)
    config = {"configurable": {"user_id": "alice"}}
    rag.invoke("I prefer answers in German.", config)
    rag.invoke("Please answer in French from now on.", config)
    assert [m["text"] for m in rag.list_memories("alice")] == ["Answer in French."]
    assert rag.forget("alice") == 1
    assert rag.list_memories("alice") == []
    assert not words_on_disk(data, "Answer in French.")
    assert not words_on_disk(data, "Answer in German.")


async def test_async_forget_erases_the_words_too(
    make_agent: Callable[..., Any], tmp_path: Path
) -> None:
    rag = make_agent("erase", memory=True, data_dir=tmp_path / "data")
    await rag.aremember([{"role": "user", "content": PRIVATE}], user_id="alice", thread_id="p")
    assert await rag.aforget("alice") == 1
    assert not words_on_disk(tmp_path / "data", PRIVATE)


def test_list_and_forget_reach_past_one_mem0_page(
    make_agent: Callable[..., Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mem0's ``get_all`` stops at a limit: a user with more memories than one call returns
    is listed and erased whole (the page is made small here; it is 10,000 in use)."""
    from retrievalagent.memory import _mem0

    monkeypatch.setattr(_mem0, "_LIST_LIMIT", 4)
    rag = make_agent("erase", memory=True, data_dir=tmp_path / "data")
    conversations = [
        {"messages": [{"role": "user", "content": f"Note {i}: shelf {i} holds box {i * 7}."}]}
        for i in range(11)
    ]
    assert len(rag.remember_many(conversations, user_id="big")) == 11
    assert len(rag.list_memories("big")) == 11
    assert rag.forget("big") == 11
    assert rag.list_memories("big") == []


def _sqlite_connections(memory: Any) -> list[sqlite3.Connection]:
    """mem0's history database and Qdrant local's collection files."""
    found = [memory.db.connection]
    for collection in memory.vector_store.client._client.collections.values():
        found.append(collection.storage.storage)
    return found


def bytes_on_disk(root: Path, words: str) -> list[str]:
    """The files under ``root`` whose raw bytes hold ``words`` (free pages included)."""
    return [
        str(path.relative_to(root))
        for path in root.rglob("*")
        if path.is_file() and words.encode() in path.read_bytes()
    ]


def test_forgotten_words_leave_the_files_even_where_sqlite_keeps_deleted_pages(
    make_agent: Callable[..., Any], tmp_path: Path, minilm: Any
) -> None:
    """A stock SQLite build (python.org's, macOS's) leaves a deleted row's bytes in the
    file's free pages until it is vacuumed; this machine's Debian build zeroes them. The
    test puts each connection in the stock mode, as such a machine would have it."""
    from mem0 import Memory

    root = tmp_path / "own-mem0"
    memory = Memory.from_config(mem0_config(root, minilm))
    for connection in _sqlite_connections(memory):
        connection.execute("PRAGMA secure_delete = OFF")
    rag = make_agent("erase", mem0_memory=memory)
    rag.remember([{"role": "user", "content": PRIVATE}], user_id="alice", thread_id="private")
    rag.remember([{"role": "user", "content": OTHER}], user_id="bob", thread_id="office")
    for connection in _sqlite_connections(memory):
        connection.execute("PRAGMA secure_delete = OFF")  # as the stock build has it
    assert bytes_on_disk(root, "Ana Costa")
    assert rag.forget("alice") == 1
    assert bytes_on_disk(root, "Ana Costa") == []
    assert bytes_on_disk(root, "floor 2 jams")  # bob's stay
