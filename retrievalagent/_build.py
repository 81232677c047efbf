"""How ``init_agent`` builds an agent's parts, one small decision per function.

The index an agent searches, the chat model's roles (or their offline stand-ins), the
long-term memory backend: each is chosen here from the arguments and the settings, so
``init_agent`` reads as the list of those choices.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.store.base import BaseStore

from retrievalagent._inputs import redact_url
from retrievalagent.config import Settings, check_collection
from retrievalagent.embeddings import MiniLMEmbeddings, resolve_embeddings
from retrievalagent.errors import ConfigError
from retrievalagent.index import EDGE_CONFIG, EdgeIndex, LexicalEncoder, ServerIndex, VectorIndex
from retrievalagent.memory import (
    ConversationWriter,
    Mem0Backend,
    MemoryBackend,
    MemoryReader,
    ReadPolicy,
    StoreBackend,
    embedded_mem0,
)
from retrievalagent.models import (
    Answerer,
    EvidenceGrader,
    ExtractiveAnswerer,
    FeedbackRewriter,
    Grader,
    LLMAnswerer,
    LLMGrader,
    LLMInlineAnswerer,
    LLMRewriter,
    RetryPolicy,
    Rewriter,
)
from retrievalagent.persistence import ThreadTitler
from retrievalagent.retrieval import HybridSearcher, QueryEmbedder, Reranker, make_fuser

if TYPE_CHECKING:
    from mem0 import AsyncMemory, Memory
    from qdrant_client import QdrantClient

__all__ = [
    "Roles",
    "check_kinds",
    "collection_exists",
    "load_embeddings",
    "make_index",
    "make_memory",
    "make_reader",
    "make_roles",
    "make_searcher",
    "make_titler",
    "make_writer",
    "open_index",
    "retry_policy",
]

BACKENDS = ("qdrant",)


def check_kinds(*, backend: object, memory: object, model: object, embeddings: object) -> None:
    """Refuse arguments of the wrong kind before anything is opened."""
    if backend is not None and backend not in BACKENDS:
        raise ConfigError(f"backend={backend!r} is invalid: accepted: {', '.join(BACKENDS)}")
    if not isinstance(memory, bool):
        raise ConfigError(f"memory must be True or False, not {memory!r}")
    if model is not None and not isinstance(model, str | BaseChatModel):
        raise ConfigError(
            f"model must be a 'provider:model' string, a BaseChatModel or None, "
            f"not {type(model).__name__}"
        )
    if embeddings is not None and not isinstance(embeddings, str | Embeddings):
        raise ConfigError(
            f"embeddings must be an Embeddings instance, a 'provider:model' string "
            f"or None, not {type(embeddings).__name__}"
        )


def retry_policy(settings: Settings) -> RetryPolicy:
    """How every call to the chat model is retried (reranks included)."""
    return RetryPolicy(retries=settings.model_retries, backoff=settings.model_backoff)


def load_embeddings(spec: Embeddings | str | None, settings: Settings) -> Embeddings:
    """The embeddings; the packaged model starts loading now, while the index opens, so
    the first question is faster."""
    embeddings = resolve_embeddings(spec, batch_size=settings.embed_batch_size)
    if isinstance(embeddings, MiniLMEmbeddings):
        embeddings.preload()
    return embeddings


# -- the index -------------------------------------------------------------------------------
def make_index(
    settings: Settings, collection: str, qdrant_client: QdrantClient | None = None
) -> VectorIndex:
    """The index ``settings.backend_url`` names (or one on the given client); not opened."""
    if qdrant_client is not None:
        if not callable(getattr(qdrant_client, "collection_exists", None)):
            raise ConfigError(
                f"qdrant_client must be a qdrant_client.QdrantClient, not "
                f"{type(qdrant_client).__name__}"
            )
        return ServerIndex(qdrant_client, collection)
    url = settings.backend_url
    if url is None:
        return EdgeIndex(settings.index_dir(collection))
    if url == ":memory:":
        return EdgeIndex(None)
    if url.startswith(("http://", "https://")):
        return ServerIndex.from_url(url, collection, api_key=settings.qdrant_api_key)
    raise ConfigError(
        f"backend_url={redact_url(url)!r} is invalid: expected None (embedded index on disk), "
        "':memory:' (throwaway index) or an http(s):// URL of a Qdrant server"
    )


def open_index(index: VectorIndex, embeddings: Embeddings, embedder: QueryEmbedder) -> int:
    """Open (or create) ``index`` for the embeddings' vectors; returns their dimension."""
    dimension = int(getattr(embeddings, "dimension", None) or len(embedder.embed("dimension")))
    index.ensure(dimension)
    return dimension


def make_searcher(
    settings: Settings,
    index: VectorIndex,
    embedder: QueryEmbedder,
    encoder: LexicalEncoder,
    reranker: Reranker | None,
) -> HybridSearcher:
    fuser = make_fuser(settings.fusion, rrf_k=settings.rrf_k, dense_weight=settings.dense_weight)
    return HybridSearcher(
        index,
        embedder,
        encoder,
        fuser,
        max(settings.fetch_k, settings.top_k),  # fewer candidates could not fill top_k
        reranker=reranker,
        rerank_k=settings.rerank_k,
        memory_weight=settings.memory_term_weight,
    )


def collection_exists(
    collection: str, *, data_dir: str | Path | None = None, backend_url: str | None = None
) -> bool:
    """Whether ``collection`` already has an index, so opening it finds one instead of
    creating an empty one (a reading command should check this first).

    ``data_dir`` and ``backend_url`` fall back to ``RAG_DATA_DIR`` and ``RAG_BACKEND_URL``
    exactly as in :func:`~retrievalagent.init_agent`. An embedded index exists once an
    agent opened it (``init_agent`` creates an empty one) or an ingest wrote it; a
    ``":memory:"`` one never does; a Qdrant server is asked.

    Raises:
        ConfigError: ``collection`` or a setting is invalid.
        VectorIndexError: the Qdrant server cannot be reached.
    """
    settings = Settings.load(data_dir=data_dir, backend_url=backend_url)
    collection = check_collection(collection)
    if settings.backend_url is None:
        return embedded_index_exists(settings, collection)
    if settings.backend_url == ":memory:":
        return False
    index = make_index(settings, collection)
    try:
        return isinstance(index, ServerIndex) and index.exists()
    finally:
        index.close()


def embedded_index_exists(settings: Settings, collection: str) -> bool:
    """Whether ``collection`` has an embedded index on disk under ``settings.data_dir``."""
    return (settings.index_dir(collection) / EDGE_CONFIG).is_file()


# -- the model's roles -----------------------------------------------------------------------
class Roles(NamedTuple):
    """Who answers, grades and rewrites: the chat model, or its offline stand-ins."""

    answerer: Answerer
    grader: Grader
    rewriter: Rewriter
    inline: LLMInlineAnswerer | None  # grading="inline": answer and grade in one call


def make_roles(
    model: BaseChatModel | None,
    retry: RetryPolicy,
    settings: Settings,
    *,
    index: VectorIndex,
    embedder: QueryEmbedder,
    encoder: LexicalEncoder,
    learn_aliases: bool,
) -> Roles:
    """The model's roles; offline, extractive answers graded by the evidence."""
    if model is None:
        grader = EvidenceGrader(
            encoder, index, embedder, settings.min_confidence, learn_aliases=learn_aliases
        )
        return Roles(ExtractiveAnswerer(encoder, embedder), grader, FeedbackRewriter(encoder), None)
    return Roles(
        LLMAnswerer(model, retry),
        LLMGrader(model, retry),
        LLMRewriter(model, retry),
        LLMInlineAnswerer(model, retry) if settings.grading == "inline" else None,
    )


def make_titler(
    model: BaseChatModel | None, settings: Settings, saver: BaseCheckpointSaver[Any] | None
) -> ThreadTitler | None:
    """Threads get titles only when a checkpointer keeps them; the model writes them only
    when ``thread_title="llm"``."""
    if saver is None:
        return None
    return ThreadTitler(model if settings.thread_title == "llm" else None)


# -- long-term memory ------------------------------------------------------------------------
def make_memory(
    *,
    mem0_memory: Mem0Backend | Memory | AsyncMemory | None,
    memory: bool,
    store: BaseStore | None,
    settings: Settings,
    collection: str,
    model: BaseChatModel | None,
    embeddings: Embeddings,
    embedder: QueryEmbedder,
    encoder: LexicalEncoder,
    dimension: int,
    exit_stack: contextlib.ExitStack,
) -> MemoryBackend | None:
    """The memory backend, in order of precedence: a given mem0, the embedded mem0
    (``memory=True``), a LangGraph store; none of them: no memory. Each ranks
    conversation memory with the agent's BM25 encoder (and memory's own fusion weight)."""
    if mem0_memory is not None:
        # A ready Mem0Backend keeps its options (e.g. infer=False with an LLM-backed mem0).
        if isinstance(mem0_memory, Mem0Backend):
            return mem0_memory
        return Mem0Backend(mem0_memory, encoder=encoder)
    if memory:
        embedded = embedded_mem0(
            Path(settings.data_dir), collection, model, embedder, dimension, encoder
        )
        exit_stack.callback(embedded.close)  # the last agent using it closes it
        return embedded
    if store is not None:
        name = getattr(embeddings, "model_name", None) or type(embeddings).__name__
        return StoreBackend(
            store,
            embedder,
            f"{name}:{dimension}",
            settings.memory_scan_limit,
            encoder=encoder,
        )
    return None


def make_reader(
    memory: MemoryBackend | None, encoder: LexicalEncoder, settings: Settings
) -> MemoryReader | None:
    """What a turn recalls, gated and bounded by the settings."""
    if memory is None:
        return None
    policy = ReadPolicy(
        fact_threshold=settings.memory_relevance_threshold,
        fact_limit=settings.memory_top_k,
        max_preferences=settings.memory_max_preferences,
        conversations=settings.memory_conversations and settings.conversation_top_k > 0,
        conversation_threshold=settings.conversation_relevance_threshold,
        conversation_limit=settings.conversation_top_k,
        conversation_chars=settings.conversation_max_chars,
    )
    return MemoryReader(memory, encoder, policy)


def make_writer(
    memory: MemoryBackend | None,
    model: BaseChatModel | None,
    retry: RetryPolicy,
    settings: Settings,
) -> ConversationWriter | None:
    """Conversation memory's writer (None when it is off); with a model and a store
    backend it also draws facts about the user (mem0 extracts its own)."""
    if memory is None or not settings.memory_conversations:
        return None
    extractor = None
    if model is not None and isinstance(memory, StoreBackend):
        from retrievalagent.models import LLMFactExtractor

        extractor = LLMFactExtractor(model, retry)
    return ConversationWriter(memory, extractor)
