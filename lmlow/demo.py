"""``make demo``: the paper in miniature on the bundled corpus (corpora/pydocs-mini).

Trains in-domain GloVe vectors on the bundled pretraining text, then the standard
configuration (tied, random init) and the recommended one (untied, frozen pretrained input,
pretrained output, log-unigram output bias) under the same time budget, and a KenLM 5-gram on the same tokens,
and prints the comparison (validation and test perplexity, rare-word bins, time) with the
learning curves as a PNG. Reuses what a previous run built. Usage: python -m lmlow.demo [--minutes-per-model 4] [--glove-epochs 15] [--out runs/demo]
"""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from lmlow.files import atomic_write_text
from lmlow.plots import plot_validation_curves

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpora" / "pydocs-mini"
CONFIGS = {
    "standard (tied, random)": dict(tie=True, init=("random",)),
    "recommended (untied, frozen GloVe input, GloVe output, unigram bias)":
        dict(tie=False, freeze_input=True, init=("glove", "glove-output", "unigram")),
}


def main(argv=None) -> int:
    from lmlow.config import build_config
    from lmlow.errors import LmlowError
    from lmlow.glove import GloveConfig, save_vectors, train_glove
    from lmlow.ngram import train_ngram
    from lmlow.rundir import RunDir
    from lmlow.runs import load
    from lmlow.train import train

    ap = argparse.ArgumentParser(description="The paper in miniature on the bundled corpus.")
    ap.add_argument("--out", type=Path, default=ROOT / "runs" / "demo",
                    help="where the vectors, runs, table and plot go, and are reused from "
                    "(default runs/demo)")
    ap.add_argument("--minutes-per-model", type=float, default=4.0,
                    help="training budget of each LSTM (default 4)")
    ap.add_argument("--glove-epochs", type=int, default=15, help="GloVe epochs (default 15)")
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    try:
        vectors = args.out / "pretrain.200d.txt"
        if not vectors.exists():
            print(f"1. GloVe vectors on the bundled pretraining text (200 dims, {args.glove_epochs} "
                  "epochs)", flush=True)
            kv, rep = train_glove([CORPUS / "pretrain.txt.gz"], GloveConfig(dim=200, epochs=args.glove_epochs))
            save_vectors(kv, vectors)
            print(f"   {rep.vocabulary} words in {rep.seconds_counting + rep.seconds_training:.0f}s")
        rows = []
        for i, (name, settings) in enumerate(CONFIGS.items(), 2):
            run = RunDir(args.out / ("standard" if i == 2 else "recommended"))
            if not run.finished:
                print(f"{i}. {name}: {args.minutes_per_model:g} minutes", flush=True)
                cfg = build_config("small", None, corpus=str(CORPUS), embeddings=str(vectors),
                                   max_time=args.minutes_per_model, **settings)
                train(cfg, run.path, force=True, quiet=True)
            rows.append(_row(name, run, load(run.path)))
        kn = RunDir(args.out / "kenlm5")
        if not kn.finished:
            print("4. KenLM 5-gram (modified Kneser-Ney) on the same tokens", flush=True)
            train_ngram(CORPUS, kn.path, order=5, force=True, quiet=True)
        rows.insert(0, _row("KenLM 5-gram", kn, load(kn.path)))
    except LmlowError as e:
        print(f"demo: error: {e}", file=sys.stderr)
        return 1
    atomic_write_text(args.out / "results.md", _print_table(rows) + "\n")
    series = [{"label": name, "rows": RunDir(args.out / folder).metrics(), "group": i}
              for i, (name, folder) in enumerate(zip(CONFIGS, ("standard", "recommended")))]
    plot_validation_curves(series, args.out / "curves.png", size=(6, 4))
    print(f"\ntable: {args.out / 'results.md'}; learning curves: {args.out / 'curves.png'}")
    return 0


def _row(name: str, run, scorer) -> dict:
    valid, test = scorer.evaluate("valid"), scorer.evaluate("test")
    rare = [b for b in test.bins if b["bin"] in ("1", "2-5") and b["tokens"]]
    n = sum(b["tokens"] for b in rare)
    rare_ppl = math.exp(sum(b["tokens"] * math.log(b["perplexity"]) for b in rare) / n) if n else float("nan")
    return {"configuration": name, "valid": valid.perplexity, "test": test.perplexity,
            "test_rare": rare_ppl, "seconds": float(run.summary()["train_seconds"])}


def _print_table(rows) -> str:
    from lmlow.tables import markdown
    table = markdown(["configuration", "valid ppl", "test ppl", "test ppl, words seen 1-5 times",
                      "training s"], [[r["configuration"], r["valid"], r["test"], r["test_rare"],
                                       r["seconds"]] for r in rows], digits=4)
    print("\n" + table)
    return table


if __name__ == "__main__":
    sys.exit(main())
