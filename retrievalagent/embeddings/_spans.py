"""Vectors for parts of a text, drawn from the text's own run of the model.

Conversation memory ranks a memory by its whole text and by its clauses (see
``memory._hybrid``). Embedding each clause on its own costs a model run per clause: a
conversation's texts plus about as many clauses again, so ``remember`` ran the model over
about 1.7 times the texts it stored. An embedder that exposes its token states can pool a
clause's vector from the tokens of the whole text's run instead ("late chunking"): the
clause is read in its context, and the model runs once per text. On the dev half of
bench/memory's conversation set, recall@10 went from 0.982 to 0.979 (with 50 added
conversations, draws 0 and 1: from 0.939 and 0.930 to 0.933 and 0.933), and remembering
the half and recalling its questions took 13.5 s instead of 19.8 s.

``SpanEmbeddings`` is that ability; :func:`embed_with_spans` uses it where the embedder has
it and embeds the parts on their own where it has not (any LangChain ``Embeddings``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from langchain_core.embeddings import Embeddings

__all__ = ["Span", "SpanEmbeddings", "SpanVectors", "aembed_with_spans", "embed_with_spans"]

#: Character offsets ``(start, end)`` of a part in its text.
Span = tuple[int, int]
#: Per text its vector, and per text the vectors of its spans, in order.
SpanVectors = tuple[list[list[float]], list[list[list[float]]]]


@runtime_checkable
class SpanEmbeddings(Protocol):
    """An embedder that returns, with each text's vector, vectors for spans of the text
    taken from the same run of the model (a span it cannot see, past its token limit, it
    embeds on its own)."""

    def embed_spans(self, texts: list[str], spans: Sequence[Sequence[Span]]) -> SpanVectors:
        """Each text's vector and its spans' vectors."""
        ...

    async def aembed_spans(self, texts: list[str], spans: Sequence[Sequence[Span]]) -> SpanVectors:
        """Async :meth:`embed_spans`."""
        ...


def _cut(texts: list[str], spans: Sequence[Sequence[Span]]) -> list[str]:
    return [text[start:end] for text, its in zip(texts, spans, strict=True) for start, end in its]


def _split(
    texts: list[str], spans: Sequence[Sequence[Span]], flat: list[list[float]]
) -> SpanVectors:
    wholes, rest = list(flat[: len(texts)]), flat[len(texts) :]
    parts, at = [], 0
    for its in spans:
        parts.append(list(rest[at : at + len(its)]))
        at += len(its)
    return wholes, parts


def embed_with_spans(
    embeddings: Embeddings, texts: list[str], spans: Sequence[Sequence[Span]]
) -> SpanVectors:
    """Each text's vector and its spans' vectors: from the text's own run where
    ``embeddings`` is a ``SpanEmbeddings``, else the spans embedded on their own in the
    same call as the texts."""
    if isinstance(embeddings, SpanEmbeddings):
        return embeddings.embed_spans(texts, spans)
    return _split(texts, spans, embeddings.embed_documents([*texts, *_cut(texts, spans)]))


async def aembed_with_spans(
    embeddings: Embeddings, texts: list[str], spans: Sequence[Sequence[Span]]
) -> SpanVectors:
    """Async :func:`embed_with_spans`."""
    if isinstance(embeddings, SpanEmbeddings):
        return await embeddings.aembed_spans(texts, spans)
    flat = await embeddings.aembed_documents([*texts, *_cut(texts, spans)])
    return _split(texts, spans, flat)
