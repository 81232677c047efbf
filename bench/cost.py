"""What a turn costs with a hosted LLM: calls, tokens and time to first token.  ``python -m bench.cost``

Every turn goes through the project's local OpenAI-compatible server
(``tests/servers/openai_compat.py``) over real HTTP with ``model="openai:gpt-5.4"``, so the
requests are exactly what a hosted model would receive. The server logs each request with
the usage it reports (tokens = words of the messages, the same count for every prompt) and
can hold back its first token, like a hosted model's time to first token.

Data: ``bench.datasets`` ``glossary`` (FOLDOC and Jargon File entries, asked about by an
alias the corpus never uses): the first ``--turns`` queries spread over the set, indexed
with their relevant passages and ``--distractors`` other entries (seeded sample). Without
the built set, the bundled sample docs and their questions are used. Turns run in
threads of ``--per-thread`` questions (a checkpointer keeps the history), as a chat app
would.

The model's words come from a simulated model that reads the prompt like a careful one:

* **answer**: cites the passage that answers the question when the prompt holds it, else
  passage [1] (a plausible wrong answer);
* **grade**: sufficient when a passage the answer cites, *as the grade prompt shows it*, is
  a relevant one; then it proposes the alias mapping as a memory. A grade prompt that lost
  the cited passage (or renumbered it) changes the decision, so equal decisions before and
  after a prompt change show the grader still sees what it judges by;
* **rewrite**: the canonical term; **title**: a few fixed words.

Passes: **cost** (no delay; ``invoke``), once per grading mode, then **ttft** (``astream``
with the server delaying every first token by ``--delay`` seconds): time to the first
answer token against retrieval (the trace's embed + search + BM25 + fusion times) plus the
model's own first-token time (as the server measured it); what is left over is split into
the time before the answer request reached the server and the way back from its first
token to the caller. ``--baseline FILE`` embeds an earlier run (e.g. the same benchmark on
``main``) as ``before``; ``--alias-runs BEFORE AFTER`` keeps the memory decisions of two
``bench.memory.alias_bench`` runs beside the numbers. Results:
``bench/results/cost.json``; ``python -m bench.report`` renders them into
``docs/benchmarks.md``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("MEM0_TELEMETRY", "False")

from bench._common import (
    RESULTS,
    CachedEmbeddings,
    build_collection,
    git_revision,
    machine,
    open_agent,
    setup_logging,
)
from tests.servers.openai_compat import ChatRequest, OpenAICompatServer, RecordedRequest

COLLECTION = "cost-glossary"
ROLES = ("answer", "grade", "rewrite", "title", "other")
_LABEL = re.compile(r"^\[(\d+)\] (\S+)", re.MULTILINE)
_CITE = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")


# ------------------------------------------------------------------------- the simulated model
def _passages(text: str) -> dict[int, tuple[str, str]]:
    """Numbered passages of a prompt: number -> (source, text)."""
    blocks = re.split(r"\n(?=\[\d+\] )", text)
    out: dict[int, tuple[str, str]] = {}
    for block in blocks:
        found = _LABEL.search(block)
        if found and block.startswith(found.group(0)):
            body = block.split("\n", 1)[1] if "\n" in block else ""
            out[int(found.group(1))] = (found.group(2), body)
    return out


def _cited(answer: str) -> list[int]:
    return [int(n) for group in _CITE.findall(answer) for n in re.split(r"\s*,\s*", group)]


def role_of(body: dict[str, Any]) -> str:
    """Which of the agent's calls a request is, from what it asks for."""
    chat = ChatRequest(body)
    system = chat.system_prompt
    if system.startswith("Name a conversation"):
        return "title"
    if system.startswith("A search over the user's documents"):
        return "rewrite"
    if chat.json_schema is not None or chat.forced_tool:
        schema = chat.json_schema or chat.tool_schema(chat.forced_tool or "") or {}
        return "answer" if "answer" in (schema.get("properties") or {}) else "grade"
    if "Passages:" in system:
        return "answer"
    return "other"


class SimulatedModel:
    """The server's responder: answers, grades, rewrites and titles as described above."""

    def __init__(self, queries: Sequence[dict[str, Any]]) -> None:
        self.by_question = {_key(q["query"]): q for q in queries}

    def _query(self, question: str) -> dict[str, Any]:
        return self.by_question.get(_key(question), {"relevant": [], "canonical": ""})

    def _answer(self, query: dict[str, Any], passages: dict[int, tuple[str, str]]) -> str:
        if not passages:
            return "The passages do not say."
        relevant = set(query["relevant"])
        number = next((n for n, (src, _) in sorted(passages.items()) if src in relevant), 1)
        words = passages.get(number, ("", ""))[1].split()[:30]
        return f"{' '.join(words).rstrip(' .')} [{number}]."

    def _grade(
        self, query: dict[str, Any], answer: str, passages: dict[int, tuple[str, str]]
    ) -> dict[str, Any]:
        relevant = set(query["relevant"])
        ok = any(passages.get(n, ("", ""))[0] in relevant for n in _cited(answer))
        alias = query.get("alias", "")
        return {
            "sufficient": ok,
            "confidence": 0.9 if ok else 0.2,
            "memory_worth_storing": bool(ok and alias),
            "memory_kind": "search_fact",
            "memory_key": alias if ok else "",
            "memory_confidence": 0.9 if ok and alias else 0.0,
            "memory_fact": f'"{alias}" is called "{query["canonical"]}" in these documents'
            if ok and alias
            else "",
        }

    def __call__(self, request: ChatRequest) -> Any:
        role = role_of(request.body)
        if role == "title":
            return "Glossary question"
        if role == "rewrite":
            found = re.search(r"^Question: (.*)$", request.last_user_message, re.MULTILINE)
            return self._query(found.group(1) if found else "").get("canonical") or "definition"
        if role == "grade":
            prompt = "\n\n".join(request.texts())
            found = re.search(r"Question: (.*?)\n", prompt)
            answer = prompt.rsplit("Answer:\n", 1)[-1] if "Answer:\n" in prompt else ""
            return self._grade(
                self._query(found.group(1) if found else ""), answer, _passages(prompt)
            )
        query = self._query(request.last_user_message)
        passages = _passages(request.system_prompt)
        answer = self._answer(query, passages)
        if role == "answer" and (request.json_schema is not None or request.forced_tool):
            return {"answer": answer, **self._grade(query, answer, passages)}
        return answer


def _key(text: str) -> str:
    return " ".join(text.lower().split())


# ------------------------------------------------------------------------------------ data
def load_data(turns: int, distractors: int) -> tuple[str, list[dict], list[dict], str]:
    """(collection, passages to index, queries, description)."""
    try:
        from bench.datasets import load, load_controls

        corpus, queries = load("glossary", build_missing=False)
        controls = load_controls("glossary", build_missing=False)
    except (FileNotFoundError, OSError):
        return _sample_data(turns)
    # Half the turns ask by an alias the corpus never uses (the answer is rarely retrieved
    # at once: a rewrite), half by an entry's own headword (answered at once).
    n_alias = turns // 2
    aliased = queries[:: max(1, len(queries) // max(1, n_alias))][:n_alias]
    plain = [
        {**c, "alias": "", "canonical": ""}
        for c in controls[:: max(1, len(controls) // max(1, turns - n_alias))][: turns - n_alias]
    ]
    chosen = [q for pair in zip(aliased, plain, strict=False) for q in pair]
    chosen += aliased[len(plain) :] + plain[len(aliased) :]
    wanted = {pid for q in chosen for pid in q["relevant"]}
    sample = random.Random(15).sample(corpus, min(distractors, len(corpus)))
    sample = [p for p in sample if p["id"] not in wanted]
    passages = [p for p in corpus if p["id"] in wanted] + sample
    what = (
        f"bench.datasets glossary: {len(chosen)} questions ({len(aliased)} 'what is <alias>?' "
        f"asked by a word the corpus never uses, {len(plain)} control questions by an entry's "
        f"headword), {len(passages)} passages ({len(wanted)} relevant + {len(sample)} seeded "
        "others)"
    )
    return COLLECTION, passages, chosen, what


def _sample_data(turns: int) -> tuple[str, list[dict], list[dict], str]:
    root = Path(__file__).resolve().parents[1] / "retrievalagent" / "sample_docs"
    questions = json.loads((root / "questions.json").read_text())[:turns]
    passages = [
        {"id": str(p.relative_to(root)), "title": "", "text": p.read_text(encoding="utf-8")}
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.suffix in (".md", ".txt") and p.name != "questions.json"
    ]
    queries = [
        {"id": f"s{i}", "query": q["question"], "relevant": [q["source"]], "canonical": ""}
        for i, q in enumerate(questions)
    ]
    return "cost-sample", passages, queries, f"bundled sample docs: {len(queries)} questions"


# ----------------------------------------------------------------------------- measuring
def _prompt_chars(body: dict[str, Any]) -> int:
    return sum(len(t) for t in ChatRequest(body).texts())


def _schema_chars(body: dict[str, Any]) -> int:
    extra = {k: body[k] for k in ("response_format", "tools") if body.get(k)}
    return len(json.dumps(extra)) if extra else 0


def _calls(records: Sequence[RecordedRequest]) -> list[dict[str, Any]]:
    out = []
    for rec in records:
        usage = rec.usage or {}
        out.append(
            {
                "role": role_of(rec.body),
                "prompt_tokens": int(usage.get("prompt_tokens", 0)),
                "completion_tokens": int(usage.get("completion_tokens", 0)),
                "prompt_chars": _prompt_chars(rec.body),
                "schema_chars": _schema_chars(rec.body),
                "stream": bool(rec.body.get("stream")),
                "received_at": rec.received_at,
                "first_token_at": rec.first_token_at,
            }
        )
    return out


def _turn_row(query: dict[str, Any], state: Any, calls: list[dict[str, Any]]) -> dict[str, Any]:
    grades = [e for e in state.get("trace", []) if e.get("node") == "final_grade"]
    row: dict[str, Any] = {
        "id": query["id"],
        "rewrote": any(c["role"] == "rewrite" for c in calls)
        or any(e.get("node") == "rewrite" for e in state.get("trace", [])),
        "sufficient": bool(grades and grades[-1].get("sufficient")),
        "first_sufficient": bool(grades and grades[0].get("sufficient")),
        "memory_fact": state.get("memory_fact", ""),
        "calls": calls,
    }
    usage = state.get("usage")
    if isinstance(usage, dict):  # the agent's own account (once the library reports it)
        row["agent_usage"] = usage
    return row


def _per_turn(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    n = len(rows) or 1
    by_role: dict[str, dict[str, float]] = {}
    for role in ROLES:
        calls = [c for r in rows for c in r["calls"] if c["role"] == role]
        if not calls:
            continue
        by_role[role] = {
            "calls": round(len(calls) / n, 3),
            "prompt_tokens": round(sum(c["prompt_tokens"] for c in calls) / n, 1),
            "completion_tokens": round(sum(c["completion_tokens"] for c in calls) / n, 1),
            "prompt_chars": round(sum(c["prompt_chars"] for c in calls) / n, 1),
            "schema_chars": round(sum(c["schema_chars"] for c in calls) / n, 1),
        }
    total = {
        key: round(sum(v[key] for v in by_role.values()), 3 if key == "calls" else 1)
        for key in ("calls", "prompt_tokens", "completion_tokens", "prompt_chars", "schema_chars")
    }
    return {"by_role": by_role, "total": total}


def _sufficient_ratio(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Prompt tokens of a turn that was sufficient at once (no rewrite), over the prompt of
    its answer call alone (median over those turns; every call of the turn counts)."""
    ratios, ratios_chars = [], []
    for row in rows:
        if row["rewrote"] or not row["first_sufficient"]:
            continue
        answers = [c for c in row["calls"] if c["role"] == "answer"]
        if len(answers) != 1 or not answers[0]["prompt_tokens"]:
            continue
        total = sum(c["prompt_tokens"] for c in row["calls"])
        ratios.append(total / answers[0]["prompt_tokens"])
        ratios_chars.append(
            sum(c["prompt_chars"] for c in row["calls"]) / answers[0]["prompt_chars"]
        )
    if not ratios:
        return {"n": 0}
    return {
        "n": len(ratios),
        "median": round(statistics.median(ratios), 3),
        "max": round(max(ratios), 3),
        "median_chars": round(statistics.median(ratios_chars), 3),
    }


def run_cost(
    collection: str,
    queries: Sequence[dict[str, Any]],
    server: OpenAICompatServer,
    embeddings: Any,
    per_thread: int,
    settings: dict[str, Any],
) -> dict[str, Any]:
    from langgraph.checkpoint.memory import InMemorySaver

    server.first_token_delay = 0.0
    rag = open_agent(
        collection,
        embeddings=embeddings,
        model="openai:gpt-5.4",
        checkpointer=InMemorySaver(),
        **settings,
    )
    rows = []
    started = time.perf_counter()
    try:
        for i, query in enumerate(queries):
            config = {"configurable": {"thread_id": f"cost-{i // per_thread}", "user_id": "bench"}}
            seen = len(server.chat_records)
            state = rag.invoke(query["query"], config=config)
            rows.append(_turn_row(query, state, _calls(server.chat_records[seen:])))
    finally:
        rag.close()
    seconds = time.perf_counter() - started
    agent_totals = [r["agent_usage"].get("total", {}) for r in rows if r.get("agent_usage")]
    out = {
        "turns": len(rows),
        "seconds": round(seconds, 1),
        "per_turn": _per_turn(rows),
        "sufficient_turn_prompt_ratio": _sufficient_ratio(rows),
        "rewrites": sum(r["rewrote"] for r in rows),
        "rewritten_turns": [r["id"] for r in rows if r["rewrote"]],
        "first_attempt_sufficient": sum(r["first_sufficient"] for r in rows),
        "sufficient": sum(r["sufficient"] for r in rows),
        "facts_proposed": sum(bool(r["memory_fact"]) for r in rows),
    }
    if agent_totals:
        out["agent_reported_per_turn"] = {
            key: round(sum(t.get(key, 0) for t in agent_totals) / len(rows), 1)
            for key in ("calls", "input_tokens", "output_tokens", "ms")
        }
    out["turn_rows"] = [
        {k: v for k, v in r.items() if k not in ("calls", "agent_usage")}
        | {
            "roles": [c["role"] for c in r["calls"]],
            "prompt_tokens": sum(c["prompt_tokens"] for c in r["calls"]),
            "answer_prompt_tokens": [
                c["prompt_tokens"] for c in r["calls"] if c["role"] == "answer"
            ],
        }
        for r in rows
    ]
    return out


#: Graph shapes timed with empty steps before ``generate``: the agent's (as an agent without
#: memory runs it), and everything before the answer in a single step.
FLOOR_SHAPES = {
    "agent": ("prepare", "read_memory", "dense_search", "lexical_search", "fuse"),
    "one_step": ("retrieve",),
}


def floor_graph(model: Any, steps: Sequence[str]) -> Any:
    """``steps`` in a line with nothing in them, then a ``generate`` that only sends the
    answer request through ``model``; the agent's checkpointer and stream modes, a state of
    just the prompt and the answer. Its time to first token minus the direct call's is what
    LangGraph alone costs for that graph shape, whatever the nodes do."""
    from typing import TypedDict

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.graph import END, START, StateGraph

    class FloorState(TypedDict, total=False):
        prompt: list[Any]
        answer: str

    async def nothing(state: FloorState) -> dict[str, Any]:
        return {}

    async def generate(state: FloorState) -> dict[str, Any]:
        reply = await model.ainvoke(state["prompt"])
        return {"answer": str(reply.content)}

    graph = StateGraph(FloorState)
    for name in steps:
        graph.add_node(name, nothing)
    graph.add_node("generate", generate)
    graph.add_edge(START, steps[0])
    for a, b in zip([*steps, "generate"], [*steps[1:], "generate", END], strict=True):
        graph.add_edge(a, b)
    return graph.compile(checkpointer=InMemorySaver())


def run_ttft(
    collection: str,
    queries: Sequence[dict[str, Any]],
    server: OpenAICompatServer,
    embeddings: Any,
    per_thread: int,
    delay: float,
    settings: dict[str, Any],
) -> dict[str, Any]:
    from langgraph.checkpoint.memory import InMemorySaver

    server.first_token_delay = delay
    from langchain.chat_models import init_chat_model
    from langchain_core.messages import convert_to_messages

    from retrievalagent.agent import STREAM_MODES  # the floor graphs stream as the agent does

    direct = init_chat_model("openai:gpt-5.4")

    async def direct_ttft(body: dict[str, Any]) -> float | None:
        """The same answer request sent straight through the chat model: what the model
        call costs on its own, client library and HTTP included."""
        t0, first = time.perf_counter(), None
        async for chunk in direct.astream(convert_to_messages(body["messages"])):
            if chunk.content and first is None:
                first = (time.perf_counter() - t0) * 1e3
        return first  # read to the end: a stream left open would run on into the next turn

    floors = {shape: floor_graph(direct, steps) for shape, steps in FLOOR_SHAPES.items()}

    async def floor_ttft(shape: str, body: dict[str, Any], thread: str) -> float | None:
        """The same answer request sent from a floor graph's ``generate``."""
        messages = convert_to_messages(body["messages"])
        run = {"configurable": {"thread_id": thread}}
        t0, first = time.perf_counter(), None
        async for mode, part in floors[shape].astream(
            {"prompt": messages}, run, stream_mode=STREAM_MODES
        ):
            if mode == "messages" and part[0].content and first is None:
                first = (time.perf_counter() - t0) * 1e3
        return first

    async def run() -> list[dict[str, Any]]:
        rag = open_agent(
            collection,
            embeddings=embeddings,
            model="openai:gpt-5.4",
            checkpointer=InMemorySaver(),
            **settings,
        )
        rows = []
        try:
            for i, query in enumerate(queries):
                config = {
                    "configurable": {"thread_id": f"ttft-{i // per_thread}", "user_id": "bench"}
                }
                seen = len(server.chat_records)
                first: float | None = None
                final: Any = None
                t0 = time.perf_counter()
                async for event in rag.astream(query["query"], config=config):
                    if event["type"] == "token" and first is None:
                        first = time.perf_counter()
                    elif event["type"] == "result":
                        final = event["result"]
                records = server.chat_records[seen:]
                calls = _calls(records)
                trace = final.get("trace", []) if final is not None else []
                row = _ttft_row(t0, first, calls, trace)
                answer = next((r for r in records if role_of(r.body) == "answer"), None)
                row["direct_model_ttft_ms"] = (
                    await direct_ttft(answer.body) if answer is not None else None
                )
                for shape in FLOOR_SHAPES:
                    floor_ms = (
                        await floor_ttft(shape, answer.body, config["configurable"]["thread_id"])
                        if answer is not None
                        else None
                    )
                    if floor_ms is not None and row["direct_model_ttft_ms"] is not None:
                        row[f"floor_{shape}_overhead_ms"] = floor_ms - row["direct_model_ttft_ms"]
                if row["ttft_ms"] is not None and row["direct_model_ttft_ms"] is not None:
                    row["overhead_vs_direct_ms"] = (
                        row["ttft_ms"] - row["retrieval_ms"] - row["direct_model_ttft_ms"]
                    )
                rows.append(row)
        finally:
            await rag.aclose()
        return rows

    rows = asyncio.run(run())
    ttft = [r["ttft_ms"] for r in rows if r["ttft_ms"] is not None]
    overhead = [r["overhead_ms"] for r in rows if r["overhead_ms"] is not None]
    retrieval = [r["retrieval_ms"] for r in rows]
    model_first = [r["model_first_token_ms"] for r in rows if r["model_first_token_ms"]]
    to_request = [r["to_answer_request_ms"] for r in rows if r["to_answer_request_ms"]]
    way_back = [r["way_back_ms"] for r in rows if r["way_back_ms"] is not None]
    direct_ms = [r["direct_model_ttft_ms"] for r in rows if r["direct_model_ttft_ms"]]
    vs_direct = [r["overhead_vs_direct_ms"] for r in rows if "overhead_vs_direct_ms" in r]
    floor_ms = {
        shape: [r[f"floor_{shape}_overhead_ms"] for r in rows if f"floor_{shape}_overhead_ms" in r]
        for shape in FLOOR_SHAPES
    }
    return {
        "turns": len(rows),
        "first_token_delay_ms": round(delay * 1e3, 1),
        "ttft_ms_p50": _p50(ttft),
        "retrieval_ms_p50": _p50(retrieval),
        "to_answer_request_ms_p50": _p50(to_request),
        "model_first_token_ms_p50": _p50(model_first),
        "way_back_ms_p50": _p50(way_back),
        "overhead_ms_p50": _p50(overhead),
        "overhead_ms_p90": round(float(sorted(overhead)[int(0.9 * (len(overhead) - 1))]), 2)
        if overhead
        else None,
        "direct_model_ttft_ms_p50": _p50(direct_ms),
        "overhead_vs_direct_ms_p50": _p50(vs_direct),
        **{f"floor_{shape}_overhead_ms_p50": _p50(ms) for shape, ms in floor_ms.items()},
        "tokens_before_grade_request": sum(r["token_before_grade"] for r in rows),
        "turns_with_grade_request": sum(r["grade_requested"] for r in rows),
        "turns_without_tokens": sum(r["ttft_ms"] is None for r in rows),
    }


def _p50(values: Sequence[float]) -> float | None:
    return round(statistics.median(values), 2) if values else None


def _ttft_row(
    t0: float, first: float | None, calls: list[dict[str, Any]], trace: list[dict[str, Any]]
) -> dict[str, Any]:
    ms = {"dense": 0.0, "lexical": 0.0, "fuse": 0.0}
    for event in trace:
        if event.get("attempt", 0) != 0:
            continue
        if event.get("node") == "dense_search":
            ms["dense"] = float(event.get("embed_ms", 0)) + float(event.get("search_ms", 0))
        elif event.get("node") == "lexical_search":
            ms["lexical"] = float(event.get("ms", 0))
        elif event.get("node") == "fuse":
            ms["fuse"] = float(event.get("ms", 0))
    retrieval = sum(ms.values())
    answer = next((c for c in calls if c["role"] == "answer"), None)
    model_first = (
        (answer["first_token_at"] - answer["received_at"]) * 1e3
        if answer and answer["first_token_at"]
        else None
    )
    grade = next((c for c in calls if c["role"] == "grade"), None)
    ttft = (first - t0) * 1e3 if first is not None else None
    return {
        "ttft_ms": ttft,
        "retrieval_ms": retrieval,
        "to_answer_request_ms": (answer["received_at"] - t0) * 1e3 if answer else None,
        "way_back_ms": (first - answer["first_token_at"]) * 1e3
        if answer and answer["first_token_at"] and first is not None
        else None,
        "model_first_token_ms": model_first,
        "overhead_ms": ttft - retrieval - model_first
        if ttft is not None and model_first is not None
        else None,
        "grade_requested": grade is not None,
        "token_before_grade": bool(grade and first is not None and first < grade["received_at"]),
    }


# ------------------------------------------------------------------------------------ main
def _summary(payload: dict[str, Any]) -> dict[str, Any]:
    """What ``before`` keeps of a run: everything but the per-turn rows."""
    modes = {
        name: {k: v for k, v in mode.items() if k != "turn_rows"}
        for name, mode in payload.get("modes", {}).items()
    }
    return {
        "git": payload.get("git"),
        "modes": modes,
        "ttft": payload.get("ttft"),
        "rewritten_turns": {
            name: mode.get("rewritten_turns") for name, mode in payload.get("modes", {}).items()
        },
    }


def _inline_ratio(separate: Sequence[dict], inline: Sequence[dict]) -> dict[str, Any]:
    """Prompt tokens of an inline turn over the default mode's answer prompt alone for the
    same question (turns sufficient at once in both modes)."""
    by_id = {r["id"]: r for r in separate}
    ratios = []
    for row in inline:
        base = by_id.get(row["id"])
        if not base or row["rewrote"] or base["rewrote"] or not row["first_sufficient"]:
            continue
        if len(base["answer_prompt_tokens"]) == 1 and base["answer_prompt_tokens"][0]:
            ratios.append(row["prompt_tokens"] / base["answer_prompt_tokens"][0])
    if not ratios:
        return {"n": 0}
    return {
        "n": len(ratios),
        "median": round(statistics.median(ratios), 3),
        "max": round(max(ratios), 3),
    }


def _alias_decisions(run: dict[str, Any]) -> dict[str, Any]:
    """The memory decisions of an alias-bench run (its LLM-graded mode)."""
    mode = run["modes"].get("scripted-llm") or {}
    teaching = mode.get("teaching") or {}
    return {
        "git": run.get("git"),
        "turns": teaching.get("turns"),
        "facts_stored": teaching.get("facts_stored"),
        "facts_correct": teaching.get("facts_correct"),
        "recall@10_after_learning": mode.get("recall@10_after_learning"),
        "stored_facts_digest": hash_text("\n".join(mode.get("stored_facts") or [])),
    }


def hash_text(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode()).hexdigest()[:12]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--per-thread", type=int, default=4)
    parser.add_argument("--distractors", type=int, default=2000)
    parser.add_argument("--delay", type=float, default=0.3, help="first-token delay, seconds")
    parser.add_argument("--modes", nargs="+", default=["separate", "inline"])
    parser.add_argument("--baseline", type=Path, help="an earlier cost.json to keep as 'before'")
    parser.add_argument("--out", type=Path, default=RESULTS / "cost.json")
    parser.add_argument(
        "--alias-runs",
        type=Path,
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="two bench.memory.alias_bench results (before/after a grade change) whose "
        "memory decisions to keep beside these numbers",
    )
    args = parser.parse_args(argv)
    setup_logging()
    started = time.perf_counter()
    collection, passages, queries, what = load_data(args.turns, args.distractors)
    build = build_collection(collection, passages, CachedEmbeddings())
    from retrievalagent.embeddings import MiniLMEmbeddings

    embeddings = MiniLMEmbeddings().load()
    server = OpenAICompatServer(responder=SimulatedModel(queries)).start()
    os.environ.update(
        {
            "OPENAI_BASE_URL": server.base_url,
            "OPENAI_API_BASE": server.base_url,
            "OPENAI_API_KEY": "sk-bench-local",
        }
    )
    modes: dict[str, Any] = {}
    try:
        for mode in args.modes:
            settings = {} if mode == "separate" else {"grading": mode}
            modes[mode] = run_cost(
                collection, queries, server, embeddings, args.per_thread, settings
            )
        ttft = {
            mode: run_ttft(
                collection,
                queries,
                server,
                embeddings,
                args.per_thread,
                args.delay,
                {} if mode == "separate" else {"grading": mode},
            )
            for mode in args.modes
        }
    finally:
        server.stop()
    payload: dict[str, Any] = {
        "benchmark": "cost",
        "command": "python -m bench.cost " + " ".join(sys.argv[1:] if argv is None else argv),
        "git": git_revision(),
        "machine": machine(),
        "data": what,
        "index": build,
        "model": "openai:gpt-5.4 against tests/servers/openai_compat.py over HTTP "
        "(simulated words; tokens = words of the messages)",
        "modes": modes,
        "ttft": ttft,
        "targets": {
            "sufficient_turn_prompt_ratio": {"separate": 1.3, "inline": 1.05},
            "ttft_overhead_ms_p50": 5.0,
        },
    }
    if "separate" in modes and "inline" in modes:
        payload["inline_vs_separate_answer_prompt"] = _inline_ratio(
            modes["separate"]["turn_rows"], modes["inline"]["turn_rows"]
        )
    if args.baseline and args.baseline.exists():
        payload["before"] = _summary(json.loads(args.baseline.read_text()))
    if args.alias_runs:
        payload["alias_bench"] = {
            label: _alias_decisions(json.loads(path.read_text()))
            for label, path in zip(("before", "after"), args.alias_runs, strict=True)
        }
    payload["run_seconds"] = round(time.perf_counter() - started, 1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=2) + "\n")
    return payload


if __name__ == "__main__":
    result = main()
    print(json.dumps({k: result[k] for k in ("modes", "ttft")}, indent=2, default=str)[:20000])
