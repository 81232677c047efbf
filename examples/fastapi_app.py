"""A FastAPI service around one agent, with per-request users and threads.

    python examples/fastapi_app.py --port 8000 [--docs ./my-notes]

    curl -s localhost:8000/ask -H 'content-type: application/json' \\
         -d '{"question": "How long is a snapshot kept?", "user_id": "alice", "thread_id": "t1"}'

Endpoints:

* ``POST /ask``: ``{"question", "user_id", "thread_id"}`` -> answer, sources, thread;
* ``POST /ask/stream``: the same, as server-sent events (``node``, ``token``, ``result``);
* ``GET /threads/{user_id}``: the user's conversations, newest first;
* ``GET /threads/{user_id}/{thread_id}``: one conversation's messages;
* ``GET /health``.

One agent serves every request: built at start-up (FastAPI lifespan), closed at shutdown
(which also drains pending memory writes). ``user_id`` selects whose long-term memory is
read and written; ``thread_id`` selects the conversation. Swap ``MemorySaver`` and
``InMemoryStore`` for the PostgreSQL helpers (see ``postgres_persistence.py``) to keep
them across restarts, and set ``RAG_MODEL`` to have an LLM write the answers.
"""

from __future__ import annotations

import argparse
import json
import os
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from _common import HANDBOOK, scratch_data_dir
from fastapi import FastAPI, HTTPException
from fastapi.responses import StreamingResponse
from langgraph.checkpoint.memory import MemorySaver
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel, Field

from retrievalagent import ConfigError, RetrievalAgent, init_agent


class Question(BaseModel):
    question: str = Field(min_length=1, max_length=2000)
    user_id: str = Field(default="anonymous", min_length=1, max_length=200)
    thread_id: str | None = Field(default=None, max_length=200)


def build_agent() -> RetrievalAgent:
    """The served agent; ``EXAMPLE_DOCS`` names a folder to index (else a tiny handbook)."""
    scratch_data_dir()
    rag = init_agent(
        os.environ.get("RAG_COLLECTION", "fastapi-example"),
        checkpointer=MemorySaver(),
        memory_store=InMemoryStore(),
    )
    rag.add_documents(os.environ.get("EXAMPLE_DOCS") or HANDBOOK)
    return rag


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    app.state.rag = build_agent()
    try:
        yield
    finally:
        await app.state.rag.adrain_background(timeout=30)
        app.state.rag.close()


app = FastAPI(title="retrievalagent example", lifespan=lifespan)


def _config(body: Question) -> dict[str, Any]:
    thread_id = body.thread_id or uuid.uuid4().hex
    return {"configurable": {"thread_id": thread_id, "user_id": body.user_id}}


@app.get("/health")
async def health() -> dict[str, Any]:
    return {"ok": True, "chunks": app.state.rag.count()}


@app.post("/ask")
async def ask(body: Question) -> dict[str, Any]:
    config = _config(body)
    try:
        state = await app.state.rag.ainvoke(body.question, config=config)
    except ConfigError as exc:
        raise HTTPException(status_code=422, detail=str(exc)) from exc
    return {
        "answer": state.answer,
        "thread_id": config["configurable"]["thread_id"],
        "user_id": body.user_id,
        "memory_context": state.memory_context,
        "sources": [
            {"source": s["source"], "score": s["score"], "headings": s["headings"]}
            for s in state.sources
        ],
    }


@app.post("/ask/stream")
async def ask_stream(body: Question) -> StreamingResponse:
    config = _config(body)

    async def events() -> AsyncIterator[str]:
        async for event in app.state.rag.astream(body.question, config=config):
            if event["type"] == "node":
                data: dict[str, Any] = {"node": event["node"]}
            elif event["type"] == "token":
                data = {"text": event["text"]}
            else:
                result = event["result"]
                data = {
                    "answer": result.answer,
                    "thread_id": config["configurable"]["thread_id"],
                    "sources": [s["source"] for s in result.sources],
                }
            yield f"event: {event['type']}\ndata: {json.dumps(data)}\n\n"

    return StreamingResponse(events(), media_type="text/event-stream")


@app.get("/threads/{user_id}")
async def threads(user_id: str) -> list[dict[str, Any]]:
    return [t.to_dict() for t in await app.state.rag.alist_threads(user_id)]


@app.get("/threads/{user_id}/{thread_id}")
async def history(user_id: str, thread_id: str) -> list[dict[str, str]]:
    owned = {t.thread_id for t in await app.state.rag.alist_threads(user_id)}
    if thread_id not in owned:
        raise HTTPException(status_code=404, detail="no such thread for this user")
    return [
        {"role": m.type, "content": str(m.content)}
        for m in await app.state.rag.aget_history(thread_id)
    ]


if __name__ == "__main__":
    import uvicorn

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--docs", help="a folder of documents to index at start-up")
    args = parser.parse_args()
    if args.docs:
        os.environ["EXAMPLE_DOCS"] = args.docs
    uvicorn.run(app, host=args.host, port=args.port)
