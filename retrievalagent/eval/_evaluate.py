"""``evaluate``: how well the hybrid search finds the relevant documents of a test set.

One pass over the queries searches each through the agent's own ``search`` (so the query
is cleaned and normalised exactly as the agent does it, full-width ``ＱＭ－４８９８`` becoming
``QM-4898``), with a searcher that also keeps both candidate lists (dense and BM25,
``DEPTH`` chunks each, ids and scores only); the payloads of the chunks not seen yet are
fetched once. Every run reported is then built from those lists with the library's own
fusers, exactly as ``HybridSearcher.search`` would build it, and the hybrid head is
checked against what the agent's search returned:

* ``bm25`` and ``dense``: one list alone.
* ``hybrid``: the current settings (``fusion``, ``dense_weight``, ``rrf_k``, ``fetch_k``);
  its head is what the agent retrieves (the fusion of the first ``fetch_k`` of each
  list). So that Recall@100 and the ``--run-out`` file reach 100 documents, the run goes
  on past that head with the same fusion of the full lists.
* ``tuned`` (``tune=True``): every fusion method, weight and ``fetch_k`` of a grid is
  scored on a dev half of the queries (a fixed half, by a hash of the query id); the
  best on dev is reported on the held-out test half, beside the current settings on the
  same half, with the ``RAG_*`` variables that apply it. The tuned head is then rebuilt
  from those variables (the searcher ``init_agent`` would build, asked through the
  agent's ``search``) and its test nDCG@10 is reported as ``reproduced``, with the
  number of queries whose ranking differs from the tuned run's (a warning when any do).
* ``+rerank``: with a reranker, the hybrid head's first ``rerank_k`` passages reordered.

Chunks are mapped to the ids the test set judges (a document, a section, a source),
each id kept at its best chunk's rank.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from retrievalagent._inputs import MAX_TOP_K
from retrievalagent.config import FUSION_METHODS, Settings
from retrievalagent.errors import ConfigError
from retrievalagent.eval._data import (
    TestSet,
    add_llm_questions,
    chunk_entries,
    derive_from_chunks,
    derive_from_headings,
    describe,
    load_beir,
    load_questions,
    split_of,
    unmatched_relevant,
)
from retrievalagent.eval._metrics import METRICS, first_occurrences, mean_scores, ndcg
from retrievalagent.eval._names import arg, given
from retrievalagent.index import Condition, Hit
from retrievalagent.models import resolve_model
from retrievalagent.retrieval import Fuser, HybridSearcher, make_fuser

__all__ = ["DEPTH", "EvalReport", "Setting", "evaluate"]

#: Chunks asked of each retriever per query (enough for 100 documents and every fetch_k).
DEPTH = 300
RUN_DEPTH = 100
FETCH_KS = (10, 20, 30, 50, 100)
WEIGHTS = tuple(round(0.1 * i, 1) for i in range(1, 10))
TIE = 0.002  # dev nDCG@10 differences below this count as a tie
#: A tuned setting replaces the current one only when its dev gain exceeds this many
#: standard errors of the per-query difference (about 95% confidence at 2). With one
#: standard error, two of our three sets adopted settings that did not hold on the
#: held-out half (docs/evaluation.md).
NOISE_SE = 2.0
#: Queries each half needs for ``tune`` (dev to choose, held-out to score).
MIN_HALF = 5


@dataclass(frozen=True)
class Setting:
    """One fusion configuration: what ``RAG_FUSION``, ``RAG_DENSE_WEIGHT``, ``RAG_RRF_K``
    and ``RAG_FETCH_K`` set."""

    fusion: str
    dense_weight: float
    fetch_k: int
    rrf_k: int = 60

    @classmethod
    def of(cls, settings: Settings) -> Setting:
        return cls(settings.fusion, settings.dense_weight, settings.fetch_k, settings.rrf_k)

    def fuser(self) -> Fuser:
        return make_fuser(self.fusion, rrf_k=self.rrf_k, dense_weight=self.dense_weight)

    def env(self) -> dict[str, str]:
        """The environment variables that make ``init_agent`` use this setting."""
        out = {"RAG_FUSION": self.fusion, "RAG_FETCH_K": str(self.fetch_k)}
        if self.fusion != "rrf":
            out["RAG_DENSE_WEIGHT"] = f"{self.dense_weight:g}"
        if self.fusion in ("rrf", "weighted_rrf"):
            out["RAG_RRF_K"] = str(self.rrf_k)
        return out

    def label(self) -> str:
        parts = [f"fetch_k={self.fetch_k}"]
        if self.fusion != "rrf":
            parts.append(f"dense_weight={self.dense_weight:g}")
        if self.fusion in ("rrf", "weighted_rrf"):
            parts.append(f"rrf_k={self.rrf_k}")
        return f"{self.fusion}({', '.join(parts)})"


def grid(current: Setting, top_k: int = 1) -> list[Setting]:
    """The settings ``tune`` tries (the current one included); a ``fetch_k`` below
    ``top_k`` is tried as ``top_k``, since the agent never fetches fewer."""
    out = [current]
    for fetch_k in sorted({max(k, top_k) for k in FETCH_KS}):
        out.append(Setting("rrf", 0.5, fetch_k, current.rrf_k))
        for method in FUSION_METHODS[1:]:
            out.extend(Setting(method, w, fetch_k, current.rrf_k) for w in WEIGHTS)
    return list(dict.fromkeys(out))


@dataclass
class Candidates:
    """Both ranked lists of one query, ``DEPTH`` deep, and its BM25 term coverage."""

    dense: list[Hit]
    lexical: list[Hit]
    coverage: float


@dataclass
class EvalReport:
    """What ``evaluate`` measured; ``to_dict()`` is the ``--json`` output."""

    test_set: dict[str, Any]
    collection: str
    settings: dict[str, Any]
    runs: list[dict[str, Any]]
    tuned: dict[str, Any] | None = None
    rerank: dict[str, Any] | None = None
    timings: dict[str, float] = field(default_factory=dict)
    run_out: str | None = None
    plot: str | None = None
    #: What was left out of the test set, and any run that is not what the agent returns.
    warnings: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "warnings": self.warnings,
            "test_set": self.test_set,
            "collection": self.collection,
            "settings": self.settings,
            "runs": self.runs,
            "tuned": self.tuned,
            "rerank": self.rerank,
            "timings": self.timings,
            "run_out": self.run_out,
        }

    def run(self, name: str, split: str = "all") -> dict[str, Any]:
        """One row of :attr:`runs`."""
        for row in self.runs:
            if row["run"] == name and row["split"] == split:
                return row
        raise KeyError(f"no run {name!r} on split {split!r}")


def _slug(text: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-.")[:40]
    return slug or "set"


def _progress(show: bool | None) -> bool:
    return sys.stderr.isatty() if show is None else show


@dataclass(eq=False)
class _Recorder(HybridSearcher):
    """The agent's searcher as ``eval`` uses it, through the agent's own ``search``: each
    list is fetched ``depth`` deep and kept, with the query as the agent searched it; the
    agent gets the first ``fetch_k`` of each, the lists its own searcher fuses, however
    many passages eval asks for (2 x ``fetch_k``: all that fusion holds; the agent's search
    would go on past it with the fusion of deeper lists, as eval's runs do with the whole
    lists); nothing is reranked (the reranker's lift is measured separately)."""

    depth: int = DEPTH
    query: str = ""
    dense: list[Hit] = field(default_factory=list)
    lexical: list[Hit] = field(default_factory=list)

    @classmethod
    def of(cls, searcher: HybridSearcher, depth: int) -> _Recorder:
        return cls(
            searcher.index,
            searcher.embedder,
            searcher.encoder,
            searcher.fuser,
            searcher.fetch_k,
            memory_weight=searcher.memory_weight,
            depth=max(depth, searcher.fetch_k),
        )

    def dense_hits(
        self,
        vector: Sequence[float],
        conditions: Sequence[Condition] = (),
        limit: int | None = None,
    ) -> list[Hit]:
        self.dense = super().dense_hits(vector, conditions, self.depth)
        return self.dense[: self.fetch_k]

    def lexical_hits(
        self,
        query: str,
        memory_terms: str = "",
        conditions: Sequence[Condition] = (),
        memory_weight: float = 1.0,
        limit: int | None = None,
    ) -> list[Hit]:
        self.query = query
        self.lexical = super().lexical_hits(
            query, memory_terms, conditions, memory_weight, self.depth
        )
        return self.lexical[: self.fetch_k]


class _Evaluation:
    """The candidate lists of every query, and the runs built from them."""

    def __init__(self, agent: Any, test: TestSet, show: bool) -> None:
        self.agent = agent
        self.test = test
        self.searcher: HybridSearcher = agent.searcher
        self.show = show
        # what the agent really fetches: never fewer than top_k (as init_agent builds it)
        self.current = dataclasses.replace(
            Setting.of(agent.settings), fetch_k=self.searcher.fetch_k
        )
        self.candidates: dict[str, Candidates] = {}
        self.payloads: dict[str, dict[str, Any]] = {}
        self.searched: dict[str, str] = {}  # each query as the agent searched it
        self.returned: dict[str, list[str]] = {}  # the chunk ids the agent's search returned

    def collect(self) -> None:
        """Search every query through the agent; queries it refuses are left out."""
        from tqdm import tqdm

        recorder = _Recorder.of(self.searcher, DEPTH)
        top_k = min(2 * recorder.fetch_k, MAX_TOP_K)  # the whole fused head
        refused: dict[str, str] = {}
        with self.agent.override(searcher=recorder):
            for qid, query in tqdm(
                self.test.queries.items(),
                desc="Searching",
                unit="query",
                disable=not self.show,
                leave=False,
            ):
                try:
                    hits = self.agent.search(query, top_k=top_k)
                except ConfigError as exc:  # empty, no words, too long: as the agent says
                    refused[qid] = str(exc)
                    continue
                self.searched[qid] = recorder.query
                self.returned[qid] = [h["id"] for h in hits]
                self._keep(qid, recorder)
        self._leave_out(refused)

    def _keep(self, qid: str, recorder: _Recorder) -> None:
        dense, lexical = recorder.dense, recorder.lexical
        coverage = recorder.coverage(recorder.query) if lexical else 1.0
        missing = list({h.id for h in (*dense, *lexical)} - self.payloads.keys())
        if missing:
            for cid, payload in self.searcher.index.retrieve(missing).items():
                payload.pop("text", None)  # only the ids that judge it are kept
                self.payloads[cid] = payload
        self.candidates[qid] = Candidates(dense, lexical, coverage)

    def _leave_out(self, refused: Mapping[str, str]) -> None:
        if not refused:
            return
        qid, why = next(iter(refused.items()))
        for q in refused:
            del self.test.queries[q], self.test.qrels[q]
        if not self.test.queries:
            raise ConfigError(
                f"the agent refuses every query of the test set (e.g. {qid!r}: {why})"
            )
        self.test.warnings.append(
            f"{len(refused)} queries the agent refuses are left out (e.g. {qid!r}: {why})"
        )

    def check_head(self, qids: Sequence[str]) -> None:
        """Warn when the hybrid head built here is not what the agent's search returned."""
        fuser = self.current.fuser()
        differ = [
            q
            for q in qids
            if self.head(self.current, fuser, q)[: len(self.returned[q])] != self.returned[q]
        ]
        if differ:
            self.test.warnings.append(
                f"the hybrid run differs from what the agent's search returns on {len(differ)} "
                f"of {len(qids)} queries (e.g. {differ[0]!r}), so its scores are not the "
                "agent's; please report this"
            )

    # -- runs --------------------------------------------------------------------------------
    def ranking(self, qid: str, chunk_ids: Sequence[str], limit: int = RUN_DEPTH) -> list[str]:
        judged = (
            self.test.judged_id(qid, cid, self.payloads[cid])
            for cid in chunk_ids
            if cid in self.payloads
        )
        return first_occurrences(judged)[:limit]

    def single(self, which: str, qids: Sequence[str]) -> dict[str, list[str]]:
        return {
            q: self.ranking(q, [h.id for h in getattr(self.candidates[q], which)]) for q in qids
        }

    def fold(self, chunk_ids: Sequence[str]) -> list[str]:
        """``chunk_ids`` less repeats of one passage (the same ``doc_hash`` and position,
        i.e. identical files), as ``HybridSearcher.with_payloads`` folds them."""
        seen: set[tuple[Any, Any]] = set()
        out = []
        for cid in chunk_ids:
            payload = self.payloads.get(cid)
            if payload is None:
                continue
            key = (payload.get("doc_hash"), payload.get("position"))
            if key[0] is not None:
                if key in seen:
                    continue
                seen.add(key)
            out.append(cid)
        return out

    def head(self, setting: Setting, fuser: Fuser, qid: str) -> list[str]:
        """The chunk ids the agent retrieves with ``setting`` (all fused candidates)."""
        c = self.candidates[qid]
        k = setting.fetch_k
        return self.fold([h.id for h in fuser(c.dense[:k], c.lexical[:k], c.coverage)])

    def hybrid(
        self, setting: Setting, qids: Sequence[str], need: int = RUN_DEPTH
    ) -> dict[str, list[str]]:
        """The fused run; past the agent's head it goes on with the fusion of the full lists
        until ``need`` judged ids are ranked."""
        fuser = setting.fuser()
        run = {}
        for q in qids:
            ranked = self.ranking(q, self.head(setting, fuser, q), need)
            if len(ranked) < need:
                c = self.candidates[q]
                tail = self.fold([h.id for h in fuser(c.dense, c.lexical, c.coverage)])
                ranked = first_occurrences([*ranked, *self.ranking(q, tail, DEPTH * 2)])[:need]
            run[q] = ranked
        return run

    def scores(self, run: Mapping[str, Sequence[str]], qids: Sequence[str]) -> dict[str, float]:
        return mean_scores(run, {q: self.test.qrels[q] for q in qids})


def _row(
    name: str, split: str, n: int, scores: Mapping[str, float], **extra: Any
) -> dict[str, Any]:
    return {
        "run": name,
        "split": split,
        "queries": n,
        **{m: round(scores[m], 4) for m in METRICS},
        **extra,
    }


def _tune(
    ev: _Evaluation, current: Setting, dev: list[str], test: list[str]
) -> tuple[Setting, dict[str, Any]]:
    scored = []
    for setting in grid(current, ev.agent.settings.top_k):
        value = ev.scores(ev.hybrid(setting, dev, need=10), dev)["ndcg@10"]
        scored.append((value, setting))
    top = max(v for v, _ in scored)
    ties = [(v, s) for v, s in scored if v >= top - TIE]
    best = next((s for v, s in ties if s == current), None)
    if best is None:
        best = min(ties, key=lambda vs: (vs[1].fetch_k, -vs[0]))[1]
    # A gain within its own noise (NOISE_SE standard errors of the per-query difference
    # on dev) is not evidence: the current setting is kept.
    gain, se = _paired_gain(ev, best, current, dev)
    kept = best != current and gain <= max(TIE, NOISE_SE * se)
    candidate = best
    if kept:
        best = current
    by_method = []
    for method in FUSION_METHODS:
        value, setting = max((vs for vs in scored if vs[1].fusion == method), key=lambda vs: vs[0])
        by_method.append(
            {"method": method, "best_on_dev": setting.label(), "dev_ndcg@10": round(value, 4)}
        )
    return best, {
        "tried": len(scored),
        "dev_gain_over_current": round(gain, 4),
        "dev_gain_standard_error": round(se, 4),
        "kept_current": kept,
        "best_on_dev": candidate.label(),
        "best_on_dev_env": candidate.env(),
        "by_method": by_method,
    }


def _paired_gain(
    ev: _Evaluation, best: Setting, current: Setting, qids: Sequence[str]
) -> tuple[float, float]:
    """Mean per-query nDCG@10 gain of ``best`` over ``current`` and its standard error."""
    if best == current or len(qids) < 2:
        return 0.0, 0.0
    a, b = ev.hybrid(best, qids, need=10), ev.hybrid(current, qids, need=10)
    diffs = [ndcg(a[q], ev.test.qrels[q], 10) - ndcg(b[q], ev.test.qrels[q], 10) for q in qids]
    mean = sum(diffs) / len(diffs)
    var = sum((d - mean) ** 2 for d in diffs) / (len(diffs) - 1)
    return mean, (var / len(diffs)) ** 0.5


def _reproduce(
    ev: _Evaluation, setting: Setting, qids: Sequence[str], run: Mapping[str, Sequence[str]]
) -> tuple[float, int]:
    """Test nDCG@10 of ``setting`` rebuilt from its ``RAG_*`` variables (the searcher
    ``init_agent`` builds from them, searched through the agent's own ``search``), and how
    many queries it ranks otherwise than the head of ``run``, eval's run of the setting."""
    from retrievalagent._build import make_searcher

    given = Settings.load(env=setting.env())  # the variables, parsed as init_agent parses them
    cfg = ev.agent.settings.replace(
        fusion=given.fusion,
        dense_weight=given.dense_weight,
        rrf_k=given.rrf_k,
        fetch_k=given.fetch_k,
    )
    base = ev.searcher
    # the lists of fetch_k each, as for the agent's own top_k (see _Recorder)
    searcher = _Recorder.of(make_searcher(cfg, base.index, base.embedder, base.encoder, None), 0)
    top_k = min(2 * searcher.fetch_k, MAX_TOP_K)
    agent_run = {}
    with ev.agent.override(searcher=searcher):
        for q in qids:
            hits = ev.agent.search(ev.test.queries[q], top_k=top_k)
            agent_run[q] = first_occurrences(ev.test.judged_id(q, h["id"], h) for h in hits)
    differ = sum(ranked != list(run[q][: len(ranked)]) for q, ranked in agent_run.items())
    return ev.scores(agent_run, qids)["ndcg@10"], differ


def _load(
    beir: str | Path | None,
    questions: str | Path | None,
    docs: Any,
    derive_from: str | None,
    split: str,
    cfg: Settings,
    agent_args: dict[str, Any],
) -> TestSet:
    chosen = [
        name
        for name, v in (
            ("beir", beir),
            ("questions", questions),
            ("docs", docs),
            ("derive_from", derive_from),
        )
        if v
    ]
    if len(chosen) != 1:
        raise ConfigError(
            f"give exactly one test set: {arg('beir')} (a BEIR folder), {arg('questions')} "
            f"(a JSONL file over an existing collection), {arg('docs')} (documents to derive "
            f"a set from their headings) or {arg('derive_from')} (a collection to derive one "
            "from)" + (f"; got {', '.join(arg(g) for g in chosen)}" if chosen else "")
        )
    if beir:
        return load_beir(beir, split)
    if questions:
        return load_questions(questions)
    if docs:
        return derive_from_headings(docs, cfg.chunk_size, cfg.chunk_overlap)
    from retrievalagent import init_agent

    _must_exist(str(derive_from), cfg)
    with init_agent(str(derive_from), **agent_args) as source:
        if source.count() == 0:
            raise ConfigError(
                f"{given('derive_from', derive_from)}: the collection holds no documents"
            )
        return derive_from_chunks(source.index.chunks())


def _must_exist(name: str, cfg: Settings) -> None:
    """Refuse an embedded collection that is not there (opening it would create an empty
    one); a server collection is checked when the agent opens it, with the agent's key."""
    from retrievalagent._build import embedded_index_exists

    if cfg.backend_url is None and not embedded_index_exists(cfg, name):
        raise ConfigError(
            f"collection {name!r} does not exist in {cfg.data_dir}; ingest the documents first"
        )


def _default_collection(test: TestSet, docs: Any) -> str:
    if test.kind == "beir":
        return f"eval-{_slug(test.name)}"
    import hashlib

    sources = sorted({d.metadata["source"].rsplit("@", 1)[0] for d in test.documents or []})
    digest = hashlib.sha1("\n".join(sources).encode()).hexdigest()[:8]
    return f"eval-derived-{digest}"


def _stale(agent: Any, test: TestSet, owned: bool) -> None:
    """Sources in the collection that the test set no longer has (an earlier version of
    the corpus): deleted from a collection ``eval`` named itself, else only reported."""
    wanted = {str(d.metadata["source"]) for d in test.documents or []}
    extra = [s for s in agent.sources() if s not in wanted]
    if not extra:
        return
    if owned:
        for source in extra:
            agent.delete_documents(source)
        test.notes.append(f"removed {len(extra)} stale source(s) from the collection")
    else:
        test.notes.append(f"{len(extra)} source(s) in the collection are not in the test set")


def _limit(test: TestSet, max_queries: int | None) -> None:
    if max_queries is None or len(test.queries) <= max_queries:
        return
    import hashlib

    keep = sorted(test.queries, key=lambda q: hashlib.sha1(q.encode()).hexdigest())[:max_queries]
    test.queries = {q: test.queries[q] for q in keep}
    test.qrels = {q: test.qrels[q] for q in keep}
    test.notes.append(f"limited to {max_queries} queries (a fixed sample)")


def evaluate(
    *,
    beir: str | Path | None = None,
    questions: str | Path | None = None,
    docs: Any = None,
    derive_from: str | None = None,
    llm_questions: int = 0,
    collection: str | None = None,
    split: str = "test",
    tune: bool = False,
    reranker: Any = None,
    model: Any = None,
    embeddings: Any = None,
    max_queries: int | None = None,
    run_out: str | Path | None = None,
    progress: bool | None = None,
    on_stage: Callable[[str], None] | None = None,
    **settings: Any,
) -> EvalReport:
    """Score BM25, dense, the current hybrid settings (and optionally the tuned ones and a
    reranker) on a test set; see ``docs/evaluation.md``.

    Args:
        beir: A BEIR folder; its corpus is ingested into ``collection`` (default
            ``eval-<folder name>``) with the corpus ids kept, and scored by them.
        questions: A JSONL file of ``{"question", "relevant"}`` over the existing
            ``collection`` (relevant = chunk ids or sources).
        docs: Files, folders or Documents to derive a test set from their headings; they
            are ingested (without heading paths) into ``collection`` (default
            ``eval-derived-<hash>``).
        derive_from: An existing collection to derive a heading set from (its chunks are
            re-indexed without heading paths into ``collection``).
        llm_questions: With a derived set and a chat model: this many more questions,
            written by the model for sampled passages.
        collection: The collection to search (required with ``questions``).
        split: Which BEIR qrels file (``qrels/<split>.tsv``).
        tune: Also search fusion method, weight and ``fetch_k`` on a dev half of the
            queries and report the best on the other half.
        reranker: A LangChain ``BaseDocumentCompressor`` or ``"llm"`` (needs ``model``):
            its lift over the hybrid run is reported.
        model: The chat model for ``reranker="llm"`` and ``llm_questions``.
        embeddings: As for ``init_agent``.
        max_queries: Evaluate a fixed sample of at most this many queries.
        run_out: Write the hybrid run here as JSON ``{query_id: [ids, best first]}``.
        progress: Progress bars on stderr (default: when it is a terminal).
        on_stage: Called with a short message as each stage starts (the CLI prints them).
        **settings: Any ``Settings`` field (``backend_url``, ``data_dir``, ``fusion``, ...).
    """
    from retrievalagent import init_agent

    started = time.perf_counter()
    say = on_stage or (lambda message: None)
    show = _progress(progress)
    cfg = Settings.load(**settings)
    out_file = _run_out_path(run_out)  # checked now, not after the whole search
    test = _load(
        beir, questions, docs, derive_from, split, cfg, {"embeddings": embeddings, **settings}
    )
    if llm_questions:
        model = _add_llm_questions(test, llm_questions, model, cfg, say)
    _limit(test, max_queries)
    if tune:
        _check_halves(list(test.queries))  # before anything is indexed
    name = _collection_name(test, collection, docs, cfg)
    agent = init_agent(
        name,
        model=model,
        embeddings=embeddings,
        reranker=reranker,
        **settings,
    )
    timings: dict[str, float] = {}
    try:
        with _timed(timings, "ingest_s"):
            _index(agent, test, name, owned=collection is None, show=show, say=say)
        ev = _Evaluation(agent, test, show)
        current = ev.current
        with _timed(timings, "search_s"):
            say(f"searching {len(test.queries)} queries")
            ev.collect()
        qids = list(test.queries)
        ev.check_head(qids)
        hybrid = ev.hybrid(current, qids)
        runs = _runs(ev, "all", qids, {"hybrid": (current, hybrid)})
        tuned = None
        if tune:
            with _timed(timings, "tune_s"):
                tuned, held_rows = _tuned(ev, current, qids, say)
                runs += held_rows
        rerank = None
        if reranker is not None:
            with _timed(timings, "rerank_s"):
                say(f"reranking the top {agent.settings.rerank_k} of {len(qids)} queries")
                rerank = _rerank(ev, current, hybrid, qids)
                runs.append(rerank.pop("row"))
        out_path = _write_run(out_file, hybrid)
        timings["total_s"] = round(time.perf_counter() - started, 2)
        return EvalReport(
            test_set=describe(test),
            collection=name,
            settings={
                "current": current.label(),
                "env": current.env(),
                "chunk_size": agent.settings.chunk_size,
                "chunk_overlap": agent.settings.chunk_overlap,
                "index": agent.index.location,
            },
            runs=runs,
            tuned=tuned,
            rerank=rerank,
            timings=timings,
            run_out=out_path,
            warnings=list(test.warnings),
        )
    finally:
        agent.close()


@contextmanager
def _timed(timings: dict[str, float], key: str) -> Iterator[None]:
    """Record under ``key`` how long the block took (seconds; nothing if it raised)."""
    t0 = time.perf_counter()
    yield
    timings[key] = round(time.perf_counter() - t0, 2)


def _add_llm_questions(
    test: TestSet, n: int, model: Any, cfg: Settings, say: Callable[[str], None]
) -> Any:
    """Add ``n`` questions the chat model writes to a derived set; returns the model."""
    from retrievalagent._build import retry_policy

    if test.kind != "derived":
        raise ConfigError(
            f"{arg('llm_questions')} adds to a derived set: use {arg('docs')} or "
            f"{arg('derive_from')}"
        )
    chat = resolve_model(model if model is not None else cfg.model)
    if chat is None:
        raise ConfigError(
            f"{arg('llm_questions')} needs a chat model: pass {arg('model')} (or RAG_MODEL)"
        )
    say(f"asking {n} questions of the model")
    add_llm_questions(test, chat, n, retry_policy(cfg))
    return chat


def _collection_name(test: TestSet, collection: str | None, docs: Any, cfg: Settings) -> str:
    """The collection the test set is searched in (it must exist unless it gets indexed)."""
    if test.kind == "questions" and not collection:
        raise ConfigError(
            f"{arg('questions')} needs {arg('collection')}: the collection the questions are about"
        )
    name = collection or _default_collection(test, docs)
    if test.documents is None:
        _must_exist(name, cfg)
    return name


def _index(
    agent: Any, test: TestSet, name: str, *, owned: bool, show: bool, say: Callable[[str], None]
) -> None:
    """Index the test set's documents (if it brings them), or check the collection has some."""
    if test.documents is not None:
        say(f"indexing {len(test.documents)} documents into {name!r}")
        agent.add_documents(test.documents, progress=show)
        _stale(agent, test, owned=owned)
        return
    if agent.count() == 0:
        raise ConfigError(f"collection {name!r} is empty: ingest the documents first")
    _check_relevant(agent, test)


def _check_relevant(agent: Any, test: TestSet) -> None:
    """Refuse a relevant entry that names nothing in the collection: its question could
    never find it, and would score 0 without saying why."""
    chunks = chunk_entries(test)
    known = agent.index.retrieve(chunks).keys() if chunks else ()
    unmatched = unmatched_relevant(test, agent.sources(), known)
    if not unmatched:
        return
    qid, entry = unmatched[0]
    more = f" ({len(unmatched) - 1} more entries match nothing)" if len(unmatched) > 1 else ""
    raise ConfigError(
        f"{arg('questions')}: question {qid!r}: the relevant entry {entry!r} matches no "
        f"source or chunk id in collection {agent.collection!r}{more}; "
        "'retrievalagent sources' lists the indexed sources"
    )


def _runs(
    ev: _Evaluation,
    split: str,
    qids: list[str],
    fused: Mapping[str, tuple[Setting, Mapping[str, Sequence[str]]]],
) -> list[dict[str, Any]]:
    """The rows of one split: BM25 and dense alone, then each named fused run with its setting."""
    rows = [
        _row(name, split, len(qids), ev.scores(ev.single(which, qids), qids))
        for name, which in (("bm25", "lexical"), ("dense", "dense"))
    ]
    rows += [
        _row(name, split, len(qids), ev.scores(run, qids), setting=setting.label())
        for name, (setting, run) in fused.items()
    ]
    return rows


def _tuned(
    ev: _Evaluation,
    current: Setting,
    qids: list[str],
    say: Callable[[str], None],
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Tune on the dev half; the outcome, and the held-out rows of the current and tuned
    settings."""
    dev, held = _check_halves(qids)
    say(f"tuning on {len(dev)} dev queries, scoring on {len(held)} held-out queries")
    best, details = _tune(ev, current, dev, held)
    tuned_run = ev.hybrid(best, held)
    fused = {"hybrid": (current, ev.hybrid(current, held)), "tuned": (best, tuned_run)}
    held_rows = _runs(ev, "test", held, fused)
    reproduced, differ = _reproduce(ev, best, held, tuned_run)
    if differ:
        ev.test.warnings.append(
            f"rebuilt from its variables, the tuned setting ranks {differ} of {len(held)} "
            f"held-out queries otherwise than the tuned run (nDCG@10 {reproduced:.3f} through "
            f"the agent's search, {held_rows[-1]['ndcg@10']:.3f} here); please report this"
        )
    outcome = {
        "setting": best.label(),
        "env": best.env(),
        "is_current": best == current,
        "dev_queries": len(dev),
        "test_queries": len(held),
        "dev_ndcg@10": round(ev.scores(ev.hybrid(best, dev, need=10), dev)["ndcg@10"], 4),
        "test_ndcg@10": held_rows[-1]["ndcg@10"],  # the tuned row
        "reproduced_test_ndcg@10": round(reproduced, 4),
        "reproduced_mismatches": differ,
        **details,
    }
    return outcome, held_rows


def _check_halves(qids: Sequence[str]) -> tuple[list[str], list[str]]:
    """The dev and held-out halves of ``qids``, or why they are too small to tune on."""
    dev = [q for q in qids if split_of(q) == "dev"]
    held = [q for q in qids if split_of(q) == "test"]
    if len(dev) < MIN_HALF or len(held) < MIN_HALF:
        raise ConfigError(
            f"{arg('tune')} needs at least {MIN_HALF} queries in each half (dev, to choose a "
            f"setting; held-out, to score it); have {len(qids)}: {len(dev)} dev, "
            f"{len(held)} held-out"
        )
    return dev, held


def _run_out_path(run_out: str | Path | None) -> Path | None:
    """Where the run file goes, checked before any work: a file in a writable folder."""
    if run_out is None:
        return None
    path = Path(run_out).expanduser()
    if path.is_dir():
        raise ConfigError(
            f"{given('run_out', path)} is a folder; give the path of the file to write"
        )
    folder = next(p for p in path.absolute().parents if p.exists())  # made if missing
    if not folder.is_dir():
        raise ConfigError(f"{given('run_out', path)}: {folder} is a file, not a folder")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{given('run_out', path)}: cannot write in {folder}")
    return path


def _write_run(out_path: Path | None, run: Mapping[str, Sequence[str]]) -> str | None:
    """Write the run as JSON ``{query_id: [ids, best first]}``; its path, or None."""
    if out_path is None:
        return None
    out_path.parent.mkdir(parents=True, exist_ok=True)
    out_path.write_text(json.dumps(run, ensure_ascii=False, indent=0) + "\n")
    return str(out_path)


def _rerank(
    ev: _Evaluation, current: Setting, hybrid: Mapping[str, list[str]], qids: Sequence[str]
) -> dict[str, Any]:
    """The hybrid run with its head's first ``rerank_k`` passages reordered by the agent's
    reranker (the step ``init_agent(reranker=...)`` adds), and its lift."""
    from tqdm import tqdm

    searcher = ev.searcher
    fuser = current.fuser()
    k = ev.agent.settings.rerank_k
    run, errors, ms = {}, 0, 0.0
    for q in tqdm(qids, desc="Reranking", unit="query", disable=not ev.show, leave=False):
        c = ev.candidates[q]
        fused = fuser(c.dense[: current.fetch_k], c.lexical[: current.fetch_k], c.coverage)
        top = searcher.with_payloads(fused, k)
        reordered, event = searcher.rerank(ev.searched[q], top)
        if event is not None:
            errors += "error" in event
            ms += event.get("ms", 0.0)
        ranked = [h.id for h in reordered]
        done = set(ranked)
        ids = [*ranked, *(cid for cid in ev.fold([h.id for h in fused]) if cid not in done)]
        run[q] = first_occurrences([*ev.ranking(q, ids), *hybrid[q]])[:RUN_DEPTH]
    scores = ev.scores(run, qids)
    base = ev.scores(hybrid, qids)
    name = searcher.reranker.name if searcher.reranker is not None else "?"
    return {
        "reranker": name,
        "rerank_k": k,
        "errors": errors,
        "mean_ms": round(ms / max(1, len(qids)), 2),
        "lift": {m: round(scores[m] - base[m], 4) for m in METRICS},
        "row": _row("hybrid+rerank", "all", len(qids), scores, setting=f"{name}, top {k}"),
    }
