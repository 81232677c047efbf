"""``init_agent`` and the agent it returns: ingestion, questions, streaming, memory, threads."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import hashlib
import math
import warnings
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypedDict, cast

from langchain_core.embeddings import Embeddings
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore
from langgraph.types import Overwrite, StreamMode
from typing_extensions import Unpack

from retrievalagent import _build
from retrievalagent._inputs import (
    NAMED_AFTER_WHAT_WAS_SAID,
    check_id,
    check_name,
    check_top_k,
    clean_question,
)
from retrievalagent._override import Overrides
from retrievalagent._threads import call_with_timeout, in_thread
from retrievalagent.config import Settings, call_settings, check_collection
from retrievalagent.errors import ConfigError
from retrievalagent.graph import Components, Nodes, TraceLog, build_graph
from retrievalagent.index import Condition, LexicalEncoder, VectorIndex
from retrievalagent.ingest import (
    IngestInterrupted,
    Ingestor,
    IngestReport,
    read_inputs,
    source_key,
)
from retrievalagent.memory import (
    CONVERSATION,
    CONVERSATION_KEYS,
    JOINED,
    PREFERENCE,
    PREFERENCE_WORDS,
    BackgroundWrites,
    ConversationRecord,
    ConversationWriter,
    Imported,
    Mem0Backend,
    MemoryBackend,
    MemoryHit,
    MemoryReader,
    RecallRequest,
    Said,
    StoreBackend,
    earliest,
    memory_info,
    parse_time,
    said_in,
    unread_keys,
    unread_warning,
    user_id_from_config,
)
from retrievalagent.models import Answerer, Grader, Rewriter, resolve_model, resolve_reranker
from retrievalagent.persistence import (
    ThreadInfo,
    Threads,
    question_title,
    resolve_checkpointer,
    resolve_store,
)
from retrievalagent.retrieval import (
    HybridRetriever,
    HybridSearcher,
    QueryEmbedder,
    Reranker,
    to_document,
    to_source,
)
from retrievalagent.types import (
    AgentResult,
    DrainReport,
    MemoryInfo,
    Recollection,
    StreamEvent,
    readable_recollection,
)

if TYPE_CHECKING:
    from langchain_core.documents import BaseDocumentCompressor
    from mem0 import AsyncMemory, Memory
    from qdrant_client import QdrantClient

__all__ = ["STREAM_MODES", "RetrievalAgent", "collection_exists", "init_agent"]

collection_exists = _build.collection_exists

#: Texts ``remember_many`` embeds in one call and writes in one batch: large enough for the
#: embedder's best speed, small enough to bound the vectors held at once and to keep the
#: chunks already written when a later one fails.
_REMEMBER_CHUNK = 512


class _LeftOut(enum.Enum):
    """``forget``'s default for an argument not given, told apart from an explicit None."""

    LEFT_OUT = "left out"

    def __repr__(self) -> str:
        return "<left out: everything>"


_LEFT_OUT: Final = _LeftOut.LEFT_OUT


def _warn_unread(imports: list[Imported]) -> None:
    """One warning naming the message keys an import does not read, at its caller's line
    (``remember`` and the like call this: the warning points past them)."""
    unread = [key for item in imports for key in item.unread]
    if unread:
        warnings.warn(unread_warning(unread), UserWarning, stacklevel=3)


def _stored_infos(stored: Sequence[MemoryHit]) -> list[MemoryInfo]:
    """What ``remember`` reports stored: not the current fact an older one joined (as its
    history), which was there before."""
    return [memory_info(h) for h in stored if h.matched != JOINED]


def _conversation_parts(conversation: Any, place: int) -> tuple[Any, Any, Any]:
    """The messages, thread id and time of one of ``remember_many``'s conversations."""
    if not isinstance(conversation, Mapping):
        if isinstance(conversation, str | bytes) or not isinstance(conversation, Iterable):
            raise ConfigError(
                f"conversations[{place}] is a {type(conversation).__name__}: expected a list "
                'of messages or a dict with "messages"'
            )
        return conversation, None, None
    if "messages" not in conversation and {"role", "content"} & set(conversation):
        raise ConfigError(
            f"conversations[{place}] is a message: remember_many takes a list of "
            "conversations, each a list of messages (remember takes one conversation)"
        )
    unknown = set(conversation) - set(CONVERSATION_KEYS)
    if "messages" not in conversation or unknown:
        what = f"unknown keys {sorted(map(str, unknown))}" if unknown else "no messages"
        raise ConfigError(
            f'conversations[{place}]: {what}; expected "messages" and optionally "thread_id" '
            'and "at"'
        )
    return conversation["messages"], conversation.get("thread_id"), conversation.get("at")


def _as_messages(history: Sequence[Any] | None) -> list[AnyMessage]:
    """Conversation history from messages, ``(role, text)`` pairs or ``{"role", "content"}``."""
    out: list[AnyMessage] = []
    for item in history or []:
        if isinstance(item, BaseMessage):
            out.append(item)  # type: ignore[arg-type]
            continue
        if isinstance(item, Mapping):
            role, text = item.get("role"), item.get("content")
        elif isinstance(item, tuple | list) and len(item) == 2:
            role, text = item
        else:
            raise ConfigError(
                "history items must be messages, (role, text) pairs or {'role', 'content'} dicts, "
                f"not {item!r}"
            )
        role = str(role).lower()
        if role in ("user", "human"):
            out.append(HumanMessage(str(text)))
        elif role in ("assistant", "ai"):
            out.append(AIMessage(str(text)))
        elif role == "system":
            out.append(SystemMessage(str(text)))
        else:
            raise ConfigError(
                f"history role {role!r} is invalid: expected user, assistant or system"
            )
    return out


class _IngestOptions(TypedDict, total=False):
    """The keyword arguments of :meth:`RetrievalAgent.add_documents`."""

    metadata: Mapping[str, Any] | None
    progress: bool | None
    keep_missing: bool


STREAM_MODES: list[StreamMode] = ["updates", "messages", "custom", "values"]
"""The LangGraph stream modes :meth:`RetrievalAgent.stream` reads ``rag.graph`` with: pass
them to ``rag.graph.stream(..., stream_mode=STREAM_MODES)`` to get the same chunks. A list,
since LangGraph tags each chunk with its mode only when given a list."""


class _StreamTurn:
    """Translates one streamed turn's LangGraph chunks into :class:`StreamEvent`\\ s: the
    logic :meth:`RetrievalAgent.stream` and :meth:`RetrievalAgent.astream` share."""

    def __init__(self) -> None:
        self.final: Mapping[str, Any] = {}  # the last full state, for the result event

    def events(self, part: Any) -> Iterator[StreamEvent]:
        """The events one ``(mode, chunk)`` pair of the graph's stream gives (none or one)."""
        mode, chunk = part
        if mode == "values":
            self.final = chunk
        elif (event := _stream_event(mode, chunk)) is not None:
            yield event


def _stream_event(mode: str, chunk: Any) -> StreamEvent | None:
    """A node update or an answer token; None for chunks the caller does not see."""
    if mode == "updates":
        for node, update in chunk.items():
            plain = {
                key: value.value if isinstance(value, Overwrite) else value
                for key, value in (update or {}).items()
            }
            return StreamEvent(type="node", node=node, update=plain)
    if mode == "messages":
        message, meta = chunk
        if meta.get("langgraph_node") == "generate" and getattr(message, "content", ""):
            text = _text(message.content)
            if text:
                return StreamEvent(type="token", text=text)
    if mode == "custom" and isinstance(chunk, Mapping) and "token" in chunk:
        return StreamEvent(type="token", text=str(chunk["token"]))
    return None


def _owner(user_id: Any) -> str | None:
    """A ``list_threads`` filter: a user id as runs record it (checked, never trimmed)."""
    return None if user_id is None else check_id(user_id, "user_id")


def _text(content: str | list[Any]) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if isinstance(b, dict))


class RetrievalAgent:
    """A retrieval agent over one collection. Build it with :func:`init_agent`."""

    def __init__(
        self,
        *,
        collection: str,
        settings: Settings,
        embeddings: Embeddings,
        model: BaseChatModel | None,
        index: VectorIndex,
        components: Components,
        graph: CompiledStateGraph[Any, Any, Any, Any],
        nodes: Nodes,
        checkpointer: BaseCheckpointSaver[Any] | None,
        store: BaseStore | None,
        exit_stack: contextlib.ExitStack,
        dimension: int | None = None,
    ) -> None:
        self.collection = collection
        self.settings = settings
        self.embeddings = embeddings
        self.model = model
        self.index = index
        self.checkpointer = checkpointer
        self.memory_store = store
        self.graph = graph
        self._components = components
        self._nodes = nodes
        self._stateless: CompiledStateGraph[Any, Any, Any, Any] | None = None
        self._exit = exit_stack
        self._ingestor = Ingestor(
            index,
            embeddings,
            components.searcher.encoder,
            settings.chunk_size,
            settings.chunk_overlap,
            window=settings.ingest_window,
            dimension=dimension,
        )
        self._overrides = Overrides(
            {
                "answerer": (components, "answerer"),
                "grader": (components, "grader"),
                "rewriter": (components, "rewriter"),
                "ingest_embeddings": (self._ingestor, "embeddings"),
                "searcher": (components, "searcher"),
            }
        )

    def __repr__(self) -> str:
        model = "offline" if self.model is None else type(self.model).__name__
        return (
            f"RetrievalAgent(collection={self.collection!r}, model={model}, "
            f"index={self.index.location!r}, memory={self.memory_backend_name})"
        )

    @property
    def memory(self) -> MemoryBackend | None:
        """The long-term memory backend (None when memory is off)."""
        return self._components.memory

    @property
    def memory_backend_name(self) -> str | None:
        return None if self._components.memory is None else self._components.memory.name

    @property
    def offline(self) -> bool:
        """True when no chat model is configured (extractive answers, evidence grades)."""
        return self.model is None

    # -- the parts, for tests, benchmarks and tools ------------------------------------------
    @property
    def searcher(self) -> HybridSearcher:
        """The hybrid searcher behind :meth:`search` and the graph (its ``encoder`` and
        ``embedder`` too): read-only; swap parts with :meth:`override`."""
        return self._components.searcher

    @property
    def answerer(self) -> Answerer:
        """Who writes the answers: the chat model, or the extractive answerer offline."""
        return self._components.answerer

    @property
    def grader(self) -> Grader:
        """Who grades the answers: the chat model, or the evidence grader offline."""
        return self._components.grader

    @property
    def rewriter(self) -> Rewriter:
        """Who rewrites the query after an insufficient answer."""
        return self._components.rewriter

    @contextlib.contextmanager
    def override(
        self,
        *,
        answerer: Answerer | None = None,
        grader: Grader | None = None,
        rewriter: Rewriter | None = None,
        ingest_embeddings: Embeddings | None = None,
        searcher: HybridSearcher | None = None,
    ) -> Iterator[RetrievalAgent]:
        """Swap parts of this agent inside a ``with`` block, like pydantic-ai's
        ``Agent.override``: for tests, benchmarks and fault injection, without rebuilding.

        ``with rag.override(grader=MyGrader(rag.grader)): rag.invoke(...)``. A part left
        ``None`` is kept. ``ingest_embeddings`` embeds the chunks :meth:`add_documents`
        writes (questions still use :attr:`embeddings`, so give vectors of the same
        model). ``searcher`` replaces the hybrid search behind :meth:`search` and the graph
        (one over this agent's index: ``eval`` passes a subclass that also keeps the
        candidate lists). Every part is restored on exit, also when the block raises; overrides
        nest, and blocks that overlap in other tasks or threads leave the agent as built
        once the last one exits. The swap is seen by every call on this agent meanwhile,
        from any thread.

        Raises:
            ConfigError: a part lacks what its role needs (e.g. an answerer without
                ``aanswer`` or ``streams_tokens``), named on entry rather than mid-turn.
        """
        parts = {
            "answerer": answerer,
            "grader": grader,
            "rewriter": rewriter,
            "ingest_embeddings": ingest_embeddings,
            "searcher": searcher,
        }
        with self._overrides.layer(parts):
            yield self

    # -- ingestion -------------------------------------------------------------------
    def add_documents(
        self,
        inputs: Any,
        *,
        metadata: Mapping[str, Any] | None = None,
        progress: bool | None = None,
        keep_missing: bool = False,
    ) -> IngestReport:
        """Index files, folders, ``Document``\\ s or strings; unchanged ones are skipped.

        Each source's new chunks appear at once, when all are written; an interrupted run
        leaves every source fully old, fully new or absent, and the next run finishes it.

        Args:
            inputs: One item or a list of: paths (files or folders of Markdown, text, HTML),
                LangChain ``Document``\\ s, or text strings.
            metadata: Added to every chunk's metadata (a ``Document``'s own metadata wins).
            progress: Show a progress bar (default: only on a terminal).
            keep_missing: Keep the indexed files of a given folder that are no longer in it
                (by default a folder is mirrored: they are removed, and the report lists them).

        Raises:
            IngestInterrupted: on Ctrl-C; its ``report`` lists the finished sources.
        """
        try:
            read = read_inputs(inputs, metadata)
        except KeyboardInterrupt:  # still reading: nothing was written, none finished
            raise IngestInterrupted(IngestReport()) from None
        mirror = [] if keep_missing else read.folders
        return self._ingestor.ingest(
            read.docs, progress=progress, mirror=mirror, unread=read.unread
        )

    async def aadd_documents(self, inputs: Any, **options: Unpack[_IngestOptions]) -> IngestReport:
        """Async :meth:`add_documents` (same arguments), run in a worker thread."""
        import asyncio

        return await asyncio.to_thread(self.add_documents, inputs, **options)

    def delete_documents(
        self, source: str | Path | None = None, *, filter: Mapping[str, Any] | None = None
    ) -> int:
        """Delete the chunks of a source (a file path, a folder path, or a source id) or of
        every chunk matching a metadata ``filter``. Returns the number of chunks deleted."""
        conditions = self._components.searcher.conditions(filter)
        if source is None:
            if not filter:
                raise ConfigError("delete_documents needs a source or a filter")
            return self.index.delete(conditions)
        keys = self.sources_under(source)
        return sum(self.index.delete([Condition("source", "match", k), *conditions]) for k in keys)

    def sources_under(self, source: str | Path) -> list[str]:
        """The indexed sources ``source`` names: a file's, every file's under a folder, or
        a source id as listed by :meth:`sources`.

        Raises:
            ConfigError: ``source`` is empty, or a root-like folder (``/``, ``~``, ``.``
                when it is the home or root folder) that would name every file.
        """
        text = str(source).strip() if isinstance(source, str | Path) else None
        if not text:
            raise ConfigError(
                f"a source to delete must be a non-empty path or source id, not {source!r}"
            )
        path = Path(text).expanduser()
        try:
            exists, is_dir = path.exists(), path.is_dir()
        except (OSError, ValueError):
            exists = is_dir = False
        if not exists:  # a source id, or a file deleted from disk since it was indexed
            indexed = self.index.sources()
            with contextlib.suppress(OSError, ValueError):
                text = text if text in indexed else source_key(path)
            return [text] if text in indexed else []
        resolved = source_key(path)
        if not is_dir:  # a file on disk: named only if it is indexed
            return [resolved] if resolved in self.index.sources() else []
        if resolved in ("/", source_key(Path.home())) or len(Path(resolved).parts) < 2:
            raise ConfigError(
                f"refusing to delete every source under {resolved!r} (a root or home folder); "
                "name the folder you ingested, or a file"
            )
        prefix = resolved.rstrip("/") + "/"
        return [s for s in self.index.sources() if s.startswith(prefix)]

    def sources(self) -> dict[str, int]:
        """Every indexed source and its number of chunks."""
        return self.index.sources()

    def count(self) -> int:
        """The number of chunks in the collection."""
        return self.index.count()

    # -- retrieval only ----------------------------------------------------------------
    def search(
        self, query: str, *, top_k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        """Hybrid search without an answer: the fused passages, best first."""
        query, top_k = self._search_args(query, top_k)
        hits, _ = self._components.searcher.search(query, top_k, filter)
        return [to_source(h) for h in hits]

    def _search_args(self, query: str, top_k: int | None) -> tuple[str, int]:
        text = clean_question(query, self.settings.max_question_chars)
        return text, self.settings.top_k if top_k is None else check_top_k(top_k)

    async def asearch(
        self, query: str, *, top_k: int | None = None, filter: Mapping[str, Any] | None = None
    ) -> list[dict[str, Any]]:
        query, top_k = self._search_args(query, top_k)
        hits = await self._components.searcher.asearch(query, top_k, filter)
        return [to_source(h) for h in hits]

    def as_retriever(
        self,
        *,
        k: int | None = None,
        top_k: int | None = None,
        filter: Mapping[str, Any] | None = None,
        search_kwargs: Mapping[str, Any] | None = None,
    ) -> HybridRetriever:
        """A LangChain ``BaseRetriever`` over the same hybrid search.

        ``k`` and ``top_k`` are one setting (default: ``settings.top_k``); both, and
        ``filter``, may also be given per call: ``retriever.invoke(question, k=1)``. As with
        LangChain's ``VectorStore.as_retriever``, they may instead come in
        ``search_kwargs={"k": 2, "filter": {...}}`` (``top_k`` too); any other key there is a
        ``ConfigError`` naming it. The documents keep the metadata they were ingested with;
        the chunk id is ``Document.id`` and the library's fields are under
        ``metadata["retrievalagent"]``.
        """
        given: dict[str, Any] = {"k": k, "top_k": top_k, "filter": filter}
        if search_kwargs is not None:
            if not isinstance(search_kwargs, Mapping):
                raise ConfigError(
                    f"search_kwargs must be a dict, not {type(search_kwargs).__name__}"
                )
            unknown = sorted(str(key) for key in search_kwargs if key not in given)
            if unknown:
                raise ConfigError(
                    f"search_kwargs has unknown keys {', '.join(map(repr, unknown))}; "
                    "accepted: 'k', 'top_k', 'filter'"
                )
            for key, value in search_kwargs.items():
                if given[key] is not None and value is not None and given[key] != value:
                    raise ConfigError(
                        f"{key} given twice with different values ({given[key]!r} and "
                        f"search_kwargs[{key!r}]={value!r})"
                    )
                if value is not None:
                    given[key] = value
        k, top_k, filter = given["k"], given["top_k"], given["filter"]  # now checked
        if k is not None and top_k is not None and k != top_k:
            raise ConfigError(f"give k or top_k, not both (k={k!r}, top_k={top_k!r})")
        self._components.searcher.conditions(filter)  # validate now, with a clear error
        count = k if k is not None else top_k
        return HybridRetriever(
            searcher=self._components.searcher,
            top_k=self.settings.top_k
            if count is None
            else check_top_k(count, "k" if k is not None else "top_k"),
            filter=dict(filter) if filter else None,
            max_query_chars=self.settings.max_question_chars,
        )

    # -- questions -------------------------------------------------------------------
    def _input(
        self, question: str | Mapping[str, Any], filter: Mapping[str, Any] | None
    ) -> dict[str, Any]:
        if isinstance(question, Mapping):
            payload = dict(question)
            payload.setdefault("filter", dict(filter) if filter else None)
            return payload
        question = clean_question(question, self.settings.max_question_chars)
        if filter is not None:
            self._components.searcher.conditions(filter)  # validate now, with a clear error
        return {"question": question, "filter": dict(filter) if filter else None}

    def graph_args(
        self,
        question: str | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> tuple[dict[str, Any], RunnableConfig]:
        """The input and the checked config :meth:`invoke` gives :attr:`graph`, for driving
        the graph yourself with LangGraph options this class does not pass on
        (``rag.graph.invoke(*rag.graph_args(q, config), durability="exit")``).

        Raises:
            ConfigError: the question, filter or config is invalid (as :meth:`invoke`).
        """
        run = self._config(config, self.graph)
        return self._input(question, filter), run

    def _config(
        self, config: RunnableConfig | None, graph: CompiledStateGraph[Any, Any, Any, Any]
    ) -> RunnableConfig:
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(
                "config must be a dict such as {'configurable': {'thread_id': '...'}}, "
                f"not {type(config).__name__}"
            )
        run = cast(RunnableConfig, dict(config or {}))
        if not isinstance(run.get("configurable") or {}, Mapping):
            raise ConfigError(
                f"config['configurable'] must be a dict, not {type(run['configurable']).__name__}"
            )
        configurable = dict(run.get("configurable") or {})
        if configurable.get("thread_id") is not None:
            thread_id = check_name(configurable["thread_id"], "thread_id")
            configurable["thread_id"] = thread_id  # a string: LangGraph mishandles 0
        if graph.checkpointer is not None and configurable.get("thread_id") is None:
            raise ConfigError(
                "this agent has a checkpointer, so each call needs a thread id: "
                "config={'configurable': {'thread_id': '...'}}"
            )
        call_settings(configurable)  # a bad per-call setting is refused before any work
        metadata = dict(run.get("metadata") or {})
        metadata.setdefault("user_id", user_id_from_config(run))
        metadata.setdefault("collection", self.collection)
        run["metadata"] = metadata
        run["configurable"] = configurable
        return run

    @staticmethod
    def _result(state: Mapping[str, Any], config: RunnableConfig) -> AgentResult:
        result = AgentResult(state)
        result["documents"] = [to_document(s) for s in state.get("sources") or []]
        result.setdefault("thread_id", (config.get("configurable") or {}).get("thread_id"))
        return result

    def invoke(
        self,
        question: str | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> AgentResult:
        """Answer one question (one turn of the thread named in ``config``, if any).

        Args:
            question: The question, or a graph input mapping (``{"messages": [...]}``).
            config: LangGraph config; ``configurable.thread_id`` selects the conversation
                (with a checkpointer), ``configurable.user_id`` the memory owner, and
                ``configurable.top_k``, ``fetch_k``, ``rerank_k``, ``memory_term_weight``
                and ``max_retries`` replace those settings for this call only
                (``retrievalagent.config.PER_CALL``), checked as ``init_agent`` checks them.
            filter: Restrict retrieval to chunks whose metadata match.

        Raises:
            ConfigError: the question, filter or config is invalid (a bad per-call setting
                is named ``configurable.<name>``).
        """
        self._refuse_blocking_own_loop("invoke", "ainvoke")
        payload, run = self.graph_args(question, config, filter=filter)
        return self._result(self.graph.invoke(payload, run), run)

    async def ainvoke(
        self,
        question: str | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> AgentResult:
        """Async :meth:`invoke`; memory writes run as tasks on the caller's loop."""
        payload, run = self.graph_args(question, config, filter=filter)
        return self._result(await self.graph.ainvoke(payload, run), run)

    def stream(
        self,
        question: str | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> Iterator[StreamEvent]:
        """Yield node updates (``type="node"``) and answer pieces (``type="token"``) as they
        happen, then the final result (``type="result"``). ``config`` as in :meth:`invoke`
        (per-call settings included)."""
        self._refuse_blocking_own_loop("stream", "astream")
        payload, run = self.graph_args(question, config, filter=filter)
        turn = _StreamTurn()
        for part in self.graph.stream(payload, run, stream_mode=STREAM_MODES):
            yield from turn.events(part)
        yield StreamEvent(type="result", result=self._result(turn.final, run))

    async def astream(
        self,
        question: str | Mapping[str, Any],
        config: RunnableConfig | None = None,
        *,
        filter: Mapping[str, Any] | None = None,
    ) -> AsyncIterator[StreamEvent]:
        """Async :meth:`stream`."""
        payload, run = self.graph_args(question, config, filter=filter)
        turn = _StreamTurn()
        async for part in self.graph.astream(payload, run, stream_mode=STREAM_MODES):
            for event in turn.events(part):
                yield event
        yield StreamEvent(type="result", result=self._result(turn.final, run))

    def _stateless_graph(self) -> CompiledStateGraph[Any, Any, Any, Any]:
        if self._stateless is None:
            self._stateless = build_graph(self._nodes, store=self.memory_store)
        return self._stateless

    def _chat_args(
        self, question: str, history: Sequence[Any] | None, config: RunnableConfig | None
    ) -> tuple[CompiledStateGraph[Any, Any, Any, Any], dict[str, Any], RunnableConfig]:
        """The graph without a checkpointer, and its input and config for one chat turn."""
        graph = self._stateless_graph()
        run = self._config(config, graph)
        question = clean_question(question, self.settings.max_question_chars)
        payload = {"messages": [*_as_messages(history), HumanMessage(question)], "filter": None}
        return graph, payload, run

    def chat(
        self,
        question: str,
        history: Sequence[Any] | None = None,
        config: RunnableConfig | None = None,
    ) -> str:
        """Multi-turn without persistence: answer ``question`` given earlier ``history``.

        ``history`` holds messages, ``(role, text)`` pairs or ``{"role", "content"}`` dicts.
        Returns the answer text; use :meth:`invoke` for sources and trace.
        """
        self._refuse_blocking_own_loop("chat", "achat")
        graph, payload, run = self._chat_args(question, history, config)
        return str(graph.invoke(payload, run)["answer"])

    async def achat(
        self,
        question: str,
        history: Sequence[Any] | None = None,
        config: RunnableConfig | None = None,
    ) -> str:
        graph, payload, run = self._chat_args(question, history, config)
        return str((await graph.ainvoke(payload, run))["answer"])

    # -- conversations ---------------------------------------------------------------------
    # (owned by the persistence work: threads kept by the checkpointer; logic lives in
    # retrievalagent/persistence/_thread_index.py)
    @property
    def threads(self) -> Threads:
        """The conversations this agent's checkpointer keeps."""
        return Threads(self.graph, self.collection)

    def list_threads(
        self, user_id: str | None = None, *, limit: int | None = None
    ) -> list[ThreadInfo]:
        """A user's conversations in this collection, most recently updated first.

        Each has its thread id, title (the first question, or a few words from the model),
        creation and last-update times and message count. ``user_id=None`` lists every
        user's; threads run without a user id belong to ``"default"``.
        """
        return self.threads.list(_owner(user_id), limit)

    async def alist_threads(
        self, user_id: str | None = None, *, limit: int | None = None
    ) -> list[ThreadInfo]:
        """Async :meth:`list_threads` (needed with async checkpointers)."""
        return await self.threads.alist(_owner(user_id), limit)

    def get_history(self, thread_id: str) -> list[AnyMessage]:
        """The messages of a thread's current branch, oldest first (empty if unknown)."""
        return self.threads.history(thread_id)

    async def aget_history(self, thread_id: str) -> list[AnyMessage]:
        return await self.threads.ahistory(thread_id)

    def delete_thread(self, thread_id: str) -> bool:
        """Delete a thread's checkpoints (and so its entry in :meth:`list_threads`).

        What memory learned in the thread stays (``forget(user_id, thread_id=...)`` erases
        it). Returns False when this collection has no such thread.
        """
        return self.threads.delete(thread_id)

    async def adelete_thread(self, thread_id: str) -> bool:
        return await self.threads.adelete(thread_id)

    def _regenerate_config(self, config: RunnableConfig | None) -> RunnableConfig:
        if not ((config or {}).get("configurable") or {}).get("thread_id"):
            raise ConfigError(
                "regenerate needs the thread: config={'configurable': {'thread_id': '...'}}"
            )
        return dict(config)  # type: ignore[arg-type, return-value]

    def regenerate(self, config: RunnableConfig) -> AgentResult:
        """Answer the thread's last question again, on a branch from before its answer.

        The thread then continues on the new branch: the replaced answer is no longer in
        its history and is never sent to the model again. ``configurable.checkpoint_id``
        (optional) picks an older point of the thread to regenerate from.
        """
        self._refuse_blocking_own_loop("regenerate", "aregenerate")
        payload, branch = self.threads.branch(self._regenerate_config(config))
        run = self._config(branch, self.graph)
        return self._result(self.graph.invoke(payload, run), run)

    async def aregenerate(self, config: RunnableConfig) -> AgentResult:
        """Async :meth:`regenerate`."""
        payload, branch = await self.threads.abranch(self._regenerate_config(config))
        run = self._config(branch, self.graph)
        return self._result(await self.graph.ainvoke(payload, run), run)

    # -- what the agent remembers about a user ----------------------------------------------
    def _memory_for(self, user_id: str) -> tuple[MemoryBackend, str]:
        memory = self._components.memory
        if memory is None:
            raise ConfigError(
                "this agent has no long-term memory: pass memory_store=, mem0_memory= or "
                "memory=True to init_agent"
            )
        return memory, check_name(user_id, "user_id")

    def list_memories(self, user_id: str) -> list[MemoryInfo]:
        """Everything the agent remembers about ``user_id``, newest first by when it was
        said (waits for that user's writes still in flight, so the list includes the last
        turn's)."""
        self._refuse_blocking_own_loop("list_memories", "alist_memories")
        memory, user = self._memory_for(user_id)
        self._components.writes.wait_for(user, self.settings.memory_timeout)
        return [memory_info(hit) for hit in memory.list(user)]

    async def alist_memories(self, user_id: str) -> list[MemoryInfo]:
        """Async :meth:`list_memories`."""
        memory, user = self._memory_for(user_id)
        await self._components.writes.await_for(user, self.settings.memory_timeout)
        return [memory_info(hit) for hit in await memory.alist(user)]

    def forget(
        self,
        user_id: str,
        memory_id: str | _LeftOut = _LEFT_OUT,
        *,
        thread_id: str | _LeftOut = _LEFT_OUT,
    ) -> int:
        """Erase one memory of ``user_id`` (by the id ``list_memories`` shows), everything
        remembered from one conversation (``thread_id``), or, with both left out, all of
        it; returns how many were erased (0 when ``memory_id`` is not theirs). Either one
        given as None is a ``ConfigError``: a variable that happened to hold nothing must
        not erase the whole user."""
        self._refuse_blocking_own_loop("forget", "aforget")
        memory, user = self._memory_for(user_id)
        one, thread = _what_to_forget(user, memory_id, thread_id)
        self._components.writes.wait_for(user, self.settings.memory_timeout)
        self._forgetting(user, one, thread)
        return memory.forget(user, one, thread)

    async def aforget(
        self,
        user_id: str,
        memory_id: str | _LeftOut = _LEFT_OUT,
        *,
        thread_id: str | _LeftOut = _LEFT_OUT,
    ) -> int:
        """Async :meth:`forget`."""
        memory, user = self._memory_for(user_id)
        one, thread = _what_to_forget(user, memory_id, thread_id)
        await self._components.writes.await_for(user, self.settings.memory_timeout)
        self._forgetting(user, one, thread)
        return await memory.aforget(user, one, thread)

    def _forgetting(self, user: str, memory_id: str | None, thread: str | None) -> None:
        """Cancel the conversation writes still on their way (a fact a model is drawing):
        landing after this ``forget``, they would bring back what it erased."""
        if memory_id is None and (writer := self._components.writer) is not None:
            writer.forgetting(user, thread)

    # -- conversation memory -----------------------------------------------------------------
    def _writer_for(self, user_id: str) -> tuple[ConversationWriter, str]:
        """The conversation writer and the checked user id of an import."""
        _, user = self._memory_for(user_id)
        writer = self._components.writer
        if writer is None:
            raise ConfigError(
                "conversation memory is off (memory_conversations=False or "
                "RAG_MEMORY_CONVERSATIONS=false): nothing would be remembered"
            )
        return writer, user

    def _history(
        self, messages: Any, user_id: str, thread_id: str | None, at: Any
    ) -> tuple[ConversationWriter, list[Said], dict[str, Any]]:
        """An imported conversation checked: its messages, and where and when it was had."""
        writer, user = self._writer_for(user_id)
        try:
            # dated by its messages where they say when they were said; given, ``at`` wins
            said = said_in(messages, times=at is None)
            if at is None:
                at = earliest(said) or None
            when = parse_time(at, past=True)
        except (ValueError, TypeError) as exc:
            raise ConfigError(str(exc)) from None
        first = next((m.content for m in said if m.role == "user"), said[0].content)
        if thread_id is None:  # named after what was said, so importing it again is a no-op
            # and who said it, with the messages' ids where they have them: Sam's "I quit
            # today." and Ann's were one thread, and forgetting one erased both
            digest = hashlib.sha256(repr([_identity(m) for m in said]).encode())
            thread = f"imported-{digest.hexdigest()[:16]}"
        else:
            thread = check_name(thread_id, "thread_id", NAMED_AFTER_WHAT_WAS_SAID)
        where = {
            "user_id": user,
            "thread_id": thread,
            "at": None if at is None else when,  # none given: now, and not part of its key
            "title": question_title(first),
        }
        return writer, said, where

    def remember(
        self,
        messages: Sequence[BaseMessage | Mapping[str, Any]],
        *,
        user_id: str,
        thread_id: str | None = None,
        at: Any = None,
    ) -> list[MemoryInfo]:
        """Store an existing conversation as if ``user_id`` had had it with the agent.

        Args:
            messages: LangChain messages, or dicts ``{"role", "content", "name"?,
                "metadata"?}`` (``name`` is the speaker; ``metadata`` is kept with what is
                stored from that message, as its ``sources``). System and tool messages are
                skipped.
            user_id: Whose memory it becomes.
            thread_id: The conversation's id (``forget(user_id, thread_id=...)`` erases it).
            at: When it took place: a datetime, a date or an ISO 8601 string, for all of
                it (a naive datetime is local time, as Python reads one; a string without a
                zone, UTC; a date alone, noon UTC, that day in every zone within 12 hours).
                Default: the times its messages give (``"at"``, ``"timestamp"``,
                ``"created_at"`` or ``"create_time"``: an ISO string, a datetime, or
                seconds since 1970), each exchange dated by its own messages (one without
                a time as the exchange before it, the first as the earliest time given),
                else now.

        Returns:
            What was stored: the exchanges, the preferences the user stated in them (as a
            turn would have taught them), and, with a model and a store backend, facts
            about the user. Importing the same conversation again stores nothing new.

        Raises:
            ModelError: the agent's model failed while drawing facts (with mem0's own LLM,
                mem0's error). The exchanges of the conversations whose facts were not
                drawn are not kept, so running the same call again draws them; what was
                stored before the call, and the preferences it stored, stay.
        """
        self._refuse_blocking_own_loop("remember", "aremember")
        writer, imports, chunks = self._one_history(messages, user_id, thread_id, at)
        _warn_unread(imports)
        return self._store_imports(writer, imports, chunks)

    async def aremember(
        self,
        messages: Sequence[BaseMessage | Mapping[str, Any]],
        *,
        user_id: str,
        thread_id: str | None = None,
        at: Any = None,
    ) -> list[MemoryInfo]:
        """Async :meth:`remember`."""
        writer, imports, chunks = self._one_history(messages, user_id, thread_id, at)
        _warn_unread(imports)
        return await self._astore_imports(writer, imports, chunks)

    def _one_history(
        self, messages: Any, user_id: str, thread_id: str | None, at: Any
    ) -> tuple[ConversationWriter, list[Imported], list[list[ConversationRecord]]]:
        """:meth:`remember`'s conversation, checked, as an import of one."""
        writer, said, where = self._history(messages, user_id, thread_id, at)
        records = writer.exchanges(said, **where)
        keys = {r.key for r in records}
        return writer, [Imported(said, where, keys, unread_keys(messages))], [records]

    def _histories(
        self, conversations: Iterable[Any], user_id: str
    ) -> tuple[ConversationWriter, list[Imported], list[list[ConversationRecord]]]:
        """Every conversation of :meth:`remember_many` checked (a bad one names its place and
        stops the call before anything is stored), and their exchanges in chunks of
        ``_REMEMBER_CHUNK``, each chunk one embedding call and one write."""
        writer, _ = self._writer_for(user_id)  # the agent and the user first, once
        if isinstance(conversations, str | bytes | Mapping) or not isinstance(
            conversations, Iterable
        ):
            raise ConfigError(
                f"conversations must be a list of conversations, got "
                f"{type(conversations).__name__}: each a list of messages or a dict with "
                '"messages" (and optionally "thread_id" and "at")'
            )
        imports: list[Imported] = []
        records: list[ConversationRecord] = []
        held: set[str] = set()
        for place, conversation in enumerate(conversations):
            messages, thread_id, at = _conversation_parts(conversation, place)
            try:
                _, said, where = self._history(messages, user_id, thread_id, at)
            except ConfigError as exc:
                raise ConfigError(f"conversations[{place}]: {exc}") from None
            # as remembered one by one: a copy of an exchange already in the import is not
            fresh = {r.key: r for r in writer.exchanges(said, **where) if r.key not in held}
            held.update(fresh)
            records += fresh.values()
            unread = [f"conversations[{place}] {key}" for key in unread_keys(messages)]
            imports.append(Imported(said, where, set(fresh), unread))
        # two conversations of one thread at one time follow each other in the order given,
        # as when remembered one by one: their places count on (recall reads what was said
        # just before an exchange by its place)
        counted: Counter[tuple[str, str]] = Counter()
        for record in records:
            group = (record.thread_id, record.at)
            record.place, counted[group] = counted[group], counted[group] + 1
        chunks = [
            records[start : start + _REMEMBER_CHUNK]
            for start in range(0, len(records), _REMEMBER_CHUNK)
        ]
        return writer, imports, chunks

    def _store_imports(
        self,
        writer: ConversationWriter,
        imports: list[Imported],
        chunks: list[list[ConversationRecord]],
    ) -> list[MemoryInfo]:
        return _stored_infos(writer.store_import(chunks, imports, self.collection))

    async def _astore_imports(
        self,
        writer: ConversationWriter,
        imports: list[Imported],
        chunks: list[list[ConversationRecord]],
    ) -> list[MemoryInfo]:
        stored = await writer.astore_import(chunks, imports, self.collection)
        return _stored_infos(stored)

    def remember_many(self, conversations: Iterable[Any], *, user_id: str) -> list[MemoryInfo]:
        """:meth:`remember` for many conversations of ``user_id`` at once: the way to import
        a long history. Their texts are embedded together, 512 to a call, which
        runs 1.3x (InMemoryStore) to 1.4x (PostgresStore) as fast as one :meth:`remember`
        per conversation (the embedder works best on large batches; docs/benchmarks.md).

        Args:
            conversations: Each a list of messages (as :meth:`remember` takes them) or a
                dict ``{"messages": [...], "thread_id"?: str, "at"?: datetime | str}``.
            user_id: Whose memory they become.

        Returns:
            What was stored, as :meth:`remember` returns it (nothing for no conversations).
            Every conversation is checked first: a bad one is a ``ConfigError`` naming its
            place, and nothing is stored.
        """
        self._refuse_blocking_own_loop("remember_many", "aremember_many")
        checked = self._histories(conversations, user_id)
        _warn_unread(checked[1])
        return self._store_imports(*checked)

    async def aremember_many(
        self, conversations: Iterable[Any], *, user_id: str
    ) -> list[MemoryInfo]:
        """Async :meth:`remember_many`. The conversations are checked on a thread: a long
        history takes a noticeable time (0.4 s for 3,000) the loop need not wait for."""
        checked = await in_thread(lambda: self._histories(conversations, user_id))
        _warn_unread(checked[1])
        return await self._astore_imports(*checked)

    def _refuse_blocking_own_loop(self, method: str, async_twin: str) -> None:
        """A sync call from the thread of the loop an async memory store runs on is refused
        at once: it would wait for that loop, which it blocks, until ``memory_timeout``,
        and then blame the backend."""
        memory = self._components.memory
        if isinstance(memory, StoreBackend) and memory.answered_by_this_loop():
            raise ConfigError(
                f"{method}() was called from async code on the event loop the memory store "
                f"({type(memory.store).__name__}) runs on, where a blocking call cannot be "
                f"answered: use `await rag.{async_twin}(...)`"
            )

    def _recall_request(
        self, query: str, user_id: str, k: int, now: Any
    ) -> tuple[MemoryReader, RecallRequest, int]:
        """The checked request of :meth:`recall` (bad input: ``ConfigError`` naming it)."""
        _, user = self._memory_for(user_id)
        reader = self._components.reader
        assert reader is not None  # there is one with every memory backend
        question = clean_question(query, self.settings.max_question_chars)
        k = check_top_k(k, "k")
        try:
            when = parse_time(now, "now", past=True)
        except (TypeError, ValueError) as exc:
            raise ConfigError(str(exc)) from None
        return reader, reader.request(question, user, now=when, limit=k), k

    def recall(
        self, query: str, *, user_id: str, k: int = 10, now: Any = None
    ) -> list[Recollection]:
        """What the agent's ``read_memory`` would recall for ``query``: all kinds, best
        first (conversation memories in the prompt's order), at most ``k`` (search facts
        and conversation memories that clear their relevance bars, and the user's
        preferences). ``now`` is when the question counts
        as asked (a datetime, a date or an ISO string; default now), for "last week" and the
        like."""
        self._refuse_blocking_own_loop("recall", "arecall")
        reader, request, k = self._recall_request(query, user_id, k, now)
        timeout = self.settings.memory_timeout
        self._components.writes.wait_for(request.user_id, timeout)
        try:
            found = call_with_timeout(lambda: reader.read(request, limit=k), timeout, "recall")
        except TimeoutError:
            raise _recall_timeout(timeout) from None
        return _recollections(found.kept, k, self._preference_asked(query))

    async def arecall(
        self, query: str, *, user_id: str, k: int = 10, now: Any = None
    ) -> list[Recollection]:
        """Async :meth:`recall`."""
        reader, request, k = self._recall_request(query, user_id, k, now)
        timeout = self.settings.memory_timeout
        await self._components.writes.await_for(request.user_id, timeout)
        try:
            found = await asyncio.wait_for(reader.aread(request, limit=k), timeout)
        except (TimeoutError, asyncio.TimeoutError):
            raise _recall_timeout(timeout) from None
        return _recollections(found.kept, k, self._preference_asked(query))

    def _preference_asked(self, query: str) -> Callable[[MemoryHit], bool]:
        """Whether a recalled preference is what ``query`` asks about: they share a word
        (its instruction's, or its subject's: "language", "tone", "call me")."""
        encoder = self._components.searcher.encoder
        asked = set(encoder.query_terms(query))

        def about(hit: MemoryHit) -> bool:
            words = f"{hit.text} {hit.key} {PREFERENCE_WORDS.get(hit.key, '')}"
            return bool(asked.intersection(encoder.query_terms(words)))

        return about

    # -- background memory writes ----------------------------------------------------------
    def drain_background(self, timeout: float | None = None) -> DrainReport:
        """Wait for scheduled memory writes; returns counts of landed, failed and pending."""
        return self._components.writes.drain(timeout)

    async def adrain_background(self, timeout: float | None = None) -> DrainReport:
        """Await scheduled memory writes without blocking the loop."""
        return await self._components.writes.adrain(timeout)

    @property
    def background(self) -> BackgroundWrites:
        return self._components.writes

    # -- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        """Wait for memory writes (bounded by ``drain_timeout``), then release the index and
        anything ``init_agent`` opened."""
        self._components.writes.close(self.settings.drain_timeout)
        self.index.close()
        self._exit.close()

    async def aclose(self) -> None:
        """Async :meth:`close`: awaits memory writes without blocking the loop."""
        import asyncio

        await self._components.writes.adrain(self.settings.drain_timeout)
        await asyncio.to_thread(self.close)

    def __enter__(self) -> RetrievalAgent:
        return self

    async def __aenter__(self) -> RetrievalAgent:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __exit__(self, *exc: object) -> None:
        self.close()


def _what_to_forget(
    user: str, memory_id: object, thread_id: object
) -> tuple[str | None, str | None]:
    """``forget``'s memory id and thread, checked: None names nothing (passed on, it would
    erase everything the user has, with no word), a blank one names no memory and no
    conversation (a blank thread would match every memory kept outside one, preferences
    among them), and one memory is named by its id alone (with a thread too, a memory of
    another thread would be "not found" without a word)."""
    for name, given in (("memory_id", memory_id), ("thread_id", thread_id)):
        if given is None:
            raise ConfigError(
                f"forget({name}=None) would erase everything remembered about {user!r}: "
                f"give a {name}, or leave {name} out to erase everything on purpose"
            )
    if memory_id is not _LEFT_OUT and thread_id is not _LEFT_OUT:
        raise ConfigError("give forget a memory_id or a thread_id, not both")
    one = None
    if memory_id is not _LEFT_OUT:
        one = check_name(memory_id, "memory_id", "take one from list_memories()")
    thread = None
    if thread_id is not _LEFT_OUT:
        thread = check_name(thread_id, "thread_id", "leave it out to erase everything")
    return one, thread


def _recall_timeout(timeout: float) -> TimeoutError:
    """What a recall the memory backend did not answer in time raises: the bound a turn's
    read_memory keeps too (where it recalls nothing instead of failing the answer)."""
    return TimeoutError(
        f"recall: the memory backend did not answer within {timeout:g}s "
        "(memory_timeout, RAG_MEMORY_TIMEOUT)"
    )


def _identity(message: Said) -> tuple[str, ...]:
    """What names an imported message in its conversation's thread id: its role and words,
    then its speaker and id where it has them (a conversation without either keeps the
    id it was given before they counted)."""
    extra = (message.name, message.id) if message.name or message.id else ()
    return (message.role, message.content, *extra)


def _recollections(
    hits: Sequence[MemoryHit], k: int, asked: Callable[[MemoryHit], bool] = lambda _: False
) -> list[Recollection]:
    """Recalled memories as ``recall`` returns them: best first, those said in the time the
    question names before the rest (as the prompt has them; a stable sort keeps the order
    recall ranked equal scores in), at most ``k``. A preference is recalled whatever the
    question (its score is 1), so it comes first only when the question is about it
    (``asked``: "Which language do I want answers in?"), else after the rest: first, it
    took the place of what the question found ("which room is srv0213 in?" with ``k=1``
    gave "Keep answers short.").

    Conversation memories keep the order recall gave them, which the prompt shows: for a
    question about now, the newer statement before the one it changed, whatever their
    scores by words (sorted by score, ``k=2`` put "I live in Berlin." before "I moved from
    Berlin to Lisbon." that ``k=1`` returned alone). Among the other kinds each takes the
    place of the best score at or after it in that order. (Which memories ``k`` places
    hold is the reader's choice for ``k``, as for the prompt's count: a question naming a
    time keeps the last of few places for the best memory from outside it, so ``recall(k=2)``
    need not be the first two of ``recall(k=10)``.)"""
    ranked: dict[int, float] = {}
    lowest = -math.inf
    for hit in reversed([h for h in hits if h.kind == CONVERSATION]):
        lowest = max(lowest, hit.score)
        ranked[id(hit)] = lowest

    def place(hit: MemoryHit) -> tuple[bool, bool, float]:
        aside = hit.kind == PREFERENCE and not asked(hit)
        return aside, not hit.in_window, -ranked.get(id(hit), hit.score)

    ordered = sorted(hits, key=place)[:k]
    return [
        readable_recollection(
            Recollection(
                id=h.id,
                kind=h.kind,
                text=h.text,
                score=round(h.score, 4),
                thread_id=h.thread_id,
                at=h.at or h.updated_at,
                sources=list(h.sources),
                matched=h.matched,
            )
        )
        for h in ordered
    ]


def _trace_log(path: Path | str | None) -> TraceLog | None:
    """The trace file, refused now if it can never be written (not at the first turn's end)."""
    if not path:
        return None
    target = Path(path).expanduser()
    if target.is_dir():
        raise ConfigError(
            f"trace_file (RAG_TRACE_FILE) {str(target)!r} is a folder; give a file path"
        )
    if target.parent.exists() and not target.parent.is_dir():
        raise ConfigError(
            f"trace_file (RAG_TRACE_FILE) {str(target)!r} is inside {str(target.parent)!r}, "
            "which is a file, not a folder"
        )
    return TraceLog(target)


def init_agent(
    collection: str,
    *,
    model: BaseChatModel | str | None = None,
    backend: str | None = None,
    backend_url: str | None = None,
    embeddings: Embeddings | str | None = None,
    checkpointer: BaseCheckpointSaver[Any]
    | AbstractContextManager[BaseCheckpointSaver[Any]]
    | None = None,
    memory_store: BaseStore | AbstractContextManager[BaseStore] | None = None,
    mem0_memory: Mem0Backend | Memory | AsyncMemory | None = None,
    memory: bool = False,
    qdrant_client: QdrantClient | None = None,
    reranker: BaseDocumentCompressor | Reranker | str | None = None,
    **settings: Any,
) -> RetrievalAgent:
    """Build a retrieval agent over ``collection``.

    Args:
        collection: The corpus name (a Qdrant collection; a folder under the data dir).
        model: A chat model, an ``init_chat_model`` string such as ``"openai:gpt-5.4"``, or
            ``None`` for offline mode (extractive answers, no LLM). Env: ``RAG_MODEL``.
        backend: Vector backend; only ``"qdrant"``.
        backend_url: ``None`` for the embedded Qdrant engine on disk, ``":memory:"`` for a
            throwaway index, or ``"http(s)://host:6333"`` for a Qdrant server.
        embeddings: A LangChain ``Embeddings``, a ``"provider:model"`` string, or ``None`` for
            the packaged offline model.
        checkpointer: Any LangGraph checkpointer (or a ``from_conn_string(...)`` context
            manager, which is entered for you) for per-thread conversations.
        memory_store: A LangGraph ``BaseStore`` (or a context manager giving one) for
            per-user long-term memory.
        mem0_memory: A mem0 ``Memory`` / ``AsyncMemory``, or a ready
            :class:`~retrievalagent.memory.Mem0Backend` (wins over ``memory_store``).
        memory: ``True`` for an embedded mem0 built from this agent's model and embeddings.
        qdrant_client: A ready ``QdrantClient`` to use instead of ``backend_url``.
        reranker: Reorders the first ``rerank_k`` fused passages before ``top_k`` are
            kept: any LangChain ``BaseDocumentCompressor`` (FlashRank, a HuggingFace
            cross-encoder, Cohere, ...) or ``"llm"`` (a listwise rerank by ``model``).
            A reranker that fails leaves the fused order (an ``error`` in the trace).
        **settings: Any field of :class:`~retrievalagent.Settings` (``top_k``,
            ``memory_relevance_threshold``, ``data_dir``, ...); each also reads its
            ``RAG_*`` env var, and an explicit argument wins.

    Raises:
        ConfigError: an argument or env var is invalid; the message names it.
        VectorIndexError: the index cannot be opened (a Qdrant server is unreachable, the
            embedded index is open in another process, ...).
    """
    collection = check_collection(collection)
    _build.check_kinds(backend=backend, memory=memory, model=model, embeddings=embeddings)
    cfg = Settings.load(
        model=model if isinstance(model, str) else None,
        embeddings=embeddings if isinstance(embeddings, str) else None,
        backend=backend,
        backend_url=backend_url,
        **settings,
    )
    chat_model = resolve_model(model if isinstance(model, BaseChatModel) else cfg.model)
    retry = _build.retry_policy(cfg)
    rerank = resolve_reranker(reranker, chat_model, retry)
    base_embeddings = _build.load_embeddings(
        embeddings if isinstance(embeddings, Embeddings) else cfg.embeddings, cfg
    )
    embedder = QueryEmbedder(base_embeddings)
    exit_stack = contextlib.ExitStack()
    with contextlib.ExitStack() as on_error:  # emptied once the agent is built
        on_error.callback(exit_stack.close)
        saver = resolve_checkpointer(checkpointer, exit_stack)
        store = resolve_store(memory_store, exit_stack)
        index = _build.make_index(cfg, collection, qdrant_client)
        on_error.callback(index.close)
        dimension = _build.open_index(index, base_embeddings, embedder)
        encoder = LexicalEncoder()
        memory_backend = _build.make_memory(
            mem0_memory=mem0_memory,
            memory=memory,
            store=store,
            settings=cfg,
            collection=collection,
            model=chat_model,
            embeddings=base_embeddings,
            embedder=embedder,
            encoder=encoder,
            dimension=dimension,
            exit_stack=exit_stack,
        )
        roles = _build.make_roles(
            chat_model,
            retry,
            cfg,
            index=index,
            embedder=embedder,
            encoder=encoder,
            learn_aliases=memory_backend is not None,
        )
        components = Components(
            settings=cfg,
            searcher=_build.make_searcher(cfg, index, embedder, encoder, rerank),
            answerer=roles.answerer,
            grader=roles.grader,
            rewriter=roles.rewriter,
            memory=memory_backend,
            reader=_build.make_reader(memory_backend, encoder, cfg),
            writer=_build.make_writer(memory_backend, chat_model, retry, cfg),
            writes=BackgroundWrites(cfg.max_pending_writes, cfg.memory_timeout, cfg.drain_timeout),
            trace_log=_trace_log(cfg.trace_file),
            collection=collection,
            titler=_build.make_titler(chat_model, cfg, saver),
            keeps_threads=saver is not None,
            inline=roles.inline,
        )
        nodes = Nodes(components)
        graph = build_graph(
            nodes, checkpointer=saver, store=store, name=f"retrievalagent:{collection}"
        )
        on_error.pop_all()
    return RetrievalAgent(
        collection=collection,
        settings=cfg,
        embeddings=base_embeddings,
        model=chat_model,
        index=index,
        components=components,
        graph=graph,
        nodes=nodes,
        checkpointer=saver,
        store=store,
        exit_stack=exit_stack,
        dimension=dimension,
    )
