#!/usr/bin/env python3
"""Copy the finished runs of one converged sweep into another under the other's names, when the
two tables share configurations (Table 1's 20 include section 3's six): the same data,
vocabulary, vectors, model, seed and stopping rule would train the same run again, so it is
not trained again.

    python experiments/converged/reuse.py SRC_SWEEP DST_SWEEP          # copy
    python experiments/converged/reuse.py --check SRC_SWEEP DST_SWEEP  # verify
    python experiments/converged/reuse.py --same-words VECTORS SRC_SWEEP DST_SWEEP

``--same-words``: two tables of the same configurations that differ only in their vectors
(../freezing's old and all-text vectors) share the runs that read no vector, random input and
output, when the vectors only add words to the vocabulary and the two sets of vectors add the
same ones: such a run is copied under its own name when the vocabulary DST's VECTORS give,
computed by lmlow's own reader, is the run's ``vocab.txt`` word for word (a run without its
``vocab.txt`` is not copied). ``--check`` then ignores the ``embeddings`` path of those copies:
it names the source's vectors, whose only use was their words.

A copy keeps the run's record (config, metrics, summary, cached evaluations, log) and a
``reused_from`` file naming its source; model files stay out (they are not committed). The copy
is made only when DST has no folder of that name. ``--check`` then compares each copy's
``config.json`` with a run DST trained itself: they must differ only in the embedding roles and
the seed, or the copy is not the same experiment and the command fails (exit 1).
"""
import functools
import json
import shutil
import sys
from pathlib import Path

from lmlow.config import Config, EmbeddingRoles

RECORD = ("config.json", "data.json", "metrics.jsonl", "summary.json",
          "eval_best_valid.json", "eval_best_test.json")
ROLES = {"tie", "freeze_input", "freeze_output", "init", "seed"}
MARK = "reused_from"
SAME_WORDS = "same words as "      # the marker's second line for a --same-words copy


def name(run: Path) -> str:
    cfg = json.loads((run / "config.json").read_text())
    return f"{EmbeddingRoles.of(cfg).slug()}.seed{cfg['seed']}"


def copy(src: Path, dst: Path, same_words: Path | None = None) -> list[str]:
    """Copy SRC's finished runs into DST (under Table 1's names; with ``same_words``, the runs
    that read no vector, under their own names, when the vocabularies match)."""
    done = []
    for run in sorted(p for p in src.iterdir() if (p / "summary.json").exists()):
        if not all((run / f).exists() for f in RECORD):
            continue
        if same_words is None:
            target, note = dst / name(run), ""
        else:
            cfg = json.loads((run / "config.json").read_text())
            if {"glove", "glove-output"} & set(cfg.get("init") or ()):
                continue                                 # it reads the vectors' values
            target, note = dst / run.name, f"{SAME_WORDS}{same_words}\n"
        if target.exists():
            continue
        if same_words is not None and not same_vocabulary(run, cfg, same_words):
            done.append(f"{run}: its vocabulary is not the one {same_words} gives; not copied")
            continue
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        for f in RECORD:
            shutil.copy2(run / f, tmp / f)
        (tmp / MARK).write_text(f"{run}\n{note}")
        log = src / "logs" / f"{run.name}.log"
        if log.exists():
            (dst / "logs").mkdir(exist_ok=True)
            shutil.copy2(log, dst / "logs" / f"{target.name}.log")
        tmp.rename(target)
        done.append(f"{run} -> {target}")
    return done


def same_vocabulary(run: Path, cfg: dict, vectors: Path) -> bool:
    """Whether the run's corpus, UNK threshold and ``vectors`` give, through lmlow's own
    reader, the vocabulary the run trained with (its ``vocab.txt``), word for word."""
    from lmlow.data.vocab import Vocabulary

    if not (run / "vocab.txt").exists():
        return False
    words = vocabulary(cfg["corpus"], cfg["unk_threshold"], vectors if cfg.get("extend_vocab") else None)
    return words == list(Vocabulary.load(run / "vocab.txt").words)


@functools.lru_cache(maxsize=None)
def vocabulary(corpus: str, unk_threshold: int, vectors: Path | None) -> list[str]:
    """The vocabulary lmlow builds for a corpus (extended by a vector file's words), read
    once for all the seeds of a table."""
    from lmlow.data.corpus import Corpus
    from lmlow.embeddings import vector_words

    extra = vector_words(vectors) if vectors else ()
    return list(Corpus(Path(corpus), unk_threshold, extra, show_progress=False).vocab.words)


def settings(run: Path) -> dict:
    """A run's settings as lmlow reads them back: what its config.json records of the built
    model (input_rows) is left out, and a setting added after the run was trained (arch,
    heads, context came with the Transformer) has the default the run was trained under."""
    return Config.load(run / "config.json").to_dict()


def check(dst: Path) -> list[str]:
    runs = [p for p in sorted(dst.iterdir()) if (p / "config.json").exists()]
    own = [p for p in runs if not (p / MARK).exists() and (p / "summary.json").exists()]
    if not own:
        return [f"{dst}: no run of its own to compare the copies with yet"]
    ref = settings(own[0])
    bad = []
    for p in runs:
        if (p / MARK).exists():
            cfg = settings(p)
            ignore = ROLES | ({"embeddings"} if SAME_WORDS in (p / MARK).read_text() else set())
            diff = sorted(k for k in cfg if k not in ignore and cfg[k] != ref[k])
            if diff:
                bad.append(f"{p}: differs from {own[0]} in {', '.join(diff)}")
    return bad


def main(argv: list[str]) -> int:
    verify = argv[:1] == ["--check"]
    same_words = Path(argv[1]) if argv[:1] == ["--same-words"] else None
    src, dst = (Path(a) for a in argv[verify + 2 * (same_words is not None):])
    if verify:
        bad = check(dst)
        print("\n".join(bad) or f"{dst}: every copied run has the settings of its own runs")
        return 1 if bad and "yet" not in bad[0] else 0
    dst.mkdir(parents=True, exist_ok=True)
    print("\n".join(copy(src, dst, same_words)) or f"{dst}: nothing to copy from {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
