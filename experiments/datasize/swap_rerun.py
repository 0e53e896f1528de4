#!/usr/bin/env python3
"""Swap the data-size table's one-thread reruns into its sweep (rerun.sh, issue 24's audit):
every run of ``sweep/`` whose config has another thread count must have a twin in
``rerun-1thread/`` that has finished, converged (stopped by the patience rule, not a cap), and
has the same settings but one thread; only then do the old folders (and logs) move to
``superseded-threads2/`` and the twins take their places. Nothing moves otherwise.

Usage: swap_rerun.py EXPERIMENT_DIR    (exit 0 swapped, 3 not finished yet, 1 refused)
"""
from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from lmlow.config import Config
from lmlow.files import atomic_write_json

NOT_YET = 3


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def check(exp: Path) -> list[str]:
    """The names to swap; SystemExit (NOT_YET or a reason) when they cannot be, yet or at all."""
    old_dir, new_dir = exp / "sweep", exp / "rerun-1thread"
    names = sorted(c.parent.name for c in old_dir.glob("*/config.json")
                   if read(c).get("threads") != 1)
    if not names:
        raise SystemExit(f"swap: no run of {old_dir} has another thread count; nothing to swap")
    for name in names:
        new = new_dir / name
        if not (new / "summary.json").exists():
            print(f"swap: {new} has not finished; rerun.sh continues it")
            raise SystemExit(NOT_YET)
        if read(new / "summary.json").get("stopped_by") != "patience":
            raise SystemExit(f"swap: {new} did not converge (stopped by a cap); nothing swapped")
        # as lmlow reads them back: a setting added since the old run has its default
        a, b = (Config.load(d / "config.json").to_dict() for d in (old_dir / name, new))
        differ = sorted(k for k in a if k != "threads" and a[k] != b[k])
        if differ or b.get("threads") != 1:
            raise SystemExit(f"swap: {new} is not {old_dir / name} at one thread "
                             f"(differs in: {', '.join(differ) or 'threads'}); nothing swapped")
    return names


def swap(exp: Path, names: list[str]) -> None:
    old_dir, new_dir, gone = exp / "sweep", exp / "rerun-1thread", exp / "superseded-threads2"
    (gone / "logs").mkdir(parents=True, exist_ok=True)
    for name in names:
        if (gone / name).exists():
            raise SystemExit(f"swap: {gone / name} exists already; nothing more swapped")
    for name in names:
        shutil.move(old_dir / name, gone / name)
        shutil.move(new_dir / name, old_dir / name)
        relocate(old_dir / name / "summary.json", str(new_dir / name), str(old_dir / name))
        log = f"logs/{name}.log"
        if (old_dir / log).exists():
            shutil.move(old_dir / log, gone / log)
        if (new_dir / log).exists():
            shutil.move(new_dir / log, old_dir / log)
    (gone / "swapped.txt").write_text(
        "Trained with two threads against the protocol's one; replaced in ../sweep by the same "
        "runs at one thread (rerun.sh):\n" + "".join(f"{n}\n" for n in names))


def relocate(summary: Path, was: str, now: str) -> None:
    """The summary's own paths (``run_dir``, ``checkpoint``) name the folder it now lives in."""
    data = read(summary)
    moved = {k: now + v[len(was):] for k, v in data.items()
             if k in ("run_dir", "checkpoint") and isinstance(v, str) and v.startswith(was)}
    if moved:
        atomic_write_json(summary, data | moved, indent=2)


def main(argv: list[str]) -> int:
    exp = Path(argv[1])
    names = check(exp)
    swap(exp, names)
    print(f"swap: {len(names)} runs swapped in; the two-thread ones are in "
          f"{exp / 'superseded-threads2'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
