"""Does memory of past conversations find what a user said?  ``python -m bench.memory.conversation_bench``

Issue 21's retrieval bench, on our own development set (``bench/memory/data/``: 24 users,
dated multi-session conversations, some with other people in them, and questions asked in
a new conversation, each naming the turns that hold its answer; see the README there).

**Memory units.** Each user's sessions are cut into units: a unit starts at each message
whose role is not ``assistant``, and the assistant messages after it join it. A unit's
text is its messages, each prefixed by its speaker (``Maya: ...``, ``Tomasz: ...``,
``Assistant: ...``); its evidence ids are the turn ids of its messages.

**Metric.** For each question, a method returns a ranked list of hits from that user's
memory only, each hit covering some turn ids. Evidence recall@k is the share of the
question's evidence turn ids covered by the top k hits; ``all@k`` is the share of questions
with every evidence turn covered. Reported per split (``dev``: tune on it; ``heldout``:
report it) and per question type.

**Methods.**

* ``bm25``: BM25 (k1 1.2, b 0.75, IDF over the user's units) with the library's own
  tokenizer: ``LexicalEncoder.query_terms`` for the question, the same term ids for units.
* ``dense``: the packaged MiniLM embedder, cosine between question and unit texts.
* ``rrf``: reference only, the two lists above fused by reciprocal rank (k = 60).
* ``bm25_stored`` / ``dense_stored``: the same two retrievers alone over the texts the
  library stores (``exchange_records``): BM25 over each exchange (the people's messages
  and the first sentences of the reply), dense over what the people said. No fusion, no
  time window: what recall adds to them is what ``recall`` shows.
* ``recall``: the library's ``rag.recall`` (issue 21's API): every session goes in through
  ``rag.remember(messages, user_id=..., thread_id=..., at=...)`` with the messages as
  stored (``role``, ``content``, ``name``, ``metadata.turn``), then each question through
  ``rag.recall(question, user_id=..., k=10)``; a hit covers the turns named in its
  ``sources``. Skipped, with a note, while the agent has no ``remember``.

**Unrelated questions.** Each question is also asked of the next user of its split, who
never said what it asks about: how many conversation memories ``rag.recall(k=10)`` and a
turn's answer prompt bring back (``unrelated`` in the results; less is better).

**Long histories** (``--haystack N``). Each person of the set has about ten sessions, so
at k = 10 every retriever is near its ceiling (held-out: the best single one finds 0.88
of the evidence, and 1.15 times that is more than all of it). ``--haystack N`` pads each
user's history with up to ``N`` whole conversations of the other people of the same split,
re-dated inside the user's own history (``conversations.with_haystack``): what a user with
a long history has, most of it about other things. Questions, evidence and the retrievers
are unchanged; the unrelated-question check is skipped (the next user's history now holds
the asker's conversations). Results go to ``memory_conversations_haystack<N>.json``
(``..._seed<S>.json`` for ``--haystack-seed S``, another draw of the distractors).

Results: ``bench/results/memory_conversations.json`` (the tables and every question's
recall per method).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Sequence
from datetime import datetime, timezone
from typing import Any

import numpy as np

from bench._common import write_result
from bench.memory.conversations import (
    QUESTION_TYPES,
    SPLITS,
    Unit,
    load,
    problems,
    units,
    with_haystack,
)

# A method's answer for one user: question id -> hits best first, each the turn ids it covers.
Hits = dict[str, list[tuple[str, ...]]]
Method = Callable[[dict[str, Any], list[Unit], list[dict[str, Any]]], Hits]
KS = (5, 10)


# ------------------------------------------------------------------------------- BM25
class BM25:
    """Okapi BM25 over one user's units, tokenized as the library's lexical index does."""

    def __init__(self, texts: Sequence[str], k1: float = 1.2, b: float = 0.75) -> None:
        from retrievalagent.index import LexicalEncoder

        self.encoder = LexicalEncoder()
        self.k1, self.b = k1, b
        self.docs: list[Counter[int]] = [self._terms(t) for t in texts]
        self.lengths = np.array([sum(d.values()) for d in self.docs], dtype=float)
        self.avg = float(self.lengths.mean()) if len(self.docs) else 1.0
        df: Counter[int] = Counter(t for d in self.docs for t in d)
        n = len(self.docs)
        self.idf = {t: math.log(1 + (n - f + 0.5) / (f + 0.5)) for t, f in df.items()}

    def _terms(self, text: str) -> Counter[int]:
        counts: Counter[int] = Counter()
        for word in self.encoder.words(text):
            counts.update(self.encoder.term_ids(word))
        return counts

    def scores(self, query: str) -> np.ndarray:
        out = np.zeros(len(self.docs))
        norm = self.k1 * (1 - self.b + self.b * self.lengths / self.avg)
        for term in self.encoder.query_terms(query):
            idf = self.idf.get(term)
            if idf is None:
                continue
            tf = np.array([d.get(term, 0) for d in self.docs], dtype=float)
            out += idf * tf * (self.k1 + 1) / (tf + norm)
        return out


def _ranked(user_units: list[Unit], scores: np.ndarray) -> list[tuple[str, ...]]:
    order = np.argsort(-scores, kind="stable")
    return [user_units[i].turns for i in order]


def bm25_method(
    user: dict[str, Any], user_units: list[Unit], questions: list[dict[str, Any]]
) -> Hits:
    index = BM25([u.text for u in user_units])
    return {q["id"]: _ranked(user_units, index.scores(q["question"])) for q in questions}


# ------------------------------------------------------------------------------ dense
class DenseMethod:
    """Cosine between the packaged MiniLM vectors of the question and of each unit."""

    def __init__(self) -> None:
        from retrievalagent.embeddings import MiniLMEmbeddings

        self.model = MiniLMEmbeddings()

    def __call__(
        self, user: dict[str, Any], user_units: list[Unit], questions: list[dict[str, Any]]
    ) -> Hits:
        docs = self.model.embed_array([u.text for u in user_units])
        queries = self.model.embed_array([q["question"] for q in questions])
        sims = queries @ docs.T  # both L2-normalised
        return {q["id"]: _ranked(user_units, sims[i]) for i, q in enumerate(questions)}


# --------------------------------------- the same retrievers over the texts recall stores
def stored_units(user: dict[str, Any]) -> list[tuple[tuple[str, ...], str, str]]:
    """The user's sessions as the library stores them (``exchange_records``, the same cut
    into units): each unit's turns, its exchange text (what recall's BM25 indexes) and what
    the people said in it (what recall embeds)."""
    from retrievalagent.memory import said_of
    from retrievalagent.memory._conversations import exchange_records

    out = []
    for session in user["sessions"]:
        said = [s for i, m in enumerate(session["messages"]) if (s := said_of(m, i))]
        for record in exchange_records(said, user_id=user["user_id"], at=session["at"]):
            turns = tuple(str(source["turn"]) for source in record.sources)
            out.append((turns, record.text, record.said))
    return out


def bm25_stored(
    user: dict[str, Any], user_units: list[Unit], questions: list[dict[str, Any]]
) -> Hits:
    """BM25 alone over the exchange texts recall indexes (no fusion, no time window)."""
    stored = stored_units(user)
    index = BM25([text for _, text, _ in stored])
    return {
        q["id"]: [stored[i][0] for i in np.argsort(-index.scores(q["question"]), kind="stable")]
        for q in questions
    }


class DenseStored(DenseMethod):
    """Dense alone over what the people said, as recall embeds it (no fusion, no window)."""

    def __call__(
        self, user: dict[str, Any], user_units: list[Unit], questions: list[dict[str, Any]]
    ) -> Hits:
        stored = stored_units(user)
        docs = self.model.embed_array([said for _, _, said in stored])
        queries = self.model.embed_array([q["question"] for q in questions])
        sims = queries @ docs.T
        return {
            q["id"]: [stored[j][0] for j in np.argsort(-sims[i], kind="stable")]
            for i, q in enumerate(questions)
        }


def rrf(*lists: list[tuple[str, ...]], k: int = 60) -> list[tuple[str, ...]]:
    """Reciprocal-rank fusion of ranked hit lists (a hit is identified by its turns)."""
    score: dict[tuple[str, ...], float] = defaultdict(float)
    for ranked in lists:
        for rank, hit in enumerate(ranked):
            score[hit] += 1.0 / (k + rank + 1)
    return sorted(score, key=lambda h: -score[h])


# ---------------------------------------------------------------- the library's recall
class LibraryRecall:
    """``rag.remember`` every session of a user, then ``rag.recall`` each question.

    One agent (throwaway index, ``InMemoryStore``) holds every user; users are kept
    apart by ``user_id`` only, so a leak between users would show as lost recall.
    """

    def __init__(self, k: int = max(KS)) -> None:
        from langgraph.store.memory import InMemoryStore

        from retrievalagent import init_agent

        self.k = k
        #: question id -> the evidence turns its end-to-end answer prompt carried, dated
        self.prompts: dict[str, list[str]] = {}
        #: question id -> characters of that prompt's memory block
        self.prompt_chars: dict[str, int] = {}
        # Any: remember/recall are issue 21's new API, absent from older agents.
        self.rag: Any = init_agent(
            "conversation-bench", backend_url=":memory:", memory_store=InMemoryStore()
        )

    @property
    def available(self) -> bool:
        return callable(getattr(self.rag, "remember", None)) and callable(
            getattr(self.rag, "recall", None)
        )

    def __call__(
        self, user: dict[str, Any], user_units: list[Unit], questions: list[dict[str, Any]]
    ) -> Hits:
        uid = user["user_id"]
        for session in user["sessions"]:
            self.rag.remember(
                session["messages"], user_id=uid, thread_id=session["thread_id"], at=session["at"]
            )
        drain = getattr(self.rag, "drain_background", None)
        if callable(drain):  # writes may run in the background, as a turn's do
            drain()
        out: Hits = {}
        said = {
            m["metadata"]["turn"]: (s["at"], m) for s in user["sessions"] for m in s["messages"]
        }
        for q in questions:
            # asked when the question says, so "last week" means the week before it
            hits = self.rag.recall(q["question"], user_id=uid, k=self.k, now=q["asked_at"])
            out[q["id"]] = [_hit_turns(hit) for hit in hits]
            self.prompts[q["id"]], self.prompt_chars[q["id"]] = self._prompt_carries(uid, q, said)
        return out

    def _prompt_carries(
        self, uid: str, q: dict[str, Any], said: dict[str, tuple[str, dict[str, Any]]]
    ) -> tuple[list[str], int]:
        """Ask the question as a turn of its own (offline, in a new thread, at its time) and
        return the evidence turns whose words the answer prompt's memory block carries on a
        line dated with the day they were said (in the question's time zone, as the prompt
        dates them), and the block's size in characters; the turn is forgotten again after."""
        thread = f"bench-{q['id']}"
        config = {"configurable": {"user_id": uid, "thread_id": thread, "now": q["asked_at"]}}
        context = self.rag.invoke(q["question"], config=config).memory_context
        self.rag.forget(uid, thread_id=thread)  # keep the bench's own turns out of memory
        lines = context.splitlines()
        carried = []
        zone = datetime.fromisoformat(q["asked_at"]).tzinfo or timezone.utc  # the prompt's
        for turn in q["evidence"]:
            at, message = said[turn]
            day = datetime.fromisoformat(at).astimezone(zone).strftime("[%Y-%m-%d")
            words = " ".join(message["content"].split())[:50]
            if any(
                line.startswith(f"- {day}") and words in " ".join(line.split()) for line in lines
            ):
                carried.append(turn)
        return carried, len(context)


def unrelated_recall(library: LibraryRecall, data: dict[str, Any]) -> dict[str, Any]:
    """Per split: each question asked of the next user of its split (who never said what it
    asks about), through ``rag.recall(k=10)`` and through a turn's answer prompt: how many
    conversation memories come back, on average, and how often any does. What a loose gate
    would put in front of the model for a question about nothing the user said."""
    out: dict[str, Any] = {}
    for split in SPLITS:
        people = [u for u in data["users"] if u["split"] == split]
        recalled, shown = [], []
        for i, person in enumerate(people):
            other = people[(i + 1) % len(people)]["user_id"]
            if other == person["user_id"]:
                continue
            for q in person["questions"]:
                hits = library.rag.recall(q["question"], user_id=other, k=10, now=q["asked_at"])
                recalled.append(sum(h["kind"] == "conversation" for h in hits))
                thread = f"bench-unrelated-{q['id']}"
                config = {"configurable": {"user_id": other, "thread_id": thread}}
                config["configurable"]["now"] = q["asked_at"]
                context = library.rag.invoke(q["question"], config=config).memory_context
                library.rag.forget(other, thread_id=thread)
                shown.append(sum(line.startswith("- [") for line in context.splitlines()))
        if recalled:
            out[split] = {
                "questions": len(recalled),
                "recall_k10_mean": round(sum(recalled) / len(recalled), 2),
                "recall_any": round(sum(n > 0 for n in recalled) / len(recalled), 3),
                "prompt_mean": round(sum(shown) / len(shown), 2),
                "prompt_any": round(sum(n > 0 for n in shown) / len(shown), 3),
            }
    return out


def _hit_turns(hit: dict[str, Any]) -> tuple[str, ...]:
    return tuple(
        str(s["turn"]) for s in hit.get("sources") or [] if isinstance(s, dict) and "turn" in s
    )


# ---------------------------------------------------------------------------- scoring
def evidence_recall(evidence: Sequence[str], hits: Sequence[tuple[str, ...]], k: int) -> float:
    """Share of ``evidence`` turn ids covered by the first ``k`` hits."""
    covered = {turn for hit in hits[:k] for turn in hit}
    return sum(turn in covered for turn in evidence) / len(evidence)


def run_methods(
    data: dict[str, Any], methods: dict[str, Method], fuse: bool
) -> tuple[list[dict[str, Any]], dict[str, float]]:
    """Every question's evidence recall@k per method, and each method's seconds."""
    rows: list[dict[str, Any]] = []
    seconds: defaultdict[str, float] = defaultdict(float)
    for user in data["users"]:
        user_units = units(user)
        answers: dict[str, Hits] = {}
        for name, method in methods.items():
            started = time.perf_counter()
            answers[name] = method(user, user_units, user["questions"])
            seconds[name] += time.perf_counter() - started
        if fuse and {"bm25", "dense"} <= answers.keys():
            answers["rrf"] = {
                qid: rrf(answers["bm25"][qid], answers["dense"][qid]) for qid in answers["bm25"]
            }
        for q in user["questions"]:
            row: dict[str, Any] = {
                "id": q["id"],
                "user": user["user_id"],
                "split": user["split"],
                "added": user.get("added", 1),
                "type": q["type"],
                "n_evidence": len(q["evidence"]),
            }
            for name, per_q in answers.items():
                hits = per_q[q["id"]]
                row[name] = {f"r@{k}": evidence_recall(q["evidence"], hits, k) for k in KS}
                row[name]["first_hit_rank"] = _first_rank(q["evidence"], hits)
            rows.append(row)
    return rows, {k: round(v, 2) for k, v in seconds.items()}


def _first_rank(evidence: Sequence[str], hits: Sequence[tuple[str, ...]]) -> int | None:
    wanted = set(evidence)
    return next((i + 1 for i, hit in enumerate(hits) if wanted & set(hit)), None)


def summarize(rows: list[dict[str, Any]], names: Sequence[str]) -> dict[str, Any]:
    """Mean recall@k and all@k per split, per split and type, per method; and the same for
    the people a later version of the set added (``heldout-v2``: nobody tuned near them)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for row in rows:
        groups[(row["split"], "all")].append(row)
        groups[(row["split"], row["type"])].append(row)
        groups[("all", "all")].append(row)
        if row.get("added", 1) > 1:
            groups[(f"{row['split']}-v{row['added']}", "all")].append(row)
            groups[(f"{row['split']}-v{row['added']}", row["type"])].append(row)
    table: dict[str, Any] = {}
    for (split, kind), members in sorted(groups.items()):
        cell: dict[str, Any] = {"n": len(members)}
        for name in names:
            cell[name] = {}
            for k in KS:
                values = [m[name][f"r@{k}"] for m in members]
                cell[name][f"r@{k}"] = round(sum(values) / len(values), 3)
                cell[name][f"all@{k}"] = round(sum(v == 1.0 for v in values) / len(values), 3)
        table.setdefault(split, {})[kind] = cell
    return table


def render(table: dict[str, Any], names: Sequence[str]) -> str:
    head = f"{'split':8} {'type':11} {'n':>4} " + " ".join(
        f"{n + ' R@5':>11} {'R@10':>6}" for n in names
    )
    lines = [head, "-" * len(head)]
    later = sorted(s for s in table if s not in (*SPLITS, "all"))
    for split in (*SPLITS, *later, "all"):
        kinds = ("all",) if split == "all" else ("all", *QUESTION_TYPES)
        for kind in kinds:
            cell = table.get(split, {}).get(kind)
            if cell is None:
                continue
            values = " ".join(f"{cell[n]['r@5']:>11.3f} {cell[n]['r@10']:>6.3f}" for n in names)
            lines.append(f"{split:8} {kind:11} {cell['n']:>4} {values}")
        lines.append("")
    return "\n".join(lines)


def prompt_shares(
    rows: list[dict[str, Any]], carried: dict[str, list[str]], chars: dict[str, int]
) -> dict[str, Any]:
    """Per split: of the turns whose recall@10 finds some evidence, how many end-to-end
    prompts carry (some of) what it found, dated; and the mean size of every turn's
    memory block (characters)."""
    out: dict[str, Any] = {}
    for split in (*SPLITS, "all"):
        found = [r for r in rows if split in ("all", r["split"]) and r["recall"]["r@10"] > 0]
        if not found:
            continue
        hits = sum(bool(carried.get(r["id"])) for r in found)
        sizes = [chars[r["id"]] for r in rows if split in ("all", r["split"]) and r["id"] in chars]
        out[split] = {
            "found": len(found),
            "carried": hits,
            "share": round(hits / len(found), 4),
            "mean_memory_chars": round(sum(sizes) / len(sizes), 1) if sizes else None,
        }
    return out


def data_summary(data: dict[str, Any]) -> dict[str, Any]:
    """Size of the set: users, sessions, messages, units, questions per split and type."""
    out: dict[str, Any] = {"users": {}, "questions": {}}
    for split in SPLITS:
        members = [u for u in data["users"] if u["split"] == split]
        out["users"][split] = [u["user_id"] for u in members]
        out["questions"][split] = dict(Counter(q["type"] for u in members for q in u["questions"]))
    sessions = [s for u in data["users"] for s in u["sessions"]]
    out["n_users"] = len(data["users"])
    out["n_sessions"] = len(sessions)
    out["n_shared_sessions"] = sum(
        any("name" in m and m["name"] != u["name"] for m in s["messages"])
        for u in data["users"]
        for s in u["sessions"]
    )
    out["n_messages"] = sum(len(s["messages"]) for s in sessions)
    out["n_units"] = sum(len(units(u)) for u in data["users"])
    out["n_questions"] = sum(len(u["questions"]) for u in data["users"])
    out["haystack"] = data.get("haystack", 0)
    out["haystack_seed"] = data.get("haystack_seed", "")
    out["n_haystack_sessions"] = sum(u.get("haystack", 0) for u in data["users"])
    return out


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument(
        "--methods",
        nargs="+",
        default=["bm25", "dense", "bm25_stored", "dense_stored", "recall"],
        choices=["bm25", "dense", "bm25_stored", "dense_stored", "recall"],
    )
    parser.add_argument(
        "--users", nargs="+", help="only these user ids (a quick look; no results file written)"
    )
    parser.add_argument(
        "--haystack",
        type=int,
        default=0,
        metavar="N",
        help="pad each user's history with up to N whole conversations of the other people "
        "of its split (default 0: the set as written)",
    )
    parser.add_argument(
        "--haystack-seed",
        type=int,
        default=0,
        metavar="S",
        help="which draw of distractors (default 0); recall@10 moves by about 0.02 between "
        "draws, so the docs report several",
    )
    args = parser.parse_args(argv)
    if args.haystack < 0:
        parser.error(f"--haystack must be >= 0, got {args.haystack}")
    started = time.perf_counter()
    data = load()
    if args.haystack:
        seed = "haystack" if not args.haystack_seed else f"haystack-{args.haystack_seed}"
        data = with_haystack(data, args.haystack, seed=seed)
    found = problems(data)
    if found:
        raise SystemExit("the data set is broken:\n" + "\n".join(found))
    if args.users:
        data = {**data, "users": [u for u in data["users"] if u["user_id"] in args.users]}
    methods: dict[str, Method] = {}
    notes: list[str] = []
    if "bm25" in args.methods:
        methods["bm25"] = bm25_method
    if "dense" in args.methods:
        methods["dense"] = DenseMethod()
    if "bm25_stored" in args.methods:
        methods["bm25_stored"] = bm25_stored
    if "dense_stored" in args.methods:
        methods["dense_stored"] = DenseStored()
    if "recall" in args.methods:
        library = LibraryRecall()
        if library.available:
            methods["recall"] = library
        else:
            notes.append("recall skipped: this retrievalagent has no rag.remember/rag.recall yet")
    rows, seconds = run_methods(data, methods, fuse=True)
    order = ("bm25", "dense", "rrf", "bm25_stored", "dense_stored", "recall")
    names = [n for n in order if rows and n in rows[0]]
    table = summarize(rows, names)
    print(render(table, names))
    prompts = (
        prompt_shares(rows, library.prompts, library.prompt_chars) if "recall" in methods else {}
    )
    for split, share in prompts.items():
        print(
            f"{split}: the answer prompt carries found evidence, dated, in "
            f"{share['carried']} of {share['found']} turns ({share['share']:.1%}); its memory "
            f"block averages {share['mean_memory_chars']} characters"
        )
    # with a haystack the next user's history holds the asker's own conversations
    unrelated = unrelated_recall(library, data) if "recall" in methods and not args.haystack else {}
    for split, seen in unrelated.items():
        print(
            f"{split}: asked of another user, {seen['recall_k10_mean']} conversation memories "
            f"recalled (any: {seen['recall_any']:.0%}), {seen['prompt_mean']} in the prompt "
            f"(any: {seen['prompt_any']:.0%})"
        )
    for note in notes:
        print(note, file=sys.stderr)
    payload = {
        "command": "python -m bench.memory.conversation_bench "
        + " ".join(sys.argv[1:] if argv is None else argv),
        "data": data_summary(data),
        "methods": names,
        "notes": notes,
        "seconds": seconds,
        "table": table,
        "prompt": prompts,
        "unrelated": unrelated,
        "questions": rows,
    }
    if args.users:  # a quick look at a few users: keep the full run's results
        return payload
    name = "memory_conversations"
    if args.haystack:
        name += f"_haystack{args.haystack}" + (
            f"_seed{args.haystack_seed}" if args.haystack_seed else ""
        )
    write_result(name, payload, started)
    return payload


if __name__ == "__main__":
    main()
