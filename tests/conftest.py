"""Shared fixtures: an isolated cache per test session, small real corpora, and the one way
tests run the real ``lmlow`` command (:func:`lmlow` in a subprocess, :func:`cli` in-process)."""
from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SPEECHES = DATA / "speeches"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("LMLOW_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


# Kummerfeld et al.'s Table 1, written out by hand as the oracle of what each valid
# configuration trains: (tie, freeze input, freeze output, init) -> (input matrix frozen,
# output matrix frozen). A tied model has one matrix: freezing either side freezes it.
# (Checked: build_model made to skip the freeze of a tied model fails test_model's two tied
# frozen rows; the old oracle was the implementation's own formula.)
T, F = True, False
TABLE1 = {
    (T, F, F, ("random",)): (F, F), (T, T, F, ("random",)): (T, T),
    (T, F, F, ("glove",)): (F, F), (T, T, F, ("glove",)): (T, T),
    (F, F, F, ("random",)): (F, F), (F, F, T, ("random",)): (F, T),
    (F, F, F, ("glove-output",)): (F, F), (F, F, T, ("glove-output",)): (F, T),
    (F, T, F, ("random",)): (T, F), (F, T, T, ("random",)): (T, T),
    (F, T, F, ("glove-output",)): (T, F), (F, T, T, ("glove-output",)): (T, T),
    (F, F, F, ("glove",)): (F, F), (F, F, T, ("glove",)): (F, T),
    (F, F, F, ("glove", "glove-output")): (F, F), (F, F, T, ("glove", "glove-output")): (F, T),
    (F, T, F, ("glove",)): (T, F), (F, T, T, ("glove",)): (T, T),
    (F, T, F, ("glove", "glove-output")): (T, F), (F, T, T, ("glove", "glove-output")): (T, T),
}


def expected_frozen(combo: dict) -> dict:
    """{"encoder.weight": frozen?, "decoder.weight": frozen?} from the hand-written table."""
    key = (combo["tie"], combo["freeze_input"], combo["freeze_output"], tuple(combo["init"]))
    frozen_in, frozen_out = TABLE1[key]
    return {"encoder.weight": frozen_in, "decoder.weight": frozen_out}


def write_corpus(root: Path, train: str, valid: str, test: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (("train", train), ("valid", valid), ("test", test)):
        (root / f"{name}.txt").write_text(text, encoding="utf-8")
    return root


# A machine without spaCy and GloVe's programs (the GPU machine: no package registry there)
# takes the two fixtures below from a folder that `python tools/prebuilt_fixtures.py DIR`
# made, with the same two builders, on a machine that has them: LMLOW_TEST_FIXTURES=DIR.
PREBUILT = os.environ.get("LMLOW_TEST_FIXTURES")


def make_speech_corpus(out: Path) -> Path:
    """Washington's six addresses, spaCy-tokenised, PTB-normalised, split by address (a file
    of the folder is a document: what `documents="line"` gave here until prepare read a
    folder's files as --documents says, and what the tests' measured numbers are of)."""
    from lmlow.data.prepare import prepare
    from lmlow.data.tokenize import Normalisation

    prepare([SPEECHES], out, tokenizer="spacy", norm=Normalisation.ptb(), valid=0.15, test=0.15,
            seed=3, documents="file", show_progress=False)
    return out


def make_vectors(corpus: Path, out: Path) -> Path:
    """Real (tiny) GloVe vectors trained on the corpus's training text."""
    from lmlow.glove import GloveConfig, save_vectors, train_glove

    kv, _ = train_glove([corpus / "train.txt"], GloveConfig(dim=24, epochs=3, min_count=2,
                                                            threads=1), show_progress=False)
    return save_vectors(kv, out)[0]


def _prebuilt(name: str, dest: Path) -> Path:
    import shutil

    src = Path(PREBUILT) / name
    if not src.exists():
        raise FileNotFoundError(f"LMLOW_TEST_FIXTURES={PREBUILT}: no {name}; make it with "
                                "`python tools/prebuilt_fixtures.py DIR`")
    (shutil.copytree if src.is_dir() else shutil.copyfile)(src, dest)   # tests may write
    return dest


@pytest.fixture(scope="session")
def speech_corpus(tmp_path_factory) -> Path:
    """Washington's six addresses, spaCy-tokenised, PTB-normalised, split by address."""
    out = tmp_path_factory.mktemp("speech") / "corpus"
    return _prebuilt("speech-corpus", out) if PREBUILT else make_speech_corpus(out)


@pytest.fixture(scope="session")
def vectors(speech_corpus, tmp_path_factory):
    """Real (tiny) GloVe vectors trained on the speech corpus's training text."""
    out = tmp_path_factory.mktemp("vec") / "v.txt"
    return _prebuilt("vectors.txt", out) if PREBUILT else make_vectors(speech_corpus, out)


def unigram_perplexity(corpus: Path, k: int) -> float:
    """Validation perplexity of the training unigram distribution under UNK threshold ``k``,
    counted here from the text (independently of lmlow's vocabulary code)."""
    from collections import Counter

    from lmlow.data.textio import iter_sentences

    train = Counter(t for s in iter_sentences(corpus / "train.txt") for t in s)
    kept = {w: c for w, c in train.items() if c >= k}
    kept["<unk>"] = sum(c for w, c in train.items() if c < k)
    total = sum(kept.values())
    valid = [t if t in kept else "<unk>" for s in iter_sentences(corpus / "valid.txt") for t in s]
    return math.exp(-sum(math.log(kept[t] / total) for t in valid) / len(valid))


def lmlow(*args, cache=None, check: bool = False, timeout: float | None = None
          ) -> subprocess.CompletedProcess:
    """Run ``python -m lmlow.cli ARGS`` as a user would, in a minimal environment (no
    inherited PATH beyond /usr/bin:/bin), with the test's cache; ``check`` raises on failure,
    ``timeout`` (seconds) stops a command that should have refused at once."""
    env = {"PATH": "/usr/bin:/bin",
           "LMLOW_CACHE_DIR": str(cache or os.environ["LMLOW_CACHE_DIR"]),
           "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "")}
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", *map(str, args)], capture_output=True,
                       text=True, env={k: v for k, v in env.items() if v}, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(r.stderr)
    return r


def cli(*args, capsys) -> tuple[int, str, str]:
    """``lmlow ARGS`` in-process: (exit code, stdout, stderr); argparse's exits become codes."""
    from lmlow.cli import main

    try:
        code = main([str(a) for a in args])
    except SystemExit as e:
        code = e.code
    out = capsys.readouterr()
    return code, out.out, out.err
