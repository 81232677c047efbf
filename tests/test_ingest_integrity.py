"""Ingestion a user can trust: interrupted runs, mirrored folders, guards, decoding, secrets.

Each test states a promise from the user's side (what ``sources()``, ``search`` and the
reports show), on the real embedded index and the real packaged embedder.
"""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import Embeddings

from retrievalagent import ConfigError, IngestError, IngestInterrupted, Settings


@pytest.fixture
def docs(tmp_path: Path, sample_docs: Path) -> Path:
    target = tmp_path / "docs"
    shutil.copytree(sample_docs, target)
    return target


def snapshot(rag: Any) -> dict[str, list[str]]:
    """What a clean ingest is compared on: each source's chunk texts, in order."""
    by_source: dict[str, list[tuple[int, str]]] = {}
    for _, payload in rag.index.chunks():
        by_source.setdefault(payload["source"], []).append((payload["position"], payload["text"]))
    return {s: [t for _, t in sorted(chunks)] for s, chunks in by_source.items()}


class InterruptAfter(Embeddings):
    """The real embedder, with Ctrl-C arriving after ``calls`` batches."""

    def __init__(self, inner: Embeddings, calls: int) -> None:
        self.inner, self.calls = inner, calls

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        if self.calls == 0:
            raise KeyboardInterrupt
        self.calls -= 1
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


def test_ctrl_c_leaves_each_file_whole_and_the_next_run_finishes(
    make_agent, minilm, docs: Path, tmp_path: Path
) -> None:
    clean = make_agent("clean")
    clean.add_documents(docs)
    expected = snapshot(clean)

    rag = make_agent("cut", backend_url=None, data_dir=tmp_path / "cut", ingest_window=8)
    with (
        rag.override(ingest_embeddings=InterruptAfter(minilm, calls=3)),
        pytest.raises(IngestInterrupted) as stop,
    ):
        rag.add_documents(docs)
    finished = stop.value.report.finished_sources
    assert "finished" in str(stop.value) and 0 < len(finished) < len(expected)
    # Every visible file is complete; the cut file is invisible, not partial.
    seen = snapshot(rag)
    assert set(seen) == set(finished)
    assert all(seen[s] == expected[s] for s in seen)
    assert rag.count() == sum(len(expected[s]) for s in finished)

    report = rag.add_documents(docs)
    assert report.unchanged_sources == len(finished)
    assert report.new_sources == len(expected) - len(finished)
    assert snapshot(rag) == expected


def test_an_interrupted_replacement_keeps_the_old_version_whole(
    make_agent, minilm, docs: Path
) -> None:
    rag = make_agent(ingest_window=4)
    faq = docs / "faq.md"
    rag.add_documents(faq)
    before = snapshot(rag)
    faq.write_text(faq.read_text() + "\n\nThe lighthouse keeper logs every ship at night.\n")
    with (
        rag.override(ingest_embeddings=InterruptAfter(minilm, calls=1)),
        pytest.raises(IngestInterrupted),
    ):
        rag.add_documents(faq)
    assert snapshot(rag) == before  # searches still see the whole old file, nothing new
    assert all("lighthouse" not in h["text"] for h in rag.search("lighthouse keeper", top_k=20))
    again = rag.add_documents(faq)
    assert again.replaced_sources == 1 and again.removed_chunks == len(before[next(iter(before))])
    texts = next(iter(snapshot(rag).values()))
    assert any("lighthouse" in t for t in texts) and rag.count() == len(texts)


def test_a_folder_is_mirrored_and_keep_missing_keeps(make_agent, docs: Path) -> None:
    rag = make_agent()
    rag.add_documents("A note that is not a file: the lighthouse opens at dawn.")
    rag.add_documents(docs)
    gone = docs / "faq.md"
    gone_key = gone.resolve().as_posix()
    gone.unlink()
    kept = rag.add_documents(docs, keep_missing=True)
    assert kept.removed_sources == [] and gone_key in rag.sources()
    report = rag.add_documents(docs)
    assert report.removed_sources == [gone_key] and "1 removed" in str(report)
    assert gone_key not in rag.sources()
    assert all(h["source"] != gone_key for h in rag.search("frequently asked", top_k=20))
    # a source outside the folder is untouched
    assert any(s.startswith("text:") for s in rag.sources())


def test_an_empty_file_is_not_new_on_every_run_and_emptying_a_file_removes_it(
    make_agent, tmp_path: Path
) -> None:
    rag = make_agent()
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "empty.md").write_text("")
    note = folder / "note.md"
    note.write_text("# Harbour\n\nThe harbour opens at dawn for the fishing boats.\n")
    first = rag.add_documents(folder)
    assert first.new_sources == 1 and len(first.empty_sources) == 1
    again = rag.add_documents(folder)
    assert (again.new_sources, again.unchanged_sources, again.added_chunks) == (0, 1, 0)
    note.write_text("")
    emptied = rag.add_documents(folder)
    assert emptied.removed_chunks > 0 and note.resolve().as_posix() not in rag.sources()


def test_identical_files_fill_one_slot_and_cite_both_names(make_agent, tmp_path: Path) -> None:
    rag = make_agent()
    folder = tmp_path / "copies"
    folder.mkdir()
    text = "# Tides\n\nThe harbour opens at dawn when the tide is high.\n"
    (folder / "a.md").write_text(text)
    (folder / "b.md").write_text(text)
    (folder / "c.md").write_text("# Fruit\n\nBananas are yellow when ripe.\n")
    rag.add_documents(folder)
    hits = rag.search("When does the harbour open?", top_k=2)
    assert len(hits) == 2 and hits[1]["source"].endswith("c.md")
    names = {Path(hits[0]["source"]).name, *(Path(s).name for s in hits[0]["also_in"])}
    assert names == {"a.md", "b.md"}


def test_delete_refuses_empty_and_root_like_paths(make_agent, docs: Path) -> None:
    rag = make_agent()
    rag.add_documents(docs)
    total = rag.count()
    for bad in ("", "   ", "/", Path("/"), "~"):
        with pytest.raises(ConfigError):
            rag.delete_documents(bad)
    assert rag.count() == total
    assert rag.delete_documents("no/such/source.md") == 0 and rag.count() == total


def test_bad_top_k_and_wordless_queries_are_errors(make_agent, docs: Path) -> None:
    rag = make_agent()
    rag.add_documents(docs / "faq.md")
    for bad in (0, -1, "5", 2.5, True, 10**6):
        with pytest.raises(ConfigError, match="top_k"):
            rag.search("snapshot", top_k=bad)
        with pytest.raises(ConfigError, match="top_k"):
            rag.as_retriever(top_k=bad)
    assert len(rag.search("snapshot", top_k=1)) == 1
    for question in ("", "?!?", "\u200b\u200b", " \ufeff ", "..."):
        with pytest.raises(ConfigError):
            rag.search(question)
        with pytest.raises(ConfigError):
            rag.invoke(question)


def test_one_bad_byte_keeps_the_rest_utf8_and_warns(
    make_agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rag = make_agent()
    path = tmp_path / "naive.md"
    path.write_bytes(
        "# Naïve\n\nA naïve café.\n".encode()
        + b"bad \xff byte\ncaf\xe9 cr\xe8me\n"  # Latin-1 lines
        + "naïve again ".encode()
        + b"\xff\n"  # one stray byte in a UTF-8 line
    )
    with caplog.at_level(logging.WARNING):
        rag.add_documents(path)
    text = " ".join(h["text"] for h in rag.search("naïve café", top_k=5))
    assert "naïve café" in text and "Ã" not in text
    assert "café crème" in text  # a Latin-1 line is read as Latin-1
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert str(path) in warning and "4 byte(s)" in warning
    assert "3 read as Latin-1" in warning and "1 replaced" in warning


def test_a_long_missing_path_is_an_error_not_text(make_agent) -> None:
    rag = make_agent()
    with pytest.raises(IngestError, match=r"no such file|too long"):
        rag.add_documents("/nonexistent/" + "d" * 1100 + ".md")
    assert rag.count() == 0


def test_secrets_never_show_in_repr_public_dict_or_errors() -> None:
    settings = Settings.load(
        backend_url="http://user:s3cret-pw@qdrant.example:6333/?api-key=k3y",
        qdrant_api_key="qk-s3cret",
    )
    for shown in (repr(settings), str(settings), str(settings.public_dict())):
        assert "s3cret" not in shown and "k3y" not in shown
        assert "qdrant.example" in shown
    with pytest.raises(ConfigError) as error:
        Settings.load(top_k=0, qdrant_api_key="qk-s3cret")
    assert "s3cret" not in str(error.value)


def test_a_damaged_index_is_one_clear_error(tmp_path: Path, minilm, docs: Path) -> None:
    from retrievalagent import VectorIndexError, init_agent

    with init_agent("docs", embeddings=minilm, data_dir=tmp_path) as rag:
        rag.add_documents(docs / "faq.md")
    index = tmp_path / "docs" / "index"
    damaged = 0
    for path in index.rglob("*"):
        if path.name == "status.dat":  # truncated: the engine panics reading it
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
            damaged += 1
    assert damaged
    with pytest.raises(VectorIndexError) as error:
        with init_agent("docs", embeddings=minilm, data_dir=tmp_path) as rag:
            rag.search("snapshot")
    message = str(error.value)
    assert str(index) in message and "--rebuild" in message and "\n" not in message


def test_a_file_left_partial_by_an_older_version_is_not_called_unchanged(
    make_agent, docs: Path
) -> None:
    from retrievalagent.retrieval import Condition

    rag = make_agent()
    faq = docs / "faq.md"
    rag.add_documents(faq)
    whole = snapshot(rag)
    key = faq.resolve().as_posix()
    # what an interrupted ingest before staging left: the current hash, some chunks missing
    lost = rag.index.delete(
        [Condition("source", "match", key), Condition("position", "any", [1, 2])]
    )
    assert lost == 2 and rag.sources()[key] == len(whole[key]) - 2
    report = rag.add_documents(faq)
    assert report.unchanged_sources == 0 and report.replaced_sources == 1
    assert snapshot(rag) == whole


def _no_damage_advice(message: str) -> None:
    assert "--rebuild" not in message and "delete" not in message and "damaged" not in message
    assert "\n" not in message


def test_a_data_dir_that_is_a_file_is_named_not_called_damaged(tmp_path: Path, minilm) -> None:
    from retrievalagent import VectorIndexError, init_agent

    precious = tmp_path / "notes.txt"
    precious.write_text("precious\n")
    with pytest.raises(VectorIndexError) as error:
        with init_agent("docs", embeddings=minilm, data_dir=precious) as rag:
            rag.add_documents("The zorblax widget rotates keys.")
    message = str(error.value)
    assert "not a folder" in message and "Not a directory" in message
    assert f"data dir {precious} (--data-dir / RAG_DATA_DIR)" in message
    _no_damage_advice(message)
    assert precious.read_text() == "precious\n"


@pytest.mark.parametrize(
    ("cause", "reason"),
    [
        (OSError(30, "Read-only file system"), "read-only"),
        (PermissionError(13, "Permission denied"), "permission denied"),
        (
            RuntimeError(  # what the engine raises for a healthy index on a read-only mount
                "Service runtime error: failed to load segment /d/c/index/segments/x: Service "
                "runtime error: Failed to open mmap payload storage: Read-only file system "
                "(os error 30)"
            ),
            "read-only",
        ),
    ],
)
def test_an_index_the_os_will_not_open_is_not_called_damaged(
    tmp_path: Path, cause: BaseException, reason: str
) -> None:
    from retrievalagent import VectorIndexError
    from retrievalagent.retrieval._edge import _engine_errors

    index = tmp_path / "data" / "docs" / "index"
    index.mkdir(parents=True)
    with pytest.raises(VectorIndexError) as error, _engine_errors(index):
        raise cause
    message = str(error.value)
    assert message.startswith(f"cannot open the index at {index}: ") and reason in message
    assert f"data dir {tmp_path / 'data'} (--data-dir / RAG_DATA_DIR)" in message
    _no_damage_advice(message)


def test_a_file_missing_inside_an_index_is_still_called_damaged(tmp_path: Path) -> None:
    from retrievalagent import VectorIndexError
    from retrievalagent.retrieval._edge import _engine_errors

    index = tmp_path / "docs" / "index"
    index.mkdir(parents=True)
    with pytest.raises(VectorIndexError) as error, _engine_errors(index):
        raise RuntimeError(
            f"failed to open {index}/segments/x/status.dat: No such file (os error 2)"
        )
    assert "may be damaged" in str(error.value) and "--rebuild" in str(error.value)
