"""Per-call settings: a run's ``configurable`` may set the turn's ``top_k``, ``fetch_k``,
``rerank_k``, ``memory_term_weight`` and ``max_retries``; each is checked as ``init_agent``
checks it, and the searcher's own ``search`` ranks as the graph does.

Real index, embedder and store; the chat model is scripted (its words only) and the
reranker is a LangChain document compressor written here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langgraph.store.memory import InMemoryStore

from retrievalagent.config import PER_CALL
from retrievalagent.errors import ConfigError
from tests.support.chat import ScriptedChatModel
from tests.support.memory import record, trace_events

QUESTION = "How is the passphrase stretched into a key?"
# A question whose word the documents do not use, and the fact that says which they use:
# the recalled term "vault" goes into the BM25 query at memory_term_weight.
ALIAS_QUESTION = "Where is the repository stored by default?"
ALIAS_FACT = '"repository" is called "vault" in these documents'


class Reverse(BaseDocumentCompressor):
    """Returns the passages in the opposite order."""

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return list(reversed(documents))


@pytest.fixture
def docs(make_agent: Callable[..., Any], sample_docs: Path) -> Callable[..., Any]:
    """An agent over the sample docs (no rewrites unless a test asks for them)."""

    def build(**kwargs: Any) -> Any:
        kwargs.setdefault("max_retries", 0)
        agent = make_agent("per-call", **kwargs)
        agent.add_documents(sample_docs, progress=False)
        return agent

    return build


def ids(passages: Sequence[Any]) -> list[str]:
    return [p["id"] if isinstance(p, dict) else p.id for p in passages]


def searched(state: Any) -> list[int]:
    """How many candidates each search of the turn returned (dense, then BM25)."""
    return [e["hits"] for e in state.trace if e["node"] in ("dense_search", "lexical_search")]


def test_the_per_call_settings_are_the_documented_ones() -> None:
    assert set(PER_CALL) == {"top_k", "fetch_k", "rerank_k", "memory_term_weight", "max_retries"}


def test_a_per_call_top_k_beyond_fetch_k_is_filled_on_every_path(docs) -> None:
    rag = docs(fetch_k=5)
    config = {"configurable": {"top_k": 12}}
    state = rag.invoke(QUESTION, config=config)
    assert len(state.sources) == 12 and searched(state) == [12, 12]
    # the next call is the agent's again, and its 5 are the first 5 of the 12
    assert ids(rag.invoke(QUESTION).sources) == ids(state.sources)[:5]
    # search, the retriever and the graph itself (as LangGraph Server runs it) search as deep
    assert ids(rag.search(QUESTION, top_k=12)) == ids(state.sources)
    assert [d.id for d in rag.as_retriever(k=12).invoke(QUESTION)] == ids(state.sources)
    assert ids(rag.graph.invoke({"question": QUESTION}, config)["sources"]) == ids(state.sources)
    streamed = list(rag.stream(QUESTION, config=config))
    assert ids(streamed[-1]["result"].sources) == ids(state.sources)
    fuse = next(e["update"] for e in streamed if e.get("node") == "fuse")
    assert len(fuse["sources"]) == 12


async def test_async_calls_honour_the_per_call_settings_too(docs) -> None:
    rag = docs(fetch_k=5)
    config = {"configurable": {"top_k": 12, "fetch_k": 20}}
    state = await rag.ainvoke(QUESTION, config=config)
    assert len(state.sources) == 12 and searched(state) == [20, 20]
    events = [e async for e in rag.astream(QUESTION, config=config)]
    assert ids(events[-1]["result"].sources) == ids(state.sources)
    hits = await rag.searcher.asearch(QUESTION, 12, fetch_k=20)
    assert ids(hits) == ids(state.sources)
    assert len(await rag.asearch(QUESTION, top_k=12)) == 12


def test_a_per_call_fetch_k_sets_how_deep_each_list_is(docs) -> None:
    rag = docs(fetch_k=5)
    state = rag.invoke(QUESTION, config={"configurable": {"fetch_k": 20}})
    assert searched(state) == [20, 20] and searched(rag.invoke(QUESTION)) == [5, 5]
    deep, _ = rag.searcher.search(QUESTION, 5, fetch_k=20)
    assert ids(state.sources) == ids(deep)  # fused from the deeper lists, as search fuses them


def test_a_per_call_rerank_k_sets_how_many_passages_the_reranker_sees(docs) -> None:
    rag = docs(reranker=Reverse())
    state = rag.invoke(QUESTION, config={"configurable": {"rerank_k": 3}})
    (event,) = trace_events(state, "rerank")
    assert event["candidates"] == 3
    assert [s.get("fused_rank") for s in state.sources] == [3, 2, 1, None, None]
    hits, timings = rag.searcher.search(QUESTION, 5, rerank_k=3)  # the same ranking
    assert ids(hits) == ids(state.sources) and "rerank_ms" in timings
    (default,) = trace_events(rag.invoke(QUESTION), "rerank")
    assert default["candidates"] == 20


def test_search_with_memory_terms_ranks_as_the_graph_does(docs) -> None:
    """The searcher's search weighs recalled terms at memory_term_weight (1.5), as the
    graph's BM25 query does; it used to weigh them 1.0 and rank otherwise."""
    rag = docs(memory_store=InMemoryStore())
    rag.memory.add(record(ALIAS_FACT, "alice", ALIAS_QUESTION))
    state = rag.invoke(ALIAS_QUESTION, config={"configurable": {"user_id": "alice"}})
    terms = trace_events(state, "lexical_search")[0]["memory_terms"]
    assert terms == "vault"
    hits, _ = rag.searcher.search(ALIAS_QUESTION, 5, memory_terms=terms)
    assert ids(hits) == ids(state.sources)
    plain, _ = rag.searcher.search(ALIAS_QUESTION, 5, memory_terms=terms, memory_weight=1.0)
    assert ids(plain) != ids(state.sources)  # the weight matters for this question


@pytest.mark.parametrize("weight", [0.5, 6.0])
def test_a_per_call_memory_term_weight_weighs_the_recalled_terms(docs, weight: float) -> None:
    rag = docs(memory_store=InMemoryStore())
    rag.memory.add(record(ALIAS_FACT, "alice", ALIAS_QUESTION))
    user = {"user_id": "alice"}
    state = rag.invoke(
        ALIAS_QUESTION, config={"configurable": {**user, "memory_term_weight": weight}}
    )
    default = rag.invoke(ALIAS_QUESTION, config={"configurable": user})
    hits, _ = rag.searcher.search(ALIAS_QUESTION, 5, memory_terms="vault", memory_weight=weight)
    assert ids(state.sources) == ids(hits) != ids(default.sources)


def test_a_per_call_max_retries_bounds_the_rewrites(make_agent, sample_docs: Path) -> None:
    bad = {
        "sufficient": False,
        "confidence": 0.1,
        "memory_worth_storing": False,
        "memory_confidence": 0.0,
        "memory_fact": "",
    }
    counter = iter(range(100))
    model = ScriptedChatModel(replies=[lambda _: f"reply {next(counter)}"], grades=[bad])
    rag = make_agent(model=model, max_retries=1)
    rag.add_documents([sample_docs / "faq.md"], progress=False)

    def grades(config: dict[str, Any] | None) -> int:
        state = rag.invoke("Something the docs do not cover?", config=config)
        return len(trace_events(state, "final_grade"))

    assert grades(None) == 2
    assert grades({"configurable": {"max_retries": 0}}) == 1
    assert grades({"configurable": {"max_retries": 3}}) == 4


@pytest.mark.parametrize(
    ("name", "value", "problem"),
    [
        ("top_k", 0, "from 1 to 100"),
        ("top_k", 1001, "from 1 to 1000"),  # the one top_k ceiling (MAX_TOP_K)
        ("top_k", "12", "expected an integer"),
        ("top_k", 2.5, "expected an integer"),
        ("fetch_k", 0, "from 1 to 1000"),
        ("rerank_k", True, "expected an integer"),
        ("memory_term_weight", -1.0, "from 0 to 10"),
        ("memory_term_weight", "heavy", "expected a number"),
        ("max_retries", 6, "from 0 to 5"),
    ],
)
def test_a_bad_per_call_setting_is_refused_by_name(
    make_agent, name: str, value: Any, problem: str
) -> None:
    rag = make_agent("per-call-bad")
    rag.add_documents(["The harbour opens at dawn for the fishing boats."])
    config = {"configurable": {name: value}}
    pattern = rf"configurable\.{name}=.* is invalid: .*{problem}"
    with pytest.raises(ConfigError, match=pattern):
        rag.invoke("When does the harbour open?", config=config)
    with pytest.raises(ConfigError, match=pattern):
        next(rag.stream("When does the harbour open?", config=config))  # before any event
    with pytest.raises(ConfigError, match=pattern):  # the graph alone, as a server runs it
        rag.graph.invoke({"question": "When does the harbour open?"}, config)
    unset = rag.invoke("When does the harbour open?", config={"configurable": {name: None}})
    assert unset.sources  # None is "not set": the agent's own setting
