#!/usr/bin/env python3
"""Next-word lists (`lmlow predict`, ``Scorer.reader``): milliseconds per word typed, for a
keyboard's loop over a line. Builds a real run of the ``--preset``'s size on the bundled
corpus (``lmlow train --max-epochs 0``: the untrained model, whose cost is the trained one's)
and a KenLM 5-gram of it, then over ``--lines`` lines of its valid split measures, per word:
the reader fed that word and asked for its 10 most probable next words, against
``next_words`` re-reading the whole line so far, and `lmlow predict --file`'s loop
(``lmlow.predict.predictions``) given each start of each line as a context, which it reads on
from the context before; and the model as `lmlow export` writes it, stepped by PyTorch alone (`--preset transformer-small`:
the Transformer, its memory padded to its context).

Usage: python benchmarks/predict_speed.py [--preset small] [--lines 20] [--threads 1]
       [--work DIR]
Measure on a quiet machine and say which CPU.
"""
from __future__ import annotations

import sys
import time

from bundled_runs import CORPUS, arguments, bundled_runs


def per_word(scorer, lines: list[list[str]]) -> tuple[float, float, float]:
    """ms per word: a reader fed word by word, re-reading the line, `lmlow predict`'s loop."""
    from lmlow.predict import predictions

    t0, words = time.perf_counter(), 0
    for line in lines:
        reader = scorer.reader()
        for w in line:
            reader.feed(w).next_words(10)
            words += 1
    incremental = (time.perf_counter() - t0) * 1000 / words
    t0 = time.perf_counter()
    for line in lines:
        for i in range(1, len(line) + 1):
            scorer.next_words(line[:i], 10)
    again = (time.perf_counter() - t0) * 1000 / words
    t0 = time.perf_counter()
    for _ in predictions(scorer, ((None, None, line[:i]) for line in lines
                                  for i in range(1, len(line) + 1))):
        pass
    return incremental, again, (time.perf_counter() - t0) * 1000 / words


def main(argv=None) -> int:
    import torch

    import lmlow

    args = arguments(__doc__, lines=20).parse_args(argv)
    with bundled_runs(args.preset, args.work) as (lstm, kn):
        torch.set_num_threads(args.threads)
        lines = [line.split() for line in (CORPUS / "valid.txt").read_text().splitlines()
                 if line.split()][:args.lines]
        words = sum(map(len, lines))
        print(f"{len(lstm.vocab.words):,} words, {args.lines} lines ({words} words), threads "
              f"{torch.get_num_threads()}; ms per word typed: reader, re-reading the line, "
              "lmlow predict's loop")
        arch = "Transformer" if args.preset.startswith("transformer") else "LSTM"
        for name, scorer in ((f"{arch} ({args.preset})", lstm), ("KenLM 5-gram", kn),
                             ("mixture", lmlow.interpolate(lstm, kn, weight=0.5))):
            scorer.next_words("the", 10)                             # warm-up
            incremental, again, command = per_word(scorer, lines)
            print(f"{name:>14}: {incremental:7.2f} {again:7.2f} {command:7.2f}  "
                  f"({again / incremental:.1f}x)")
        step = exported_step(lstm, lstm.run_dir.parent / "lstm.pt2", lines)
        print(f"exported {args.preset} step (lmlow export, torch.export.load): {step:7.2f} ms "
              "per word")
    return 0


def exported_step(lstm, path, lines: list[list[str]]) -> float:
    """ms per word typed with the model as `lmlow export` writes it, run by PyTorch alone: one
    step of the program per word, then its 10 most probable next words (the reader's work)."""
    import json

    import torch

    from lmlow.export import export

    export(lstm, path, force=True)
    extra = {"vocabulary.txt": "", "lmlow.json": ""}
    step = torch.export.load(str(path), extra_files=extra).module()
    info = json.loads(extra["lmlow.json"])
    index = {w: i for i, w in enumerate(extra["vocabulary.txt"].split("\n"))}
    def fresh():          # the state at a line's start: the LSTM's (h, c), the Transformer's memory
        if info["arch"] == "transformer":
            return ([torch.zeros(info["context"], 1, info["memory_size"])
                     for _ in range(info["blocks"])], torch.zeros(1, dtype=torch.long))
        h = [torch.zeros(1, 1, n) for n in info["state_sizes"]]
        return h, [t.clone() for t in h]

    t0, words = time.perf_counter(), 0
    with torch.no_grad():
        for line in lines:
            lp, *state = step(torch.tensor([info["eos_id"]]), *fresh())
            for w in line:
                lp, *state = step(torch.tensor([index.get(w, info["unk_id"])]), *state)
                lp[0].topk(10)
                words += 1
    return (time.perf_counter() - t0) * 1000 / words


if __name__ == "__main__":
    sys.exit(main())
