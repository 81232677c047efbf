"""Streaming: trace events as each node finishes, then the answer piece by piece.

``rag.stream`` yields dicts: ``{"type": "node", "node": ..., "update": ...}`` when a node
finishes, ``{"type": "token", "text": ...}`` for each piece of the answer (an LLM's tokens;
words of an extractive answer) and, last, ``{"type": "result", "result": ...}``.
"""

from __future__ import annotations

import asyncio

from _common import HANDBOOK, scratch_data_dir

from retrievalagent import init_agent


def show_sync(rag) -> None:
    answer = []
    for event in rag.stream("What does error LF-409 mean?"):
        if event["type"] == "node":
            update = event["update"]
            extra = f" ({len(update['sources'])} passages)" if update.get("sources") else ""
            print(f"[node] {event['node']}{extra}")
        elif event["type"] == "token":
            answer.append(event["text"])
            print(event["text"], end="", flush=True)
        else:
            print(f"\n[result] {len(event['result'].sources)} sources")
    assert "".join(answer).strip() == event["result"].answer


async def show_async(rag) -> None:
    nodes = []
    async for event in rag.astream("How long is a snapshot kept?"):
        if event["type"] == "node":
            nodes.append(event["node"])
        elif event["type"] == "token":
            print(event["text"], end="", flush=True)
    print("\n[async nodes]", " -> ".join(nodes))


def main() -> None:
    scratch_data_dir()
    with init_agent("streaming-example", backend_url=":memory:") as rag:
        rag.add_documents(HANDBOOK)
        show_sync(rag)
        asyncio.run(show_async(rag))


if __name__ == "__main__":
    main()
