#!/usr/bin/env python3
"""Score the LSTMs of EXPERIMENT/sweep alone, the 5-gram of EXPERIMENT/kenlm5 alone, and each
LSTM mixed word by word with the 5-gram (the weight tuned by EM on the validation split), with
lines carried (the LSTM's default) and with every line from a fresh state (the n-gram's only
way); write EXPERIMENT/results.json and results.md.

    python experiments/interpolation/measure.py experiments/interpolation

First it checks that each LSTM is the run of ../six it was trained again to be: the same
number of epochs, the same best epoch and the same validation perplexity after every epoch to
1e-4 relative (float rounding differs between machines: 1e-5 was seen; different data, settings
or software would show far more, and the command stops).
"""
import sys
from pathlib import Path

import lmlow
from lmlow.files import atomic_write_json, atomic_write_text
from lmlow.rundir import RunDir
from lmlow.tables import markdown

SIX = Path("experiments/six/sweep")


def curve(run: Path) -> list[float]:
    return [r["valid_ppl"] for r in RunDir(run).learning_curve()]


def check_same_as_six(run: Path) -> float:
    """The largest relative difference between the run's validation curve and ../six's; stops
    unless both have the same epochs, the same best epoch and every value within 1e-4."""
    ours, theirs = curve(run), curve(SIX / run.name)
    worst = max((abs(a - b) / b for a, b in zip(ours, theirs)), default=0.0)
    if len(ours) != len(theirs) or ours.index(min(ours)) != theirs.index(min(theirs)) or worst > 1e-4:
        raise SystemExit(f"{run}: its validation curve differs from {SIX / run.name}'s "
                         f"({len(ours)} vs {len(theirs)} epochs, up to {worst:.1e} apart); "
                         "not the same run")
    return worst


def row(model: str, lines: str, scorer, weight=None) -> dict:
    valid, test = scorer.evaluate("valid", reset_lines=lines == "reset"), \
        scorer.evaluate("test", reset_lines=lines == "reset")
    return {"model": model, "lines": lines, "weight of the LSTM": weight,
            "valid ppl": valid.perplexity, "test ppl": test.perplexity,
            "test ppl excluding <unk>": test.perplexity_excluding_unk, "test tokens": test.tokens}


def main(experiment: str) -> None:
    import torch

    torch.set_num_threads(1)             # beside other runs on 2 cores (experiments/README.md)
    e = Path(experiment)
    runs = sorted(p for p in (e / "sweep").iterdir() if (p / "summary.json").exists())
    same = {run.name: check_same_as_six(run) for run in runs}
    kenlm = lmlow.load(e / "kenlm5")
    rows = [row("KenLM 5-gram", "reset", kenlm)]
    for run in runs:
        lstm = lmlow.load(run)
        for lines in ("carried", "reset"):
            rows.append(row(run.name, lines, lstm))
            mix = lmlow.interpolate(lstm, kenlm, reset_lines=lines == "reset")
            rows.append(row(f"{run.name} + KenLM 5-gram", lines, mix, round(mix.weight, 4)))
    atomic_write_json(e / "results.json", rows, indent=1)
    cols = list(rows[0])
    table = markdown(cols, [[r[c] for c in cols] for r in rows], digits=4)
    agree = "; ".join(f"{n}: {d:.1e}" for n, d in same.items())
    atomic_write_text(e / "results.md", "# LSTM, 5-gram and their mixture (K=0, pydocs-mini-q)\n\n"
                      "Written by `experiments/interpolation/measure.py`; lines `reset`: every "
                      "line scored from a fresh state (KenLM always does). The LSTMs are "
                      "../six's runs trained again: same epochs and best epoch, validation "
                      f"perplexities at most this far apart (relative) from ../six's: {agree} "
                      "(float rounding, which differs between machines).\n\n" + table + "\n")
    print(table)


if __name__ == "__main__":
    main(*sys.argv[1:])
