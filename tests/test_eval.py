"""``retrievalagent eval``: metrics checked by hand and against ir-measures, the three
kinds of test set, tuning reproduced by ``init_agent``, a reranker's lift, and the CLI.

The BEIR folder is made here from the bundled sample docs: one corpus entry per section,
the bundled questions as queries, the section holding the answer graded 2 and the other
sections of the same file graded 1. Real index, real embedder, real ir-measures.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from typer.testing import CliRunner

from retrievalagent.cli import app
from retrievalagent.errors import ConfigError
from retrievalagent.eval import (
    derive_from_headings,
    evaluate,
    load_beir,
    mean_scores,
    mrr,
    ndcg,
    recall,
)
from retrievalagent.eval._metrics import first_occurrences
from retrievalagent.ingest._chunking import split_sections

# -- metrics by hand ------------------------------------------------------------------------


def test_metrics_match_hand_computed_values() -> None:
    qrels = {"b": 1}
    assert ndcg(["a", "b", "c"], qrels, 10) == pytest.approx(1 / math.log2(3))
    assert recall(["a", "b", "c"], qrels, 10) == 1.0
    assert mrr(["a", "b", "c"], qrels, 10) == 0.5
    graded = {"a": 2, "b": 1, "c": 1, "z": 0}
    dcg = 2 / math.log2(3) + 1 / math.log2(4)
    ideal = 2 + 1 / math.log2(3) + 1 / math.log2(4)
    assert ndcg(["x", "a", "b"], graded, 10) == pytest.approx(dcg / ideal)  # 1.76186 / 3.13093
    assert ndcg(["x", "a", "b"], graded, 10) == pytest.approx(0.562727, abs=1e-6)
    assert recall(["x", "a", "b"], graded, 10) == pytest.approx(2 / 3)
    assert mrr(["z", "x", "a"], graded, 10) == pytest.approx(1 / 3)  # grade 0 is not relevant
    # the cut-off: relevant at rank 11 counts for @100 only
    ranked = [f"n{i}" for i in range(10)] + ["b"]
    assert (ndcg(ranked, qrels, 10), recall(ranked, qrels, 10), mrr(ranked, qrels, 10)) == (0, 0, 0)
    assert recall(ranked, qrels, 100) == 1.0
    assert ndcg(["b", "a"], {"a": 1, "b": 1}, 10) == pytest.approx(1.0)  # any order of equals
    assert ndcg([], qrels, 10) == 0.0


def test_a_document_counts_once_at_its_best_chunks_rank() -> None:
    assert first_occurrences(["d1", "d2", "d1", "d3", "d2"]) == ["d1", "d2", "d3"]
    run = {"q1": ["d2", "d1"], "q2": []}
    qrels = {"q1": {"d1": 1}, "q2": {"d9": 1}, "q3": {"d1": 0}}  # q3: nothing relevant
    means = mean_scores(run, qrels)  # q3 is left out; q2 (no results) scores 0
    assert means["mrr@10"] == pytest.approx(0.25)
    assert means["recall@10"] == pytest.approx(0.5)


# -- a BEIR folder made from the sample docs -------------------------------------------------


@pytest.fixture(scope="module")
def beir_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = Path(__file__).resolve().parents[1] / "retrievalagent" / "sample_docs"
    folder = tmp_path_factory.mktemp("beir")
    (folder / "qrels").mkdir()
    corpus, by_file = [], {}
    for path in sorted(root.rglob("*.md")):
        rel = path.relative_to(root).as_posix()
        for n, section in enumerate(split_sections(path.read_text())):
            doc_id = f"{rel}#{n}"
            by_file.setdefault(rel, []).append((doc_id, section.text))
            title = section.headings[-1] if section.headings else ""
            corpus.append({"_id": doc_id, "title": title, "text": section.text})
    questions = json.loads((root / "questions.json").read_text())
    queries, qrels = [], ["query-id\tcorpus-id\tscore"]
    for n, q in enumerate(questions):
        sections = by_file.get(q["source"])
        if not sections:
            continue
        queries.append({"_id": f"q{n}", "text": q["question"]})
        for doc_id, text in sections:
            said = any(a.lower() in text.lower() for a in q["answer_contains"])
            qrels.append(f"q{n}\t{doc_id}\t{2 if said else 1}")
    (folder / "corpus.jsonl").write_text("".join(json.dumps(c) + "\n" for c in corpus))
    (folder / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (folder / "qrels" / "test.tsv").write_text("\n".join(qrels) + "\n")
    return folder


@pytest.fixture(scope="module")
def beir_report(beir_folder: Path, minilm: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = tmp_path_factory.mktemp("beir-data")
    run_out = data / "run.json"
    report = evaluate(
        beir=beir_folder,
        tune=True,
        embeddings=minilm,
        data_dir=data,
        collection="beir-sample",
        run_out=run_out,
        progress=False,
        # a poor current setting, so that tuning has something to find
        fusion="weighted_rrf",
        dense_weight=0.1,
        fetch_k=10,
    )
    report.data_dir = data  # for the reproduction test
    return report


def test_beir_folder_keeps_corpus_ids_and_scores_by_them(beir_folder: Path, beir_report) -> None:
    test = load_beir(beir_folder)
    assert {d.metadata["doc_id"] for d in test.documents} >= {"faq.md#0", "overview.md#1"}
    assert beir_report.test_set["kind"] == "beir" and beir_report.test_set["queries"] >= 10
    run = json.loads(Path(beir_report.run_out).read_text())
    assert set(run) == set(test.queries)
    corpus_ids = {d.metadata["doc_id"] for d in test.documents}
    for ranked in run.values():
        assert len(ranked) == len(set(ranked)) == min(100, len(corpus_ids))
        assert set(ranked) <= corpus_ids  # judged by the BEIR ids, not chunk ids
    hybrid = beir_report.run("hybrid")
    assert hybrid["setting"] == "weighted_rrf(fetch_k=10, dense_weight=0.1, rrf_k=60)"
    assert hybrid["ndcg@10"] > 0.3 and hybrid["recall@100"] > 0.9
    assert {r["run"] for r in beir_report.runs} >= {"bm25", "dense", "hybrid", "tuned"}


def test_scores_agree_with_ir_measures_on_the_written_run(beir_folder: Path, beir_report) -> None:
    import ir_measures
    from ir_measures import RR, R, nDCG

    qrels = list(ir_measures.read_trec_qrels(_trec_qrels(beir_folder)))
    run = json.loads(Path(beir_report.run_out).read_text())
    scored = {q: {d: float(len(ids) - i) for i, d in enumerate(ids)} for q, ids in run.items()}
    theirs = ir_measures.calc_aggregate([nDCG @ 10, R @ 10, R @ 100, RR @ 10], qrels, scored)
    ours = beir_report.run("hybrid")
    assert round(ours["ndcg@10"], 3) == round(theirs[nDCG @ 10], 3)
    assert ours["ndcg@10"] == pytest.approx(theirs[nDCG @ 10], abs=1e-4)
    assert ours["recall@10"] == pytest.approx(theirs[R @ 10], abs=1e-4)
    assert ours["recall@100"] == pytest.approx(theirs[R @ 100], abs=1e-4)
    assert ours["mrr@10"] == pytest.approx(theirs[RR @ 10], abs=1e-4)


def _trec_qrels(folder: Path) -> str:
    out = folder / "qrels.trec"
    lines = (folder / "qrels" / "test.tsv").read_text().splitlines()[1:]
    out.write_text("".join(f"{q} 0 {d} {g}\n" for q, d, g in (ln.split("\t") for ln in lines)))
    return str(out)


def test_printed_settings_make_init_agent_reproduce_the_tuned_score(
    beir_folder: Path, beir_report, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from retrievalagent import init_agent
    from retrievalagent.eval._data import split_of

    tuned = beir_report.tuned
    assert not tuned["is_current"] and not tuned["kept_current"]  # tuning moved
    assert tuned["test_ndcg@10"] > beir_report.run("hybrid", "test")["ndcg@10"]
    assert tuned["reproduced_test_ndcg@10"] == tuned["test_ndcg@10"]
    for key, value in tuned["env"].items():
        monkeypatch.setenv(key, value)
    test = load_beir(beir_folder)
    held = {q: g for q, g in test.qrels.items() if split_of(q) == "test"}
    with init_agent("beir-sample", data_dir=beir_report.data_dir, embeddings=minilm) as rag:
        depth = 2 * rag.settings.fetch_k
        run = {
            q: first_occurrences(
                h["metadata"]["doc_id"] for h in rag.search(test.queries[q], top_k=depth)
            )
            for q in held
        }
    assert len(held) == tuned["test_queries"]
    assert round(mean_scores(run, held)["ndcg@10"], 4) == tuned["test_ndcg@10"]


# -- questions over a collection, derived sets ---------------------------------------------


def test_questions_over_an_existing_collection(make_agent, sample_docs: Path, tmp_path) -> None:
    data = tmp_path / "data"
    rag = make_agent("handbook", backend_url=None, data_dir=data)
    rag.add_documents(sample_docs)
    chunk = rag.search("Which algorithm stretches the passphrase?", top_k=1)[0]
    rag.close()
    questions = tmp_path / "questions.jsonl"
    rows = [
        {"question": "Which algorithm stretches the passphrase?", "relevant": [chunk["id"]]},
        {"question": "What does error code LF-409 mean?", "relevant": "reference/error-codes.txt"},
        {"id": "sleep", "question": "What if the laptop sleeps?", "relevant": ["./faq.md"]},
        {"question": "How do I install on Debian?", "relevant": [str(sample_docs / "guide")]},
    ]
    questions.write_text("".join(json.dumps(r) + "\n" for r in rows))
    report = evaluate(
        questions=questions, collection="handbook", data_dir=data, progress=False,
        run_out=tmp_path / "run.json", embeddings=rag.embeddings,
    )  # fmt: skip
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["1"][0] == chunk["id"]  # judged by chunk id
    assert run["2"][0] == "reference/error-codes.txt"  # a relative path matches its source
    assert run["sleep"][0] == "./faq.md"
    assert run["4"][0] == str(sample_docs / "guide")  # a file under a relevant folder
    assert report.run("hybrid")["queries"] == 4
    assert report.run("hybrid")["mrr@10"] >= 0.75

    # no labels: a set derived from the collection's own chunks, the same as from the files
    derived = evaluate(derive_from="handbook", data_dir=data, embeddings=rag.embeddings)
    from_files = evaluate(docs=sample_docs, data_dir=data, embeddings=rag.embeddings)
    assert derived.collection == from_files.collection != "handbook"
    assert derived.runs == from_files.runs and derived.test_set["queries"] >= 40


def test_derived_set_queries_are_headings_indexed_without_them(sample_docs: Path) -> None:
    test = derive_from_headings(sample_docs, 1000, 120)
    assert test.kind == "derived" and len(test.queries) >= 40
    texts = {d.page_content for d in test.documents}
    for qid, heading in test.queries.items():
        assert len(heading.split()) >= 2
        # no passage opens with its heading line, as the indexed text of a chunk does
        assert not any(t.split("\n", 1)[0].strip().endswith(heading) for t in texts)
        assert all(qid.split("#")[0] == s.split("#")[0] for s in test.qrels[qid])
    faq = next(q for q, h in test.queries.items() if h == "Frequently asked questions")
    assert len(test.qrels[faq]) > 5  # a heading's section includes its subsections
    assert sum(1 for h in test.queries.values() if h == "Default rules") == 1


def test_a_reranker_lift_is_reported(beir_folder: Path, minilm: Any, tmp_path: Path) -> None:
    class Reverse(BaseDocumentCompressor):
        def compress_documents(
            self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
        ) -> Sequence[Document]:
            return list(reversed(documents))

    report = evaluate(
        beir=beir_folder, reranker=Reverse(), rerank_k=10, embeddings=minilm,
        backend_url=":memory:", progress=False,
    )  # fmt: skip
    assert report.rerank["reranker"] == "Reverse" and report.rerank["rerank_k"] == 10
    row, base = report.run("hybrid+rerank"), report.run("hybrid")
    assert report.rerank["lift"]["mrr@10"] == pytest.approx(row["mrr@10"] - base["mrr@10"], 1e-3)
    assert report.rerank["lift"]["mrr@10"] < 0  # reversing the best ten hurts
    assert row["recall@10"] == pytest.approx(base["recall@10"], abs=0.05)


def test_one_test_set_at_a_time() -> None:
    with pytest.raises(ConfigError, match="exactly one test set"):
        evaluate(progress=False)
    with pytest.raises(ConfigError, match="not a BEIR folder"):
        evaluate(beir=Path(__file__).parent, progress=False)


def test_questions_need_an_existing_collection(tmp_path: Path) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text('{"question": "what?", "relevant": ["a.md"]}\n')
    with pytest.raises(ConfigError, match="does not exist"):
        evaluate(questions=questions, collection="nothing-here", data_dir=tmp_path, progress=False)
    assert not (tmp_path / "nothing-here").exists()


# -- the command ----------------------------------------------------------------------------


def test_cli_eval_json_run_out_and_plot(
    beir_folder: Path, minilm: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("matplotlib")
    import retrievalagent.eval._evaluate as module

    real = module.evaluate

    def with_memo(**kwargs: Any) -> Any:  # the packaged model, with the session's memo
        return real(embeddings=minilm, **kwargs)

    monkeypatch.setattr("retrievalagent.eval.evaluate", with_memo)
    args = ["eval", "--beir", str(beir_folder), "--backend-url", ":memory:", "--tune"]
    out = CliRunner().invoke(
        app,
        [*args, "--json", "--run-out", str(tmp_path / "r.json"), "--plot", str(tmp_path / "p.png")],
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    assert report["tuned"]["env"]["RAG_FUSION"] in ("rrf", "weighted_rrf", "convex", "adaptive")
    assert (tmp_path / "p.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tmp_path / "r.json").read_text())
    text = CliRunner().invoke(app, args).output
    assert "nDCG@10" in text and "hybrid (test)" in text
    assert "export RAG_FUSION=" in text or "the current setting stays" in text
    bad = CliRunner().invoke(app, ["eval", "--beir", str(tmp_path)])
    assert bad.exit_code == 1 and "not a BEIR folder" in bad.output


def test_a_changed_corpus_leaves_no_stale_passages(minilm: Any, tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    page = folder / "guide.md"
    sections = {
        "Backing up the vault": "Copy the vault folder to another disk every night.",
        "Restoring old snapshots": "Pick a snapshot by date and restore its files.",
        "Rotating the encryption keys": "Run the rekey command; the old key stops working.",
    }
    page.write_text("".join(f"## {h}\n\n{t}\n\n" for h, t in sections.items()))
    first = evaluate(docs=folder, data_dir=tmp_path / "data", embeddings=minilm, progress=False)
    assert first.test_set["queries"] == 3
    del sections["Restoring old snapshots"]
    page.write_text("".join(f"## {h}\n\n{t}\n\n" for h, t in sections.items()))
    second = evaluate(docs=folder, data_dir=tmp_path / "data", embeddings=minilm, progress=False)
    assert second.collection == first.collection
    assert any("removed 1 stale source" in note for note in second.test_set["notes"])
    assert second.run("dense")["queries"] == 2


def test_questions_written_by_a_model_join_a_derived_set(
    sample_docs: Path, minilm: Any, openai_server: Any
) -> None:
    from tests.servers.openai_compat import ChatRequest

    def writer(request: ChatRequest) -> Any:
        assert "write one question" in request.system_prompt
        words = request.last_user_message.split("\n\n", 1)[1].split()
        return {"question": "What about " + " ".join(words[5:11]) + "?"}

    openai_server.responder = writer
    report = evaluate(
        docs=sample_docs, llm_questions=4, model="openai:gpt-5.4", embeddings=minilm,
        backend_url=":memory:", progress=False,
    )  # fmt: skip
    assert len(openai_server.chat_requests) == 4
    assert any("4 questions written by gpt-5.4" in n for n in report.test_set["notes"])
    derived = derive_from_headings(sample_docs, 1000, 120)
    assert report.test_set["queries"] == len(derived.queries) + 4
    with pytest.raises(ConfigError, match="needs a chat model"):
        evaluate(docs=sample_docs, llm_questions=2, backend_url=":memory:", progress=False)


def test_cli_rerank_option_names_a_compressor() -> None:
    import typer
    from langchain_core.documents import BaseDocumentCompressor

    from retrievalagent.cli._eval import load_reranker

    assert load_reranker(None) is None and load_reranker("llm") == "llm"
    made = load_reranker("tests.test_rerank:Reverse")  # a class is instantiated
    assert isinstance(made, BaseDocumentCompressor)
    with pytest.raises(typer.BadParameter, match="module:attribute"):
        load_reranker("flashrank")


# -- eval searches as the agent does -----------------------------------------------------------

_MEANINGS = (
    "the intake fan is blocked by dust",
    "the battery is too cold to charge",
    "the lid sensor reports an open lid",
    "the water tank is empty",
    "the firmware update was interrupted",
    "the heating element is disconnected",
    "the pump runs dry",
    "the door lock is jammed",
    "the network cable is unplugged",
    "the clock lost its time after a power cut",
    "the filter needs replacing",
    "the display ribbon is loose",
)


def _full_width(text: str) -> str:
    """``text`` with its ASCII letters, digits and signs in their full-width forms."""
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


def _write_beir(folder: Path, corpus: str, queries: str, qrels: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "qrels").mkdir(exist_ok=True)
    (folder / "corpus.jsonl").write_text(corpus, encoding="utf-8")
    (folder / "queries.jsonl").write_text(queries, encoding="utf-8")
    (folder / "qrels" / "test.tsv").write_text(qrels, encoding="utf-8")
    return folder


def _jsonl(rows: Sequence[dict[str, Any]]) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)


@pytest.fixture(scope="module")
def coded_beir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twelve error codes, each explained by one entry; the queries are typed in full width
    (``ｗｈａｔ ｄｏｅｓ ＱＭ－４８９８ ｍｅａｎ``), as an East Asian keyboard writes them."""
    codes = [4898 + 37 * i for i in range(len(_MEANINGS))]
    corpus = [
        {"_id": f"d{i}", "title": f"QM-{code}", "text": f"Code QM-{code} means {meaning}."}
        for i, (code, meaning) in enumerate(zip(codes, _MEANINGS, strict=True))
    ]
    queries = [
        {"_id": f"q{i}", "text": _full_width(f"what does QM-{c} mean")} for i, c in enumerate(codes)
    ]
    qrels = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(len(codes)))
    return _write_beir(tmp_path_factory.mktemp("coded"), _jsonl(corpus), _jsonl(queries), qrels)


@pytest.fixture(scope="module")
def coded_report(coded_beir: Path, minilm: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    data = tmp_path_factory.mktemp("coded-data")
    report = evaluate(
        beir=coded_beir, tune=True, embeddings=minilm, data_dir=data, collection="coded",
        progress=False,
    )  # fmt: skip
    report.data_dir = data
    return report


def test_eval_scores_full_width_queries_as_the_agent_searches_them(
    coded_beir: Path, coded_report: Any, minilm: Any
) -> None:
    from retrievalagent import init_agent

    test = load_beir(coded_beir)
    assert "ＱＭ－" in next(iter(test.queries.values()))
    with init_agent("coded", data_dir=coded_report.data_dir, embeddings=minilm) as rag:
        run = {
            q: first_occurrences(h["metadata"]["doc_id"] for h in rag.search(text, top_k=10))
            for q, text in test.queries.items()
        }
    agent = mean_scores(run, test.qrels)["ndcg@10"]
    assert agent > 0.9
    assert coded_report.run("hybrid")["ndcg@10"] == round(agent, 4)
    assert coded_report.run("bm25")["ndcg@10"] > 0.9  # the normalised query finds the code
    tuned = coded_report.tuned
    assert tuned["test_queries"] == 6
    assert tuned["reproduced_test_ndcg@10"] == tuned["test_ndcg@10"]
    assert tuned["reproduced_mismatches"] == 0 and coded_report.warnings == []


def test_the_reproduced_check_reports_a_run_the_agent_would_not_return(
    coded_beir: Path, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrievalagent.eval._evaluate as module

    real = module.Setting.fuser

    def backwards(self: Any) -> Any:  # a fault in eval's own fusion, not the agent's
        fuse = real(self)
        return lambda dense, lexical, coverage: list(reversed(fuse(dense, lexical, coverage)))

    monkeypatch.setattr(module.Setting, "fuser", backwards)
    report = evaluate(
        beir=coded_beir, tune=True, embeddings=minilm, backend_url=":memory:", progress=False
    )
    assert report.tuned["reproduced_mismatches"] == report.tuned["test_queries"]
    assert report.tuned["reproduced_test_ndcg@10"] != report.tuned["test_ndcg@10"]
    assert any("agent" in w and "12 of 12 queries" in w for w in report.warnings)


# -- bad input is an error that names the option --------------------------------------------

_CORPUS = _jsonl([{"_id": f"d{i}", "text": f"Passage {i} about topic {i}."} for i in range(3)])
_QUERIES = _jsonl([{"_id": f"q{i}", "text": f"topic {i}"} for i in range(3)])
_QRELS = "query-id\tcorpus-id\tscore\n" + "".join(f"q{i}\td{i}\t1\n" for i in range(3))
_ARRAY = json.dumps([{"_id": "d0", "text": "Passage 0."}]) + "\n"
_PRETTY_ARRAY = json.dumps([{"_id": "d0", "text": "Passage 0."}], indent=2) + "\n"


@pytest.mark.parametrize(
    ("corpus", "queries", "qrels", "expected"),
    [
        ("", _QUERIES, _QRELS, "corpus.jsonl holds no documents"),
        ("\n\n", _QUERIES, _QRELS, "corpus.jsonl holds no documents"),
        (_ARRAY, _QUERIES, _QRELS, "a JSON array, not JSON lines"),
        (_PRETTY_ARRAY, _QUERIES, _QRELS, "a JSON array, not JSON lines"),
        (_CORPUS + _jsonl([{"_id": "d1", "text": "again"}]), _QUERIES, _QRELS, "'d1' twice"),
        (_CORPUS, _QUERIES + _jsonl([{"_id": "q2", "text": "again"}]), _QRELS, "'q2' twice"),
        (_CORPUS, _QUERIES, _QRELS + "q0\td1\n", "test.tsv:5: not a qrels row"),
        (_CORPUS, _QUERIES, _QRELS + "q0\td1\thigh\n", "test.tsv:5: not a qrels row"),
        (_CORPUS, _QUERIES, "q0\td7\t1\nq1\td8\t1\n", "none of the 2 judged documents"),
    ],
    ids=[
        "empty-corpus",
        "blank-corpus",
        "array",
        "pretty-array",
        "duplicate-doc",
        "duplicate-query",
        "two-columns",
        "word-grade",
        "no-known-document",
    ],
)
def test_a_bad_beir_folder_is_an_error_naming_the_option(
    tmp_path: Path, corpus: str, queries: str, qrels: str, expected: str
) -> None:
    folder = _write_beir(tmp_path / "set", corpus, queries, qrels)
    out = CliRunner().invoke(
        app, ["eval", "--beir", str(folder), "--data-dir", str(tmp_path / "data")]
    )
    assert out.exit_code == 1, out.output
    text = " ".join(out.output.split())
    assert expected in text and "--beir" in text and "beir=" not in text
    assert "Traceback" not in out.output
    assert not (tmp_path / "data").exists()  # refused before anything was indexed


def test_a_beir_folder_with_a_utf8_bom_is_read_as_ingest_reads_it(tmp_path: Path) -> None:
    bom = "\ufeff"
    folder = _write_beir(tmp_path / "set", bom + _CORPUS, bom + _QUERIES, bom + _QRELS)
    test = load_beir(folder)
    assert set(test.queries) == {"q0", "q1", "q2"} and test.qrels["q0"] == {"d0": 1}
    assert [d.metadata["doc_id"] for d in test.documents] == ["d0", "d1", "d2"]
    assert test.warnings == []


def test_qrels_naming_unknown_documents_are_a_warning_with_the_count(tmp_path: Path) -> None:
    qrels = _QRELS + "q0\td8\t1\nq1\td9\t2\nq9\td0\t1\n"
    test = load_beir(_write_beir(tmp_path / "set", _CORPUS, _QUERIES, qrels))
    assert test.qrels["q0"] == {"d0": 1} and test.qrels["q1"] == {"d1": 1}
    assert any("2 judgement(s) name documents not in corpus.jsonl" in w for w in test.warnings)
    assert any("1 judgement(s) name queries not in queries.jsonl" in w for w in test.warnings)


def test_the_command_prints_the_warnings(
    tmp_path: Path, minilm: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import retrievalagent.eval._evaluate as module

    real = module.evaluate
    monkeypatch.setattr("retrievalagent.eval.evaluate", lambda **kw: real(embeddings=minilm, **kw))
    folder = _write_beir(tmp_path / "set", _CORPUS, _QUERIES, _QRELS + "q0\td9\t1\n")
    out = CliRunner().invoke(app, ["eval", "--beir", str(folder), "--backend-url", ":memory:"])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "warning: --beir" in text and "1 judgement(s) name documents not in corpus" in text
    assert "nDCG@10" in text


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("", "holds no questions"),
        ("\n  \n", "holds no questions"),
        (json.dumps([{"question": "what?", "relevant": ["a.md"]}]), "a JSON array, not JSON lines"),
        (
            _jsonl(
                [
                    {"id": "a", "question": "what?", "relevant": ["a.md"]},
                    {"id": "a", "question": "why?", "relevant": ["b.md"]},
                ]
            ),
            "'a' twice",
        ),
    ],
    ids=["empty", "blank", "array", "duplicate-id"],
)
def test_a_bad_questions_file_is_an_error_naming_the_option(
    tmp_path: Path, content: str, expected: str
) -> None:
    questions = tmp_path / "q.jsonl"
    questions.write_text(content)
    out = CliRunner().invoke(
        app, ["eval", "--questions", str(questions), "-c", "x", "--data-dir", str(tmp_path / "d")]
    )
    assert out.exit_code == 1, out.output
    text = " ".join(out.output.split())
    assert expected in text and "--questions" in text and "questions=" not in text


def test_a_relevant_entry_that_matches_nothing_is_an_error(make_agent: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "vault.md").write_text("# Vault\n\nThe vault lives in /var/lib/vault.\n")
    rag = make_agent("notes", backend_url=None, data_dir=data)
    rag.add_documents(folder)
    rag.close()
    questions = tmp_path / "q.jsonl"
    questions.write_text(
        _jsonl([
            {"question": "Where is the vault?", "relevant": ["vault.md"]},
            {"id": "typo", "question": "Where is it?", "relevant": ["valut.md", "vault.md"]},
        ])
    )  # fmt: skip
    with pytest.raises(ConfigError, match=r"question 'typo'.*'valut\.md' matches no"):
        evaluate(
            questions=questions, collection="notes", data_dir=data, progress=False,
            embeddings=rag.embeddings,
        )  # fmt: skip


def test_run_out_and_tune_are_checked_before_anything_is_indexed(
    coded_beir: Path, tmp_path: Path
) -> None:
    data = tmp_path / "data"
    args = ["eval", "--beir", str(coded_beir), "--data-dir", str(data)]
    out = CliRunner().invoke(app, [*args, "--run-out", str(tmp_path)])
    assert out.exit_code == 1 and "--run-out" in out.output and "is a folder" in out.output
    out = CliRunner().invoke(app, [*args, "--plot", str(tmp_path)])
    assert out.exit_code == 1 and "--plot" in out.output and "is a folder" in out.output
    assert not data.exists()
    few = _write_beir(tmp_path / "few", _CORPUS, _QUERIES, _QRELS)
    out = CliRunner().invoke(app, ["eval", "--beir", str(few), "--data-dir", str(data), "--tune"])
    assert out.exit_code == 1, out.output
    assert "--tune needs" in " ".join(out.output.split()) and "have 3" in out.output
    assert not data.exists()


def test_an_empty_docs_folder_says_no_documents(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = CliRunner().invoke(
        app, ["eval", "--docs", str(tmp_path / "empty"), "--data-dir", str(tmp_path / "data")]
    )
    assert out.exit_code == 1 and "no documents" in out.output and "--docs" in out.output


# -- derived sets ------------------------------------------------------------------------------


def test_headings_that_differ_by_a_digit_or_a_letter_are_different_queries(
    tmp_path: Path,
) -> None:
    page = tmp_path / "errors.md"
    page.write_text(
        "# Quillmate Error E3\n\nThe lid is open.\n\n"
        "# Quillmate Error E7\n\nThe base plate sensor is too hot.\n\n"
        "# Quillmate error: E7\n\nSee above.\n\n"  # the same heading, punctuated otherwise
        "# Reset step 1\n\nHold the button.\n\n# Reset step 2\n\nRelease it.\n"
    )
    test = derive_from_headings(page, 1000, 120)
    assert sorted(test.queries.values()) == [
        "Quillmate Error E3", "Reset step 1", "Reset step 2",
    ]  # fmt: skip
    assert any("2 heading not unique" in note for note in test.notes)
