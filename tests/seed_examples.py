"""The spec page's code examples, read from ``../shared/seeds`` at test time.

The spec (``seeds/003_5ebf319bd6cd3212.txt``) is a plain-text rendering of a docs page, so
code blocks are not fenced. A block is a maximal run of lines that compiles as Python
(top-level ``await`` allowed) and starts like code. Nothing of the page is copied into the
repository: tests read it where CI puts it (beside the clone) and skip if it is absent.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

SEED = "003_5ebf319bd6cd3212.txt"
_STARTS = (
    "from ",
    "import ",
    "rag",
    "config",
    "state",
    "with ",
    "checkpointer",
    "store",
    "mem ",
    "mem=",
    "await ",
    "for ",
    "ainvoke",
    "#",
)


def seed_path() -> Path | None:
    candidates = [os.environ.get("RAG_SEEDS_DIR", "")]
    here = Path(__file__).resolve()
    candidates += [str(p / "shared" / "seeds") for p in here.parents]
    for folder in candidates:
        if folder and (Path(folder) / SEED).is_file():
            return Path(folder) / SEED
    return None


def _compiles(source: str) -> bool:
    try:
        compile(source, "<seed>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT)
    except SyntaxError:
        return False
    return True


_CODE_LINE = re.compile(
    r"^([A-Za-z_][\w.]*\s*(=|\(|\[)|[)\]}\"'#]|(from|import|with|for|if|await|async|return)\b)"
)


def _looks_like_code(line: str) -> bool:
    return not line.strip() or line.startswith((" ", "\t")) or bool(_CODE_LINE.match(line))


@dataclass
class SeedBlock:
    """One example: its code and the heading line above it."""

    code: str
    heading: str
    line: int

    def uses(self, *names: str) -> bool:
        return all(name in self.code for name in names)


def seed_blocks() -> list[SeedBlock]:
    path = seed_path()
    if path is None:
        pytest.skip("the spec page ../shared/seeds is not beside this clone (it is in CI)")
    lines = path.read_text(encoding="utf-8").splitlines()
    blocks: list[SeedBlock] = []
    heading = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip().startswith(_STARTS) or not _compiles(line.strip() + "\n"):
            if line.strip() and not line.startswith((" ", "\t")):
                heading = line.strip()
            i += 1
            continue
        end = i + 1
        while end < len(lines) and _looks_like_code(lines[end]):
            end += 1
        best = max(
            (e for e in range(i + 1, end + 1) if _compiles("\n".join(lines[i:e]))), default=i + 1
        )
        code = "\n".join(lines[i:best]).strip("\n")
        statements = "\n".join(x for x in code.splitlines() if not x.strip().startswith("#"))
        if any(word in statements for word in ("init_agent", "rag.", "Memory", "store")):
            blocks.append(SeedBlock(code + "\n", heading, i + 1))
        i = best
    return blocks


def find_block(*names: str, after: int = 0) -> SeedBlock:
    """The first example (after line ``after``) whose code mentions every one of ``names``."""
    for block in seed_blocks():
        if block.line > after and block.uses(*names):
            return block
    raise LookupError(f"no example on the spec page uses {names}")


def run_block(block: SeedBlock, namespace: dict[str, object]) -> dict[str, object]:
    """Execute one example as written, in ``namespace`` (top-level ``await`` supported)."""
    import asyncio
    import inspect

    code = compile(
        block.code, f"<seed line {block.line}>", "exec", flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
    )
    result = eval(code, namespace)  # the spec's own example
    if inspect.iscoroutine(result):
        asyncio.run(result)
    return namespace
