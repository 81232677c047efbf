"""Other phrasings of a benchmark request: the same words inside longer, natural sentences.

A memory benchmark teaches a fact with one question and must then recognise the fact in
later questions phrased differently. ``phrase(request, kind, key)`` wraps ``request``
(kept word for word, so a taught alias stays in it) in ``PER_QUERY`` sentences built from
a lead-in (what the user was doing), a frame (how the request is asked) and an optional
tail. The choice is seeded by ``key`` (a query id), so it is the same on every machine,
and no two phrasings of one request share a lead-in or a frame.

Three kinds of request, each with its own frames:

* ``TASK``: a verb phrase, a man page description (``get the value of a variable``);
* ``TOPIC``: a noun phrase (``overview of cgroup namespaces``);
* ``TERM``: a glossary word (``MUA``).
"""

from __future__ import annotations

import random
import re

__all__ = ["PER_QUERY", "TASK", "TERM", "TOPIC", "kind_of", "phrase"]

SEED = 20261122
PER_QUERY = 4
TASK, TOPIC, TERM = "task", "topic", "term"

# What the user was doing when the question came up (before the request).
_WORK_LEADS = (
    "my build broke last night",
    "quick one",
    "sorry if this is a basic question",
    "I'm porting an old C program to Linux",
    "a colleague asked me this over lunch and I had no answer",
    "I have been reading through our codebase all morning",
    "this came up in a code review today",
    "I'd like to check this before I open a ticket",
    "I'm writing a small backup tool in my spare time",
    "we are moving a service to a new server this week",
    "I'm fairly new to systems programming",
    "the pager woke me up at 3 am",
    "our lecturer skipped over this in class",
    "I searched for an hour without luck",
    "not urgent, just curious",
    "I'm chasing a flaky test",
)
_READING_LEADS = (
    "quick one",
    "sorry if this is a basic question",
    "I'm reading an old computing book from the nineties",
    "a colleague used a term in a meeting and I just nodded along",
    "I'm going through old mailing list archives",
    "this came up in a code review today",
    "my manager threw a term around during stand-up this morning",
    "I'm translating some technical documentation",
    "I'm fairly new to the field",
    "I'm doing a crossword with a computing theme",
    "our lecturer uses a lot of terms without explaining them",
    "I searched for an hour without luck",
    "not urgent, just curious",
    "I'm reading a forum thread from 1998",
    "my grandfather worked with computers in the eighties",
    "I'm preparing notes for an interview",
)
_TAILS = (
    "",
    "",
    " Thanks!",
    " A short answer is fine.",
    " I'm on Debian, if that matters.",
    " Any pointer helps.",
    " Thanks in advance.",
)

# How the request is asked; {lead} is capitalised when it starts the sentence.
_FRAMES = {
    TASK: (
        "{lead}; how do I {q}?",
        "{lead}: what is the proper way to {q}?",
        "{lead}. Is there a standard call to {q}?",
        "{lead}. Now I need to {q}; which man page should I read?",
        "{lead}. I want to {q} - what should I use?",
        "{lead}. Can you show me how to {q} in C?",
        "{lead}. What's the function that lets me {q}?",
    ),
    TOPIC: (
        "{lead}; where can I find the {q}?",
        "{lead}: which man page has the {q}?",
        "{lead}. I'm looking for the {q} in the manual.",
        "{lead}. Can you point me to the {q}?",
        "{lead}. Is there a page with the {q}?",
        "{lead}. I need the {q}; where is it?",
    ),
    TERM: (
        "{lead}; what does {q} mean?",
        "{lead}: can you explain {q} in a sentence or two?",
        "{lead}. The term {q} keeps coming up; what is it exactly?",
        "{lead}. Someone mentioned {q}; what does that refer to?",
        "{lead}. What's the story behind {q}?",
        "{lead}. Could you define {q} for me?",
        "{lead}. What is meant by {q}?",
    ),
}

# First words of man page descriptions that are verbs (the request is a task).
_VERB_WORDS = """
abort accept add allocate allocates allow append apply bind calculate cancel cause
change check clear close commit compare compile compute concatenate configure confine
control convert copy correct count create creates deallocate define delete destroy
detach determine disassociate display duplicate emulate enable encrypt end enforce enter
examine execute exit export extract fail fill find flush free generate get give grant
handle hash hint initialize initiate insert interpret introduce issue join list listen
load locate lock make manage manipulate map match move multiply obtain open parse
perform port predeclare prevent print profile project push query randomize read receive
reboot reconstruct record register release remap remove request reset restart retrieve
return reverse round run scan schedule search seek select send set setup shut sleep sort
splice split start submit support suspend swap switch sync synchronize terminate test
transfer transform translate truncate try unload unlock wait walk write
"""
_VERBS = frozenset(_VERB_WORDS.split())


def kind_of(description: str) -> str:
    """``TASK`` when a man page description starts with a verb, else ``TOPIC``."""
    first = re.split(r"[\s/,]+", description.strip().lower(), maxsplit=1)[0]
    return TASK if first in _VERBS else TOPIC


def _sentence(lead: str, frame: str, q: str, tail: str) -> str:
    return frame.format(lead=lead[:1].upper() + lead[1:], q=q) + tail


def phrase(request: str, kind: str, key: str, n: int = PER_QUERY) -> list[str]:
    """``n`` other phrasings of ``request`` (kept verbatim inside each), seeded by ``key``."""
    frames = _FRAMES[kind]
    leads = _READING_LEADS if kind == TERM else _WORK_LEADS
    rng = random.Random(f"{SEED}:{key}")
    out = []
    for lead, frame in zip(rng.sample(leads, n), rng.sample(frames, n), strict=True):
        out.append(_sentence(lead, frame, request, rng.choice(_TAILS)))
    return out
