"""Long-term memory in a LangGraph store (``InMemoryStore`` here), sync and async.

Search facts and preferences live under the namespace ``("memories", user_id)``, what the
user said (conversation memory) under ``("conversations", user_id)``. This store has no
vector index, so the agent scores a user's memories against the question with its own
embeddings. For production, use ``PostgresStore`` (see ``postgres_persistence.py``).
"""

from __future__ import annotations

import asyncio

from _common import HANDBOOK, scratch_data_dir
from langgraph.store.memory import InMemoryStore

from retrievalagent import init_agent


def main() -> None:
    scratch_data_dir()
    store = InMemoryStore()
    rag = init_agent(
        "store-example",
        backend_url=":memory:",
        memory_store=store,
        # Offline, the grader and the packaged embedder give modest scores; with an LLM and
        # its embeddings the defaults (0.85 to store, 0.7 to recall) suit better.
        memory_storage_threshold=0.5,
        memory_relevance_threshold=0.4,
    )
    rag.add_documents(HANDBOOK)
    alice = {"configurable": {"user_id": "alice"}}

    state = rag.invoke("How long is a backup kept?", config=alice)
    print("answer:", state.answer)
    print("write:", state.events("write_memory")[0])
    rag.drain_background(timeout=30)
    for item in store.search(("memories", "alice")):
        print("stored for alice:", item.value["text"])
    for item in store.search(("conversations", "alice")):
        print("said by alice:", " / ".join(item.value["text"].splitlines()))

    async def ask_async() -> None:
        later = await rag.ainvoke("Is a backup kept for thirty days?", config=alice)
        facts = [m["text"] for m in later.memories if m["kind"] == "search_fact"]
        said = [m["text"] for m in later.memories if m["kind"] == "conversation"]
        print("alice recalled (async):", "; ".join(facts) or "-")
        print("alice's earlier exchange (async):", "; ".join(said) or "-")
        stranger = await rag.ainvoke(
            "Is a backup kept for thirty days?", config={"configurable": {"user_id": "carol"}}
        )
        print("carol recalled (async):", "; ".join(m["text"] for m in stranger.memories) or "-")
        assert stranger.memory_context == ""
        await rag.adrain_background()

    asyncio.run(ask_async())
    rag.close()


if __name__ == "__main__":
    main()
