"""Preferences a user states apply to every later answer of that user, and only theirs.

The chat model is the project's local OpenAI-compatible server over real HTTP (only its
words are scripted); the memory backends are real: InMemoryStore, PostgresStore, the
embedded mem0 (``memory=True``) and mem0's ``AsyncMemory``. What is checked is what the
model was sent: the system prompt of each answer request.
"""

from __future__ import annotations

import asyncio
import json
import re
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from retrievalagent.errors import ConfigError
from retrievalagent.memory import Mem0Backend
from tests.support.memory import mem0_config

STATEMENTS = {
    "I prefer answers in German.": ("language", "Answer in German."),
    "Please answer in French from now on.": ("language", "Answer in French."),
    "Keep answers short.": ("length", "Keep answers short."),
    "Use bullet points.": ("format", "Format answers as bullet points."),
    # two: the model's grade holds the last
    "I prefer answers in German. Keep answers short.": ("length", "Keep answers short."),
    "I prefer answers in German. Keep answers brief.": ("length", "Be brief."),
}


class HostedModel:
    """Scripted words of a hosted model: a grade that recognises the statements above,
    and answers; every answer request's (question, system prompt) is recorded."""

    def __init__(self) -> None:
        self.answers: list[tuple[str, str]] = []

    def __call__(self, request: Any) -> Any:
        if request.json_schema is not None:
            question = re.search(r"Question: (.*)", request.last_user_message)
            stated = STATEMENTS.get(question.group(1).strip() if question else "")
            if stated is None:
                return {"sufficient": True, "confidence": 0.9}
            return {
                "sufficient": True,
                "confidence": 0.9,
                "memory_worth_storing": True,
                "memory_kind": "preference",
                "memory_key": stated[0],
                "memory_confidence": 0.95,
                "memory_fact": stated[1],
            }
        if "Passages:" in request.system_prompt:
            self.answers.append((request.last_user_message, request.system_prompt))
        return "Hybrid search fuses BM25 and dense results [1]."

    def prompt(self, question: str) -> str:
        (system,) = [s for q, s in self.answers if q == question]
        return system


@pytest.fixture
def hosted(openai_server: Any) -> HostedModel:
    model = HostedModel()
    openai_server.responder = model
    return model


@pytest.fixture
def pg_store(postgres_url: str) -> Iterator[Any]:
    import psycopg
    from langgraph.store.postgres import PostgresStore

    schema = f"ra_pref_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    sep = "&" if "?" in postgres_url else "?"
    url = f"{postgres_url}{sep}options=-csearch_path%3D{schema}"
    try:
        with PostgresStore.from_conn_string(url) as store:
            store.setup()
            yield store
    finally:
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture
def build(
    make_agent: Callable[..., Any], sample_docs: Path, tmp_path: Path, minilm: Any, request: Any
) -> Callable[..., Any]:
    def factory(backend: str, **kwargs: Any) -> Any:
        kwargs.setdefault("model", "openai:gpt-test")
        if backend == "store":
            kwargs["memory_store"] = InMemoryStore()
        elif backend == "postgres":
            kwargs["memory_store"] = request.getfixturevalue("pg_store")
        elif backend == "mem0":
            kwargs["memory"] = True
        elif backend == "mem0_async":
            from mem0 import AsyncMemory

            memory = AsyncMemory.from_config(mem0_config(tmp_path / "am0", minilm))
            kwargs["mem0_memory"] = Mem0Backend(memory, infer=False)
        rag = make_agent("prefs", **kwargs)
        rag.add_documents(sample_docs, progress=False)
        return rag

    return factory


def cfg(user: str, thread: str | None = None) -> dict[str, Any]:
    configurable = {"user_id": user}
    if thread:
        configurable["thread_id"] = thread
    return {"configurable": configurable}


BACKENDS = ["store", "postgres", "mem0", "mem0_async"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_preference_applies_to_every_later_turn_of_its_user_only(
    build: Callable[..., Any], hosted: HostedModel, backend: str
) -> None:
    rag = build(backend)
    rag.invoke("I prefer answers in German.", cfg("alice", "t1"))
    state = rag.invoke("What is hybrid search?", cfg("alice", "t1"))
    assert "- Answer in German." in hosted.prompt("What is hybrid search?")
    (read,) = state.events("read_memory")
    # the one preference (beside what alice said before, which conversation memory recalls)
    kept = [(i["kind"], i["text"]) for i in read["items"] if i["kind"] != "conversation"]
    assert kept == [("preference", "Answer in German.")]
    assert state.memory_context in hosted.prompt("What is hybrid search?")
    # whatever the question, in any thread of hers
    rag.invoke("Where are the logs kept?", cfg("alice", "another-thread"))
    assert "- Answer in German." in hosted.prompt("Where are the logs kept?")
    # never in another user's prompt, never into search
    other = rag.invoke("How do I restore a backup?", cfg("bob", "t9"))
    assert "German" not in hosted.prompt("How do I restore a backup?")
    assert other.memory_context == ""
    assert "memory_terms" not in state.events("lexical_search")[0]
    # a newer preference on the same subject replaces the older one
    rag.invoke("Please answer in French from now on.", cfg("alice", "t1"))
    rag.invoke("What does fusion do?", cfg("alice", "t2"))
    prompt = hosted.prompt("What does fusion do?")
    assert "- Answer in French." in prompt and "German" not in prompt
    kept = [m for m in rag.list_memories("alice") if m["kind"] != "conversation"]
    assert [(m["kind"], m["key"], m["text"]) for m in kept] == [
        ("preference", "language", "Answer in French.")
    ]
    assert {m["kind"] for m in rag.list_memories("bob")} == {"conversation"}  # what bob said


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_preference_one_message_states_reaches_later_prompts(
    build: Callable[..., Any], hosted: HostedModel, backend: str
) -> None:
    """A grade holds one memory, so "I prefer answers in German. Keep answers short." kept
    only the shorter answers, and German never reached a later prompt."""
    rag = build(backend)
    said = rag.invoke("I prefer answers in German. Keep answers short.", cfg("ann", "one"))
    rag.invoke("What is hybrid search?", cfg("ann", "two"))
    prompt = hosted.prompt("What is hybrid search?")
    assert "- Answer in German." in prompt and "- Keep answers short." in prompt
    (write,) = said.events("write_memory")
    assert write["fact"] == "Keep answers short." and write.get("also") == ["Answer in German."]
    # erasing the conversation erases both
    rag.forget("ann", thread_id="one")
    assert [m for m in rag.list_memories("ann") if m["kind"] == "preference"] == []
    # the rules must find the model's own choice: one they do not know ("Be brief.") is
    # kept alone, never beside a guess of theirs
    said = rag.invoke("I prefer answers in German. Keep answers brief.", cfg("bea", "one"))
    assert "also" not in said.events("write_memory")[0]
    kept = [m["text"] for m in rag.list_memories("bea") if m["kind"] == "preference"]
    assert kept == ["Be brief."]


def test_preferences_of_one_message_are_listed_and_shown_in_one_order(
    make_agent: Callable[..., Any],
) -> None:
    """They share their time; written at once, they came back in any order, so the prompt
    changed from one run to the next. They are newest first, the last said first."""
    rag = make_agent("offline-order", memory_store=InMemoryStore())
    rag.invoke(
        "Answer in German. Keep answers short. Use a formal tone. Use bullet points.",
        cfg("gus", "one"),
    )
    said_last_first = [
        "Format answers as bullet points.",
        "Use a formal tone.",
        "Keep answers short.",
        "Answer in German.",
    ]
    later = rag.invoke("What is hybrid search?", cfg("gus", "later"))
    shown = later.memory_context.partition("standing preferences")[2]
    assert re.findall(r"^- (.*)$", shown, re.MULTILINE) == said_last_first
    kept = [m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference"]
    assert kept == said_last_first


class _ModelGrade:
    """A hosted model's structured grade, naming a preference's subject its own way."""

    def __init__(self, key: str, fact: str) -> None:
        self.key, self.fact = key, fact

    def grade(self, request: Any, config: Any = None) -> Any:
        from retrievalagent.types import Grade

        return Grade(
            sufficient=True,
            confidence=0.9,
            memory_worth_storing=True,
            memory_kind="preference",
            memory_key=self.key,
            memory_confidence=0.95,
            memory_fact=self.fact,
        )

    async def agrade(self, request: Any, config: Any = None) -> Any:
        return self.grade(request, config)


@pytest.mark.parametrize("key", ["Language preference", "LANGUAGE", "lang"])
def test_a_models_subject_is_kept_as_the_rules_name_it(
    make_agent: Callable[..., Any], key: str
) -> None:
    """A model that called the subject "Language preference" once and "language" later
    left both in every prompt: "Answer in German." beside "Answer in French."."""
    rag = make_agent("model-subjects", memory_store=InMemoryStore())
    with rag.override(grader=_ModelGrade(key, "Answer in German.")):
        rag.invoke("I prefer answers in German.", cfg("gus", "one"))
    with rag.override(grader=_ModelGrade("length", "Keep answers short.")):
        rag.invoke("Keep answers short. I prefer answers in French.", cfg("gus", "two"))
    later = rag.invoke("What is hybrid search?", cfg("gus", "later"))
    assert "German" not in later.memory_context
    kept = {m["key"]: m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference"}
    assert kept == {"language": "Answer in French.", "length": "Keep answers short."}


@pytest.mark.parametrize("backend", ["store", "postgres", "mem0"])
def test_an_imported_preference_keeps_its_messages_metadata(
    build: Callable[..., Any], hosted: HostedModel, backend: str
) -> None:
    """ "Each message's metadata is kept with whatever is stored from it": the preference
    an imported message states came back with no sources."""
    rag = build(backend)
    said = [
        {"role": "user", "content": "Hello.", "metadata": {"turn": 1}},
        {"role": "assistant", "content": "Hi."},
        {"role": "user", "content": "I prefer answers in German.", "metadata": {"turn": 3}},
    ]
    stored = rag.remember(said, user_id="ida", thread_id="old")
    for found in (
        stored,
        rag.list_memories("ida"),
        rag.recall("How do I restore a backup?", user_id="ida"),
    ):
        (preference,) = [m for m in found if m["kind"] == "preference"]
        assert preference["sources"] == [{"turn": 3}], found


def test_offline_every_preference_one_message_states_is_kept_and_noted(
    make_agent: Callable[..., Any],
) -> None:
    rag = make_agent("offline-two", memory_store=InMemoryStore())
    reply = rag.invoke("I prefer answers in German. Keep answers short.", cfg("gus", "one"))
    assert "these preferences: Answer in German. Keep answers short." in reply.answer
    later = rag.invoke("What is hybrid search?", cfg("gus", "later"))
    shown = later.memory_context.partition("standing preferences")[2]
    assert sorted(re.findall(r"^- (.*)$", shown, re.MULTILINE)) == [
        "Answer in German.",
        "Keep answers short.",
    ]
    # said again in the same conversation: nothing new is written
    again = rag.invoke("I prefer answers in German. Keep answers short.", cfg("gus", "one"))
    (write,) = again.events("write_memory")
    assert write.get("skipped") == "already_known" and "also" not in write


@pytest.mark.parametrize("backend", BACKENDS)
def test_erasing_a_conversation_erases_the_preference_stated_in_it(
    build: Callable[..., Any], hosted: HostedModel, backend: str
) -> None:
    rag = build(backend)
    rag.invoke("I prefer answers in German.", cfg("alice", "said-german"))
    rag.invoke("Keep answers short.", cfg("alice", "said-short"))
    listed = {m["key"]: m for m in rag.list_memories("alice") if m["kind"] == "preference"}
    assert listed["language"]["thread_id"] == "said-german" and listed["language"]["at"]
    assert rag.forget("alice", thread_id="said-german") >= 2  # the exchange and the preference
    rag.invoke("What is hybrid search?", cfg("alice", "later"))
    prompt = hosted.prompt("What is hybrid search?")
    assert "German" not in prompt and "- Keep answers short." in prompt
    kept = [m["key"] for m in rag.list_memories("alice") if m["kind"] == "preference"]
    assert kept == ["length"]
    # stated again in a later conversation, it belongs to that one and outlives the first
    rag.invoke("I prefer answers in German.", cfg("bea", "first"))
    rag.invoke("I prefer answers in German.", cfg("bea", "again"))
    rag.forget("bea", thread_id="first")
    rag.invoke("Where are the logs kept?", cfg("bea", "later"))
    assert "- Answer in German." in hosted.prompt("Where are the logs kept?")
    rag.forget("bea", thread_id="again")  # now no conversation that said it is left
    assert [m for m in rag.list_memories("bea") if m["kind"] == "preference"] == []


@pytest.mark.parametrize("backend", BACKENDS)
def test_forgetting_the_conversation_that_changed_a_preference_brings_back_the_one_before(
    build: Callable[..., Any], hosted: HostedModel, backend: str
) -> None:
    """German in one conversation, French in the next: erasing the second must not erase
    what the first said. The same preference said again in a third is kept as long as
    either conversation is."""
    rag = build(backend)
    rag.invoke("I prefer answers in German.", cfg("alice", "german"))
    rag.invoke("Please answer in French from now on.", cfg("alice", "french"))
    rag.forget("alice", thread_id="french")

    def preferences() -> list[tuple[str, str, str]]:
        listed = rag.list_memories("alice")
        return [(m["key"], m["text"], m["thread_id"]) for m in listed if m["kind"] == "preference"]

    assert preferences() == [("language", "Answer in German.", "german")]
    rag.invoke("What is hybrid search?", cfg("alice", "later"))
    prompt = hosted.prompt("What is hybrid search?")
    assert "- Answer in German." in prompt and "French" not in prompt
    rag.invoke("I prefer answers in German.", cfg("alice", "again"))
    rag.forget("alice", thread_id="again")
    assert preferences() == [("language", "Answer in German.", "german")]
    rag.forget("alice", thread_id="german")
    assert preferences() == []
    assert "French" not in json.dumps(rag.list_memories("alice"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_preference_said_earlier_does_not_replace_one_said_later(
    build: Callable[..., Any], hosted: HostedModel, backend: str
) -> None:
    """Turns replayed at their own times, the later-said first: French (March 2026) stays
    the preference, German (January 2025, replayed after it) goes into its history, and
    comes back once March's conversation is forgotten."""
    rag = build(backend)
    march = {**cfg("alice", "march")["configurable"], "now": "2026-03-05T09:00:00Z"}
    rag.invoke("Please answer in French from now on.", {"configurable": march})
    january = {**cfg("alice", "january")["configurable"], "now": "2025-01-05T09:00:00Z"}
    rag.invoke("I prefer answers in German.", {"configurable": january})
    (current,) = [m for m in rag.list_memories("alice") if m["kind"] == "preference"]
    assert (current["text"], current["thread_id"]) == ("Answer in French.", "march")
    assert [h["thread_id"] for h in current["history"]] == ["january"]
    rag.forget("alice", thread_id="march")
    (back,) = [m for m in rag.list_memories("alice") if m["kind"] == "preference"]
    assert (back["text"], back["thread_id"]) == ("Answer in German.", "january")


@pytest.mark.parametrize("backend", ["store", "mem0_async"])
def test_preferences_under_ainvoke_and_forget(
    build: Callable[..., Any], hosted: HostedModel, backend: str
) -> None:
    rag = build(backend)

    async def scenario() -> None:
        config = cfg("carol")
        await rag.ainvoke("Keep answers short.", config)
        await rag.ainvoke("Use bullet points.", config)
        await rag.ainvoke("What is hybrid search?", config)
        prompt = hosted.prompt("What is hybrid search?")
        assert "- Keep answers short." in prompt and "- Format answers as bullet points." in prompt
        everything = await rag.alist_memories("carol")
        kept = [m for m in everything if m["kind"] == "preference"]
        assert {m["key"] for m in kept} == {"length", "format"}
        assert await rag.aforget("carol", kept[0]["id"]) == 1
        assert await rag.aforget("carol", "no-such-id") == 0
        assert len(await rag.alist_memories("carol")) == len(everything) - 1
        assert await rag.aforget("carol") == len(everything) - 1
        assert await rag.alist_memories("carol") == []
        await rag.ainvoke("Where are the logs kept?", config)
        assert "preferences" not in hosted.prompt("Where are the logs kept?")

    asyncio.run(scenario())


def test_the_number_of_preferences_applied_is_bounded(
    build: Callable[..., Any], hosted: HostedModel
) -> None:
    rag = build("store", memory_max_preferences=2)
    for statement in ("I prefer answers in German.", "Keep answers short.", "Use bullet points."):
        rag.invoke(statement, cfg("dan"))
    rag.invoke("What is hybrid search?", cfg("dan"))
    prompt = hosted.prompt("What is hybrid search?")
    # the newest two subjects apply; all three stay listed (nothing stored is dropped)
    assert "- Keep answers short." in prompt and "- Format answers as bullet points." in prompt
    assert "- Answer in German." not in prompt
    assert len([m for m in rag.list_memories("dan") if m["kind"] == "preference"]) == 3


@pytest.mark.parametrize("backend", ["store", "mem0"])
def test_concurrent_users_never_see_each_others_preferences(
    build: Callable[..., Any], hosted: HostedModel, backend: str
) -> None:
    rag = build(backend)
    languages = ["German", "French", "Spanish", "Italian", "Dutch", "Polish"]
    for language in languages:
        STATEMENTS[f"I prefer answers in {language}."] = ("language", f"Answer in {language}.")

    def user_turns(language: str) -> None:
        user = f"user-{language}"
        rag.invoke(f"I prefer answers in {language}.", cfg(user))
        rag.invoke(f"What is hybrid search for {user}?", cfg(user))

    with ThreadPoolExecutor(len(languages)) as pool:
        list(pool.map(user_turns, languages))
    for language in languages:
        prompt = hosted.prompt(f"What is hybrid search for user-{language}?")
        assert f"- Answer in {language}." in prompt
        assert not [other for other in languages if other != language and other in prompt]


def test_offline_rules_store_and_apply_a_preference(
    make_agent: Callable[..., Any], sample_docs: Path
) -> None:
    rag = make_agent("offline-prefs", memory_store=InMemoryStore())
    rag.add_documents(sample_docs, progress=False)
    first = rag.invoke("I prefer answers in German.", cfg("erin"))
    assert "Answer in German." in first.answer  # acknowledged, not answered from a passage
    assert first.events("final_grade")[0]["memory_kind"] == "preference"
    later = rag.invoke("What is hybrid search?", cfg("erin", "new-thread"))
    assert later.memory_context.endswith("- Answer in German.")
    # a question about preferences is not one
    asked = rag.invoke("Why do people prefer answers in German?", cfg("frank"))
    assert asked.events("final_grade")[0]["memory_kind"] != "preference", asked.trace
    assert [m for m in rag.list_memories("frank") if m["kind"] == "preference"] == []
    # asking for a phone call is not asking to be called a name
    for said in ("Call me after the board meeting on Friday.", "Call me tomorrow."):
        rag.invoke(said, cfg("gail"))
    assert [m for m in rag.list_memories("gail") if m["kind"] == "preference"] == []


@pytest.mark.parametrize("backend", ["store", "mem0"])
def test_a_preference_stated_beside_a_pasted_key_keeps_no_copy_of_the_key(
    make_agent: Callable[..., Any], tmp_path: Path, backend: str
) -> None:
    """The preference is stored with the turn it came from (listed as its question): the
    key pasted in that turn must not be kept there, nor anywhere on disk with mem0."""
    key = "sk-proj-AbCdEfGhIjKlMnOpQrStUv123456"
    store = InMemoryStore()
    kwargs: dict[str, Any] = (
        {"memory_store": store} if backend == "store" else {"memory": True, "data_dir": tmp_path}
    )
    rag = make_agent("prefs-key", **kwargs)
    rag.add_documents(["Backups: pg_basebackup takes a base backup of a cluster."])
    rag.invoke(f"Keep answers short. My OpenAI key is {key}.", cfg("kim"))
    assert rag.drain_background(10)["failed"] == 0
    listed = rag.list_memories("kim")
    (preference,) = [m for m in listed if m["kind"] == "preference"]
    assert preference["question"].startswith("Keep answers short. My OpenAI key is [secret")
    assert key not in repr(listed)
    later = rag.invoke("How do backups work?", cfg("kim", "later"))
    assert "Keep answers short." in later.memory_context and key not in later.memory_context
    if backend == "store":
        kept = [it.value for ns in store.list_namespaces() for it in store.search(ns, limit=99)]
        assert kept and key not in repr(kept)
    else:
        rag.close()
        files = [p for p in tmp_path.rglob("*") if p.is_file()]
        assert files and not any(key.encode() in p.read_bytes() for p in files)


def test_offline_a_changed_preference_replaces_the_old_one_however_it_is_worded(
    make_agent: Callable[..., Any], sample_docs: Path
) -> None:
    rag = make_agent("offline-change", memory_store=InMemoryStore())
    rag.add_documents(sample_docs, progress=False)
    rag.invoke("Answer in French from now on. What is LF-409?", cfg("gus"))
    for statement, language in [
        ("Actually, answer in German from now on. What is LF-409?", "German"),
        ("OK so reply in Spanish instead, thanks.", "Spanish"),
        ("Sorry, I prefer answers in Italian.", "Italian"),
    ]:
        rag.invoke(statement, cfg("gus"))
        later = rag.invoke("What is hybrid search?", cfg("gus", "later"))
        assert later.memory_context.endswith(f"- Answer in {language}."), (statement, later.trace)
        kept = [m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference"]
        assert kept == [f"Answer in {language}."], statement


@pytest.mark.parametrize(
    ("message", "language"),
    [
        ("I prefer answers in German. Actually, English.", "English"),
        ("Answer in French. No wait, make that Spanish please!", "Spanish"),
        ("Reply in German. Sorry, I mean Italian.", "Italian"),
        ("I prefer answers in German. Actually, thanks.", "German"),  # no language: kept
        ("Answer in German. Oh wait, English.", "English"),
        ("Answer in German. No, English. Actually, French.", "French"),
        # "no" without a comma refuses what follows it
        ("Answer in English. No German, please.", "English"),
        ("Answer in German. No English.", "German"),
        ("Answer in German. Forget it, English.", "English"),
        ("Answer in German. No thanks, English.", "English"),
    ],
)
def test_offline_a_preference_corrected_in_the_same_message_keeps_the_correction(
    make_agent: Callable[..., Any], message: str, language: str
) -> None:
    """Before, "Actually, English." was not a whole preference sentence, so the German
    said just before it was stored and applied to every later turn."""
    rag = make_agent("offline-correction", memory_store=InMemoryStore())
    rag.invoke(message, cfg("gus"))
    later = rag.invoke("What is hybrid search?", cfg("gus", "later"))
    assert later.memory_context.endswith(f"- Answer in {language}."), later.memory_context
    kept = [m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference"]
    assert kept == [f"Answer in {language}."]
    # and the same message in an imported history
    rag.remember([{"role": "user", "content": message}], user_id="ida", thread_id="old")
    kept = [m["text"] for m in rag.list_memories("ida") if m["kind"] == "preference"]
    assert kept == [f"Answer in {language}."]


@pytest.mark.parametrize(
    "taken_back",
    [
        "Actually, no.",
        "No, no.",
        "Scratch that.",
        "Actually, never mind.",
        "Forget it, sorry.",
        "No German, please.",  # refusing the very value just stated
        "No, no German.",
    ],
)
def test_offline_a_preference_taken_back_in_the_same_message_is_not_stored(
    make_agent: Callable[..., Any], taken_back: str
) -> None:
    """Before, "Answer in German. Actually, no." stored German, and replaced the French the
    user had asked for earlier."""
    rag = make_agent("offline-retraction", memory_store=InMemoryStore())
    rag.invoke("Answer in French.", cfg("gus", "before"))
    rag.invoke(f"Answer in German. {taken_back}", cfg("gus", "now"))
    later = rag.invoke("What is hybrid search?", cfg("gus", "later"))
    assert later.memory_context.endswith("- Answer in French."), later.memory_context
    kept = [m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference"]
    assert kept == ["Answer in French."]


@pytest.mark.parametrize(
    ("said", "kept"),
    [
        (["I prefer answers in German.", "Actually, English."], ["Answer in English."]),
        (["Answer in French.", "No, Spanish please."], ["Answer in Spanish."]),
        (["Keep answers short.", "Sorry, I meant detailed."], ["Give detailed answers."]),
        (["Answer in German.", "Hmm. Actually, English."], ["Answer in English."]),
        (["Answer in German.", "Well. Actually, English."], ["Answer in English."]),
        (["Answer in German.", "Ah, OK. Actually, English."], ["Answer in English."]),
        # a correction of a correction
        (["Answer in German.", "Actually, English.", "No, French."], ["Answer in French."]),
        # the subject the value belongs to, though another was stated after it
        (
            ["I prefer answers in German. Keep answers short.", "Actually, English."],
            ["Answer in English.", "Keep answers short."],
        ),
        # not a correction: the message before stated no preference, or this one no value
        (["What is hybrid search?", "Actually, English."], []),
        (["I prefer answers in German.", "Actually, thanks."], ["Answer in German."]),
        (
            ["I prefer answers in German.", "What is hybrid search?", "Actually, English."],
            ["Answer in German."],
        ),
        # a name is no closed set: a reply after "Call me Robert." names no one
        (["Call me Robert.", "Oh, Nice."], ["Address the user as Robert."]),
        (["Call me Robert.", "Wait, Nevermind."], ["Address the user as Robert."]),
        (["Call me Robert.", "Sorry, PostgreSQL."], ["Address the user as Robert."]),
    ],
)
def test_offline_a_correction_sent_as_the_next_message_changes_the_preference(
    make_agent: Callable[..., Any], sample_docs: Path, said: list[str], kept: list[str]
) -> None:
    """A user who sends "I prefer answers in German." and then, as the next message,
    "Actually, English." wants English. Before, the second message was no preference on
    its own, so German stayed in every later prompt."""
    from langgraph.checkpoint.memory import InMemorySaver

    rag = make_agent(
        "offline-next-correction", memory_store=InMemoryStore(), checkpointer=InMemorySaver()
    )
    rag.add_documents(sample_docs, progress=False)
    replies = [rag.invoke(message, cfg("gus", "now")) for message in said]
    later = rag.invoke("What is hybrid search?", cfg("gus", "later"))
    stored = sorted(m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference")
    assert stored == kept
    shown = later.memory_context.partition("standing preferences")[2]
    assert sorted(re.findall(r"^- (.*)$", shown, re.MULTILINE)) == kept, later.memory_context
    if "Answer in English." in kept and said[-1].endswith("English."):
        assert "Answer in English." in replies[-1].answer  # the offline reply says what it noted
    # the same messages in an imported history
    history: list[dict[str, str]] = []
    for message in said:
        history += [{"role": "user", "content": message}, {"role": "assistant", "content": "OK."}]
    rag.remember(history, user_id="ida", thread_id="old")
    imported = sorted(m["text"] for m in rag.list_memories("ida") if m["kind"] == "preference")
    assert imported == kept


def test_offline_another_persons_message_is_not_what_a_correction_changes(
    make_agent: Callable[..., Any],
) -> None:
    """In a shared chat, "I prefer answers in German." said by Bob is not the user's, so
    the user's "Actually, English." after it corrects nothing, in a turn as in an import."""
    from langchain_core.messages import AIMessage, HumanMessage

    rag = make_agent("offline-shared", memory_store=InMemoryStore())
    said_by_bob = HumanMessage("I prefer answers in German.", name="Bob")
    rag.chat("Actually, English.", history=[said_by_bob, AIMessage("OK.")], config=cfg("gus"))
    rag.remember(
        [
            {"role": "user", "content": "I prefer answers in German.", "name": "Bob"},
            {"role": "assistant", "content": "OK."},
            {"role": "user", "content": "Actually, English."},
        ],
        user_id="ida",
        thread_id="shared",
    )
    for user in ("gus", "ida"):
        assert [m["text"] for m in rag.list_memories(user) if m["kind"] == "preference"] == []


def test_offline_a_bare_correction_in_a_new_conversation_changes_nothing(
    make_agent: Callable[..., Any],
) -> None:
    """Only the user's message just before it is corrected: "Actually, English." as the
    first message of another conversation is no preference."""
    from langgraph.checkpoint.memory import InMemorySaver

    rag = make_agent("offline-bare", memory_store=InMemoryStore(), checkpointer=InMemorySaver())
    rag.invoke("I prefer answers in German.", cfg("gus", "one"))
    rag.invoke("Actually, English.", cfg("gus", "two"))
    stored = [m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference"]
    assert stored == ["Answer in German."]


@pytest.mark.parametrize(
    ("message", "name"),
    [
        ("Call me Robert. No, Bob.", "Bob"),
        ("Call me Bob. Actually, Rob.", "Rob"),
        ("Call me Bob. Actually, thanks.", "Bob"),  # not a name
    ],
)
def test_offline_a_name_corrected_in_the_same_message_keeps_the_correction(
    make_agent: Callable[..., Any], message: str, name: str
) -> None:
    rag = make_agent("offline-name", memory_store=InMemoryStore())
    rag.invoke(message, cfg("gus"))
    kept = [m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference"]
    assert kept == [f"Address the user as {name}."]


# Every example sentence of the offline rules table in docs/memory.md, and what the answer
# prompt of the user's next turn must then carry.
DOCUMENTED_EXAMPLES = {
    "I prefer answers in German.": "Answer in German.",
    "Answer in French.": "Answer in French.",
    "Reply to me in Spanish.": "Answer in Spanish.",
    "Speak Dutch with me.": "Answer in Dutch.",
    "Switch to English please.": "Answer in English.",
    "English answers from now on, please.": "Answer in English.",
    "Keep answers short.": "Keep answers short.",
    "I prefer brief answers.": "Keep answers short.",
    "Be concise.": "Keep answers short.",
    "I'd like detailed answers.": "Give detailed answers.",
    "Use bullet points.": "Format answers as bullet points.",
    "Answer in bullet points.": "Format answers as bullet points.",
    "I'd like answers as a bulleted list.": "Format answers as bullet points.",
    "Use a formal tone.": "Use a formal tone.",
    "Be more casual.": "Use a casual tone.",
    "I prefer a friendly tone.": "Use a friendly tone.",
    "Call me Ana.": "Address the user as Ana.",
    "Address me as Dr. Lee.": "Address the user as Dr. Lee.",
    # a polite request asked as a question
    "Could you answer in German from now on?": "Answer in German.",
    "Can you keep answers short from now on, please?": "Keep answers short.",
}


@pytest.mark.parametrize(
    ("message", "kept"),
    [
        ("Could you answer in German from now on?", ["Answer in German."]),
        ("Can you keep answers short from now on, please?", ["Keep answers short."]),
        ("Would you please always use bullet points?", ["Format answers as bullet points."]),
        # other polite forms (a hostile pass: these were read as questions)
        ("Would you mind answering in German from now on?", ["Answer in German."]),
        ("Please could you answer in German from now on?", ["Answer in German."]),
        ("Would you mind using bullet points by default?", ["Format answers as bullet points."]),
        ("Would you mind answering in German?", []),
        ("Would you mind calling me Bob from now on?", []),
        ("Would you mind if I always ask in German?", []),
        # a step of a how-to, an answer: not a standing request (a second hostile pass)
        ("Open Settings, tap Language. Switch to German. Then check the menus.", []),
        ("Spanish replies.", []),
        # a question about something else, what the agent can do, or one answer: none
        ("Can you answer in German about backups?", []),
        ("Could you tell me how backups work?", []),
        ("Why do people prefer answers in German?", []),
        ("Can you speak German?", []),
        ("Could you answer in German again?", []),
        ("Can you keep answers short, please?", []),
        # a call, not a name
        ("Can you call me back?", []),
        ("Could you call me Monday from now on?", []),
        # a request pasted in a code block is not the user's
        ("My test sends this:\n```\nCould you answer in German from now on?\n```\nWhy?", []),
    ],
)
def test_offline_a_polite_request_asked_as_a_question_is_a_preference(
    make_agent: Callable[..., Any], sample_docs: Path, message: str, kept: list[str]
) -> None:
    """ "Could you answer in German from now on?" ends with "?", so it was read as a
    question, and the user's German was never kept."""
    rag = make_agent("offline-polite", memory_store=InMemoryStore())
    rag.add_documents(sample_docs, progress=False)
    reply = rag.invoke(message, cfg("gus", "one"))
    later = rag.invoke("What is hybrid search?", cfg("gus", "later"))
    shown = later.memory_context.partition("standing preferences")[2]
    assert re.findall(r"^- (.*)$", shown, re.MULTILINE) == kept
    assert ("Noted" in reply.answer) == bool(kept), reply.answer


def test_offline_a_polite_request_beside_a_question_is_kept_and_the_question_answered(
    make_agent: Callable[..., Any], sample_docs: Path
) -> None:
    rag = make_agent("offline-polite-question", memory_store=InMemoryStore())
    rag.add_documents(sample_docs, progress=False)
    reply = rag.invoke(
        "Could you answer in German from now on? And what is hybrid search?", cfg("gus", "one")
    )
    assert "Noted" not in reply.answer and reply.sources
    kept = [m["text"] for m in rag.list_memories("gus") if m["kind"] == "preference"]
    assert kept == ["Answer in German."]


def test_offline_rules_recognise_every_documented_example(
    make_agent: Callable[..., Any], sample_docs: Path
) -> None:
    rag = make_agent("offline-examples", memory_store=InMemoryStore())
    rag.add_documents(sample_docs, progress=False)
    for n, (statement, instruction) in enumerate(DOCUMENTED_EXAMPLES.items()):
        user = f"example-{n}"
        rag.invoke(statement, cfg(user))
        later = rag.invoke("What is hybrid search?", cfg(user, "later"))
        assert later.memory_context.endswith(f"- {instruction}"), (statement, later.memory_context)


def test_listing_and_forgetting_need_memory_and_a_user(make_agent: Callable[..., Any]) -> None:
    with pytest.raises(ConfigError, match="no long-term memory"):
        make_agent("no-memory").list_memories("alice")
    rag = make_agent("with-memory", memory_store=InMemoryStore())
    with pytest.raises(ConfigError, match="user_id"):
        rag.forget("  ")
    with pytest.raises(ConfigError):
        rag.list_memories("bad\x00id")
    # a blank memory id names no memory; an id and a thread together are refused, not
    # answered "0 erased" when the memory belongs to another thread
    rag.remember([{"role": "user", "content": "Our NAS is in the attic."}], user_id="al")
    with pytest.raises(ConfigError, match="memory_id must not be empty"):
        rag.forget("al", "")
    (memory,) = rag.list_memories("al")
    with pytest.raises(ConfigError, match="not both"):
        rag.forget("al", memory["id"], thread_id="another")
    assert rag.forget("al", memory["id"]) == 1


def test_mem0_accepts_any_user_id_and_keeps_look_alikes_apart(
    build: Callable[..., Any], hosted: HostedModel
) -> None:
    # mem0 itself rejects ids with whitespace; the agent maps them one-to-one
    rag = build("mem0")
    rag.invoke("I prefer answers in German.", cfg("alice smith", "t1"))
    state = rag.invoke("What is hybrid search?", cfg("alice smith", "t2"))
    (read,) = state.events("read_memory")
    assert "error" not in read and read["n_preferences"] == 1
    assert "- Answer in German." in hosted.prompt("What is hybrid search?")
    rag.invoke("Where are the logs kept?", cfg("alice%20smith", "t3"))
    assert "German" not in hosted.prompt("Where are the logs kept?")
    prefs = [m["text"] for m in rag.list_memories("alice smith") if m["kind"] == "preference"]
    assert prefs == ["Answer in German."]
    assert not [m for m in rag.list_memories("alice%20smith") if "German" in m["text"]]


@pytest.mark.parametrize("padded", ["  alice  ", "alice ", "\u3000alice"])
def test_a_padded_user_id_is_refused_not_merged_with_the_trimmed_one(
    make_agent: Callable[..., Any], padded: str
) -> None:
    """Ids are used exactly as given: "  alice  " stating a preference used to replace
    alice's own, since both were trimmed to one user."""
    rag = make_agent("padded-ids", memory_store=InMemoryStore())
    rag.add_documents(["# Search\n\nHybrid search fuses BM25 and dense results."])
    rag.invoke("Please answer in French from now on.", cfg("alice"))
    rag.drain_background(timeout=30)
    with pytest.raises(ConfigError, match=r"user_id=.*whitespace"):
        rag.invoke("I prefer answers in German.", cfg(padded))
    for call in (rag.list_memories, rag.forget, lambda u: rag.list_threads(u)):
        with pytest.raises(ConfigError, match=r"user_id=.*whitespace"):
            call(padded)
    rag.drain_background(timeout=30)
    kept = [m["text"] for m in rag.list_memories("alice") if m["kind"] == "preference"]
    assert kept == ["Answer in French."]
    later = rag.invoke("What is hybrid search?", cfg("alice", "later"))
    assert later.memory_context.endswith("- Answer in French.")
