#!/usr/bin/env python3
"""Can a model whose input rows trained get back what freezing gives after unseen words, with
no training at all? `lmlow eval --map-unseen-inputs` (lmlow/input_map.py) against the frozen
run and the trained run as they are, on every ours / ours-unfrozen pair of the paper-recipe
tables whose best.pt this workspace kept (model files stay out of git), and on the Adam
protocol's ours-unfrozen trained again for it (adam-map.sh).

`freezing-costs.md` shows the frozen model predicting much better after the words that have
a vector but never occur in the LM text, and worse after the moderately frequent ones; the map
moves only the unread words' rows into the trained space. Its rule (map the words read 0
times, fit on those read 6 or more) was chosen on validation splits only (the words read at
most 0, 1 or 5 times, tried on four pairs) before any test split was scored. Writes
mapped-rows.md, and keeps each trained run's mapped evaluations in its folder
(``eval_mapped_{valid,test}.json``, what `lmlow eval RUN --map-unseen-inputs --json` prints;
``eval_mapped_outputs_*`` with --map-unseen-outputs, ``eval_mapped_both_*`` with both),
where experiments/claims.py finds it; one already there that the kept model no longer gives is
reported, not replaced (exit 1). The rows of pairs whose models are no longer here (a new
workspace keeps none) stay in mapped-rows.md as committed. Run from the repo root:

    python experiments/freezing/mapped_rows.py
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from lmlow.files import atomic_write_json, atomic_write_text, read_json, to_json  # noqa: E402
from lmlow.rundir import evaluation_name  # noqa: E402
from lmlow.runs import STAMP_KEYS, evaluation_record, load, model_stamp  # noqa: E402

HERE = Path("experiments/freezing")
FROZEN, TRAINED = "ours", "ours-unfrozen"


def pairs() -> list[tuple[Path, int, bool]]:
    """(table folder, seed, whether its frozen twin is here) of every finished trained-input
    run whose best.pt is here: the paper-recipe tables (``sweep-*``, each with its frozen
    twin) and the Adam protocol's runs trained again for the map (``adam-unfrozen``, none)."""
    found = []
    for table in sorted([*HERE.glob("*/sweep-*"), *HERE.glob("*/adam-unfrozen")]):
        for seed in (1, 2, 3):
            runs = [table / f"{name}.seed{seed}" for name in (TRAINED, FROZEN)]
            kept = [(r / "best.pt").exists() and (r / "summary.json").exists() for r in runs]
            if kept[0]:
                found.append((table, seed, kept[1]))
    return found


def after_unseen(ev) -> float:
    return {b["bin"]: b["perplexity"] for b in ev.context_bins}["unseen"]


def close(a, b, rel: float = 1e-9) -> bool:
    """Equal records, numbers to ``rel``: the map's R^2 comes from LAPACK, whose last digit
    can change with the thread count (0.7322225143294723 against ...722 on one run)."""
    if isinstance(a, dict):
        return (isinstance(b, dict) and a.keys() == b.keys()
                and all(close(a[k], b[k], rel) for k in a))
    if isinstance(a, list):
        return (isinstance(b, list) and len(a) == len(b)
                and all(close(x, y, rel) for x, y in zip(a, b)))
    if isinstance(a, float) and isinstance(b, (int, float)):
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    return a == b


def unstamped(record: dict) -> dict:
    """An evaluation without the stamp of the model file (its mtime changes with a checkout)."""
    return {k: v for k, v in record.items() if k not in STAMP_KEYS}


def keep(run_dir: Path, name: str, split: str, record: dict) -> bool:
    """Write a mapped evaluation beside the run's own (``eval_<name>_<split>.json``, named as
    lmlow.rundir.evaluation_name says) unless one is there; False when the one there differs
    from what the kept model gives now."""
    path = run_dir / f"eval_{name}_{split}.json"
    # as lmlow.runs.evaluation caches it (stamped with the model file), as it reads back
    record = json.loads(to_json(record | model_stamp(run_dir / "best.pt")))
    if not path.exists():
        atomic_write_json(path, record)
        return True
    if close(unstamped(read_json(path)), unstamped(record)):
        return True
    print(f"{path}: differs from what {run_dir}/best.pt gives now; left as it is", file=sys.stderr)
    return False


def row_key(row: str) -> tuple:
    """(table, seed, split) of a table row: the rows' order, and which are recomputed."""
    cells = [c.strip() for c in row.strip("|").split("|")]
    return cells[0], int(cells[1]), 0 if cells[3] == "valid" else 1


def merged(new: list[str], path: Path) -> list[str]:
    """The rows computed now, with the committed file's rows of the pairs not computed now
    (their models are gone from this workspace), in table, seed, split order."""
    done = {row_key(r)[:2] for r in new}
    old = []
    if path.exists():
        lines = [x for x in path.read_text().splitlines() if x.startswith("| ")][1:]
        old = [x for x in lines if row_key(x)[:2] not in done]
    return sorted([*old, *new], key=row_key)


def main() -> int:
    torch.set_num_threads(1)
    rows, same = [], True
    for table, seed, twin in pairs():
        frozen = load(table / f"{FROZEN}.seed{seed}", device="cpu") if twin else None
        trained = load(table / f"{TRAINED}.seed{seed}", device="cpu")
        mapped = load(table / f"{TRAINED}.seed{seed}", device="cpu", map_unseen_inputs=True)
        outputs = load(table / f"{TRAINED}.seed{seed}", device="cpu", map_unseen_outputs=True)
        both = load(table / f"{TRAINED}.seed{seed}", device="cpu", map_unseen_inputs=True,
                    map_unseen_outputs=True)
        m = mapped.mapped_inputs
        for split in ("valid", "test"):
            f, t, x, o, y = (run.evaluate(split) if run else None
                             for run in (frozen, trained, mapped, outputs, both))
            for scorer, ev in ((mapped, x), (outputs, o), (both, y)):
                name = evaluation_name(bool(scorer.mapped_inputs), bool(scorer.mapped_outputs))
                same &= keep(table / f"{TRAINED}.seed{seed}", name, split,
                             evaluation_record(ev, scorer.mapped_inputs, scorer.mapped_outputs))

            def ppl(ev) -> str:
                return f"{ev.perplexity:.2f} ({100 * (ev.perplexity / t.perplexity - 1):+.1f}%)"
            rows.append(f"| {table.relative_to(HERE)} | {seed} | {m.rows} ({m.fit_words}, "
                        f"{m.r2:.2f}) | {split} | {f'{f.perplexity:.2f}' if f else '-'} | "
                        f"{t.perplexity:.2f} | {ppl(x)} | "
                        f"{f'{after_unseen(f):.1f}' if f else '-'} / "
                        f"{after_unseen(t):.1f} / {after_unseen(x):.1f} | {ppl(o)} | {ppl(y)} | "
                        + " / ".join(f"{ev.perplexity_excluding_unk:.2f}" for ev in (t, x, o, y))
                        + " |")
            print(rows[-1], flush=True)
    lines = ["# Mapping the unseen words' input rows into the trained space", "",
             "Generated by `python experiments/freezing/mapped_rows.py` from the kept `best.pt` of "
             f"each `{FROZEN}` / `{TRAINED}` pair of the paper-recipe tables (`sweep-*`), and of "
             f"the Adam protocol's `{TRAINED}` trained again for the map (`adam-unfrozen`, "
             "`adam-map.sh`; no frozen twin kept: *-*). *mapped*: "
             f"`lmlow eval {TRAINED}.seedN --map-unseen-inputs`, the trained model with the input "
             "rows of the words that have a vector but are never read in the LM text replaced "
             "by their vectors through a linear map fitted on the words read at least 6 times; "
             "nothing is trained again. *rows*: words mapped (words fitted on, R^2 of the fit). "
             "Perplexity on the whole split; *after unseen*: on the tokens that follow a word "
             "read 0 times (`<unk>` apart). *outputs mapped* (`lmlow eval --map-unseen-outputs`): "
             "instead, the output rows of the words never seen as targets (`<unk>` among them) "
             "mapped from their vectors, by a map fitted on the output rows of the words read "
             "at least 6 times, the bias as trained; *both mapped*: `--map-unseen-inputs "
             "--map-unseen-outputs`. Changes in % of *trained*. *excluding `<unk>`*: the "
             "perplexity without the `<unk>` targets, trained / inputs mapped / outputs mapped "
             "/ both mapped, since much of the output side's gain is on `<unk>`.", "",
             "| table | seed | rows (fit, R^2) | split | frozen | trained | trained, mapped | "
             "after unseen: frozen / trained / mapped | outputs mapped | both mapped | "
             "excluding `<unk>`: trained / inputs / outputs / both |",
             "|---|---|---|---|---|---|---|---|---|---|---|", *merged(rows, HERE / "mapped-rows.md")]
    atomic_write_text(HERE / "mapped-rows.md", "\n".join(lines) + "\n")
    print(HERE / "mapped-rows.md")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
