"""``retrievalagent eval``: retrieval quality on a test set, and the settings that raise it.

The work is :func:`retrievalagent.eval.evaluate`; this module turns options into its
arguments and its report into a table (or JSON), the ``RAG_*`` lines of a tuned setting,
a run file and a plot.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from retrievalagent.cli._common import err, handle_errors

__all__ = ["eval_command", "load_reranker"]


def load_reranker(spec: str | None) -> Any:
    """``"llm"``, or ``"module:attribute"`` naming a compressor (or a function making one)."""
    if spec is None or spec == "llm":
        return spec
    module, sep, attribute = spec.partition(":")
    if not sep or not module or not attribute:
        raise typer.BadParameter(
            f"--rerank expects 'llm' or 'module:attribute' (a LangChain document compressor, "
            f"or a function returning one), got {spec!r}"
        )
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, type) or not hasattr(target, "compress_documents"):
        target = target()
    return target


def _print(report: Any, console: Console) -> None:
    _print_test_set(report, console)
    _print_runs(report.runs, console)
    if report.tuned:
        _print_tuned(report.tuned, console)
    if report.rerank:
        r = report.rerank
        lift = ", ".join(f"{m} {v:+.3f}" for m, v in r["lift"].items())
        console.print(
            f"[bold]rerank[/] ({escape(r['reranker'])}, top {r['rerank_k']}): {lift}; "
            f"{r['mean_ms']:.0f} ms per query" + (f"; {r['errors']} failed" if r["errors"] else "")
        )
    parts = ", ".join(f"{k[:-2]} {v:.1f}s" for k, v in report.timings.items())
    console.print(f"[dim]time: {parts}[/]")
    if report.run_out:
        console.print(f"[dim]hybrid run written to {escape(report.run_out)}[/]")


def _print_test_set(report: Any, console: Console) -> None:
    info = report.test_set
    console.print(
        f"[bold]{escape(info['name'])}[/] ({info['kind']}): {info['queries']} queries, "
        f"{info['relevant_per_query']} relevant each on average; collection "
        f"{escape(repr(report.collection))}, {report.settings['index']}",
        soft_wrap=True,
    )
    for note in info["notes"]:
        console.print(f"  [dim]{escape(note)}[/]", soft_wrap=True)


def _print_runs(runs: list[dict[str, Any]], console: Console) -> None:
    """The table of runs, then the setting each fused run used."""
    table = Table("run", "queries", "nDCG@10", "R@10", "R@100", "MRR@10")
    table.columns[0].no_wrap = True
    settings: dict[str, str] = {}
    for row in runs:
        name = row["run"] if row["split"] == "all" else f"{row['run']} ({row['split']})"
        table.add_row(
            name,
            str(row["queries"]),
            *(f"{row[m]:.3f}" for m in ("ndcg@10", "recall@10", "recall@100", "mrr@10")),
        )
        if row.get("setting"):
            settings.setdefault(row["run"], row["setting"])
    console.print(table)
    for run, setting in settings.items():
        console.print(f"  [dim]{escape(run)}: {escape(setting)}[/]", soft_wrap=True)
    if any(row["split"] == "test" for row in runs):
        console.print("  [dim](test) = the held-out half of the queries, not used to tune[/]")


def _print_tuned(tuned: dict[str, Any], console: Console) -> None:
    """What tuning found: the setting to apply (as ``export`` lines), or why none is."""
    if not (tuned["kept_current"] or tuned["is_current"]):
        console.print(
            f"[bold]tuned[/] on {tuned['dev_queries']} dev queries ({tuned['tried']} "
            f"settings): {escape(tuned['setting'])}; nDCG@10 on the "
            f"{tuned['test_queries']} held-out queries {tuned['test_ndcg@10']:.3f} "
            f"(reproduced from the variables: {tuned['reproduced_test_ndcg@10']:.3f}; "
            f"dev gain {tuned['dev_gain_over_current']:+.3f} ± "
            f"{tuned['dev_gain_standard_error']:.3f}). Apply it with:"
        )
        for key, value in tuned["env"].items():
            console.print(f"  export {key}={value}")
        return
    why = (
        f"the best on dev, {escape(tuned['best_on_dev'])}, gained "
        f"{tuned['dev_gain_over_current']:+.3f} nDCG@10, less than twice its standard "
        f"error {tuned['dev_gain_standard_error']:.3f}"
        if tuned["kept_current"]
        else "it was the best on dev"
    )
    console.print(
        f"[bold]tuned[/]: the current setting stays ({tuned['tried']} settings tried on "
        f"{tuned['dev_queries']} dev queries; {why}); its nDCG@10 on the "
        f"{tuned['test_queries']} held-out queries is {tuned['test_ndcg@10']:.3f}"
    )


#: The ``--help`` text of each ``eval`` option, by flag.
_HELP = {
    "--beir": "A BEIR folder (corpus.jsonl, queries.jsonl, qrels/).",
    "--questions": 'JSON lines {"question": ..., "relevant": [sources or chunk ids]} over '
    "an existing --collection.",
    "--docs": "Files or folders: derive a test set from their headings.",
    "--derive-from": "An existing collection: derive a test set from its chunks' headings.",
    "--sample-docs": "Derive a test set from the bundled sample docs.",
    "--llm-questions": "With --docs/--derive-from and --model: N more questions the model writes.",
    "--collection": "Collection to search or build (default: eval-*).",
    "--split": "BEIR qrels split.",
    "--tune": "Find the best fusion on a dev half; score it on the rest.",
    "--rerank": "'llm' (needs --model) or module:attribute of a LangChain document compressor.",
    "--model": "Chat model for --rerank llm and --llm-questions.",
    "--max-queries": "Evaluate a fixed sample.",
    "--backend-url": "':memory:' or http(s):// Qdrant URL.",
    "--data-dir": "Where embedded indexes live.",
    "--run-out": "Write the hybrid run as JSON {query_id: [ids]}.",
    "--plot": "Draw the table into a PNG (needs matplotlib).",
    "--json": "Print the report as JSON.",
}


def _check_plot(path: Path) -> None:
    """Refuse a ``--plot`` that cannot be drawn before the evaluation starts."""
    from retrievalagent.errors import ConfigError

    if path.expanduser().is_dir():
        raise ConfigError(f"--plot {path} is a folder; give the path of the PNG to write")
    if importlib.util.find_spec("matplotlib") is None:
        raise ConfigError("--plot needs matplotlib: pip install 'retrievalagent[plot]'")


def _option(flag: str, *short: str, **kwargs: Any) -> Any:
    """The typer option ``flag`` (and its ``short`` names) with its help from ``_HELP``."""
    return typer.Option(flag, *short, help=_HELP.get(flag), **kwargs)


def eval_command(
    beir: Annotated[Path | None, _option("--beir")] = None,
    questions: Annotated[Path | None, _option("--questions")] = None,
    docs: Annotated[list[Path] | None, _option("--docs")] = None,
    derive_from: Annotated[str | None, _option("--derive-from")] = None,
    sample_docs: Annotated[bool, _option("--sample-docs")] = False,
    llm_questions: Annotated[int, _option("--llm-questions", min=0)] = 0,
    collection: Annotated[str | None, _option("--collection", "-c")] = None,
    split: Annotated[str, _option("--split")] = "test",
    tune: Annotated[bool, _option("--tune")] = False,
    rerank: Annotated[str | None, _option("--rerank")] = None,
    model: Annotated[str | None, _option("--model", "-m")] = None,
    max_queries: Annotated[int | None, _option("--max-queries", min=1)] = None,
    backend_url: Annotated[str | None, _option("--backend-url")] = None,
    data_dir: Annotated[Path | None, _option("--data-dir")] = None,
    run_out: Annotated[Path | None, _option("--run-out")] = None,
    plot: Annotated[Path | None, _option("--plot")] = None,
    as_json: Annotated[bool, _option("--json")] = False,
) -> None:
    """Measure retrieval quality (nDCG@10, Recall@10/@100, MRR@10) and tune the fusion."""
    from retrievalagent.eval import cli_names, evaluate

    console = Console()
    with handle_errors(), cli_names():
        if plot is not None:
            _check_plot(plot)  # now, not after the whole run
        if sample_docs:
            from retrievalagent import sample_docs_path

            docs = [*(docs or []), Path(sample_docs_path())]
        report = evaluate(
            beir=beir,
            questions=questions,
            docs=list(docs) if docs else None,  # paths: a missing one is an error, not text
            derive_from=derive_from,
            llm_questions=llm_questions,
            collection=collection,
            split=split,
            tune=tune,
            reranker=load_reranker(rerank),
            model=model,
            max_queries=max_queries,
            run_out=run_out,
            backend_url=backend_url,
            data_dir=data_dir,
            on_stage=None if as_json else lambda m: err.print(f"[dim]{escape(m)}...[/]"),
        )
        for warning in report.warnings:
            err.print(f"[yellow]warning:[/] {escape(warning)}", soft_wrap=True)
        plotted = None
        if plot is not None:
            from retrievalagent.eval import plot_report

            plotted = report.plot = str(plot_report(report, plot))
        if as_json:
            out = report.to_dict()
            if plotted is not None:
                out["plot"] = plotted
            console.print_json(json.dumps(out))
        else:
            _print(report, console)
            if plotted is not None:
                console.print(f"[dim]plot written to {escape(plotted)}[/]")
