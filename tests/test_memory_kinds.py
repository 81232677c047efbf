"""A memory is found by the kinds of the well-known names it holds (``memory._kinds``).

"My cluster runs PostgreSQL 13" answers "How should I upgrade my database?" though the two
share no word; the end-to-end example on every backend is in test_memory_conversations.py.
Here: which names count, and that everyday words are never read as one.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore

from retrievalagent.memory._kinds import kinds_named


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("My cluster runs PostgreSQL 13 on Debian 11.", {"database", "postgres", "distro"}),
        ("we moved everything to Postgres last year", {"database", "postgresql"}),
        ("prod is SQL Server 2019 on Windows Server", {"database", "mssql", "os"}),
        ("my laptop is a ThinkPad with Ubuntu", {"laptop", "operating", "system"}),
        ("the service is written in Kotlin, deployed with k8s", {"language", "kubernetes"}),
    ],
)
def test_a_known_name_is_searched_by_its_kind_and_other_spellings(
    text: str, words: set[str]
) -> None:
    assert words <= set(kinds_named(text).split()), kinds_named(text)


@pytest.mark.parametrize(
    "text",
    [
        "I go to the gym before work",
        "the windows are open and it's raining in",
        "there's rust on my bike chain",
        "we hiked past the alpine lakes",
        "I react badly to pollen",
        "we threw a birthday bash for Julia and Cassandra",
        "reading Kafka on the train, a snowflake landed on the page",
        "I keep my notes in postgresql.conf.bak files",  # a file name, not the database
        "",
    ],
)
def test_everyday_words_are_not_taken_for_a_name(text: str) -> None:
    assert kinds_named(text) == ""


def test_a_long_memory_shows_the_sentence_that_names_what_the_question_asks_about(
    make_agent: Callable[..., Any],
) -> None:
    """A memory longer than a prompt line shows the sentences that bear on the question;
    the one naming the database bears on "my database" by its kind."""
    rag = make_agent("kinds", memory_store=InMemoryStore())
    filler = " ".join(
        f"Item {n}: the hallway light flickers when the fridge starts." for n in range(12)
    )
    rag.remember(
        [
            {"role": "user", "content": f"{filler} Also my cluster runs PostgreSQL 13. {filler}"},
            {"role": "assistant", "content": "Noted."},
        ],
        user_id="alice",
        thread_id="t1",
    )
    state = rag.invoke(
        "How should I upgrade my database?",
        {"configurable": {"user_id": "alice", "thread_id": "t2"}},
    )
    assert "PostgreSQL 13" in state.memory_context, state.memory_context
