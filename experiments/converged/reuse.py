#!/usr/bin/env python3
"""Copy the finished runs of one converged sweep into another under the other's names, when the
two tables share configurations (Table 1's 20 include section 3's six): the same data,
vocabulary, vectors, model, seed and stopping rule would train the same run again, so it is
not trained again.

    python experiments/converged/reuse.py SRC_SWEEP DST_SWEEP          # copy
    python experiments/converged/reuse.py --check SRC_SWEEP DST_SWEEP  # verify

A copy keeps the run's record (config, metrics, summary, cached evaluations, log) and a
``reused_from`` file naming its source; model files stay out (they are not committed). The copy
is made only when DST has no folder of that name. ``--check`` then compares each copy's
``config.json`` with a run DST trained itself: they must differ only in the embedding roles and
the seed, or the copy is not the same experiment and the command fails (exit 1).
"""
import json
import shutil
import sys
from pathlib import Path

from lmlow.config import EmbeddingRoles

RECORD = ("config.json", "data.json", "metrics.jsonl", "summary.json",
          "eval_best_valid.json", "eval_best_test.json")
ROLES = {"tie", "freeze_input", "freeze_output", "init", "seed"}
MARK = "reused_from"


def name(run: Path) -> str:
    cfg = json.loads((run / "config.json").read_text())
    return f"{EmbeddingRoles.of(cfg).slug()}.seed{cfg['seed']}"


def copy(src: Path, dst: Path) -> list[str]:
    done = []
    for run in sorted(p for p in src.iterdir() if (p / "summary.json").exists()):
        target = dst / name(run)
        if target.exists() or not all((run / f).exists() for f in RECORD):
            continue
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in RECORD:
            shutil.copy2(run / f, tmp / f)
        (tmp / MARK).write_text(f"{run}\n")
        log = src / "logs" / f"{run.name}.log"
        if log.exists():
            (dst / "logs").mkdir(exist_ok=True)
            shutil.copy2(log, dst / "logs" / f"{target.name}.log")
        tmp.rename(target)
        done.append(f"{run} -> {target}")
    return done


def check(dst: Path) -> list[str]:
    runs = [p for p in sorted(dst.iterdir()) if (p / "config.json").exists()]
    own = [p for p in runs if not (p / MARK).exists() and (p / "summary.json").exists()]
    if not own:
        return [f"{dst}: no run of its own to compare the copies with yet"]
    ref = json.loads((own[0] / "config.json").read_text())
    bad = []
    for p in runs:
        if (p / MARK).exists():
            cfg = json.loads((p / "config.json").read_text())
            diff = sorted(k for k in set(cfg) | set(ref) if k not in ROLES and cfg.get(k) != ref.get(k))
            if diff:
                bad.append(f"{p}: differs from {own[0]} in {', '.join(diff)}")
    return bad


def main(argv: list[str]) -> int:
    verify = argv[:1] == ["--check"]
    src, dst = (Path(a) for a in argv[verify:])
    if verify:
        bad = check(dst)
        print("\n".join(bad) or f"{dst}: every copied run has the settings of its own runs")
        return 1 if bad and "yet" not in bad[0] else 0
    dst.mkdir(parents=True, exist_ok=True)
    print("\n".join(copy(src, dst)) or f"{dst}: nothing to copy from {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
