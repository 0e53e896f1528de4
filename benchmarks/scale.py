#!/usr/bin/env python3
"""Every data step of lmlow at growing corpus sizes: wall time and peak memory (each step a
fresh process, its own peak RSS from wait4), so that growth with the token count is visible.

Steps: ``lmlow prepare`` (whitespace; spaCy up to --spacy-max tokens), ``lmlow vocab``,
``lmlow stats``, the first encoding of the training split into the cache and a cached re-open
(``Corpus.encode`` in a fresh process), ``lmlow embed`` (GloVe, --dim, one AdaGrad epoch: the
counting and shuffling that scale with the text, plus one pass), ``lmlow ngram --order 5`` and
one epoch's data pass of ``lmlow train`` (the batching loop over the cached ids: what the
trainer does besides the model).

The text: the SOURCES (tokenised paragraphs, one per line) concatenated and, where the size
asks for more than they hold, repeated; the table says how many distinct tokens each size has.
Targets: memory grows with the vocabulary, not the token count; prepare and encode stay under
2 GB at 100M tokens; a cached re-open under a second.

Usage: python benchmarks/scale.py --sources data/pylibs.txt data/pydocs/train.txt \\
           data/sotu/train.txt data/ptb/train.txt --sizes 10M 30M 100M --work /tmp/scale
Writes WORK/scale.json, WORK/scale.md (a table) and WORK/scale.png (log-log), and prints the table.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ENCODE = "from lmlow.data.corpus import Corpus; import sys; Corpus(sys.argv[1]).encode('train')"
DATA_PASS = """
import random, sys, time
import numpy as np, torch
from lmlow.data.corpus import Corpus
from lmlow.train import batchify, seq_length
ids = Corpus(sys.argv[1]).encode('train').ids
data, rng, pos, n = batchify(ids, 80), random.Random(1), 0, 0
while pos < data.shape[0] - 2:
    seq = min(seq_length(rng, 70), data.shape[0] - 1 - pos)
    x = torch.from_numpy(np.ascontiguousarray(data[pos:pos + seq], np.int64))
    y = torch.from_numpy(np.ascontiguousarray(data[pos + 1:pos + 1 + seq], np.int64))
    n += x.numel(); pos += seq
print(n)
"""


def parse_size(text: str) -> int:
    scale = {"K": 10**3, "M": 10**6, "G": 10**9}.get(text[-1].upper(), 1)
    return int(float(text.rstrip("KMGkmg")) * scale)


def build_text(sources: list[Path], tokens: int, out: Path) -> dict:
    """``out``: the sources' lines in order, repeated until ``tokens`` tokens; returns the
    distinct (first-pass) token count."""
    written, distinct, passes = 0, 0, 0
    with open(out, "w", encoding="utf-8") as f:
        while written < tokens:
            passes += 1
            for src in sources:
                with open(src, encoding="utf-8") as s:
                    for line in s:
                        n = len(line.split())
                        if not n:
                            continue
                        f.write(line if line.endswith("\n") else line + "\n")
                        written += n
                        distinct += n if passes == 1 else 0
                        if written >= tokens:
                            return {"tokens": written, "distinct_tokens": distinct, "passes": passes}
    return {"tokens": written, "distinct_tokens": distinct, "passes": passes}


def measure(cmd: list[str], env: dict, log: Path) -> dict:
    """Wall seconds and the process tree's peak RSS (the largest of the process and its
    waited-for children, as wait4 reports)."""
    t0 = time.perf_counter()
    with open(log, "a") as f:
        f.write(f"$ {' '.join(map(str, cmd))}\n")
        f.flush()
        proc = subprocess.Popen(cmd, stdout=f, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        raise SystemExit(f"failed (exit {code}): {' '.join(map(str, cmd))}; see {log}")
    return {"seconds": round(seconds, 2), "peak_rss_mb": round(usage.ru_maxrss / 1024)}


def steps(size: int, work: Path, args) -> list[tuple[str, list[str]]]:
    py, lmlow = sys.executable, [sys.executable, "-m", "lmlow.cli"]
    raw, corpus = work / f"raw{size}.txt", work / f"corpus{size}"
    out = [("prepare (whitespace)", [*lmlow, "prepare", raw, "--out", corpus, "--documents",
                                     "line", "--valid", "0.005", "--test", "0.005", "--force"])]
    if size <= args.spacy_max:
        out.append(("prepare (spaCy)", [*lmlow, "prepare", raw, "--out", work / f"spacy{size}",
                                        "--tokenizer", "spacy", "--documents", "line",
                                        "--valid", "0.005", "--test", "0.005", "--force"]))
    out += [("vocab", [*lmlow, "vocab", corpus, "--json"]),
            ("stats", [*lmlow, "stats", corpus, "--json"]),
            ("encode (first, into the cache)", [py, "-c", ENCODE, corpus]),
            ("encode (cached re-open)", [py, "-c", ENCODE, corpus]),
            ("train: one epoch's data pass", [py, "-c", DATA_PASS, corpus]),
            (f"embed (GloVe {args.dim}-d, 1 epoch)", [*lmlow, "embed", corpus / "train.txt",
                                                      "--out", work / f"vec{size}.txt", "--dim",
                                                      str(args.dim), "--epochs", "1", "--force",
                                                      "--tmp-dir", work]),
            ("ngram --order 5", [*lmlow, "ngram", corpus, "--order", "5", "--out",
                                 work / f"kn{size}", "--force", "--quiet", "--memory", "4G"])]
    return [(name, [str(c) for c in cmd]) for name, cmd in out if name not in args.skip]


def plot(rows: list[dict], png: Path) -> None:
    from lmlow.plots import pyplot

    plt = pyplot()
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5))
    for name in dict.fromkeys(r["step"] for r in rows):
        pts = [r for r in rows if r["step"] == name]
        a.loglog([r["tokens"] for r in pts], [r["seconds"] for r in pts], "o-", label=name)
        b.loglog([r["tokens"] for r in pts], [r["peak_rss_mb"] for r in pts], "o-", label=name)
    a.set(xlabel="corpus tokens", ylabel="seconds", title="time")
    b.set(xlabel="corpus tokens", ylabel="peak RSS (MB)", title="memory")
    b.axhline(2048, color="grey", ls=":", lw=1)
    a.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png, dpi=120)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sources", type=Path, nargs="+", required=True)
    ap.add_argument("--sizes", nargs="+", default=["10M", "30M", "100M"])
    ap.add_argument("--work", type=Path, required=True, help="scratch folder (gigabytes)")
    ap.add_argument("--dim", type=int, default=400)
    ap.add_argument("--spacy-max", type=parse_size, default=parse_size("100M"),
                    help="run the spaCy tokeniser only up to this size")
    ap.add_argument("--skip", nargs="*", default=[], help="step names to leave out")
    args = ap.parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, LMLOW_CACHE_DIR=str(args.work / "cache"))
    log, rows = args.work / "scale.log", []
    result = args.work / "scale.json"
    for size in map(parse_size, args.sizes):
        text = build_text(args.sources, size, args.work / f"raw{size}.txt")
        print(f"{text['tokens']:,} tokens ({text['distinct_tokens']:,} distinct, "
              f"{text['passes']} pass(es) over the sources)", flush=True)
        shutil.rmtree(args.work / "cache", ignore_errors=True)
        for name, cmd in steps(size, args.work, args):
            m = measure(cmd, env, log)
            rows.append({"tokens": text["tokens"], "distinct_tokens": text["distinct_tokens"],
                         "step": name, **m})
            print(f"  {name}: {m['seconds']:.1f} s, {m['peak_rss_mb']:,} MB", flush=True)
            result.write_text(json.dumps(rows, indent=1) + "\n")
    from lmlow.tables import markdown

    cols = ["step", "tokens", "distinct_tokens", "seconds", "peak_rss_mb"]
    table = markdown(cols, [[r[c] for c in cols] for r in rows])
    (args.work / "scale.md").write_text(table + "\n")
    plot(rows, args.work / "scale.png")
    print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
