"""Settings: defaults, env vars, precedence, and errors that name the culprit."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from retrievalagent import ConfigError, Settings, init_agent
from retrievalagent.config import PER_CALL, env_table


def test_defaults_match_the_spec() -> None:
    s = Settings.load(env={})
    assert s.memory_relevance_threshold == 0.7
    assert s.memory_storage_threshold == 0.85
    assert s.backend == "qdrant"
    assert s.backend_url is None
    assert isinstance(s.data_dir, Path)


def test_env_vars_are_read_and_explicit_arguments_win() -> None:
    env = {
        "RAG_MEMORY_RELEVANCE_THRESHOLD": "0.6",
        "RAG_MEMORY_STORAGE_THRESHOLD": "0.9",
        "RAG_TOP_K": "7",
        "RAG_DATA_DIR": "/tmp/somewhere",
    }
    s = Settings.load(env=env)
    assert (s.memory_relevance_threshold, s.memory_storage_threshold, s.top_k) == (0.6, 0.9, 7)
    assert s.data_dir == Path("/tmp/somewhere")
    s = Settings.load(env=env, top_k=3, memory_relevance_threshold=0.5)
    assert (s.top_k, s.memory_relevance_threshold, s.memory_storage_threshold) == (3, 0.5, 0.9)


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"RAG_MEMORY_RELEVANCE_THRESHOLD": "high"}, "RAG_MEMORY_RELEVANCE_THRESHOLD"),
        ({"RAG_MEMORY_STORAGE_THRESHOLD": "1.5"}, "RAG_MEMORY_STORAGE_THRESHOLD"),
        ({"RAG_TOP_K": "0"}, "RAG_TOP_K"),
        ({"RAG_TOP_K": "2.5"}, "RAG_TOP_K"),
        ({"RAG_TOP_K": "1_0"}, "RAG_TOP_K"),  # Python's int() would read 10
        ({"RAG_TOP_K": "\u0665"}, "RAG_TOP_K"),  # an Arabic-Indic 5
        ({"RAG_MEMORY_RELEVANCE_THRESHOLD": "0.7_5"}, "RAG_MEMORY_RELEVANCE_THRESHOLD"),
        ({"RAG_FUSION": "magic"}, "RAG_FUSION"),
        ({"RAG_BACKEND": "pinecone"}, "RAG_BACKEND"),
    ],
)
def test_bad_env_values_name_the_variable(env: dict[str, str], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        Settings.load(env=env)


def test_bad_env_value_names_accepted_range() -> None:
    with pytest.raises(ConfigError, match="from 0 to 1"):
        Settings.load(env={"RAG_MEMORY_STORAGE_THRESHOLD": "2"})


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"top_k": 0}, "top_k"),
        ({"top_k": "5"}, "top_k"),
        ({"memory_relevance_threshold": -0.1}, "memory_relevance_threshold"),
        ({"fusion": "best"}, "fusion"),
        ({"max_retries": True}, "max_retries"),
    ],
)
def test_bad_arguments_name_the_argument(kwargs: dict[str, object], named: str) -> None:
    with pytest.raises(ConfigError, match=named):
        Settings.load(env={}, **kwargs)


def test_unknown_setting_lists_accepted_names() -> None:
    with pytest.raises(ConfigError, match=r"topk.*accepted:.*top_k"):
        Settings.load(env={}, topk=3)


def test_overlap_must_be_smaller_than_chunk() -> None:
    with pytest.raises(ConfigError, match="chunk_overlap"):
        Settings.load(env={}, chunk_size=200, chunk_overlap=200)


def test_env_table_covers_every_setting() -> None:
    rows = env_table()
    assert {r["setting"] for r in rows} == {f.name for f in dataclasses.fields(Settings)}
    assert all(r["env"].startswith("RAG_") for r in rows)
    thresholds = {r["env"]: r["default"] for r in rows}
    assert thresholds["RAG_MEMORY_RELEVANCE_THRESHOLD"] == "0.7"
    assert {r["setting"] for r in rows if r["per_call"] == "yes"} == set(PER_CALL)


def test_secrets_are_masked() -> None:
    s = Settings.load(env={"RAG_QDRANT_API_KEY": "k3y"})
    assert s.qdrant_api_key == "k3y"
    assert s.public_dict()["qdrant_api_key"] == "***"


@pytest.mark.parametrize(
    ("args", "kwargs", "named"),
    [
        (("bad name!",), {}, "collection"),
        (("",), {}, "collection"),
        (("docs",), {"backend": "weaviate"}, "backend"),
        (("docs",), {"backend_url": "ftp://x"}, "backend_url"),
        (("docs",), {"model": 42}, "model"),
        (("docs",), {"embeddings": 3.5}, "embeddings"),
        (("docs",), {"memory": "yes"}, "memory"),
        (("docs",), {"checkpointer": object()}, "checkpointer"),
        (("docs",), {"memory_store": {"not": "a store"}}, "memory_store"),
        (("docs",), {"top_k": -1}, "top_k"),
        (("docs",), {"embeddings": "no-provider"}, "embeddings"),
    ],
)
def test_init_agent_rejects_bad_arguments(
    args: tuple, kwargs: dict, named: str, tmp_path: Path
) -> None:
    with pytest.raises(ConfigError, match=named):
        init_agent(*args, data_dir=tmp_path, **kwargs)


def test_init_agent_reports_bad_env_var(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("RAG_MEMORY_RELEVANCE_THRESHOLD", "lots")
    with pytest.raises(ConfigError, match="RAG_MEMORY_RELEVANCE_THRESHOLD"):
        init_agent("docs", backend_url=":memory:", data_dir=tmp_path)


def test_agent_exposes_its_settings(make_agent, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RAG_MEMORY_STORAGE_THRESHOLD", "0.9")
    rag = make_agent(top_k=3)
    assert rag.settings.top_k == 3
    assert rag.settings.memory_storage_threshold == 0.9
    assert rag.model is None and rag.offline
    assert rag.embeddings is not None
    assert rag.graph is not None


def test_a_fetch_k_below_top_k_still_fills_top_k(
    make_agent: Callable[..., Any], sample_docs: Path
) -> None:
    rag = make_agent("few-candidates", fetch_k=1, top_k=5)
    rag.add_documents(sample_docs, progress=False)
    assert len(rag.search("How long are snapshots kept?")) == 5
    assert len(rag.invoke("How long are snapshots kept?").sources) == 5


def test_a_trace_file_that_cannot_be_a_file_is_refused_by_name(tmp_path: Path) -> None:
    for bad in (tmp_path, tmp_path / "a-file" / "trace.jsonl"):
        (tmp_path / "a-file").write_text("x")
        with pytest.raises(ConfigError, match="RAG_TRACE_FILE"):
            init_agent("t", backend_url=":memory:", trace_file=bad)


def test_importing_the_package_sets_no_environment_variables() -> None:
    """Every module of the package, imported in a fresh process, leaves os.environ as it was;
    mem0's telemetry switch is set only when the package itself imports mem0."""
    import json
    import os
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import importlib, json, os, pkgutil
        before = dict(os.environ)
        import retrievalagent
        for info in pkgutil.walk_packages(retrievalagent.__path__, "retrievalagent."):
            if not info.name.endswith("__main__"):
                importlib.import_module(info.name)
        after = dict(os.environ)
        changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
        from retrievalagent.memory import prepare_mem0_import
        prepare_mem0_import()                       # what runs right before mem0 is imported
        print(json.dumps({"changed": changed, "mem0": os.environ.get("MEM0_TELEMETRY")}))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEM0_")}
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True
    )
    assert json.loads(proc.stdout.splitlines()[-1]) == {"changed": [], "mem0": "False"}


def test_one_top_k_ceiling_for_the_setting_and_every_call(
    make_agent: Callable[..., Any], sample_docs: Path
) -> None:
    """A passage count a call accepts is one the setting accepts too, and the first one
    over is refused by both, with the same limit in the message."""
    ceiling = 1000  # what search(top_k=...) has always accepted (eval reads 2 * fetch_k)
    assert Settings.load(env={}, top_k=ceiling).top_k == ceiling
    assert Settings.load(env={"RAG_TOP_K": str(ceiling)}).top_k == ceiling
    with pytest.raises(ConfigError, match=f"top_k.* 1 (to|and) {ceiling}"):
        Settings.load(env={}, top_k=ceiling + 1)
    rag = make_agent("ceiling", top_k=ceiling)
    rag.add_documents(sample_docs, progress=False)
    assert 5 < len(rag.search("How long are snapshots kept?")) <= ceiling
    with pytest.raises(ConfigError, match=f"top_k.* 1 (to|and) {ceiling}"):
        rag.search("How long are snapshots kept?", top_k=ceiling + 1)
    retriever = rag.as_retriever(top_k=ceiling)
    with pytest.raises(ValueError, match="top_k"):  # built directly, bounded alike
        type(retriever)(searcher=retriever.searcher, top_k=ceiling + 1)
