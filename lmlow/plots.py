"""PNG plots of validation curves: one function for sweeps, comparisons and the demo, so
every "perplexity against time" figure reads the same (log perplexity axis, grid, legend)."""
from __future__ import annotations

from pathlib import Path

AXES = {"step": "updates", "elapsed": "training minutes"}


def pyplot():
    """matplotlib's pyplot without a display."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_validation_curves(series: list[dict], path: Path, x: tuple[str, ...] = ("elapsed",),
                           baselines: dict[str, float] | None = None, mark_step: int | None = None,
                           colours: str | None = None, size=None) -> None:
    """Validation perplexity of each series against updates (``step``) and/or minutes
    (``elapsed``), one panel per entry of ``x``. A series is ``{"label": str | None, "rows":
    metrics rows, "group": int}`` (series of one group share a colour, e.g. a configuration's
    seeds); ``baselines`` are drawn as dashed horizontal lines; ``mark_step`` as a dotted
    vertical line on the updates panel."""
    plt = pyplot()
    fig, axes = plt.subplots(1, len(x), figsize=size or (5.5 * len(x) + (3.5 if len(x) == 1 else 0), 4.6),
                             squeeze=False)
    cmap = plt.get_cmap(colours) if colours else None
    for ax, key in zip(axes[0], x):
        for s in series:
            pts = [r for r in s["rows"] if "valid_ppl" in r and r.get(key) is not None]
            if not pts:
                continue
            g = s.get("group", 0)
            ax.plot([r[key] / 60 if key == "elapsed" else r[key] for r in pts],
                    [r["valid_ppl"] for r in pts], "o-", ms=3, lw=1.2, alpha=0.9,
                    color=cmap(g % cmap.N) if cmap else f"C{g % 10}", label=s.get("label"))
        for name, value in (baselines or {}).items():
            ax.axhline(value, color="black", ls="--", lw=1, label=name)
        if mark_step and key == "step":
            ax.axvline(mark_step, color="gray", ls=":", lw=1)
        ax.set_xlabel(AXES[key])
        ax.set_ylabel("validation perplexity")
        ax.set_yscale("log")
        ax.grid(alpha=0.3, which="both")
    axes[0][0].legend(fontsize=7, ncol=2 if len(series) > 8 else 1)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
