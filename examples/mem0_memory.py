"""Long-term memory with mem0, offline: the agent learns how a user words things.

The documents say "snapshot"; Alice says "backup". After her first question the
grader proposes the fact that links the two, the agent stores it in mem0 in the
background (with the exchange itself: conversation memory), and her next question recalls
both: the search fact joins the BM25 query and the answer prompt, the earlier exchange
joins the prompt, dated. Bob asks the same question and recalls nothing: memories belong to one user.

``memory=True`` builds an embedded mem0 from the agent's own embeddings (no LLM here, so
facts are stored as written, without mem0's extraction step). With your own mem0, pass
``mem0_memory=Memory.from_config({...})`` instead.
"""

from __future__ import annotations

from _common import HANDBOOK, scratch_data_dir

from retrievalagent import init_agent


def main() -> None:
    scratch_data_dir()
    rag = init_agent(
        "mem0-example",
        backend_url=":memory:",
        memory=True,
        # Offline, the grader and the packaged embedder give modest scores; with an LLM and
        # its embeddings the defaults (0.85 to store, 0.7 to recall) suit better.
        memory_storage_threshold=0.5,
        memory_relevance_threshold=0.4,
    )
    rag.add_documents(HANDBOOK)
    alice = {"configurable": {"user_id": "alice"}}
    bob = {"configurable": {"user_id": "bob"}}

    first = rag.invoke("How long is a backup kept?", config=alice)
    print("answer:", first.answer)
    print("fact chosen for memory:", first.memory_fact or "(none)")
    print("writes:", rag.drain_background(timeout=30))

    again = rag.invoke("Is a backup kept for thirty days?", config=alice)
    print("alice recalled:", "; ".join(m["text"] for m in again.memories) or "(nothing)")
    for memory in again.memories:
        print(f"  [{memory['kind']}] {memory['text']}")
    [lexical] = again.events("lexical_search")
    print("memory terms added to BM25:", lexical.get("memory_terms", "(none)"))

    other = rag.invoke("Is a backup kept for thirty days?", config=bob)
    print("bob recalled:", "; ".join(m["text"] for m in other.memories) or "(nothing)")
    assert other.memory_context == "", "one user's memories must never reach another"
    rag.close()


if __name__ == "__main__":
    main()
