"""LLM mode with a scripted chat model: prompts, citations, grading, rewrites, streaming."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from tests.support.chat import ScriptedChatModel

GOOD = {
    "sufficient": True,
    "confidence": 0.9,
    "memory_worth_storing": False,
    "memory_confidence": 0.0,
    "memory_fact": "",
}
BAD = {
    "sufficient": False,
    "confidence": 0.2,
    "memory_worth_storing": False,
    "memory_confidence": 0.0,
    "memory_fact": "",
}


@pytest.fixture
def docs_agent(make_agent, sample_docs: Path):
    def build(model: ScriptedChatModel, **kwargs):
        rag = make_agent(model=model, **kwargs)
        rag.add_documents([sample_docs / "guide" / "encryption.md", sample_docs / "faq.md"])
        return rag

    return build


def test_answer_prompt_numbers_passages_and_result_records_the_model(docs_agent) -> None:
    model = ScriptedChatModel(replies=["Argon2id stretches it [1]."], grades=[GOOD])
    rag = docs_agent(model)
    state = rag.invoke("Which algorithm stretches the passphrase?")
    assert state.answer == "Argon2id stretches it [1]."
    assert state.llm_used is True and state.generated_by == "llm:ScriptedChatModel"
    system, human = model.prompts[0][0], model.prompts[0][-1]
    assert isinstance(system, SystemMessage) and isinstance(human, HumanMessage)
    assert human.content == "Which algorithm stretches the passphrase?"
    assert "[1] " in system.content and state.sources[0]["text"][:60] in system.content
    assert not system.content.startswith("Known search hints")  # no memory, no hints
    grade_prompt = model.grade_prompts[0][-1].content
    assert "Argon2id stretches it [1]." in grade_prompt
    grade = next(e for e in state.trace if e["node"] == "final_grade")
    assert (grade["sufficient"], grade["confidence"], grade["memory_should_store"]) == (
        True,
        0.9,
        False,
    )


def test_chat_history_reaches_the_model(docs_agent) -> None:
    model = ScriptedChatModel(replies=["first [1]", "second [1]"], grades=[GOOD])
    rag = docs_agent(model)
    rag.chat("What is a recovery sheet?", history=[("user", "Hi"), ("assistant", "Hello!")])
    sent = model.prompts[-1]
    assert [m.content for m in sent[1:]] == ["Hi", "Hello!", "What is a recovery sheet?"]


@pytest.mark.parametrize("memory", [False, True], ids=["one-line", "recall-in-parallel"])
def test_insufficient_grade_rewrites_the_query_once_per_retry(docs_agent, memory: bool) -> None:
    from langgraph.store.memory import InMemoryStore

    model = ScriptedChatModel(
        replies=["not sure [1]", "rekey passphrase change", "Use lantern vault rekey [1]."],
        grades=[BAD, GOOD],
    )
    store = {"memory_store": InMemoryStore()} if memory else {}
    rag = docs_agent(model, max_retries=2, **store)
    state = rag.invoke("How do I change my secret?")
    nodes = [e["node"] for e in state.trace]
    assert nodes.count("generate") == 2 and nodes.count("rewrite") == 1
    assert state.query == "rekey passphrase change"
    assert state.answer == "Use lantern vault rekey [1]."
    for searcher in ("dense_search", "lexical_search"):  # each search once per attempt
        assert [e["attempt"] for e in state.trace if e["node"] == searcher] == [0, 1]
    assert nodes.count("fuse") == 2


def test_retries_are_bounded(docs_agent) -> None:
    counter = iter(range(100))
    model = ScriptedChatModel(replies=[lambda msgs: f"reply {next(counter)}"], grades=[BAD])
    rag = docs_agent(model, max_retries=2)
    state = rag.invoke("Something the docs do not cover?")
    assert [e["node"] for e in state.trace].count("final_grade") == 3  # first try + 2 retries
    assert len(state.messages) == 2


def test_grader_failure_grades_conservatively_and_is_traced(docs_agent) -> None:
    model = ScriptedChatModel(replies=["An answer [1]."], grades=[ValueError("bad JSON")])
    rag = docs_agent(model)
    state = rag.invoke("Which algorithm stretches the passphrase?")
    grade = next(e for e in state.trace if e["node"] == "final_grade")
    assert grade["error_type"] == "ValueError" and grade["fallback"] == "conservative"
    assert grade["sufficient"] is False and grade["memory_should_store"] is False
    assert state.answer == "An answer [1]."


def test_answer_tokens_stream_from_the_model(docs_agent) -> None:
    model = ScriptedChatModel(replies=["Argon2id with 64 MiB of memory [1]."], grades=[GOOD])
    rag = docs_agent(model)
    events = list(rag.stream("Which algorithm stretches the passphrase?"))
    tokens = [e["text"] for e in events if e["type"] == "token"]
    assert len(tokens) > 3 and "".join(tokens) == "Argon2id with 64 MiB of memory [1]."
    assert events[-1]["result"].answer == "".join(tokens)


async def test_async_path_uses_the_same_prompts(docs_agent) -> None:
    model = ScriptedChatModel(replies=["A [1]."], grades=[GOOD])
    rag = docs_agent(model)
    sync_state = rag.invoke("Which algorithm stretches the passphrase?")
    async_state = await rag.ainvoke("Which algorithm stretches the passphrase?")
    assert [m.content for m in model.prompts[0]] == [m.content for m in model.prompts[1]]
    assert async_state.answer == sync_state.answer


def test_model_strings_go_through_init_chat_model(make_agent) -> None:
    from retrievalagent import ConfigError

    with pytest.raises(ConfigError, match="model='nosuchprovider:x'"):
        make_agent(model="nosuchprovider:x")
