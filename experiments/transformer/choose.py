#!/usr/bin/env python3
"""The search's winner as ``lmlow train`` flags (run.sh writes them to chosen.flags, once).

Usage: python experiments/transformer/choose.py SEARCH.toml SEARCH/results.json

The winner is the setting with the lowest validation perplexity (the mean over its seeds),
once every run the search planned (its sweep.json, beside results.json) has finished and
converged (a run ended by its cap is not a measurement of its settings); its settings other
than the configuration's own (tie, init) become flags, one per line, for the tables' sweeps.
"""
from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

CONFIGURATION_KEYS = {"tie", "init", "freeze_input", "freeze_output", "freeze_input_rows"}


def choose(grid: Path, results: Path) -> tuple[str, list[str]]:
    runs = tomllib.loads(grid.read_text())["runs"]
    rows = {r["configuration"]: r for r in json.loads(results.read_text())}
    missing = sorted(set(runs) - set(rows))
    if missing:
        raise SystemExit(f"choose: {results} has no row for {', '.join(missing)} (not finished)")
    plan = results.parent / "sweep.json"
    planned = json.loads(plan.read_text()) if plan.exists() else []
    unfinished = sorted(f"{r['name']}.seed{r['seed']}" for r in planned if r["name"] in runs
                        and r["seed"] not in rows[r["name"]]["seed list"])
    if unfinished:
        raise SystemExit(f"choose: {', '.join(unfinished)} not finished: no winner yet")
    open_runs = [n for n in runs if rows[n]["converged"].partition("/")[0] !=
                 rows[n]["converged"].partition("/")[2]]
    if open_runs:
        raise SystemExit(f"choose: {', '.join(open_runs)} did not converge: no winner yet")
    best = min(runs, key=lambda n: rows[n]["valid ppl"])
    flags = []
    for key, value in runs[best].items():
        if key not in CONFIGURATION_KEYS:
            flags += [f"--{key.replace('_', '-')}", str(value)]
    return best, flags


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        raise SystemExit(__doc__.split("\n\n")[1])
    best, flags = choose(Path(argv[0]), Path(argv[1]))
    print(f"# {best}: the lowest validation perplexity of {argv[1]}")
    print("\n".join(flags))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
