"""retrievalagent: retrieval agents with long-term memory, on LangGraph.

>>> from retrievalagent import init_agent
>>> rag = init_agent("docs", backend_url=":memory:")   # offline: no LLM, packaged embedder
"""

from __future__ import annotations

from retrievalagent.agent import RetrievalAgent, collection_exists, init_agent
from retrievalagent.config import Settings
from retrievalagent.errors import (
    ConfigError,
    IngestError,
    ModelError,
    RetrievalAgentError,
    VectorIndexError,
)
from retrievalagent.ingest import IngestInterrupted, IngestReport
from retrievalagent.trace import TraceEvent
from retrievalagent.types import AgentResult, DrainReport, Grade, Source, StreamEvent

__version__ = "0.1.0"

__all__ = [
    "AgentResult",
    "ConfigError",
    "DrainReport",
    "Grade",
    "IngestError",
    "IngestInterrupted",
    "IngestReport",
    "ModelError",
    "RetrievalAgent",
    "RetrievalAgentError",
    "Settings",
    "Source",
    "StreamEvent",
    "TraceEvent",
    "VectorIndexError",
    "collection_exists",
    "init_agent",
    "sample_docs_path",
]


def sample_docs_path() -> str:
    """The folder of sample documents that ships with the package (used by the demo)."""
    from importlib import resources

    return str(resources.files("retrievalagent") / "sample_docs")
