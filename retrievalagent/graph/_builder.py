"""Wiring the nodes into the agent's LangGraph.

```
START ─ prepare ─┬─ read_memory ─ lexical_search ─┐
                 └─ dense_search ─────────────────┴─ fuse ─ generate ─ final_grade ─┬─ write_memory ─ END
                        ↑                                                          │
                        └──────────── rewrite (insufficient, at most max_retries) ─┘
```

Memory recall runs beside the dense search (the question vector never depends on memory);
BM25 waits for recall because recalled text joins its query. An agent without a memory
backend runs the same nodes in one line (``read_memory`` then only records that it
skipped), since a parallel branch would buy nothing and costs a thread per turn.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.store.base import BaseStore

from retrievalagent.graph._nodes import Nodes
from retrievalagent.graph._state import AgentState

__all__ = ["NODE_NAMES", "build_graph"]

NODE_NAMES = (
    "prepare",
    "read_memory",
    "dense_search",
    "lexical_search",
    "fuse",
    "generate",
    "final_grade",
    "rewrite",
    "write_memory",
)


def _node(
    sync: Callable[..., Any], afunc: Callable[..., Awaitable[Any]] | None, name: str
) -> Runnable[Any, Any]:
    """One node with its sync and async bodies, in LangGraph's own wrapper (no extra
    tracing span per node) while it is where this LangGraph keeps it."""
    try:
        from langgraph._internal._runnable import RunnableCallable
    except ImportError:  # pragma: no cover - a future LangGraph moved it
        return RunnableLambda(sync, afunc=afunc, name=name)
    return RunnableCallable(sync, afunc, name=name, trace=False)


def build_graph(
    nodes: Nodes,
    *,
    checkpointer: BaseCheckpointSaver[Any] | None = None,
    store: BaseStore | None = None,
    name: str = "retrievalagent",
) -> CompiledStateGraph[Any, Any, Any, Any]:
    """The compiled graph for one agent."""
    graph = StateGraph(AgentState)
    graph.add_node("prepare", _node(nodes.prepare, nodes.aprepare, "prepare"))
    graph.add_node("read_memory", _node(nodes.read_memory, nodes.aread_memory, "read_memory"))
    graph.add_node("dense_search", _node(nodes.dense_search, nodes.adense_search, "dense_search"))
    graph.add_node(
        "lexical_search", _node(nodes.lexical_search, nodes.alexical_search, "lexical_search")
    )
    graph.add_node("fuse", _node(nodes.fuse, nodes.afuse, "fuse"))
    graph.add_node("generate", _node(nodes.generate, nodes.agenerate, "generate"))
    graph.add_node("final_grade", _node(nodes.final_grade, nodes.afinal_grade, "final_grade"))
    graph.add_node("rewrite", _node(nodes.rewrite, nodes.arewrite, "rewrite"))
    graph.add_node("write_memory", _node(nodes.write_memory, nodes.awrite_memory, "write_memory"))

    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "read_memory")
    if nodes.recall_in_parallel:
        # Recall overlaps the embedding and vector search; BM25 waits for it.
        graph.add_edge("prepare", "dense_search")
        graph.add_edge("read_memory", "lexical_search")
        graph.add_edge(["dense_search", "lexical_search"], "fuse")
    else:
        # Nothing to recall, so nothing to overlap: one line of steps, and no thread
        # hand-off (LangGraph runs each parallel branch of a sync run in a new thread).
        graph.add_edge("read_memory", "dense_search")
        graph.add_edge("dense_search", "lexical_search")
        graph.add_edge("lexical_search", "fuse")
    graph.add_edge("fuse", "generate")
    graph.add_edge("generate", "final_grade")
    graph.add_conditional_edges("final_grade", nodes.after_grade, ["rewrite", "write_memory"])
    graph.add_conditional_edges(
        "rewrite", nodes.after_rewrite, ["dense_search", "lexical_search", "write_memory"]
    )
    graph.add_edge("write_memory", END)
    return graph.compile(checkpointer=checkpointer, store=store, name=name)
