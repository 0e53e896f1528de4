#!/usr/bin/env python3
"""Write a sweep grid file (TOML) of the N best and N worst configurations of a reported sweep,
with their settings as the sweep trained them, so that more seeds can be run for them alone:

    python experiments/converged/ends.py SWEEP_DIR 5 > ends.toml
"""
import json
import sys
from pathlib import Path

KEYS = ("tie", "freeze_input", "freeze_output", "freeze_output_bias", "init")


def main(sweep: str, n: str) -> None:
    rows = sorted(json.loads((Path(sweep) / "results.json").read_text()), key=lambda r: r["valid ppl"])
    names = [r["configuration"] for r in rows if r.get("tie")]
    ends = names[:int(n)] + [m for m in names[-int(n):] if m not in names[:int(n)]]
    print(f"# the {n} best and {n} worst configurations of {sweep} (experiments/converged/ends.py)")
    for name in ends:
        cfg = json.loads((Path(sweep) / f"{name}.seed1" / "config.json").read_text())
        print(f'\n[runs."{name}"]')
        for k in KEYS:
            print(f"{k} = {json.dumps(cfg[k])}")


if __name__ == "__main__":
    main(*sys.argv[1:])
