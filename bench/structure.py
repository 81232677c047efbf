"""How the package hangs together: ``python -m bench.structure``.

Issue 22's before/after table, measured from the source (nothing is imported), except
the last line, which runs a few real turns:

* **cycles between subpackages**: the import graph of ``retrievalagent``'s subpackages
  (a top-level module counts as its own part), every import included, also those inside
  functions; each strongly connected group of two or more parts is a cycle;
* **cycles inside a part**: the same, between the modules of one subpackage (the CLI's
  commands import its shared helpers, never each other or the module wiring them);
* **cross-package private imports**: an import of a ``_private`` module or name of
  another part (``from retrievalagent.memory._base import ...`` in ``graph``);
* **largest class and function**, in lines;
* **duplicates pairs**: what the ``duplicates`` tool reports for the package, if installed;
* **undocumented trace keys**: the keys the events of real turns carry that their node's
  TypedDict in ``retrievalagent.trace`` (from which the tracing docs' table is generated)
  does not declare. The turns (``tests/support/trace.py``: offline, memory store, inline
  grading, a reranker, a rewrite, a failing store, conversation memory) leave every kind
  of event; a few seconds.

Results: ``bench/results/structure.json``.
"""

from __future__ import annotations

import ast
import json
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "retrievalagent"
RESULTS = ROOT / "bench" / "results" / "structure.json"


def part_of(module: str) -> str:
    """The part a dotted module belongs to: its subpackage, or the top-level module."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "retrievalagent"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> Iterator[tuple[str, list[str], int]]:
    """(imported module, names imported from it, line) for every import in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = (
        _module_name(path) if path.name == "__init__.py" else _module_name(path).rsplit(".", 1)[0]
    )
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, [], node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            yield base, [a.name for a in node.names], node.lineno


def import_graph() -> tuple[dict[str, set[str]], list[dict[str, Any]]]:
    """Part -> parts it imports, and every cross-part private import."""
    graph: dict[str, set[str]] = defaultdict(set)
    private: list[dict[str, Any]] = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = part_of(_module_name(path))
        graph[source]
        for module, names, line in _imports(path):
            if not module.startswith("retrievalagent"):
                continue
            target = part_of(module)
            if module == "retrievalagent":  # from retrievalagent import x: x's part
                targets = [part_of(f"retrievalagent.{n}") for n in names]
            else:
                targets = [target]
            for t in targets:
                if t != source:
                    graph[source].add(t)
            if target == source or module == "retrievalagent":
                continue
            hidden = [p for p in module.split(".")[2:] if p.startswith("_")]
            hidden += [n for n in names if n.startswith("_") and not n.startswith("__")]
            if hidden:
                where = f"{path.relative_to(ROOT)}:{line}"
                private.append({"where": where, "from": source, "to": module, "names": names})
    return graph, private


def module_graph(part: str) -> dict[str, set[str]]:
    """Module -> modules of the same subpackage it imports (``part``: ``"cli"``), every
    import included, also those inside functions; the subpackage's ``__init__`` is a module."""
    inside = f"retrievalagent.{part}"
    graph: dict[str, set[str]] = defaultdict(set)
    for path in sorted((PACKAGE / part).rglob("*.py")):
        source = _module_name(path)
        graph[source]
        for module, names, _ in _imports(path):
            if module != inside and not module.startswith(f"{inside}."):
                continue
            # ``from retrievalagent.cli import _common`` imports a module, ``... import app``
            # a name of the package's __init__
            named = [f"{module}.{n}" for n in names if _is_module(f"{module}.{n}")]
            for target in named or [module]:
                if target != source:
                    graph[source].add(target)
    return graph


def _is_module(dotted: str) -> bool:
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of two or more parts (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def largest() -> dict[str, Any]:
    """The longest class and function of the package, in lines."""
    best: dict[str, Any] = {"class": ("", 0), "function": ("", 0)}
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            kind = (
                "class"
                if isinstance(node, ast.ClassDef)
                else "function"
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)
                else None
            )
            if kind is None:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > best[kind][1]:
                best[kind] = (f"{path.relative_to(ROOT)}::{node.name}", lines)
    return {k: {"name": v[0], "lines": v[1]} for k, v in best.items()}


def duplicate_pairs() -> int | None:
    """Pairs the ``duplicates`` tool lists for the package (None when it is not here)."""
    tool = shutil.which("duplicates")
    if tool is None:
        return None
    run = subprocess.run(
        [tool, "--repo", str(PACKAGE), "--most", "200", "--seconds", "60"],
        capture_output=True,
        text=True,
        check=False,
    )
    first = run.stdout.splitlines()[0] if run.stdout else ""
    if first.startswith("no duplicates"):
        return 0
    word = first.split()[0] if first else ""
    return int(word) if word.isdigit() else None


def undocumented_trace_keys() -> list[str]:
    """``node.key`` paths that real turns emit and ``retrievalagent.trace`` does not declare."""
    import tempfile

    from retrievalagent.embeddings import MiniLMEmbeddings
    from tests.support.trace import every_event_kind, undeclared

    with tempfile.TemporaryDirectory() as tmp:
        events = every_event_kind(MiniLMEmbeddings().load(), Path(tmp))
    return sorted({key for event in events for key in undeclared(event)})


def measure() -> dict[str, Any]:
    graph, private = import_graph()
    return {
        "parts": {k: sorted(v) for k, v in sorted(graph.items())},
        "cycles": cycles(graph),
        "cycles_inside": {
            p.name: found
            for p in sorted(PACKAGE.iterdir())
            if (p / "__init__.py").exists() and (found := cycles(module_graph(p.name)))
        },
        "private_imports": private,
        "largest": largest(),
        "duplicate_pairs": duplicate_pairs(),
        "undocumented_trace_keys": undocumented_trace_keys(),
    }


def main() -> dict[str, Any]:
    found = {
        "benchmark": "How the package hangs together (issue 22)",
        "command": "python -m bench.structure",
        **measure(),
    }
    if RESULTS.exists():  # the 'before' column is measured once, on the code before issue 22
        kept = json.loads(RESULTS.read_text(encoding="utf-8")).get("before")
        if kept:
            found["before"] = kept
    print(f"cycles between parts: {len(found['cycles'])} {found['cycles']}")
    for part, found_inside in found["cycles_inside"].items():
        print(f"cycles inside {part}: {len(found_inside)} {found_inside}")
    print(f"cross-part private imports: {len(found['private_imports'])}")
    for item in found["private_imports"]:
        print(f"  {item['where']}: {item['to']} {item['names']}")
    for kind, best in found["largest"].items():
        print(f"largest {kind}: {best['name']} ({best['lines']} lines)")
    print(f"duplicates pairs: {found['duplicate_pairs']}")
    undocumented = found["undocumented_trace_keys"]
    print(f"undocumented trace keys: {len(undocumented)} {undocumented}")
    RESULTS.write_text(json.dumps(found, indent=2) + "\n", encoding="utf-8")
    return found


if __name__ == "__main__":
    main()
