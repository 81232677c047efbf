"""Offline learning: with no LLM, the evidence grader proposes search facts, and they help."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.documents import Document
from langgraph.store.memory import InMemoryStore

from retrievalagent.aliases import stem_root
from tests.support.memory import ALIASES, SAMPLE_QUESTIONS, trace_events

# Proposed with memory_confidence >= the default storage threshold (0.85). "pruned" is
# proposed too, but below the bar (see test_pruned_is_proposed_below_the_bar).
STORED = ("repository", "password", "throttle")
# What a paraphrase question may teach: real synonyms of the corpus's words.
SYNONYMS = {
    '"notebook" is called "laptop" in these documents',
    '"room" is called "space" in these documents',
}


@pytest.fixture
def offline(make_agent: Callable[..., Any], sample_docs: Path) -> Callable[..., Any]:
    def build(**kwargs: Any) -> Any:
        agent = make_agent("alias", **kwargs)
        agent.add_documents(sample_docs, progress=False)
        return agent

    return build


def _grade(state: Any) -> dict[str, Any]:
    return trace_events(state, "final_grade")[-1]


@pytest.mark.parametrize("alias", STORED)
def test_offline_grader_learns_the_alias(offline: Callable[..., Any], alias: str) -> None:
    rag = offline(memory_store=InMemoryStore())
    case = ALIASES[alias]
    state = rag.invoke(case["question"], config={"configurable": {"user_id": "u"}})
    event = _grade(state)
    assert event["memory_should_store"] is True
    assert event["memory_confidence"] >= 0.85
    assert state.memory_fact.startswith(f'"{alias}" is called "')
    canonical = state.memory_fact.split('"')[3]
    assert stem_root(case["canonical"]) in {stem_root(p) for p in canonical.split("_")}


def test_pruned_is_proposed_below_the_bar(offline: Callable[..., Any]) -> None:
    """The sample docs say "expired"; the passages support "expiry" only weakly (and the
    answer's "removes" is a different inflection), so the mapping is proposed, not stored."""
    rag = offline(memory_store=InMemoryStore())
    state = rag.invoke(ALIASES["pruned"]["question"])
    grade = state.grade
    assert grade["memory_worth_storing"] and grade["memory_fact"].startswith('"pruned" is called')
    assert 0.6 <= grade["memory_confidence"] < 0.85 and state.memory_fact == ""


def test_no_alias_search_without_a_memory_backend(offline: Callable[..., Any]) -> None:
    """Nowhere to store a fact: the grader grades, but spends nothing on proposing one."""
    rag = offline()
    assert rag.grader.aliases is None
    state = rag.invoke(ALIASES["password"]["question"])
    assert state.grade["sufficient"] and state.grade["confidence"] > 0
    assert not state.grade["memory_worth_storing"] and state.memory_fact == ""


def test_no_junk_is_stored_for_ordinary_questions(offline: Callable[..., Any]) -> None:
    rag = offline()
    for case in SAMPLE_QUESTIONS:
        if case["kind"] == "alias":
            continue
        state = rag.invoke(case["question"])
        if case["kind"] == "lexical":  # every word is in the corpus: nothing to learn
            assert state.grade["memory_fact"] == ""
        elif state.memory_fact:  # a paraphrase may teach only a real synonym
            assert state.memory_fact in SYNONYMS
        assert "everything" not in state.grade["memory_fact"]
        assert "removes" not in state.grade["memory_fact"]


# Acronyms the sample docs never use, asked about alone: dense search can only match the
# pieces of the unknown word, and the learner used to store what it happened to find
# ('"sla" is called "snapshot"', '"cdp" is called "vault"').
BARE_UNKNOWN_WORDS = ("What is an SLA?", "what is RPO?", "what is CDP?")


def test_nothing_is_learned_from_a_question_that_is_only_an_unknown_word(
    offline: Callable[..., Any],
) -> None:
    rag = offline(memory_store=InMemoryStore())
    for question in BARE_UNKNOWN_WORDS:
        state = rag.invoke(question, config={"configurable": {"user_id": "u"}})
        assert state.memory_fact == "", (question, state.grade)
    assert [m for m in rag.list_memories("u") if m["kind"] != "conversation"] == []
    later = rag.invoke("Is RPO the same as a snapshot?", config={"configurable": {"user_id": "u"}})
    assert later.memory_terms == "" and "search hints" not in later.memory_context


# A corpus written for the next test: the user says "car", the documents never do. Dense
# search ranks the vehicle passage below others that share the question's other words.
CAR_QUESTION = "How do I reset my car alarm code?"
CAR_PASSAGES = {
    "vehicle-alarm": "The vehicle alarm has a four-digit code of its own. To change it, hold the "
    "lock button on the dashboard of the vehicle for ten seconds, then type the new digits.",
    "alarm-code": "To reset an alarm code, open the wall panel, choose Codes, and type the old "
    "code and then the new code. Every alarm code can be reset this way.",
    "phone-app": "The phone app shows every alarm and can reset an alarm code remotely after "
    "you sign in with your account.",
    "garage-alarm": "The garage alarm code is reset from the keypad next to the door. Type the "
    "master code, then the new alarm code twice.",
    "forgotten-code": "If you forgot the alarm code, reset it with the master code printed on "
    "the installation card, then choose a new alarm code.",
    "fob-battery": "After changing the battery of the key fob, press both buttons until the "
    "light blinks. The code stored in the fob is kept.",
    "smoke": "Change the battery of each smoke detector once a year. After changing it, press "
    "the test button to silence the alarm.",
    "charging": "The wall charging station charges the battery of an electric vehicle "
    "overnight at 11 kW.",
    "window-sensor": "Window sensors report to the home alarm. Their coin battery lasts about "
    "two years.",
    "doorbell": "The doorbell camera records when someone rings. Restart it by holding the "
    "button on its back for thirty seconds.",
    "thermostat": "The thermostat keeps the rooms at the temperature you choose, following a "
    "weekly schedule.",
    "water": "A leak sensor under the sink sounds an alarm when it gets wet. Dry it and press "
    "the button.",
}
CAR_TITLES = {
    "vehicle-alarm": "Vehicle alarm",
    "alarm-code": "Resetting an alarm code",
    "phone-app": "Phone app",
    "garage-alarm": "Garage door alarm",
    "forgotten-code": "Forgotten alarm code",
    "fob-battery": "Key fob battery",
    "smoke": "Smoke detector",
    "charging": "Charging station",
    "window-sensor": "Window sensors",
    "doorbell": "Doorbell",
    "thermostat": "Thermostat",
    "water": "Water leak sensor",
}


@pytest.mark.parametrize("backend", ["store", "mem0"])
def test_memory_improves_retrieval_without_an_llm(
    make_agent: Callable[..., Any], backend: str
) -> None:
    kwargs = {"memory_store": InMemoryStore()} if backend == "store" else {"memory": True}
    rag = make_agent("car", top_k=8, **kwargs)  # memory=True with no model: infer=False
    rag.add_documents(
        [
            Document(f"# {CAR_TITLES[key]}\n\n{text}", metadata={"source": key})
            for key, text in CAR_PASSAGES.items()
        ],
        progress=False,
    )
    config = {"configurable": {"user_id": "ops"}}

    def rank(sources: list[dict[str, Any]]) -> int:
        return [s["source"] for s in sources].index("vehicle-alarm")

    best = rag.index.dense_search(rag.embeddings.embed_query(CAR_QUESTION), 1)[0].id
    assert rag.index.retrieve([best])[best]["source"] != "vehicle-alarm"  # dense alone misses
    first = rag.invoke(CAR_QUESTION, config=config)
    assert first.memory_context == "" and rank(first.sources) >= 2
    assert first.memory_fact == '"car" is called "vehicle" in these documents'
    # the fact, and the exchange (conversation memory)
    assert rag.drain_background(timeout=30) == {"landed": 2, "failed": 0, "pending": 0}
    second = rag.invoke(CAR_QUESTION, config=config)
    assert trace_events(second, "read_memory")[0].get("n_facts") == 1, second.trace
    assert "vehicle" in trace_events(second, "lexical_search")[0]["memory_terms"].split()
    assert rank(second.sources) == 0
    # known already: nothing new is stored (the offline grader does not propose it again)
    assert trace_events(second, "write_memory")[0]["skipped"] in (
        "already_known",
        "not_worth_storing",
    )
    assert rag.drain_background(timeout=30)["landed"] == 3  # and the second exchange
    assert len([m for m in rag.list_memories("ops") if m["kind"] == "search_fact"]) == 1


LONG_PHRASINGS = [
    "My daughter borrowed the car last weekend and now nobody remembers the alarm code; "
    "how can I reset it?",
    "After the battery swap the car keeps beeping, so where do I change its alarm code?",
    "Is there a way to set a new alarm code for the car without going to the dealer?",
]


@pytest.mark.parametrize("backend", ["store", "mem0"])
def test_a_learned_alias_is_recalled_whatever_words_surround_it(
    make_agent: Callable[..., Any], backend: str
) -> None:
    kwargs = {"memory_store": InMemoryStore()} if backend == "store" else {"memory": True}
    rag = make_agent("car-phrasings", top_k=8, **kwargs)
    rag.add_documents(
        [
            Document(f"# {CAR_TITLES[key]}\n\n{text}", metadata={"source": key})
            for key, text in CAR_PASSAGES.items()
        ],
        progress=False,
    )
    ops, stranger = {"configurable": {"user_id": "ops"}}, {"configurable": {"user_id": "bob"}}
    taught = rag.invoke(CAR_QUESTION, config=ops)
    assert taught.memory_fact == '"car" is called "vehicle" in these documents'
    rag.drain_background(timeout=30)

    def rank(state: Any) -> int:
        return [s["source"] for s in state.sources].index("vehicle-alarm")

    for question in LONG_PHRASINGS:
        state = rag.invoke(question, config=ops)
        (read,) = trace_events(state, "read_memory")
        facts = [(i["kind"], i["matched"]) for i in read["items"] if i["kind"] != "conversation"]
        assert facts == [("search_fact", "alias")]
        # recalled by the word, not by meaning: these phrasings are far from the taught one
        assert read["best_similarity"] is None or read["best_similarity"] < 0.9
        assert trace_events(state, "lexical_search")[0]["memory_terms"] == "vehicle"
        assert rank(state) <= rank(rag.invoke(question, config=stranger)), question
    # a question that does not use the word recalls nothing, however close its topic
    control = rag.invoke("How often should the smoke detector battery be changed?", config=ops)
    items = trace_events(control, "read_memory")[0]["items"]
    assert [i for i in items if i["kind"] == "search_fact"] == []
    # the same mapping taught again is not stored twice
    rag.invoke(CAR_QUESTION, config=ops)
    rag.drain_background(timeout=30)
    facts = [m["text"] for m in rag.list_memories("ops") if m["kind"] == "search_fact"]
    assert facts == [taught.memory_fact]


# An appliance manual that never names the appliance the user has. "tea" is a word of the
# corpus (another section, or the manual's title above the error code), never of the
# passage the answer cites, and only a piece of the user's "teapot".
TEA_ERROR = (
    "### E7 Base plate sensor\n\nE7 means the base plate sensor reads a temperature outside "
    "its range. Unplug the appliance, let the base plate cool for ten minutes, and wipe the "
    "sensor contacts.\n\n### E3 Dry boil\n\nE3 means the appliance was switched on empty. "
    "Fill it above the minimum mark.\n\n"
)
TEA_BREWING = (
    "## Brewing tea\n\nGreen tea brews best at 80 degrees; black tea at 100 degrees. Use the "
    "keep-warm mode to hold the temperature.\n\n## Descaling\n\nDescale it every month with "
    "citric acid.\n"
)
TEA_MANUALS = {
    "tea in another section": f"# Quillmate Brewer Manual\n\n## Error codes\n\n{TEA_ERROR}"
    + TEA_BREWING,
    "tea in the title above": f"# Quillmate Tea Maker\n\n## Error codes\n\n{TEA_ERROR}",
}


@pytest.mark.parametrize("manual", TEA_MANUALS)
def test_a_piece_of_the_users_word_is_not_learned_as_its_name(
    make_agent: Callable[..., Any], manual: str
) -> None:
    """The question "my teapot shows E7": the answer cites the E7 passage, which never says
    "tea"; the learner used to store '"teapot" is called "tea"' at 0.97."""
    rag = make_agent("tea", memory_store=InMemoryStore())
    rag.add_documents([Document(TEA_MANUALS[manual], metadata={"source": "manual.md"})])
    state = rag.invoke(
        "my teapot shows E7 on the base plate sensor", config={"configurable": {"user_id": "u"}}
    )
    assert "E7 means" in state.answer and state.grade["sufficient"]
    fact = state.grade["memory_fact"]
    assert '"tea"' not in fact and '"pot"' not in fact, state.grade
    if fact:  # whatever is proposed is a word of a passage the answer cites (or its headings)
        canonical = fact.split('"')[3]
        cited = [state.sources[int(n) - 1] for n in re.findall(r"\[(\d+)\]", state.answer)]
        texts = [" ".join([*s["headings"], s["text"]]).lower() for s in cited]
        assert any(re.search(rf"\b{re.escape(canonical)}\b", t) for t in texts), state.grade
    rag.drain_background(timeout=30)
    facts = [m for m in rag.list_memories("u") if m["kind"] == "search_fact"]
    assert not any("tea" in m["text"].split('"')[3:4] for m in facts)
