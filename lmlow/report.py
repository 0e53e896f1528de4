"""``lmlow report SWEEP_DIR``: one table row per configuration (mean +- sd over seeds) and the
validation learning curves of all runs in one plot."""
from __future__ import annotations

import json
import math
import re
import statistics
from pathlib import Path

from lmlow.errors import LmlowError
from lmlow.tables import markdown, to_csv

COLUMNS = ["configuration", "tie", "input", "output", "unigram bias", "seeds", "trainable params",
           "frozen params", "valid ppl", "valid sd", "test ppl", "test sd", "tokens/s", "minutes"]


def run_folders(sweep_dir: Path) -> list[Path]:
    return sorted(p.parent for p in Path(sweep_dir).glob("*/summary.json"))


def evaluation(run_dir: Path, split: str) -> dict:
    """The best checkpoint's evaluation, cached beside it (recomputed if the checkpoint changed)."""
    from lmlow.runs import default_checkpoint, load

    checkpoint = default_checkpoint(run_dir)
    cache = run_dir / f"eval_best_{split}.json"
    stamp = (run_dir / f"{checkpoint}.pt").stat().st_mtime
    if cache.exists():
        data = json.loads(cache.read_text())
        if data.get("checkpoint_mtime") == stamp:
            return data
    data = load(run_dir, checkpoint=checkpoint).evaluate(split).to_dict() | {"checkpoint_mtime": stamp}
    cache.write_text(json.dumps(data, indent=1) + "\n")
    return data


def _roles(cfg: dict) -> tuple[str, str, str]:
    init = set(cfg.get("init", ["random"]))
    inp = ("pretrained" if "glove" in init else "random") + (", frozen" if cfg.get("freeze_input") else "")
    if cfg.get("tie", True):
        return "tied", inp, "= input"
    out = ("pretrained" if "glove-output" in init else "random") + (", frozen" if cfg.get("freeze_output") else "")
    return "untied", inp, out


def _metrics(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def collect(sweep_dir: Path) -> list[dict]:
    """One row per configuration; seeds are the runs named ``CONFIG.seedN``."""
    groups: dict[str, list[Path]] = {}
    for run in run_folders(sweep_dir):
        groups.setdefault(re.sub(r"\.seed\d+$", "", run.name), []).append(run)
    if not groups:
        raise LmlowError(f"{sweep_dir}: no finished runs (run folders with summary.json)")
    rows = []
    for name, runs in groups.items():
        cfg = json.loads((runs[0] / "config.json").read_text())
        summaries = [json.loads((r / "summary.json").read_text()) for r in runs]
        valid = [evaluation(r, "valid")["perplexity"] for r in runs]
        test = [evaluation(r, "test")["perplexity"] for r in runs]
        speeds = [s["tokens_per_s"] for s in summaries if "tokens_per_s" in s]  # whole run, wall clock
        tie, inp, out = _roles(cfg)
        rows.append({"configuration": name, "tie": tie, "input": inp, "output": out,
                     "unigram bias": "yes" if "unigram" in cfg.get("init", []) else "no",
                     "seeds": len(runs), "trainable params": summaries[0].get("trainable"),
                     "frozen params": summaries[0].get("frozen"),
                     "valid ppl": statistics.mean(valid), "valid sd": _sd(valid),
                     "test ppl": statistics.mean(test), "test sd": _sd(test),
                     "tokens/s": round(statistics.mean(speeds)) if speeds else None,
                     "minutes": statistics.mean(s["train_seconds"] for s in summaries) / 60,
                     "runs": [str(r) for r in runs]})
    rows.sort(key=lambda r: -r["valid ppl"])       # as the paper's Table 1: worst first
    return rows


def _sd(xs: list[float]) -> float | None:
    return statistics.stdev(xs) if len(xs) > 1 else None


def baseline_row(run_dir: Path) -> dict:
    """A KenLM (or any other) run folder as an extra row."""
    from lmlow.runs import load

    scorer = load(run_dir)
    cfg = json.loads((Path(run_dir) / "config.json").read_text())
    name = f"KenLM {cfg['order']}-gram" if "order" in cfg else Path(run_dir).name
    return {"configuration": name, "tie": "", "input": "", "output": "", "unigram bias": "",
            "seeds": 1, "trainable params": None, "frozen params": None,
            "valid ppl": scorer.evaluate("valid").perplexity, "valid sd": None,
            "test ppl": scorer.evaluate("test").perplexity, "test sd": None,
            "tokens/s": None, "minutes": cfg.get("train_seconds", 0) / 60, "runs": [str(run_dir)]}


def write_report(sweep_dir: Path, baseline: Path | None = None) -> list[Path]:
    sweep_dir = Path(sweep_dir)
    rows = collect(sweep_dir)
    if baseline:
        rows.append(baseline_row(baseline))
    table = [[r[c] for c in COLUMNS] for r in rows]
    md = sweep_dir / "results.md"
    md.write_text(f"# {sweep_dir.name}\n\nValidation and test perplexity of each run's best "
                  f"checkpoint; mean and sd over seeds.\n\n" + markdown(COLUMNS, table, digits=4) + "\n")
    csv = sweep_dir / "results.csv"
    csv.write_text(to_csv(COLUMNS, table))
    (sweep_dir / "results.json").write_text(json.dumps(rows, indent=1) + "\n")
    png = sweep_dir / "curves.png"
    plot_curves(rows, png)
    return [md, csv, sweep_dir / "results.json", png]


def plot_curves(rows: list[dict], out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5.5))
    colours = plt.get_cmap("tab20")
    for i, row in enumerate(r for r in rows if r["tie"]):
        for j, run in enumerate(row["runs"]):
            pts = [(m["elapsed"] / 60, m["valid_ppl"]) for m in _metrics(Path(run)) if "valid_ppl" in m]
            if pts:
                xs, ys = zip(*pts)
                ax.plot(xs, ys, color=colours(i % 20), alpha=0.9, lw=1.2,
                        label=row["configuration"] if j == 0 else None)
    for row in rows:
        if not row["tie"] and math.isfinite(row["valid ppl"]):
            ax.axhline(row["valid ppl"], color="black", ls="--", lw=1, label=row["configuration"])
    ax.set_xlabel("training minutes")
    ax.set_ylabel("validation perplexity")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(out, dpi=120)
    plt.close(fig)
