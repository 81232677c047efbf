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

from retrievalagent.memory._kinds import kinds_asked, kinds_named


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("My cluster runs PostgreSQL 13 on Debian 11.", {"kinddatabase", "namepostgres", "kindos"}),
        ("My cluster runs Postgres13 on Debian11.", {"kinddatabase", "namepostgres", "kindos"}),
        ("prod is SQL Server 2019 on Windows Server", {"kinddatabase", "namesqlserver", "kindos"}),
        ("my laptop is a ThinkPad with Ubuntu", {"kindlaptop", "kindos"}),
        ("the service is written in Kotlin, deployed with k8s", {"kindlanguage", "kindcontainer"}),
        ("we are still on Java 8 and python3.11", {"namejava", "namepython"}),
    ],
)
def test_a_known_name_is_searched_by_its_kind_and_its_name_in_any_spelling(
    text: str, words: set[str]
) -> None:
    assert words <= set(kinds_named(text).split()), kinds_named(text)


@pytest.mark.parametrize(
    "text",
    [
        "I go to the gym before work",
        "the windows are open and it's raining in",
        "the windows 10 years ago were single glazed",
        "there's rust on my bike chain",
        "we hiked past the alpine lakes",
        "I react badly to pollen",
        "we threw a birthday bash for Julia and Cassandra",
        "reading Kafka on the train, a snowflake landed on the page",
        "I wore my new fedora to my sister's wedding",
        "we saw gentoo penguins on the cruise",
        "my trip to Bali and Java was lovely",
        "I played a sonata in C# minor at the recital",
        "we watched Dune at the Vue cinema",
        "the sky was azure over the beach",
        "we quoted Monty Python all evening",
        "a novel about an android who dreams",
        "full of vim and vigour",
        "I keep my notes in postgresql.conf.bak files",  # a file name, not the database
        "",
    ],
)
def test_everyday_words_are_not_taken_for_a_name(text: str) -> None:
    assert kinds_named(text) == ""


def _tokens(question: str) -> str:
    """The kind and name words ``kinds_asked`` gives a question, in order."""
    return " ".join(w for w in kinds_asked(question).split() if w.startswith(("kind", "name")))


@pytest.mark.parametrize(
    ("question", "words"),
    [
        ("How should I upgrade my database?", "kinddatabase"),
        ("What OS is my server on?", "kindos"),
        ("which linux distro do I use", "kindos"),
        ("Should I upgrade my operating system?", "kindos"),
        ("Which Postgres release am I on?", "namepostgres"),
        ("Which programming language do I use most?", "kindlanguage"),
        # an ordinary word asks about no kind
        ("Which system sends the invoices?", ""),
        ("What language should you answer me in?", ""),
        ("What is the legal framework for GDPR?", ""),
        ("Will there be cloud cover tomorrow?", ""),
        ("Who is my health insurance provider?", ""),
        ("How do I build a treehouse?", ""),
        ("When did my brother phone?", ""),
        ("What's my phone number?", ""),
        ("Who orchestrated it?", ""),
        ("Os preços subiram?", ""),  # Portuguese "the"
        ("Saya punya ide bagus?", ""),  # Indonesian "idea"
        # the kind in general is nobody's: no memory of the user answers it
        ("Who created Linux?", ""),
        ("What is a database index?", ""),
        ("What is an operating system?", ""),
        ("Which OS is my cluster on?", "kindos"),
        ("What Linux distribution do my servers use?", "kindos"),
    ],
)
def test_a_question_asks_about_a_kind_only_in_so_many_words(question: str, words: str) -> None:
    assert _tokens(question) == words


def test_the_phrase_naming_the_kind_is_read_as_the_kind() -> None:
    """Replaced, not joined: "my database" and "PostgreSQL" then weigh the same in the
    question's words, so a short question leans on its kind as a long one does."""
    assert kinds_asked("How should I upgrade my database?").split() == [
        "How",
        "should",
        "I",
        "upgrade",
        "my",
        "kinddatabase",
        "?",
    ]
    # the words between the owner and the kind stay words of the question
    assert kinds_asked("Is my production DB slow?").split()[:4] == [
        "Is",
        "my",
        "production",
        "kinddatabase",
    ]


@pytest.mark.parametrize(
    "text",
    ["I bought a fedora 2 weeks ago.", "I spent a week on Java 3 years ago.", "fedora 25 weeks"],
)
def test_a_count_or_a_time_is_no_version(text: str) -> None:
    assert kinds_named(text) == ""


def test_a_name_in_the_reply_says_nothing_of_the_user(make_agent: Callable[..., Any]) -> None:
    """The kinds are read from what the people said: the documents' "Ubuntu box", quoted in
    the reply, does not make the user's question about the wiki a memory of their OS."""
    rag = make_agent("kinds-reply", memory_store=InMemoryStore())
    rag.add_documents(["The company wiki is hosted at wiki.example.com on an Ubuntu box."])
    rag.invoke("Where is the company wiki?", {"configurable": {"user_id": "ann", "thread_id": "a"}})
    state = rag.invoke(
        "What OS is my server on?", {"configurable": {"user_id": "ann", "thread_id": "b"}}
    )
    assert "wiki" not in state.memory_context, state.memory_context


#: What users said, and questions about other things that share a word with a kind or name.
UNRELATED = [
    ("My cluster runs PostgreSQL 13 on Debian 11.", "Which system sends the invoices?"),
    ("I write all my scripts in Python.", "What language should you answer me in?"),
    ("Our CI runs on GitHub Actions.", "How do I build a treehouse?"),
    ("We host everything on AWS.", "Who is my health insurance provider?"),
    ("I use Django for my side project.", "What is the legal framework for GDPR?"),
    ("I develop on macOS.", "What does the X in the chart mean?"),
    ("I wore my new fedora to my sister's wedding.", "Which operating system should I install?"),
    ("My trip to Bali and Java was lovely.", "Which programming language should I learn?"),
    ("My cluster runs PostgreSQL 13 on Debian 11.", "Who created Linux?"),
    ("My cluster runs PostgreSQL 13 on Debian 11.", "What is a database index?"),
]


@pytest.mark.parametrize(("said", "question"), UNRELATED)
def test_a_kind_or_a_name_never_brings_an_unrelated_memory(
    make_agent: Callable[..., Any], said: str, question: str
) -> None:
    """The hostile pass on the first version of this table: every pair here was recalled,
    since a memory was searched by plain words ("system", "language", "build", "provider",
    "framework", "x") and everyday words counted as names ("fedora", "Java")."""
    rag = make_agent("kinds-unrelated", memory_store=InMemoryStore())
    rag.invoke(said, {"configurable": {"user_id": "ann", "thread_id": "t1"}})
    state = rag.invoke(question, {"configurable": {"user_id": "ann", "thread_id": "t2"}})
    assert state.memory_context == "", state.memory_context


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
