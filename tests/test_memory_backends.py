"""The two memory backends on their own: real mem0 (sync and async) and real LangGraph stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from retrievalagent.errors import ConfigError
from retrievalagent.memory import Mem0Backend, StoreBackend, user_id_from_config
from retrievalagent.memory._base import fact_text, recall_text
from tests.support.chat import prompt_text
from tests.support.memory import CountingEmbeddings, mem0_config, mem0_extractor, record

FACT = '"password" is called "passphrase" in these documents'
QUESTION = "Which environment variable can hold the encryption password?"


@pytest.fixture
def mem0_sync(tmp_path: Path, minilm: Any) -> Any:
    from mem0 import Memory

    return Memory.from_config(mem0_config(tmp_path / "m0", minilm))


@pytest.fixture
def mem0_async(tmp_path: Path, minilm: Any) -> Any:
    from mem0 import AsyncMemory

    return AsyncMemory.from_config(mem0_config(tmp_path / "am0", minilm))


def test_user_id_resolution() -> None:
    assert user_id_from_config({"configurable": {"user_id": "alice"}}) == "alice"
    auth = {"configurable": {"langgraph_auth_user": {"identity": "bob"}}}
    assert user_id_from_config(auth) == "bob"
    # behind LangGraph Server's auth, a client naming another user gets its own memory
    both = {"configurable": {"user_id": "alice", "langgraph_auth_user": {"identity": "bob"}}}
    assert user_id_from_config(both) == "bob"
    # no auth handler: the server leaves the user empty, and the client's id is used
    none = {"configurable": {"user_id": "alice", "langgraph_auth_user": None}}
    assert user_id_from_config(none) == "alice"
    anonymous = {"identity": "", "is_authenticated": False}
    assert (
        user_id_from_config(
            {"configurable": {"user_id": "alice", "langgraph_auth_user": anonymous}}
        )
        == "alice"
    )
    # an authenticated user without an identity (an auth handler's bug) never falls back
    # to the user the client names, which would open that user's memory to it
    for blank in ({"identity": ""}, {"identity": None}, {}, {"identity": " "}):
        with pytest.raises(ConfigError, match="no identity"):
            user_id_from_config(
                {"configurable": {"user_id": "alice", "langgraph_auth_user": blank}}
            )
    assert user_id_from_config({"configurable": {"user_id": "  "}}) == "default"
    assert user_id_from_config(None) == "default"


def test_recall_text_round_trip() -> None:
    rec = record(FACT, question="Where (exactly) is it?")
    text = recall_text(rec)
    assert text == f"Where [exactly] is it? (search hint: {FACT})"  # the question leads
    assert fact_text(text) == FACT
    assert fact_text(FACT) == FACT
    assert recall_text(record(FACT)) == FACT


def test_recall_text_is_found_by_its_question(minilm: Any) -> None:
    """Why the question leads: a bare fact never clears the 0.7 bar against the question
    that taught it; the recall text does, and stays far from unrelated questions."""
    question = "Where is the repository stored by default?"
    fact = '"repository" is called "vault" in these documents'
    text = recall_text(record(fact, question=question))
    vectors = minilm.embed_documents([question, fact, text, "How do I encrypt backups?"])

    def cos(a: list[float], b: list[float]) -> float:
        return sum(x * y for x, y in zip(a, b, strict=True))

    assert cos(vectors[0], vectors[1]) < 0.7 <= cos(vectors[0], vectors[2])
    assert cos(vectors[3], vectors[2]) < 0.5


def test_mem0_sync_stores_and_recalls_per_user(mem0_sync: Any) -> None:
    backend = Mem0Backend(mem0_sync, infer=False)
    assert not backend.async_native and backend.score_kind == "similarity"
    backend.add(record(FACT, "alice", QUESTION))
    hits, scanned = backend.search(QUESTION, "alice", 5)
    assert scanned == 1 and hits[0].text == FACT  # the "(asked: ...)" part is not injected
    assert 0.7 <= hits[0].score <= 1.0  # found again by the question that taught it
    assert backend.search(QUESTION, "bob", 5) == ([], 0)


def test_mem0_infer_sends_the_mapping_to_the_extractor(tmp_path: Path, minilm: Any) -> None:
    from mem0 import Memory

    extractor = mem0_extractor()
    memory = Memory.from_config(mem0_config(tmp_path / "m0", minilm, extractor))
    backend = Mem0Backend(memory, infer=True)
    backend.add(record(FACT, "alice", QUESTION))
    assert len(extractor.prompts) == 1 and "passphrase" in prompt_text(extractor.prompts[0])
    hits, _ = backend.search(QUESTION, "alice", 5)
    assert [h.text for h in hits] == [FACT]
    assert hits[0].score >= 0.7


async def test_mem0_async_memory_is_awaited(mem0_async: Any) -> None:
    backend = Mem0Backend(mem0_async, infer=False)
    assert backend.async_native  # AsyncMemory.add is a coroutine: scheduled as a task
    await backend.aadd(record(FACT, "alice", QUESTION))
    hits, scanned = await backend.asearch(QUESTION, "alice", 5)
    assert scanned == 1 and hits[0].text == FACT
    assert (await backend.asearch(QUESTION, "mallory", 5)) == ([], 0)


def test_mem0_async_memory_from_sync_code(mem0_async: Any) -> None:
    backend = Mem0Backend(mem0_async, infer=False)
    backend.add(record(FACT, "alice", QUESTION))  # no running loop: run to completion
    hits, _ = backend.search(QUESTION, "alice", 5)
    assert hits and hits[0].text == FACT


def test_mem0_distances_become_similarities(mem0_sync: Any) -> None:
    backend = Mem0Backend(mem0_sync, infer=False, score_kind="distance")
    backend.add(record(FACT, "alice", QUESTION))
    hits, _ = backend.search(QUESTION, "alice", 5)
    raw = mem0_sync.search(QUESTION, filters={"user_id": "alice"}, top_k=5, threshold=0.0)
    distance = raw["results"][0]["score"]
    assert hits[0].score == pytest.approx(1 / (1 + distance))
    with pytest.raises(ValueError, match="score_kind"):
        Mem0Backend(mem0_sync, score_kind="cosine")


def test_mem0_backend_rejects_objects_without_search_add_and_get_all() -> None:
    with pytest.raises(TypeError, match="has no search\\(\\) or add\\(\\) or get_all"):
        Mem0Backend(object())

    class SearchAndAddOnly:  # a client every recall would fail on (preferences use get_all)
        def search(self, query: str, **kwargs: Any) -> Any:
            return {"results": []}

        def add(self, messages: Any, **kwargs: Any) -> Any:
            return {"results": []}

    with pytest.raises(TypeError, match="SearchAndAddOnly has no get_all\\(\\)"):
        Mem0Backend(SearchAndAddOnly())


@pytest.mark.parametrize("indexed", [False, True], ids=["no-index", "index"])
def test_store_backend_recall_and_isolation(minilm: Any, indexed: bool) -> None:
    store = InMemoryStore(index={"dims": 384, "embed": minilm}) if indexed else InMemoryStore()
    backend = StoreBackend(store, minilm, "minilm:384")
    assert backend.indexed is indexed
    backend.add(record(FACT, "alice", QUESTION))
    backend.add(record('"kill" is called "terminate" in these documents', "alice", "kill it?"))
    hits, scanned = backend.search(QUESTION, "alice", 5)
    assert scanned == 2 and hits[0].text == FACT and hits[0].score >= 0.7
    assert hits[0].score > hits[1].score
    assert backend.search(QUESTION, "bob", 5) == ([], 0)
    item = store.search(("memories", "alice"), limit=10)[0].value
    assert {"text", "question", "answer", "created_at"} <= set(item)


@pytest.mark.parametrize("indexed", [False, True], ids=["no-index", "index"])
async def test_store_backend_async(minilm: Any, indexed: bool) -> None:
    store = InMemoryStore(index={"dims": 384, "embed": minilm}) if indexed else InMemoryStore()
    backend = StoreBackend(store, minilm, "minilm:384")
    await backend.aadd(record(FACT, "alice", QUESTION))
    hits, scanned = await backend.asearch(QUESTION, "alice", 5)
    assert scanned == 1 and hits[0].text == FACT
    assert (await backend.asearch(QUESTION, "bob", 5)) == ([], 0)


def test_store_write_reuses_the_turns_question_vector(minilm: Any) -> None:
    """A background write must not compete with the next turn for the CPU: the vector a
    memory is found by is the question's, already computed by the turn's dense search."""
    from retrievalagent.retrieval import QueryEmbedder

    counting = CountingEmbeddings(minilm)
    calls = counting.calls
    embedder = QueryEmbedder(counting)
    embedder.embed(QUESTION)  # the turn's dense search
    backend = StoreBackend(InMemoryStore(), embedder, "minilm:384")
    backend.add(record(FACT, "alice", QUESTION))
    assert calls == [1]  # the write embedded nothing
    hits, _ = backend.search(QUESTION, "alice", 5)
    assert hits[0].text == FACT and hits[0].score > 0.99
    backend.add(record('"a" is called "b" in these documents', "alice"))  # no question
    assert calls == [1, 1]  # then the fact itself is embedded


def test_store_without_index_scores_only_the_most_recent(minilm: Any) -> None:
    store = InMemoryStore()
    backend = StoreBackend(store, minilm, "minilm:384", scan_limit=2)
    backend.add(record(FACT, "alice", QUESTION))  # oldest: beyond the scan limit
    backend.add(record('"a" is called "b" in these documents', "alice", "one"))
    backend.add(record('"c" is called "d" in these documents', "alice", "two"))
    hits, scanned = backend.search(QUESTION, "alice", 5)
    assert scanned == 2 and FACT not in [h.text for h in hits]


def test_store_memories_written_by_other_code_are_embedded_once(minilm: Any) -> None:
    store = InMemoryStore()
    store.put(("memories", "alice"), "k1", {"text": FACT})  # no vector saved with it
    backend = StoreBackend(store, minilm, "minilm:384")
    hits, _ = backend.search("password passphrase", "alice", 5)
    assert hits[0].text == FACT
    assert len(backend._cache) == 1
    backend.search("another question", "alice", 5)
    assert len(backend._cache) == 1


def test_store_backend_needs_a_base_store(minilm: Any) -> None:
    with pytest.raises(TypeError, match="BaseStore"):
        StoreBackend({}, minilm, "x")  # type: ignore[arg-type]


@pytest.mark.parametrize("indexed", [False, True], ids=["no-index", "index"])
async def test_a_store_recall_holds_while_background_threads_write(
    minilm: Any, indexed: bool
) -> None:
    """Under ``ainvoke`` with an ``InMemoryStore``, recalls run on the loop while
    ``write_memory`` writes from background threads. InMemoryStore is not thread-safe: a
    write that adds a user's namespace while a recall lists the store failed that recall
    ("dictionary changed size during iteration"), and the turn lost its memories."""
    import sys
    import threading

    from retrievalagent.retrieval import QueryEmbedder

    embedder = QueryEmbedder(minilm)
    embedder.embed(QUESTION)  # writes reuse the turn's question vector: they are quick
    store = InMemoryStore(index={"dims": 384, "embed": minilm}) if indexed else InMemoryStore()
    backend = StoreBackend(store, embedder, "minilm:384")
    backend.add(record(FACT, "alice", QUESTION))
    stop, failures = threading.Event(), []

    def write(n: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                backend.add(record(f'"w{n}x{i}" is called "port"', f"u{n}-{i}", QUESTION))
            except Exception as exc:  # a failed write is a failure too
                failures.append(exc)
            i += 1

    writers = [threading.Thread(target=write, args=(n,), daemon=True) for n in range(3)]
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns often, as under a busy server
    for w in writers:
        w.start()
    try:
        for _ in range(100 if indexed else 200):
            hits, _ = await backend.asearch(QUESTION, "alice", 5)
            assert [h.text for h in hits] == [FACT]
    finally:
        stop.set()
        sys.setswitchinterval(switch)
        for w in writers:
            w.join(10)
    assert not failures, failures[:3]


async def test_an_indexed_store_with_an_async_only_embedder_still_recalls(minilm: Any) -> None:
    """LangGraph lets a store's index embed with an async function alone; recall under
    ``ainvoke`` goes through the store's async methods, so that keeps working."""

    async def aembed(texts: list[str]) -> list[list[float]]:
        return await minilm.aembed_documents(texts)

    store = InMemoryStore(index={"dims": 384, "embed": aembed})
    backend = StoreBackend(store, minilm, "minilm:384")
    await backend.aadd(record(FACT, "alice", QUESTION))
    hits, scanned = await backend.asearch(QUESTION, "alice", 5)
    assert scanned == 1 and [h.text for h in hits] == [FACT]


@pytest.mark.parametrize("indexed", [False, True], ids=["no-index", "index"])
def test_a_sync_call_inside_async_code_never_waits_for_ever(minilm: Any, indexed: bool) -> None:
    """A sync recall made on the event loop's thread (a sync helper inside an async
    endpoint) while that loop's tasks recall from the same InMemoryStore: the lock is never
    held by a suspended task, so the sync call cannot wait for one that cannot run."""
    import asyncio
    import threading

    store = InMemoryStore(index={"dims": 384, "embed": minilm}) if indexed else InMemoryStore()
    backend = StoreBackend(store, minilm, "minilm:384")
    backend.add(record(FACT, "alice", QUESTION))
    found: list[Any] = []

    async def main() -> None:
        tasks = [asyncio.create_task(backend.asearch(QUESTION, "alice", 5)) for _ in range(5)]
        await asyncio.sleep(0)  # the tasks are inside their store calls
        found.append(backend.search(QUESTION, "alice", 5))  # blocks the loop's thread
        found.extend(await asyncio.gather(*tasks))

    runner = threading.Thread(target=lambda: asyncio.run(main()), daemon=True)
    runner.start()
    runner.join(60)
    assert not runner.is_alive(), "the sync call waited for ever for the store's lock"
    assert len(found) == 6 and all([h.text for h in hits] == [FACT] for hits, _ in found)
