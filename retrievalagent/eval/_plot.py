"""``--plot FILE.png``: the eval table as a grouped bar chart (needs matplotlib, the
``plot`` extra)."""

from __future__ import annotations

from pathlib import Path

from retrievalagent.errors import ConfigError
from retrievalagent.eval._evaluate import EvalReport
from retrievalagent.eval._metrics import METRICS

__all__ = ["plot_report"]


def plot_report(report: EvalReport, path: str | Path) -> Path:
    """Draw every run's metrics (one group of bars per metric) into ``path``."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ConfigError("--plot needs matplotlib: pip install 'retrievalagent[plot]'") from None
    rows = report.runs
    labels = [f"{r['run']} ({r['split']}, {r['queries']} q)" for r in rows]
    width = 0.8 / max(1, len(rows))
    fig, ax = plt.subplots(figsize=(max(6.0, 1.6 * len(METRICS) + 0.4 * len(rows)), 4.8))
    for i, (row, label) in enumerate(zip(rows, labels, strict=True)):
        xs = [m + (i - (len(rows) - 1) / 2) * width for m in range(len(METRICS))]
        bars = ax.bar(xs, [row[m] for m in METRICS], width, label=label)
        ax.bar_label(bars, fmt="%.2f", fontsize=6, padding=1)
    ax.set_xticks(range(len(METRICS)), list(METRICS))
    ax.set_ylim(0, 1.08)
    ax.set_ylabel("score")
    info = report.test_set
    title = info["name"] if info["name"] == info["kind"] else f"{info['name']} ({info['kind']})"
    ax.set_title(f"{title}: {info['queries']} queries, collection {report.collection}")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.09), ncols=4)
    fig.tight_layout()
    out = Path(path).expanduser()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
    return out
