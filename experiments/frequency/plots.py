"""Meister et al.'s Fig. 4 and Kobayashi et al.'s Fig. 1 for both runs in one figure, from the
analysis.json files `lmlow analyze` wrote. Usage: python plots.py [SUFFIX] (from anywhere):
analysis/unigramSUFFIX and analysis/zeroSUFFIX -> fig4SUFFIX.png, fig1kSUFFIX.png."""
import json
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).parent
SUFFIX = sys.argv[1] if len(sys.argv) > 1 else ""
RUNS = {"unigram init": HERE / f"analysis/unigram{SUFFIX}/analysis.json",
        "zero init": HERE / f"analysis/zero{SUFFIX}/analysis.json"}
data = {k: json.loads(p.read_text()) for k, p in RUNS.items()}

for key, ylabel, name in (("logprob_vs_frequency", "mean ln p(target), per word type", f"fig4{SUFFIX}.png"),
                          ("prediction_vs_frequency", "ln mean predicted probability",
                           f"fig1k{SUFFIX}.png")):
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, part, title in zip(axes, ("full", "no_bias"), ("all parameters", "bias dropped (W h only)")):
        for i, (run, d) in enumerate(data.items()):
            rows = d[key][part]
            ax.plot([r["x"] for r in rows], [r["y"] for r in rows], "o-", ms=3, color=f"C{i}",
                    label=run)
        if key == "prediction_vs_frequency":
            xs = [r["x"] for d in data.values() for r in d[key][part]]
            ax.plot([min(xs), max(xs)], [min(xs), max(xs)], "k--", lw=0.8, label="unigram")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("ln unigram probability (training)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].legend(fontsize=8)
    fig.suptitle("PTB valid, best checkpoints", fontsize=10)
    fig.tight_layout()
    fig.savefig(HERE / name, dpi=110)
    plt.close(fig)
    print("wrote", HERE / name)
