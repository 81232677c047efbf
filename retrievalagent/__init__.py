"""retrievalagent: retrieval agents with long-term memory, on LangGraph.

>>> from retrievalagent import init_agent
>>> rag = init_agent("docs", backend_url=":memory:")   # offline: no LLM, packaged embedder
"""

from __future__ import annotations

import os

# mem0 reads this when it is imported and otherwise reports usage over the network; an
# offline-first library must not let that happen by accident (the user's value wins).
os.environ.setdefault("MEM0_TELEMETRY", "False")

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
    "VectorIndexError",
    "collection_exists",
    "init_agent",
    "sample_docs_path",
]


def sample_docs_path() -> str:
    """The folder of sample documents that ships with the package (used by the demo)."""
    from importlib import resources

    return str(resources.files("retrievalagent") / "sample_docs")
