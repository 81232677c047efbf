"""Ingestion into the real embedded index: inputs, idempotency, replacement, deletion."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from langchain_core.documents import Document

from retrievalagent import ConfigError, IngestError, init_agent
from retrievalagent.errors import IndexLockedError, VectorIndexError


@pytest.fixture
def docs(tmp_path: Path, sample_docs: Path) -> Path:
    target = tmp_path / "docs"
    shutil.copytree(sample_docs, target)
    return target


def _ids_by_source(rag) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for source in rag.sources():
        hits = rag.search("snapshot vault", top_k=100, filter={"source": source})
        out[source] = {h["id"] for h in hits}
    return out


def test_folder_ingest_is_idempotent_and_edits_replace_only_that_file(
    make_agent, docs: Path
) -> None:
    rag = make_agent()
    first = rag.add_documents(docs)
    assert first.new_sources == 12 and first.added_chunks == rag.count() > 50
    again = rag.add_documents(docs)
    assert (again.added_chunks, again.unchanged_sources, again.removed_chunks) == (0, 12, 0)
    assert rag.count() == first.added_chunks

    before = _ids_by_source(rag)
    faq = docs / "faq.md"
    faq.write_text(faq.read_text() + "\n\n## A new question\n\nThe answer is forty-two.\n")
    edit = rag.add_documents(docs)
    assert (edit.replaced_sources, edit.unchanged_sources) == (1, 11)
    after = _ids_by_source(rag)
    faq_key = faq.resolve().as_posix()
    assert after[faq_key].isdisjoint(before[faq_key])  # the file's chunks were replaced
    assert edit.removed_chunks == len(before[faq_key])
    for source, ids in before.items():
        if source != faq_key:
            assert after[source] == ids  # every other file untouched
    assert rag.search("forty-two", top_k=1)[0]["source"] == faq_key


def test_strings_and_documents_keep_caller_metadata(make_agent) -> None:
    rag = make_agent()
    meta = {"team": "infra", "year": 2024, "tags": ["a", "b"]}
    rag.add_documents(
        [
            Document("Quasar mode doubles the ingest rate of the glimmer engine.", metadata=meta),
            "The zephyr setting controls how long a lease lasts.",
        ],
        metadata={"origin": "unit-test"},
    )
    hit = rag.search("What does quasar mode do?", top_k=1)[0]
    assert hit["metadata"] == {**meta, "origin": "unit-test"}
    assert hit["text"].startswith("Quasar mode")
    assert set(hit) >= {"id", "source", "text", "score", "metadata"}
    zephyr = "The zephyr setting controls how long a lease lasts."
    assert rag.add_documents(zephyr, metadata={"origin": "unit-test"}).added_chunks == 0
    changed = rag.add_documents(zephyr, metadata={"origin": "elsewhere"})  # new metadata
    assert (changed.replaced_sources, changed.added_chunks, changed.removed_chunks) == (1, 1, 1)
    assert rag.search("zephyr lease", top_k=1)[0]["metadata"] == {"origin": "elsewhere"}


def test_metadata_filter_restricts_retrieval(make_agent) -> None:
    rag = make_agent()
    rag.add_documents(
        [
            Document("Ports: the daemon listens on 7311.", metadata={"lang": "en"}),
            Document("Ports: le démon écoute sur 7311.", metadata={"lang": "fr"}),
        ]
    )
    assert {h["metadata"]["lang"] for h in rag.search("daemon port", filter={"lang": "fr"})} == {
        "fr"
    }
    assert len(rag.search("daemon port", filter={"lang": ["en", "fr"]})) == 2
    assert rag.delete_documents(filter={"lang": "fr"}) == 1
    assert rag.count() == 1


def test_delete_documents_by_file_and_folder(make_agent, docs: Path) -> None:
    rag = make_agent()
    rag.add_documents(docs)
    total = rag.count()
    n_faq = rag.sources()[(docs / "faq.md").resolve().as_posix()]
    assert rag.delete_documents(docs / "faq.md") == n_faq
    n_guide = sum(c for s, c in rag.sources().items() if "/guide/" in s)
    assert rag.delete_documents(str(docs / "guide")) == n_guide
    assert rag.count() == total - n_faq - n_guide
    assert rag.delete_documents(docs / "faq.md") == 0


def test_bad_inputs_raise_clear_errors(make_agent, tmp_path: Path) -> None:
    rag = make_agent()
    with pytest.raises(IngestError, match="no such file"):
        rag.add_documents("./notes-that-do-not-exist.md")
    (tmp_path / "data.xlsx").write_bytes(b"x")
    with pytest.raises(IngestError, match=r"unsupported file type \.xlsx"):
        rag.add_documents(tmp_path / "data.xlsx")
    with pytest.raises(IngestError, match="type int"):
        rag.add_documents([42])
    assert rag.count() == 0


@pytest.mark.parametrize(
    "typo",
    [
        "./my-notes",
        "docs/notes.md",
        "docs/notes",
        "A/nope",
        "~/no-such-notes",
        "notes.txt",
        "guide.markdown",
        "notes.md\n",
    ],
)
def test_a_string_that_looks_like_a_missing_path_is_an_error(
    make_agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, typo: str
) -> None:
    monkeypatch.chdir(tmp_path)
    rag = make_agent()
    with pytest.raises(IngestError, match=f"cannot ingest .*{Path(typo.strip()).name}: no such"):
        rag.add_documents(typo)
    assert rag.count() == 0
    # a sentence is text, also with a slash in it or a path-like word
    rag.add_documents(["The ferry and/or the bus leave at noon.", "my notes"])
    assert len(rag.sources()) == 2


def test_range_filters_need_finite_numbers(make_agent) -> None:
    rag = make_agent()
    rag.add_documents(Document("Opening hours: 9 to 18.", metadata={"year": 2023}))
    assert len(rag.search("opening hours", filter={"year": {"gte": 2020.5}})) == 1
    for bad, problem in (
        ("x", "a number"),
        (float("nan"), "a finite number"),
        (float("inf"), "a finite number"),
        (True, "a number"),
        (None, "a number"),
    ):
        with pytest.raises(ConfigError, match=f"filter 'year': gt must be {problem}"):
            rag.search("opening hours", filter={"year": {"gt": bad}})
    with pytest.raises(ConfigError, match="filter 'year': lte must be a number"):
        rag.delete_documents(filter={"year": {"lte": "2025"}})
    assert rag.count() == 1


def test_embedded_index_persists_across_agents(minilm, tmp_path: Path, docs: Path) -> None:
    with init_agent("persist", embeddings=minilm, data_dir=tmp_path) as rag:
        added = rag.add_documents(docs / "faq.md").added_chunks
    assert (tmp_path / "persist" / "index" / "edge_config.json").exists()
    with init_agent("persist", embeddings=minilm, data_dir=tmp_path) as rag:
        assert rag.count() == added
        assert rag.add_documents(docs / "faq.md").added_chunks == 0


def test_dimension_mismatch_is_refused(tmp_path: Path, minilm) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    with init_agent("dims", embeddings=minilm, data_dir=tmp_path) as rag:
        rag.add_documents("some text to create the index")
    with pytest.raises(VectorIndexError, match="384-d"):
        init_agent("dims", embeddings=DeterministicFakeEmbedding(size=16), data_dir=tmp_path)


def test_second_process_gets_a_clear_lock_error(tmp_path: Path, minilm) -> None:
    with init_agent("locked", embeddings=minilm, data_dir=tmp_path) as rag:
        rag.add_documents("hold the index open")
        code = textwrap.dedent(f"""
            from retrievalagent import init_agent
            from retrievalagent.errors import IndexLockedError
            try:
                init_agent("locked", data_dir={str(tmp_path)!r})
            except IndexLockedError as exc:
                print("LOCKED", exc)
        """)
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120
        )
    assert "LOCKED" in out.stdout and "another process" in out.stdout, out.stderr
    assert IndexLockedError.__mro__[1] is VectorIndexError
