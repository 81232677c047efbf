"""Bad input: every strange question, setting, env var, id or document gets a clear error or
a documented behaviour — never a crash deep inside a dependency, never a memory write from a
failed turn. Property-based (hypothesis) where the input space is large.

Documented behaviour checked here (see retrievalagent/_inputs.py and ingest/_loaders.py):

* question: a string, trimmed; control characters other than tab/newline become spaces,
  unpaired surrogates U+FFFD; empty/whitespace-only or longer than ``max_question_chars``
  (default 8000, ``RAG_MAX_QUESTION_CHARS``) is a ``ConfigError`` (a ``ValueError``).
* user id / thread id: a string (ints and UUIDs are turned into one) of at most 256
  characters without control characters; an empty user id means ``"default"``.
* documents: binary, unreadable, FIFO, symlink loop -> ``IngestError`` naming the file; in a
  folder, non-regular entries are skipped; an empty file is a source with no chunks; a
  huge word is cut into chunks of at most ``chunk_size`` characters.
"""

from __future__ import annotations

import dataclasses
import math
import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from langgraph.checkpoint.memory import MemorySaver
from langgraph.store.memory import InMemoryStore

from retrievalagent import ConfigError, IngestError, Settings
from retrievalagent.memory import MemoryRecord, StoreBackend

DOCS = [
    "Lanternfish listens on port 7311 by default; change it with --port.",
    "The vault passphrase is stretched with Argon2id using 64 MiB of memory.",
]
QUESTION = "Which port does Lanternfish listen on?"
FAST = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None
)
# what the agent turns into spaces (questions) or refuses (ids): C0 (but tab, newline), DEL, C1
CONTROL = "".join(map(chr, [*range(0, 32), *range(127, 160)]))


def _stored(store: InMemoryStore) -> int:
    return sum(
        len(store.search(ns, limit=10_000)) for ns in store.list_namespaces(prefix=("memories",))
    )


@pytest.fixture
def agent(make_agent: Callable[..., Any]) -> Any:
    rag = make_agent("bad-input", memory_store=InMemoryStore(), checkpointer=MemorySaver())
    rag.add_documents(DOCS, progress=False)
    return rag


def _config(user: Any = "alice", thread: Any = None) -> dict[str, Any]:
    return {"configurable": {"user_id": user, "thread_id": thread or uuid.uuid4().hex}}


# -- questions ---------------------------------------------------------------------------------
def _is_blank(text: str) -> bool:
    """No letter or digit in it: such a question cannot be searched for (a ConfigError)."""
    return not any(c.isalnum() or c == "_" for c in text if c not in CONTROL)


questions = st.one_of(
    st.text(max_size=120),  # any code point but surrogates, control characters included
    st.text(alphabet=st.sampled_from(CONTROL + " "), max_size=40),
    st.builds(lambda a, b: a + QUESTION + b, st.text(CONTROL, max_size=5), st.text(CONTROL, max_size=5)),
)  # fmt: skip


def test_questions_get_an_answer_or_a_value_error(agent: Any) -> None:
    store = agent.memory_store

    @FAST
    @given(question=questions)
    def check(question: str) -> None:
        before = _stored(store)
        try:
            state = agent.invoke(question, _config())
        except ConfigError as exc:
            assert isinstance(exc, ValueError) and "question" in str(exc)
            assert _is_blank(question), question
            agent.drain_background(timeout=5)
            assert _stored(store) == before  # nothing written from a failed turn
            return
        assert not _is_blank(question)
        assert isinstance(state.answer, str) and state.answer
        assert not any(c in CONTROL and c not in "\t\n" for c in state.question)

    check()


@pytest.mark.parametrize("question", ["", "   ", "\t\n", "\x00\x01\x1f", "\u2028\u2029"])
async def test_blank_questions_raise_value_error_everywhere(agent: Any, question: str) -> None:
    with pytest.raises(ValueError, match="question"):
        agent.invoke(question, _config())
    with pytest.raises(ValueError, match="question"):
        await agent.ainvoke(question, _config())
    with pytest.raises(ValueError, match="question"):
        next(iter(agent.stream(question, _config())))
    with pytest.raises(ValueError, match="question"):
        agent.chat(question)
    with pytest.raises(ValueError, match="question"):
        agent.invoke({"question": question}, _config())  # a graph input mapping


@pytest.mark.parametrize("question", [None, 42, 4.2, b"bytes", ["a list"], object()])
def test_non_string_questions_raise_value_error(agent: Any, question: Any) -> None:
    with pytest.raises(ValueError, match=r"question must be a string, not"):
        agent.invoke(question, _config())
    with pytest.raises(ValueError, match="question"):
        agent.invoke({"question": question}, _config())


def test_question_length_limit(make_agent: Callable[..., Any], monkeypatch: Any) -> None:
    store = InMemoryStore()
    rag = make_agent("bad-input-long", memory_store=store)
    rag.add_documents(DOCS, progress=False)
    megabyte = "port? " * ((1 << 20) // 6)
    with pytest.raises(ValueError, match=r"limit is 8000.*RAG_MAX_QUESTION_CHARS"):
        rag.invoke(megabyte)
    with pytest.raises(ValueError) as caught:
        rag.invoke(megabyte)
    assert len(str(caught.value)) < 300  # the message does not repeat the question
    assert rag.invoke("p" * 7990 + " port?").answer  # just under the limit: answered
    monkeypatch.setenv("RAG_MAX_QUESTION_CHARS", "20")
    short = make_agent("bad-input-short")
    with pytest.raises(ValueError, match="limit is 20"):
        short.invoke("a question of more than twenty characters")
    rag.drain_background(timeout=5)
    assert _stored(store) == 0


def test_odd_but_valid_questions_are_cleaned(agent: Any) -> None:
    state = agent.invoke("  Which\x00port\x1b[31m does \ud800Lanternfish use?\r\n", _config())
    assert state.question == "Which port [31m does \ufffdLanternfish use?"
    assert "7311" in state.answer


def test_a_question_sent_as_content_blocks_is_read_as_its_text(agent: Any) -> None:
    """Chat UIs send the user's words as blocks; the question is their text, not a repr."""
    from langchain_core.messages import HumanMessage

    blocks = [
        {"type": "text", "text": "Which port does"},
        {"type": "text", "text": "Lanternfish use?"},
    ]
    state = agent.invoke({"messages": [HumanMessage(content=blocks)]}, _config())
    assert state.question == "Which port does\nLanternfish use?" and "7311" in state.answer
    image_only = [{"type": "image_url", "image_url": {"url": "https://example.com/a.png"}}]
    with pytest.raises(ConfigError, match="no text block"):
        agent.invoke({"messages": [HumanMessage(content=image_only)]}, _config())


# -- settings and env vars ----------------------------------------------------------------------
THRESHOLDS = ["memory_relevance_threshold", "memory_storage_threshold", "min_confidence", "dense_weight"]  # fmt: skip
values = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True),
    st.integers(min_value=-(10**400), max_value=10**400),
    st.text(max_size=8),
    st.booleans(),
    st.lists(st.floats(), max_size=2),
    st.just(b"0.5"),
)


@FAST
@given(value=values)
def test_threshold_arguments(value: Any) -> None:
    number = isinstance(value, int | float) and not isinstance(value, bool)
    valid = number and 0 <= value <= 1  # NaN compares False
    for name in THRESHOLDS:
        if valid:
            assert getattr(Settings.load(env={}, **{name: value}), name) == float(value)
        else:
            with pytest.raises(ValueError, match=rf"argument {name}=.* is invalid"):
                Settings.load(env={}, **{name: value})


@FAST
@given(raw=st.one_of(st.text(max_size=30), st.sampled_from(["nan", "-inf", "1e999", "1.5", "-0.1", "0x1", "1_0", "~nobody_here/x", "a\x00b", "9" * 5000])))  # fmt: skip
def test_every_env_var_is_valid_or_named_in_the_error(raw: str) -> None:
    for field in dataclasses.fields(Settings):
        env = field.metadata["env"]
        try:
            Settings.load(env={env: raw})
        except ConfigError as exc:
            assert env in str(exc) and len(str(exc)) < 400, str(exc)[:400]


def test_thresholds_through_init_agent(make_agent: Callable[..., Any], monkeypatch: Any) -> None:
    for bad in (1.5, -0.1, math.nan, math.inf, "0.7", [0.7]):
        with pytest.raises(ValueError, match="memory_relevance_threshold"):
            make_agent("bad-threshold", memory_relevance_threshold=bad)
    for raw in ("1.5", "nan", "high", "0.7.1"):
        monkeypatch.setenv("RAG_MEMORY_STORAGE_THRESHOLD", raw)
        with pytest.raises(ValueError, match="RAG_MEMORY_STORAGE_THRESHOLD"):
            make_agent("bad-threshold")
    monkeypatch.setenv("RAG_MEMORY_STORAGE_THRESHOLD", "0.9")
    assert make_agent("good-threshold").settings.memory_storage_threshold == 0.9


@pytest.mark.parametrize(
    "kwargs",
    [{"top_k": 0}, {"top_k": "5"}, {"top_k": 5.0}, {"memory_timeout": -1},
     {"data_dir": 42}, {"data_dir": "bad\x00dir"}, {"chunk_overlap": 2000},
     {"fusion": "best"}, {"model_retries": 99}, {"no_such_setting": 1}],
)  # fmt: skip
def test_wrong_settings_name_what_is_wrong(make_agent: Callable[..., Any], kwargs: Any) -> None:
    with pytest.raises(ValueError, match=next(iter(kwargs)).split("_setting")[0]):
        make_agent("bad-settings", **kwargs)


# -- user and thread ids ---------------------------------------------------------------------------
ids = st.one_of(
    st.text(max_size=40),
    st.text(alphabet=st.sampled_from("./\\*%_:@~ \x00"), max_size=12),
    st.sampled_from(
        ["", " ", ".", "..", "../../etc/passwd", "a/b", "memories.x", "*", "%2E", " a", "b\u3000"]
    ),
    st.builds(lambda n: "é" * n, st.integers(250, 300)),
)


def _valid_id(value: str) -> bool:
    """At most 256 characters, no control characters, and no whitespace around it (unless
    it is all whitespace: a blank user id means "not given")."""
    unpadded = value == value.strip() or not value.strip()
    return len(value) <= 256 and not any(c in CONTROL for c in value) and unpadded


def test_user_ids_work_or_are_refused_clearly(agent: Any) -> None:
    @FAST
    @given(user=ids)
    def check(user: str) -> None:
        try:
            state = agent.invoke(QUESTION, _config(user=user))
        except ConfigError as exc:
            assert not _valid_id(user) and "user_id" in str(exc)
            return
        assert _valid_id(user)
        owner = user if user.strip() else "default"
        assert state.user_id == owner
        fact = f"note for {uuid.uuid4().hex}"
        agent.memory.add(MemoryRecord(fact, QUESTION, "", owner))
        hits, _ = agent.memory.search(QUESTION, owner, 100)
        assert fact in [h.text for h in hits]
        assert agent.memory_store.search(StoreBackend.namespace(owner), limit=100)

    check()


def test_thread_ids_work_or_are_refused_clearly(agent: Any) -> None:
    @FAST
    @given(thread=st.one_of(ids, st.integers(), st.uuids()))
    def check(thread: Any) -> None:
        config = {"configurable": {"user_id": "alice", "thread_id": thread}}
        text = str(thread) if not isinstance(thread, str) else thread
        try:
            agent.invoke(QUESTION, config)
        except ConfigError as exc:
            assert "thread" in str(exc)
            assert not (_valid_id(text) and text.strip()), thread
            return
        assert _valid_id(text) and text.strip()
        history = agent.get_history(thread)
        assert [m.content for m in history][-2] == QUESTION and len(history) % 2 == 0

    check()


@pytest.mark.postgres
def test_odd_ids_and_questions_against_postgres(
    make_agent: Callable[..., Any], postgres_url: str
) -> None:
    """PostgreSQL refuses NUL in text and long btree keys: such input must be stopped (or
    cleaned) before it gets there, and everything else must work."""
    from retrievalagent.persistence import postgres_checkpointer, postgres_store

    saver, store = postgres_checkpointer(postgres_url), postgres_store(postgres_url)
    run = uuid.uuid4().hex[:8]
    users = [f"{run}.ann@x.org", f"{run}/../bob", f"{run}-" + "é" * 246]
    threads = [f"{run}:{user}"[:256] for user in users]
    try:
        rag = make_agent(
            "bad-input-pg", checkpointer=saver, memory_store=store, thread_title="question"
        )
        rag.add_documents(DOCS, progress=False)
        for user, thread in zip(users, threads, strict=True):
            state = rag.invoke(
                "Which\x00port?", {"configurable": {"user_id": user, "thread_id": thread}}
            )
            assert state.question == "Which port?"
            rag.memory.add(MemoryRecord(f"fact of {user}", "Which port?", "", user))
            assert [h.text for h in rag.memory.search("Which port?", user, 5)[0]] == [
                f"fact of {user}"
            ]
            assert len(rag.get_history(thread)) == 2
        for bad in (
            {"user_id": f"{run}\x00"},
            {"thread_id": f"{run}\x00"},
            {"thread_id": "t" * 300},
        ):
            with pytest.raises(ValueError, match=r"user_id|thread_id"):
                rag.invoke("Which port?", {"configurable": {"thread_id": run, **bad}})
    finally:
        for ns in store.list_namespaces(prefix=("memories",)):
            if ns[1].startswith(run):
                for item in store.search(ns, limit=100):
                    store.delete(ns, item.key)
        for thread in threads:
            saver.delete_thread(thread)
        saver.conn.close()
        store.conn.close()


# -- documents -----------------------------------------------------------------------------------
@pytest.fixture
def ingest_agent(make_agent: Callable[..., Any]) -> Any:
    return make_agent("bad-docs")


def test_binary_file_is_refused(ingest_agent: Any, tmp_path: Path) -> None:
    binary = tmp_path / "image.md"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + os.urandom(2048))
    with pytest.raises(IngestError, match=r"image\.md.*binary"):
        ingest_agent.add_documents(binary)
    assert ingest_agent.count() == 0


@pytest.mark.parametrize("encoding", ["utf-16-le", "utf-16-be", "utf-32-le", "utf-32-be"])
def test_text_with_a_utf16_or_utf32_bom_is_indexed_with_its_folder(
    ingest_agent: Any, tmp_path: Path, encoding: str
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nThe zorblax widget rotates keys.\n")
    bom = "\ufeffNotepad file: quux listens on port 8123.\r\nCafé crème.\r\n"
    (folder / "notepad.txt").write_bytes(bom.encode(encoding))  # as Notepad writes it
    report = ingest_agent.add_documents(folder)
    assert report.new_sources == 2
    hit = ingest_agent.search("which port does quux listen on", top_k=1)[0]
    assert hit["source"].endswith("notepad.txt")
    assert "quux listens on port 8123" in hit["text"] and "Café crème" in hit["text"]
    assert "\ufeff" not in hit["text"]


def test_binary_file_error_names_it_once(ingest_agent: Any, tmp_path: Path) -> None:
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"\xff\xfe\x00\x00\x00\x00" + os.urandom(64))  # a BOM, then NULs
    with pytest.raises(IngestError) as raised:
        ingest_agent.add_documents(binary)
    assert str(raised.value) == (
        f"cannot ingest {binary}: it looks like a binary file (NUL bytes), not text"
    )


def test_nul_bytes_after_a_texts_start_are_dropped_not_indexed(
    ingest_agent: Any, tmp_path: Path
) -> None:
    """A log cut by a crash ends in NULs: its text is indexed, the NULs are not (and the
    file does not stop its folder's ingest)."""
    log = tmp_path / "app.log.txt"
    log.write_bytes(b"The quux service listens on port 8123.\n" * 300 + b"\x00" * 4096)
    ingest_agent.add_documents(log)
    hits = ingest_agent.search("Which port does quux listen on?", top_k=3)
    assert hits and all("\x00" not in h["text"] for h in hits)


def test_latin1_text_is_read(ingest_agent: Any, tmp_path: Path) -> None:
    old = tmp_path / "old.txt"
    old.write_bytes("Caf\xe9 cr\xe8me on port 7311.".encode("latin-1"))
    assert ingest_agent.add_documents(old).added_chunks == 1
    assert "Café" in ingest_agent.search("café port")[0]["text"]


def test_empty_file_is_a_source_without_chunks(ingest_agent: Any, tmp_path: Path) -> None:
    empty = tmp_path / "empty.md"
    empty.write_text("")
    report = ingest_agent.add_documents(empty)
    assert report.added_chunks == 0 and report.empty_sources == [empty.resolve().as_posix()]
    with pytest.raises(IngestError, match="empty"):
        ingest_agent.add_documents("   \n\t ")


def test_unreadable_file_is_refused(ingest_agent: Any, tmp_path: Path) -> None:
    unreadable = tmp_path / "secret.txt"
    if os.geteuid() != 0:
        unreadable.write_text("no peeking")
        unreadable.chmod(0)
    elif Path("/proc/self/mem").exists():
        unreadable.symlink_to("/proc/self/mem")  # root reads anything; this fails with EIO
    else:  # pragma: no cover
        pytest.skip("no way to make an unreadable file here")
    with pytest.raises(IngestError, match=r"cannot read .*secret\.txt"):
        ingest_agent.add_documents(unreadable)


def test_fifo_and_symlink_loops(ingest_agent: Any, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "real.md").write_text("Lanternfish listens on port 7311.")
    os.mkfifo(folder / "pipe.md")  # reading it would block for ever
    (folder / "loop.md").symlink_to(folder / "loop.md")
    (folder / "a.md").symlink_to(folder / "b.md")
    (folder / "b.md").symlink_to(folder / "a.md")
    (folder / "up").symlink_to(folder, target_is_directory=True)  # a directory cycle
    (folder / "dir.md").mkdir()
    report = ingest_agent.add_documents(folder)
    assert report.sources == 1 and list(ingest_agent.sources()) == [
        (folder / "real.md").resolve().as_posix()
    ]
    with pytest.raises(IngestError, match="FIFO"):
        ingest_agent.add_documents(folder / "pipe.md")
    with pytest.raises(IngestError, match="loop"):
        ingest_agent.add_documents(folder / "loop.md")
    with pytest.raises(IngestError, match="no such file"):
        ingest_agent.add_documents(tmp_path / "missing.md")


def test_huge_inputs(ingest_agent: Any, tmp_path: Path) -> None:
    """A word longer than a chunk (a blob, minified text) is cut into chunk-sized pieces
    (it used to become one multi-megabyte chunk); a string too long to be a path is text."""
    from retrievalagent.ingest._chunking import chunk_sections, split_sections

    chunks = chunk_sections(split_sections("x" * 2_000_000), 1000, 120)
    assert len(chunks) == 2000 and max(len(c.text) for c in chunks) == 1000
    long_line = "Lanternfish port 7311. " + "y" * 5000
    report = ingest_agent.add_documents(long_line)  # Path(...).exists() raised ENAMETOOLONG
    assert report.added_chunks == 6
    assert max(len(s["text"]) for s in ingest_agent.search("Lanternfish port", top_k=10)) <= 1000


@pytest.mark.parametrize("item", [42, None, b"bytes", 4.2, {"a": 1}])
def test_non_document_inputs(ingest_agent: Any, item: Any) -> None:
    with pytest.raises(IngestError):
        ingest_agent.add_documents(item)


def _names_a_path(text: str) -> bool:
    try:
        return bool(text.strip()) and Path(text.strip()).expanduser().exists()
    except (OSError, ValueError, RuntimeError):
        return False


def test_any_text_document_is_indexed_or_refused(make_agent: Callable[..., Any]) -> None:
    rag = make_agent("bad-docs-text")

    @settings(max_examples=40, deadline=None, database=None)
    @given(text=st.text(min_size=0, max_size=300))
    @example(text="~")  # "~\x00": starts like a path, but no path can hold a NUL byte
    def check(text: str) -> None:
        item = text + "\x00\ud800"[: len(text) % 3]
        # text naming an existing file or folder ("/", ".") is that path, read as such
        assume(not _names_a_path(item))
        try:
            rag.add_documents([item])
        except IngestError as exc:
            assert "empty" in str(exc) or "no such file" in str(exc), exc

    check()


@pytest.mark.parametrize("how", ["invoke", "ainvoke"])
async def test_a_bad_time_is_refused_before_any_model_call(
    make_agent: Callable[..., Any], how: str
) -> None:
    """A turn with an unreadable ``configurable.now`` is an error naming it, raised before
    the model is asked for the new thread's title (a paid call for a turn that fails)."""
    from tests.support.chat import ScriptedChatModel

    model = ScriptedChatModel(replies=["Restore with `snap restore` [1]."])
    rag = make_agent("bad-now", model=model, checkpointer=MemorySaver(), thread_title="llm")
    rag.add_documents(["Snapshots are restored with `snap restore ID`."])
    config = {"configurable": {"thread_id": "t1", "now": "last Tuesday"}}
    with pytest.raises(ConfigError, match=r"configurable\.now"):
        if how == "ainvoke":
            await rag.ainvoke("How are snapshots restored?", config)
        else:
            rag.invoke("How are snapshots restored?", config)
    assert model.calls == []


def test_a_conversation_dated_in_the_future_is_refused_not_ranked_first(
    make_agent: Callable[..., Any],
) -> None:
    """A year typed wrong (2062 for 2026) would make that conversation the newest for every
    "now?" question from then on: it is an error naming the date, and nothing is stored."""
    from datetime import datetime, timedelta, timezone

    from langgraph.store.memory import InMemoryStore

    from retrievalagent.errors import ConfigError

    rag = make_agent("future", memory_store=InMemoryStore())
    said = [{"role": "user", "content": "My hourly rate is 40 euros."}]
    with pytest.raises(ConfigError, match=r"at is in the future \(2062-01-10"):
        rag.remember(said, user_id="f", thread_id="typo", at="2062-01-10T10:00:00Z")
    with pytest.raises(ConfigError, match=r"conversations\[1\]: at is in the future"):
        rag.remember_many([said, {"messages": said, "at": "2062-01-10"}], user_id="f")
    assert rag.list_memories("f") == []
    # a turn replayed "at" such a time would be remembered as said then: refused alike
    future = {"configurable": {"user_id": "f", "thread_id": "q", "now": "2062-01-10T10:00:00Z"}}
    with pytest.raises(ConfigError, match=r"configurable.now is in the future \(2062-01-10"):
        rag.invoke("My hourly rate is 40 euros.", config=future)
    assert rag.drain_background(10)["failed"] == 0
    assert rag.list_memories("f") == []
    # later today in another zone, and the past, are fine
    soon = datetime.now(timezone.utc) + timedelta(hours=10)
    assert len(rag.remember(said, user_id="f", thread_id="ok", at=soon)) == 1
    assert len(rag.remember(said, user_id="f", thread_id="old", at="2001-02-03")) == 1
