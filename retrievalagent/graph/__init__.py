"""The agent's LangGraph: state, nodes and wiring.

``AgentState`` is public: it is the state schema of ``rag.graph``, for composing it into a
bigger graph. The rest is what ``RetrievalAgent`` builds its graph with.
"""

from retrievalagent._threads import TraceLog
from retrievalagent.graph._builder import NODE_NAMES, build_graph
from retrievalagent.graph._nodes import Components, Nodes
from retrievalagent.graph._state import AgentState

__all__ = [
    "NODE_NAMES",
    "AgentState",
    "Components",
    "Nodes",
    "TraceLog",
    "build_graph",
]
