"""Conversations and long-term memory in PostgreSQL, resumed by a later process.

    python examples/postgres_persistence.py postgresql://user:pass@localhost/mydb [THREAD]

Each run asks the next question of a short script on the thread ``THREAD`` (default
``demo-thread``). Run it twice: the second process finds the first one's turns in
PostgreSQL and continues the conversation. Needs ``pip install "retrievalagent[postgres]"``
and a database you can create tables in (``setup()`` runs once, on first use).
"""

from __future__ import annotations

import sys

from _common import HANDBOOK, scratch_data_dir

from retrievalagent import init_agent
from retrievalagent.persistence import postgres_checkpointer, postgres_store

SCRIPT = [
    "How often is a snapshot taken?",
    "How long is it kept?",
    "How do I restore a file from one?",
]


def main(url: str, thread_id: str) -> None:
    scratch_data_dir()
    rag = init_agent(
        "postgres-example",
        checkpointer=postgres_checkpointer(url, max_size=4),
        memory_store=postgres_store(url),
    )
    rag.add_documents(HANDBOOK)  # unchanged documents are skipped on later runs
    config = {"configurable": {"thread_id": thread_id, "user_id": "alice"}}

    turns_so_far = len(rag.get_history(thread_id)) // 2
    question = SCRIPT[turns_so_far % len(SCRIPT)]
    state = rag.invoke(question, config=config)
    print(f"turn {turns_so_far + 1}: {question}\n  -> {state.answer}")

    print("history:")
    for message in rag.get_history(thread_id):
        print(f"  {message.type:>5}: {message.content[:70]}")
    print(
        "alice's threads:",
        [(t.thread_id, t.title, t.message_count) for t in rag.list_threads("alice")],
    )
    rag.close()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(f"usage: {sys.argv[0]} POSTGRES_URL [THREAD_ID]")
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "demo-thread")
