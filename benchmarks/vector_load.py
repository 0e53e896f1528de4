#!/usr/bin/env python3
"""Loading a GloVe text vector file: lmlow's reader (``lmlow.embeddings.load_vectors``: one
pass, every error with its line) against gensim's ``load_word2vec_format(no_header=True)``,
which lmlow used before (followed by a second pass of its own over the file for duplicates
and short lines, so the old cost was more than gensim's); and lmlow's words alone
(``vector_words``: what --extend-vocab, ``stats --embeddings`` and ``ngram`` read, which
loaded the whole matrix before). Each reader runs in a fresh process, so its peak memory
(``ru_maxrss`` above the process's own after imports) is its own. The digests of words and
float32 bits say whether they read the same vectors and words.

Usage: python benchmarks/vector_load.py FILE [--repeat 3]
       python benchmarks/vector_load.py --make FILE --words 400000 --dim 300 [--seed 0]
``--make`` writes a GloVe-format file of random vectors (six decimals, as Stanford's files)
to measure a file of glove.6B's size without downloading it; a FILE ending in ``.bin`` is
word2vec's binary format instead (lmlow's own reader since 2026-11-30 against gensim's
``binary=True``), one ending in ``.npz`` lmlow's own format as this tree's ``save_npz`` writes
it (gensim has no reader for it: lmlow's loader and the words alone only).
The peak is taken when the reader returns, before the digests (since 2026-11-30; before, it
included the digest's copies of the matrix).
Measure on a quiet machine and say which CPU.
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time

READERS = {
    "lmlow": "from lmlow.embeddings import load_vectors; kv = load_vectors(path); "
             "words, vectors = kv.index_to_key, kv.vectors",
    "gensim": "from gensim.models import KeyedVectors; binary = path.endswith('.bin'); "
              "kv = KeyedVectors.load_word2vec_format(path, binary=binary, no_header=not binary); "
              "words, vectors = kv.index_to_key, kv.vectors",
    # what --extend-vocab, stats --embeddings and ngram need: the words alone, no matrix
    "words": "from lmlow.embeddings import vector_words; words, vectors = vector_words(path), None",
}

CHILD = """
import hashlib, json, resource, sys, time
import numpy as np, gensim, lmlow.embeddings
path = sys.argv[1]
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.perf_counter()
{reader}
seconds = time.perf_counter() - t0
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
listed = "\\n".join(words).encode()
digest = None if vectors is None else hashlib.sha256(np.ascontiguousarray(vectors).tobytes()
                                                     + listed).hexdigest()
print(json.dumps({{"seconds": seconds, "peak_mb": (peak - base) / 1024, "words": len(words),
                  "dim": None if vectors is None else vectors.shape[1],
                  "digest": digest, "words_digest": hashlib.sha256(listed).hexdigest()}}))
"""


def measure(name: str, path: str) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD.format(reader=READERS[name]), path],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.splitlines()[-1])


def make(path: str, words: int, dim: int, seed: int) -> None:
    import numpy as np
    rng = np.random.default_rng(seed)
    if path.endswith(".npz"):                  # lmlow's own, as this tree writes it
        from gensim.models import KeyedVectors

        from lmlow.embeddings import save_npz
        kv = KeyedVectors(dim)
        kv.add_vectors([f"w{i}" for i in range(words)],
                       rng.standard_normal((words, dim)).astype(np.float32))
        save_npz(kv, path)
        return
    if path.endswith(".bin"):                  # word2vec's binary format, as its C tool writes it
        with open(path, "wb") as f:
            f.write(f"{words} {dim}\n".encode())
            for start in range(0, words, 10000):
                block = rng.standard_normal((min(10000, words - start), dim)).astype("<f4")
                f.writelines(f"w{start + i} ".encode() + row.tobytes() + b"\n"
                             for i, row in enumerate(block))
        return
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, words, 10000):
            block = rng.standard_normal((min(10000, words - start), dim)).astype(np.float32)
            f.writelines(f"w{start + i} " + " ".join(f"{x:.6f}" for x in row) + "\n"
                         for i, row in enumerate(block))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3, help="runs per reader, best kept (>= 1)")
    ap.add_argument("--make", action="store_true", help="write a random GloVe file to FILE "
                    "(word2vec binary if FILE ends in .bin, lmlow's .npz if in .npz)")
    ap.add_argument("--words", type=int, default=400000)
    ap.add_argument("--dim", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    if a.make:
        make(a.file, a.words, a.dim, a.seed)
        return
    best = {}
    readers = [n for n in READERS if n != "gensim" or not a.file.endswith(".npz")]
    for _ in range(max(1, a.repeat)):
        for name in readers:
            r = measure(name, a.file)
            if name not in best or r["seconds"] < best[name]["seconds"]:
                best[name] = r
    lm = best["lmlow"]
    print(f"{a.file}: {lm['words']} words x {lm['dim']} dims; best of {a.repeat}")
    for name, r in best.items():
        print(f"  {name:7s} {r['seconds']:7.2f} s   peak +{r['peak_mb']:7.0f} MB")
    if "gensim" in best:
        print(f"  gensim / lmlow time: {best['gensim']['seconds'] / lm['seconds']:.2f}x; "
              f"same words and float32 bits: {lm['digest'] == best['gensim']['digest']}")
    print(f"  digest of words and float32 bits: {lm['digest']}")
    wd = best["words"]
    print(f"  lmlow / words alone time: {lm['seconds'] / wd['seconds']:.2f}x; "
          f"the same words: {wd['words_digest'] == lm['words_digest']}")


if __name__ == "__main__":
    main()
