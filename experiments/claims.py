#!/usr/bin/env python3
"""The paper's claims, checked against committed sweep results (``results.json`` written by
``lmlow report``). Prints Markdown. Run from the repo root:

    python experiments/claims.py

A difference counts only when it is larger than twice the larger seed sd (or, with one seed,
than 2% of the perplexity): the rest is reported as "no clear difference".
"""
from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def rows(path: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    return {r["configuration"]: r for r in json.loads(path.read_text()) if r.get("tie")}


def verdict(better: dict, worse: dict) -> str:
    """'yes' if ``better`` has clearly lower valid ppl than ``worse``, 'no' if clearly higher."""
    d = worse["valid ppl"] - better["valid ppl"]
    sds = [x for x in (better.get("valid sd"), worse.get("valid sd")) if x]
    margin = 2 * max(sds) if sds else 0.02 * min(better["valid ppl"], worse["valid ppl"])
    return "yes" if d > margin else "no" if -d > margin else "no clear difference"


def line(label: str, better: dict, worse: dict) -> str:
    return (f"| {label} | {better['configuration']} {better['valid ppl']:.1f} | "
            f"{worse['configuration']} {worse['valid ppl']:.1f} | {verdict(better, worse)} |")


def table1_pairs(t1: dict[str, dict], a: str, b: str) -> list[tuple[dict, dict]]:
    """Pairs of Table 1 configurations whose names differ only by ``a`` -> ``b`` in the input part."""
    out = []
    for name, r in t1.items():
        head, _, tail = name.partition(".out-") if name.startswith("untied") else (name, "", "")
        if a in head:
            other = head.replace(a, b) + ((".out-" + tail) if tail else "")
            if other in t1:
                out.append((t1[other], r))
    return out


def main() -> None:
    six = rows(HERE / "six-pydocs-mini/sweep/results.json")
    unk = rows(HERE / "table3/sweep/results.json")
    print("| claim | expected better | expected worse | holds here? |\n|---|---|---|---|")
    for corpus in ("pydocs-mini", "ptb"):
        t1 = rows(HERE / f"table1/{corpus}/results.json")
        for better, worse in table1_pairs(t1, "rand", "pre"):
            print(line(f"1. pretrained input beats random (Table 1, {corpus})", better, worse))
    for corpus in ("pydocs-mini", "ptb"):
        t1 = rows(HERE / f"table1/{corpus}/results.json")
        for better, worse in table1_pairs(t1, "pre", "pre-frozen"):
            print(line(f"2. freezing pretrained input helps (Table 1, {corpus})", better, worse))
    if six:
        print(line("1. pretrained input beats random (six, 3 seeds)", six["standard+pretraining"], six["standard"]))
        print(line("2. freezing pretrained input helps (six)", six["ours"], six["ours-unfrozen"]))
        print(line("2. freezing pretrained input helps (six)", six["ours-random-output"],
                   six["ours-random-output-unfrozen"]))
        for untied in ("ours-unfrozen", "ours"):
            print(line("3. with pretrained input, untied beats tied (six, K=0)", six[untied],
                       six["standard+pretraining"]))
    for corpus in ("pydocs-mini", "ptb"):
        t1 = rows(HERE / f"table1/{corpus}/results.json")
        for name in [n for n in t1 if n.startswith("untied.in-pre") and "out-pre" in n and "frozen" not in n.split(".out-")[1]]:
            tied = "tied.pre-frozen" if "in-pre-frozen" in name else "tied.pre"
            if tied in t1:
                print(line(f"3. with pretrained input, untied beats tied (Table 1, {corpus})", t1[name], t1[tied]))
    if six and unk:
        print("\n4. The gain of `ours` over `standard` by UNK threshold K (valid perplexity; K=0 is "
              "the 3-seed mean of the six):\n")
        print("| K | standard | ours | gain | gain % |\n|---|---|---|---|---|")
        for k in (0, 1, 2, 5):
            src = six if k == 0 else {n.removesuffix(f".K{k}"): r for n, r in unk.items() if n.endswith(f".K{k}")}
            if "standard" in src and "ours" in src:
                s, o = src["standard"]["valid ppl"], src["ours"]["valid ppl"]
                print(f"| {k} | {s:.1f} | {o:.1f} | {s - o:.1f} | {100 * (s - o) / s:.1f} |")


if __name__ == "__main__":
    main()
