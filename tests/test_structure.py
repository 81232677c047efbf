"""The package's parts import one way: no cycle between subpackages, and no part reaches
into another's private modules (``bench/structure.py`` measures both from the source, lazy
imports inside functions included)."""

from __future__ import annotations

from bench.structure import PACKAGE, cycles, import_graph, module_graph


def test_no_cycle_between_the_parts_of_the_package() -> None:
    graph, _ = import_graph()
    assert cycles(graph) == []
    # the floor stays a floor: the index knows nothing of the parts built on it
    assert not graph["index"] & {"retrieval", "models", "memory", "aliases", "graph", "ingest"}
    assert "models" not in graph["retrieval"]  # the LLM reranker lives with the LLM roles


def test_no_part_imports_another_parts_private_modules() -> None:
    _, private = import_graph()
    assert private == [], private


def test_no_cycle_between_the_modules_of_a_part() -> None:
    """Inside a part too, imports go one way: the CLI's commands import its shared helpers
    (``cli/_common.py``), and only ``cli/_app.py`` imports the commands to wire them."""
    parts = [p.name for p in sorted(PACKAGE.iterdir()) if (p / "__init__.py").is_file()]
    assert "cli" in parts
    found = {part: cycles(module_graph(part)) for part in parts}
    assert {part: c for part, c in found.items() if c} == {}
    cli = module_graph("cli")
    commands = [m for m in cli if m.rsplit(".", 1)[-1] not in ("cli", "_app", "_common")]
    assert commands, cli
    for module in commands:
        assert cli[module] <= {"retrievalagent.cli._common"}, (module, cli[module])


#: Module names several parts use, each for the same thing in its part.
SHARED_MODULE_NAMES = {
    "__init__": "the part itself",
    "__main__": "python -m",
    "_base": "the interface the part's implementations share",
    "_rerank": "reranking: retrieval's Reranker protocol and the models' LLM reranker",
}


def test_no_two_modules_share_a_name_for_different_things() -> None:
    by_name: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        by_name.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    shared = {n: p for n, p in by_name.items() if len(p) > 1 and n not in SHARED_MODULE_NAMES}
    assert shared == {}
