"""The agent's LangGraph: state, nodes and wiring."""

from retrievalagent._threads import TraceLog
from retrievalagent.graph._builder import NODE_NAMES, build_graph
from retrievalagent.graph._history import fifo_removals, history_for_model
from retrievalagent.graph._nodes import Components, Nodes
from retrievalagent.graph._state import AgentState

__all__ = [
    "NODE_NAMES",
    "AgentState",
    "Components",
    "Nodes",
    "TraceLog",
    "build_graph",
    "fifo_removals",
    "history_for_model",
]
