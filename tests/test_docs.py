"""The documentation is tested: its Python blocks run, and the site builds with --strict.

Every fenced Python block under ``docs/`` either runs here or is preceded by a marker that
says why it cannot (``<!-- not-run: needs a hosted model -->``). The blocks of one page run
in order in one namespace, as a reader would paste them, in a temporary working directory
with offline stand-ins for the services the docs name:

* ``RAG_DATA_DIR`` and ``MEM0_DIR`` point into the temporary directory;
* ``openai:...`` models and mem0's OpenAI LLM/embedder talk to the local OpenAI-compatible
  server (``openai_server``), whose replies are scripted below;
* ``http://localhost:6333`` is the Qdrant REST shim (``qdrant_server_6333``);
* the placeholder ``postgresql://user:pass@localhost/mydb`` is replaced by the test
  database's URL (``postgres_url``) -- the only text substitution made in any block;
* ``./my-notes`` (the reader's own folder in Getting started) is a small folder of
  Markdown notes written below.

Blocks may use top-level ``await`` (they run on one event loop per page). The packaged
embedding model is loaded once per session and shared (the real model, just not re-read
from disk for every ``init_agent`` in the docs).
"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import inspect
import io
import os
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PYTHON_LANGS = {"python", "py", "python3", "pycon"}
NOT_RUN = re.compile(r"^<!--\s*not-run:\s*(?P<reason>.*?)\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>`{3,}|~{3,})\s*(?P<lang>[\w+-]*)")
PG_PLACEHOLDER = "postgresql://user:pass@localhost/mydb"

# The reader's own notes for Getting started (any small folder of Markdown would do).
MY_NOTES = {
    "security/api-keys.md": """# API keys

## Rotating the API keys

Create a new key in the admin console under Settings > Keys, deploy it to every service
with `deployctl secrets set API_KEY`, then revoke the old key. Keys expire after 90 days.
""",
    "ops/deploy.md": """# Deployment

## Steps

1. Build the release with `make release`.
2. Run the database migrations with `deployctl migrate`.
3. Roll the new version out with `deployctl rollout --canary 10`.
""",
    "team/onboarding.md": """# Onboarding

New engineers get access to the admin console on their first day. The on-call rotation
starts after four weeks.
""",
}


@dataclass
class Block:
    page: str
    line: int
    lang: str
    code: str
    skip: str | None  # the reason given in a not-run marker

    @property
    def is_python(self) -> bool:
        return self.lang.lower() in PYTHON_LANGS

    def __str__(self) -> str:
        return f"{self.page}:{self.line}"


def extract_blocks(path: Path) -> list[Block]:
    """Fenced code blocks of a Markdown page, with the not-run marker before each, if any."""
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(DOCS).as_posix()
    blocks: list[Block] = []
    previous = ""
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            if lines[i].strip():
                previous = lines[i].strip()
            i += 1
            continue
        indent, fence, lang = match["indent"], match["fence"], match["lang"]
        start = i + 1
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence):
            body.append(lines[i][len(indent) :] if lines[i].startswith(indent) else lines[i])
            i += 1
        marker = NOT_RUN.match(previous)
        skip = marker["reason"] if marker else None
        blocks.append(Block(page, start, lang, "\n".join(body) + "\n", skip))
        previous = ""
        i += 1
    return blocks


def doc_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if "_hooks" not in p.parts)


def runnable_pages() -> list[str]:
    return [
        p.relative_to(DOCS).as_posix()
        for p in doc_pages()
        if any(b.is_python and b.skip is None for b in extract_blocks(p))
    ]


# -- offline stand-ins ---------------------------------------------------------------------

HINT = re.compile(r"Search hint for these documents:\s*(?P<fact>.+)")


def scripted_llm(request: Any) -> Any:
    """What the stand-in for the hosted model says: plausible, deterministic replies.

    * the agent's grade (structured output with the ``Grade`` fields): sufficient; when the
      user wrote "backup copy", also a search fact worth storing, as a real model would
      (inline grading's schema adds an ``answer`` field: a fixed cited sentence);
    * mem0's fact extraction (JSON): the hint the agent sent it;
    * anything else: the default (an echo of the question, or a minimal valid JSON value).
    """
    from tests.servers.openai_compat import default_responder

    schema = request.json_schema or {}
    if "memory_worth_storing" in (schema.get("properties") or {}):
        question = " ".join(request.texts("user")).lower()
        learned = "backup copy" in question
        answer = {"answer": "The passages say so [1]."} if "answer" in schema["properties"] else {}
        return {
            **answer,
            "sufficient": True,
            "confidence": 0.9,
            "memory_worth_storing": learned,
            "memory_confidence": 0.92 if learned else 0.0,
            "memory_fact": '"backup copy" is called "snapshot" in these documents'
            if learned
            else "",
        }
    if request.wants_json and not schema:
        for text in request.texts():
            if match := HINT.search(text):
                return {"memory": [{"id": "0", "text": match["fact"].strip()}]}
        if "memory" in request.system_prompt.lower():
            return {"memory": []}
    return default_responder(request)


_MODEL_CACHE: dict[int, Any] = {}


@pytest.fixture
def shared_minilm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Load the packaged embedding model once for all pages (same files, same vectors)."""
    from retrievalagent.embeddings import _minilm

    original = _minilm.MiniLMEmbeddings._open

    def cached_open(self: Any) -> Any:
        key = self.max_tokens
        if key not in _MODEL_CACHE:
            _MODEL_CACHE[key] = original(self)
        return _MODEL_CACHE[key]

    monkeypatch.setattr(_minilm.MiniLMEmbeddings, "_open", cached_open)


@pytest.fixture
def docs_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, shared_minilm: None) -> Path:
    """A fresh working directory with the stand-ins the docs need."""
    for rel, text in MY_NOTES.items():
        target = tmp_path / "my-notes" / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RAG_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("MEM0_DIR", str(tmp_path / "mem0"))  # effective if mem0 is not imported
    for name in list(os.environ):
        if name.startswith("RAG_") and name != "RAG_DATA_DIR" and not name.startswith("RAG_TEST"):
            monkeypatch.delenv(name)
    return tmp_path


def _track_agents(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Record every agent the blocks build, so the test can close them all afterwards."""
    import retrievalagent
    import retrievalagent.agent

    made: list[Any] = []
    real = retrievalagent.agent.init_agent

    def init_agent(*args: Any, **kwargs: Any) -> Any:
        agent = real(*args, **kwargs)
        made.append(agent)
        return agent

    init_agent.__doc__ = real.__doc__
    monkeypatch.setattr(retrievalagent, "init_agent", init_agent)
    return made


def run_page(page: str, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a page's Python blocks in order in one namespace; returns what they printed."""
    blocks = [b for b in extract_blocks(DOCS / page) if b.is_python and b.skip is None]
    text = (DOCS / page).read_text(encoding="utf-8")
    # Each stand-in is started only for the pages that need it.
    if "localhost:6333" in text:
        request.getfixturevalue("qdrant_server_6333")
    if "openai" in text.lower() or "mem0" in text.lower():
        request.getfixturevalue("openai_server").responder = scripted_llm
    substitutions: dict[str, str] = {}
    if PG_PLACEHOLDER in text:
        # The docs show a placeholder URL; here it means the test database.
        substitutions[PG_PLACEHOLDER] = request.getfixturevalue("postgres_url")
    made = _track_agents(monkeypatch)
    namespace: dict[str, Any] = {"__name__": "__docs__"}
    loop = asyncio.new_event_loop()
    out = io.StringIO()
    current: Block | None = None
    try:
        for block in blocks:
            current = block
            code = block.code
            for old, new in substitutions.items():
                code = code.replace(old, new)
            compiled = compile(
                code, f"<{block}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True
            )
            with contextlib.redirect_stdout(out):
                result = eval(compiled, namespace)
                if inspect.iscoroutine(result):
                    loop.run_until_complete(result)
    except Exception as exc:
        raise AssertionError(
            f"docs block {current} failed: {type(exc).__name__}: {exc}\n--- it printed:\n"
            f"{out.getvalue()[-3000:]}\n--- code:\n{current.code if current else ''}"
        ) from exc
    finally:
        for agent in made:
            # writes scheduled as tasks on this page's loop can only land while it runs
            with contextlib.suppress(Exception):
                loop.run_until_complete(agent.adrain_background(timeout=10))
            with contextlib.suppress(Exception):
                agent.close()
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()
    return out.getvalue()


# -- tests ---------------------------------------------------------------------------------


def test_docs_exist_and_have_python_blocks() -> None:
    pages = [p.relative_to(DOCS).as_posix() for p in doc_pages()]
    for required in (
        "index.md",
        "getting-started.md",
        "concepts.md",
        "memory.md",
        "retrieval.md",
        "evaluation.md",
        "models.md",
        "configuration.md",
        "tracing.md",
        "conversations.md",
        "deployment.md",
        "benchmarks.md",
        "reference.md",
    ):
        assert required in pages, f"docs/{required} is missing"
    assert len(runnable_pages()) >= 8


def test_every_python_block_runs_or_says_why_not() -> None:
    for path in doc_pages():
        for block in extract_blocks(path):
            if block.skip is not None:
                assert block.skip, f"{block}: a not-run marker needs a reason"
                assert block.is_python, f"{block}: not-run markers are only for Python blocks"
            if block.is_python and block.skip is None:
                try:
                    ast.parse(block.code)
                except SyntaxError:
                    # top-level await is allowed; it parses inside an async function
                    ast.parse("async def _():\n" + textwrap.indent(block.code, "    "))


def test_extract_blocks_reads_markers_and_indented_fences(tmp_path: Path) -> None:
    page = DOCS / "_extract_check.md"
    try:
        page.write_text(
            "Text\n\n<!-- not-run: needs a GPU -->\n```python\nimport torch\n```\n\n"
            '!!! note\n    ```python\n    print("indented")\n    ```\n\n```bash\nls\n```\n',
            encoding="utf-8",
        )
        blocks = extract_blocks(page)
    finally:
        page.unlink()
    assert [(b.lang, b.skip) for b in blocks] == [
        ("python", "needs a GPU"),
        ("python", None),
        ("bash", None),
    ]
    assert blocks[1].code == 'print("indented")\n'


# What some pages' blocks must print, beyond running: the story the page tells holds.
EXPECTED_OUTPUT = {
    # the reader's own notes are indexed and answer the question with a citation
    "getting-started.md": ["3 source(s): 3 new", "security/api-keys.md", "llm:gpt-5.4"],
    # with the scripted model, the "backup copy" question stores a search fact for alice
    "memory.md": ['"backup copy" is called "snapshot"'],
}


@pytest.mark.parametrize("page", runnable_pages())
def test_docs_page_runs(
    page: str, docs_env: Path, request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> None:
    printed = run_page(page, request, monkeypatch)
    for expected in EXPECTED_OUTPUT.get(page, []):
        assert expected in printed, f"{page}: expected {expected!r} in what the blocks printed"


# -- the site -----------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _site_build(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Start ``mkdocs build --strict`` once, in the background, when this module starts.

    It runs while the pages' blocks run (two cores), and ``built_site`` waits for it.
    """
    site = tmp_path_factory.mktemp("site")
    env = {**os.environ, "MEM0_TELEMETRY": "False", "NO_COLOR": "1", "NO_MKDOCS_2_WARNING": "1"}
    env["RAG_DATA_DIR"] = str(tmp_path_factory.mktemp("site-data"))
    log = site.parent / "mkdocs-build.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    build = {"proc": proc, "site": site, "log": log, "start": time.perf_counter()}
    yield build
    if proc.poll() is None:
        proc.kill()
        proc.wait()


@pytest.fixture(scope="module")
def built_site(_site_build: dict[str, Any]) -> tuple[Path, str]:
    """The site folder and the build log, once ``mkdocs build --strict`` has finished."""
    proc: subprocess.Popen[bytes] = _site_build["proc"]
    returncode = proc.wait(timeout=240)
    log = _site_build["log"].read_text(encoding="utf-8")
    assert returncode == 0, f"mkdocs build --strict failed:\n{log[-5000:]}"
    return _site_build["site"], log


def test_mkdocs_build_strict_has_every_page(built_site: tuple[Path, str]) -> None:
    site, log = built_site
    assert "WARNING" not in log, log
    for path in doc_pages():
        rel = path.relative_to(DOCS).with_suffix("")
        html = site / ("index.html" if rel.name == "index" else f"{rel.as_posix()}/index.html")
        assert html.is_file(), f"{path.name} was not built"


def test_built_graph_diagram_is_the_real_graph(built_site: tuple[Path, str]) -> None:
    from retrievalagent.graph import NODE_NAMES

    html = (built_site[0] / "concepts" / "index.html").read_text(encoding="utf-8")
    assert 'class="mermaid"' in html
    assert "generated:graph" not in html
    for node in NODE_NAMES:
        assert f"{node}({node})" in html, f"node {node} missing from the diagram"
    assert "prepare --&gt; read_memory" in html
    assert "read_memory --&gt; lexical_search" in html


def test_built_env_table_lists_every_setting(built_site: tuple[Path, str]) -> None:
    from retrievalagent.config import env_table

    html = (built_site[0] / "configuration" / "index.html").read_text(encoding="utf-8")
    assert "generated:env-table" not in html
    for row in env_table():
        assert f"<code>{row['env']}</code>" in html, row["env"]


def test_built_trace_table_lists_every_key(built_site: tuple[Path, str]) -> None:
    from retrievalagent.trace import EVENTS, fields

    html = (built_site[0] / "tracing" / "index.html").read_text(encoding="utf-8")
    assert "generated:trace" not in html
    for node, event in EVENTS.items():
        for field in fields(event):
            assert f"<code>{field.key}</code>" in html, f"{node}.{field.key}"


def test_built_api_reference_documents_the_public_api(built_site: tuple[Path, str]) -> None:
    import retrievalagent

    html = (built_site[0] / "reference" / "index.html").read_text(encoding="utf-8")
    for name in retrievalagent.__all__:
        assert f'id="retrievalagent.{name}"' in html, f"{name} is not in the API reference"
    assert 'id="retrievalagent.RetrievalAgent.invoke"' in html
    assert "_check_collection" not in html  # private names stay out
    assert ":meth:" not in html and ":func:" not in html  # Sphinx roles became code


def test_generated_parts_come_from_the_code() -> None:
    """The hook's output equals what the code produces now (nothing stale is committed)."""
    sys.path.insert(0, str(DOCS / "_hooks"))
    try:
        import generated
    finally:
        sys.path.pop(0)
    from langgraph.store.memory import InMemoryStore

    from retrievalagent import init_agent
    from retrievalagent.config import env_table

    with init_agent("graph-check", backend_url=":memory:", memory_store=InMemoryStore()) as rag:
        assert generated.graph_mermaid() == rag.graph.get_graph().draw_mermaid()
    table = generated.env_table_markdown()
    assert table.count("\n") == len(env_table()) + 1
    filled = generated.fill("a\n<!-- generated:env-table -->\nb")
    assert "RAG_MEMORY_RELEVANCE_THRESHOLD" in filled and "generated:" not in filled
    assert "`retrievalagent graph`" in generated.cli_help_markdown()
    # the trace table: one group of rows per node's event, one row per key it declares
    from retrievalagent.trace import EVENTS, fields

    listed: dict[str, set[str]] = {}
    node = ""
    for row in generated.trace_table_markdown().splitlines()[2:]:
        cells = [c.strip().strip("`") for c in row.strip("|").split(" | ")]
        node = cells[0] or node
        listed.setdefault(node, set()).add(cells[1])
    assert {n: {k for k in keys if "." not in k} for n, keys in listed.items()} == {
        n: {f.key for f in fields(event)} for n, event in EVENTS.items()
    }
    assert {"memory_key", "memory_kind"} <= listed["final_grade"]
    assert {"mode", "waited_ms", "conversation.facts"} <= listed["write_memory"]
    assert "| `by_role` |" in generated.trace_usage_markdown()


def test_models_page_names_every_part_override_can_swap() -> None:
    from retrievalagent import RetrievalAgent

    page = (DOCS / "models.md").read_text()
    for name in inspect.signature(RetrievalAgent.override).parameters:
        if name != "self":
            assert f"`{name}=" in page, f"docs/models.md does not name override({name}=...)"


def _reference_targets() -> set[str]:
    """What docs/reference.md documents: each ``::: target`` and the members it lists."""
    page = (DOCS / "reference.md").read_text(encoding="utf-8")
    found: set[str] = set()
    for block in re.split(r"^(?=::: )", page, flags=re.M)[1:]:
        target = block.split()[1]
        found.add(target)
        members = re.search(r"members: \[([^\]]*)\]", block)
        if members:
            found |= {f"{target}.{m.strip()}" for m in members.group(1).split(",")}
    return found


def test_reference_lists_every_public_name_and_no_private_one() -> None:
    """A name the docs, README or examples use from the package is in the API reference,
    and the reference documents only public names (in their module's ``__all__``)."""
    import importlib

    import retrievalagent

    documented = _reference_targets()
    for target in sorted(documented):
        assert not any(p.startswith("_") for p in target.split(".")), target
        module, _, name = target.rpartition(".")
        with contextlib.suppress(ModuleNotFoundError):
            importlib.import_module(target)
            continue  # a module (retrievalagent.server)
        assert name in importlib.import_module(module).__all__, f"{target} is not exported"
    used = {f"retrievalagent.{name}" for name in retrievalagent.__all__}
    texts = [p.read_text(encoding="utf-8") for p in doc_pages() if p.name != "reference.md"]
    texts += [(ROOT / "README.md").read_text(encoding="utf-8")]
    texts += [p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples").glob("*.py"))]
    for text in texts:
        for module, names in re.findall(r"from (retrievalagent\.[a-z]\w*) import ([\w, ]+)", text):
            used |= {f"{module}.{n.strip()}" for n in names.split(",") if n.strip()}
        used |= set(re.findall(r"\bretrievalagent\.[a-z]\w*\.[A-Za-z]\w*", text))
    assert sorted(used - documented) == []
