"""Ingestion a user can trust: interrupted runs, mirrored folders, guards, decoding, secrets.

Each test states a promise from the user's side (what ``sources()``, ``search`` and the
reports show), on the real embedded index and the real packaged embedder.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
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


def folder_of(path: Path, **notes: str) -> Path:
    """A folder at ``path`` holding one Markdown note per keyword (``ferry="..."`` is
    ``ferry.md``)."""
    path.mkdir()
    for name, text in notes.items():
        (path / f"{name}.md").write_text(text)
    return path


def ingested_warning(rag: Any, folder: Path, caplog: pytest.LogCaptureFixture) -> Any:
    """``rag.add_documents(folder)``'s report, with the warnings it logged in ``caplog``."""
    with caplog.at_level(logging.WARNING):
        return rag.add_documents(folder)


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


def test_a_pdf_that_cannot_be_read_without_pypdf_is_named_and_stays_indexed(
    make_agent, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Indexed where pypdf was installed, ingested again where it is not: the PDF is still
    there, so the folder's mirror keeps it, and the skip is said, with the fix."""
    import types

    folder = folder_of(tmp_path / "manuals", notes="# Notes\n\nThe ferry leaves at noon.\n")
    (folder / "manual.pdf").write_bytes(b"%PDF-1.4\n%%EOF\n")

    class Page:
        def extract_text(self) -> str:
            return "The lighthouse manual: the lamp turns every ten seconds."

    class PdfReader:  # a stand-in for pypdf where it is installed
        def __init__(self, path: str) -> None:
            self.pages = [Page()]

    monkeypatch.setitem(sys.modules, "pypdf", types.SimpleNamespace(PdfReader=PdfReader))
    rag = make_agent()
    rag.add_documents(folder)
    pdf = (folder / "manual.pdf").resolve().as_posix()
    assert pdf in rag.sources()
    monkeypatch.setitem(sys.modules, "pypdf", None)  # import pypdf now fails
    report = ingested_warning(rag, folder, caplog)
    assert report.removed_sources == [] and pdf in rag.sources()
    assert "manual.pdf" in caplog.text and "pip install pypdf" in caplog.text
    (folder / "manual.pdf").unlink()  # deleted, it goes
    assert rag.add_documents(folder).removed_sources == [pdf]


def test_a_file_named_in_another_encoding_does_not_stop_the_folder(
    make_agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A Latin-1 "café.md" from an old archive: the index keeps names as UTF-8, so it is
    skipped, named; the folder's other files are indexed (none were: the engine failed)."""
    folder = folder_of(tmp_path / "notes", ferry="# Ferry\n\nThe ferry leaves at noon.\n")
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.md"), "wb") as latin:
        latin.write(b"# Cafe\n\nThe cafe opens at eight.\n")
    rag = make_agent()
    ingested_warning(rag, folder, caplog)
    assert [Path(s).name for s in rag.sources()] == ["ferry.md"]
    assert "caf\\udce9.md" in caplog.text and "not UTF-8" in caplog.text


def test_a_symlinked_folder_in_a_folder_is_named_not_skipped_silently(
    make_agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outside = folder_of(tmp_path / "shared", ferry="# Ferry\n\nThe ferry leaves at noon.\n")
    folder = folder_of(tmp_path / "notes", own="# Own\n\nThe lighthouse opens at dawn.\n")
    (folder / "ferry.md").symlink_to(outside / "ferry.md")
    (folder / "more").symlink_to(outside)
    rag = make_agent()
    ingested_warning(rag, folder, caplog)
    assert len(rag.sources()) == 2  # own.md and the linked ferry.md, by its target
    assert "more" in caplog.text and "symlinked folder" in caplog.text


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
    from retrievalagent.index import Condition

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
    from retrievalagent.index._edge import _engine_errors

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
    from retrievalagent.index._edge import _engine_errors

    index = tmp_path / "docs" / "index"
    index.mkdir(parents=True)
    with pytest.raises(VectorIndexError) as error, _engine_errors(index):
        raise RuntimeError(
            f"failed to open {index}/segments/x/status.dat: No such file (os error 2)"
        )
    assert "may be damaged" in str(error.value) and "--rebuild" in str(error.value)


# Run as root with the effective user switched to "nobody" around the second ingest:
# root reads any folder, so only an unprivileged user meets a real permission error.
# (Python's own files stay where root keeps them, so the first ingest, as root, also
# loads every module the second one needs.)
_UNREADABLE_SUBFOLDER = """
import json, os, sys
from pathlib import Path
from retrievalagent import IngestError, init_agent
from retrievalagent.embeddings import MiniLMEmbeddings

folder, data = Path(sys.argv[1]), Path(sys.argv[2])
out = {}
with init_agent("walk", embeddings=MiniLMEmbeddings(), data_dir=data) as rag:
    rag.add_documents(folder)
    out["before"] = sorted(rag.sources())
    (folder / "closed").chmod(0)
    os.setegid(65534)
    os.seteuid(65534)
    try:
        report = rag.add_documents(folder)
        out["report"] = str(report)
    except IngestError as exc:
        out["error"] = str(exc)
    finally:
        os.seteuid(0)
        os.setegid(0)
        (folder / "closed").chmod(0o755)
    out["after"] = sorted(rag.sources())
print(json.dumps(out))
"""


def test_an_unreadable_subfolder_is_an_error_and_removes_nothing(tmp_path: Path) -> None:
    if os.geteuid() != 0:  # pragma: no cover - CI and the dev machines run as root
        pytest.skip("switching to an unprivileged user needs root")
    with tempfile.TemporaryDirectory() as shared:  # under /tmp: "nobody" can reach it
        folder = Path(shared) / "docs"
        (folder / "closed").mkdir(parents=True)
        Path(shared).chmod(0o755)
        folder.chmod(0o755)
        (folder / "open.md").write_text("# Harbour\n\nThe harbour opens at dawn.\n")
        (folder / "closed" / "in.md").write_text("# Ferry\n\nThe ferry leaves at noon.\n")
        run = subprocess.run(
            [sys.executable, "-c", _UNREADABLE_SUBFOLDER, str(folder), str(tmp_path / "data")],
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert run.returncode == 0, run.stderr
        out = json.loads(run.stdout.strip().splitlines()[-1])
    closed = (folder / "closed").as_posix()
    assert "report" not in out, out
    assert closed in out["error"] and "permission denied" in out["error"].lower()
    assert out["after"] == out["before"] and len(out["before"]) == 2


def test_a_broken_symlink_in_a_folder_is_skipped_with_a_warning(
    make_agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    folder = folder_of(tmp_path / "notes", real="# Harbour\n\nThe harbour opens at dawn.\n")
    (folder / "gone.md").symlink_to(tmp_path / "elsewhere.md")
    report = ingested_warning(make_agent(), folder, caplog)
    assert report.sources == 1
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert str(folder / "gone.md") in warning and "broken symlink" in warning


def test_ctrl_c_counts_unchanged_and_empty_sources_as_finished(
    make_agent, minilm, docs: Path
) -> None:
    rag = make_agent()
    rag.add_documents(docs)
    total = len(rag.sources())
    (docs / "empty.md").write_text("")
    (docs / "new.md").write_text("# Lighthouse\n\nThe keeper logs every ship at night.\n")
    with (
        rag.override(ingest_embeddings=InterruptAfter(minilm, calls=0)),
        pytest.raises(IngestInterrupted) as stop,
    ):
        rag.add_documents(docs)
    # every source but the new one is as it should be: unchanged, or empty and indexed so
    assert f"interrupted: {total + 1} of {total + 2} source(s) finished" in str(stop.value)
    finished = stop.value.report.finished_sources
    assert (docs / "new.md").resolve().as_posix() not in finished
    assert (docs / "empty.md").resolve().as_posix() in finished


def test_a_file_of_headings_only_is_indexed_not_called_empty(make_agent, tmp_path: Path) -> None:
    rag = make_agent()
    release = tmp_path / "release.md"
    release.write_text("# Release 2.6 fixed the temperature overshoot\n")
    contents = tmp_path / "contents.md"
    contents.write_text(
        "# Handbook\n\n## Installing the boiler\n\n## Bleeding the radiators\n\n"
        "### Which valve comes first\n"
    )
    report = rag.add_documents([release, contents])
    assert report.empty_sources == [] and report.added_chunks >= 2
    hit = rag.search("temperature overshoot", top_k=1)[0]
    assert hit["source"] == release.resolve().as_posix()
    assert "Release 2.6 fixed the temperature overshoot" in hit["text"]
    hit = rag.search("bleeding radiators valve", top_k=1)[0]
    assert hit["source"] == contents.resolve().as_posix()
    assert "Bleeding the radiators" in hit["text"] and "Which valve comes first" in hit["text"]


def test_windows_1252_text_is_read_as_windows_1252_and_the_warning_says_so(
    make_agent, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rag = make_agent()
    path = tmp_path / "prices.txt"
    text = "\u201cHello\u201d \u2013 the tour costs 40 \u20ac, caf\u00e9 included\u2026\n"
    path.write_bytes(text.encode("cp1252"))
    with caplog.at_level(logging.WARNING):
        rag.add_documents(path)
    [hit] = rag.search("tour costs", top_k=1)
    assert hit["text"] == text.strip()
    warning = " ".join(r.getMessage() for r in caplog.records)
    assert str(path) in warning and "read as Windows-1252" in warning
