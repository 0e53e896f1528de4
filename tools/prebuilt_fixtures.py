#!/usr/bin/env python3
"""Build the test suite's two costly fixtures (the spaCy-tokenised speech corpus and its tiny
GloVe vectors) into DIR, for a machine that cannot build them: one without spaCy or GloVe's
programs, such as a GPU machine with no package registry. There, run the tests with
``LMLOW_TEST_FIXTURES=DIR`` (tests/conftest.py copies them into each session's temporary
folder). The builders are the fixtures' own, so the files are the ones a full machine makes.

Usage: python tools/prebuilt_fixtures.py DIR     (DIR must not exist yet)
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from conftest import make_speech_corpus, make_vectors  # noqa: E402


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = Path(argv[0])
    if out.exists():
        print(f"prebuilt_fixtures: {out} exists; give a new folder", file=sys.stderr)
        return 2
    out.mkdir(parents=True)
    corpus = make_speech_corpus(out / "speech-corpus")
    make_vectors(corpus, out / "vectors.txt")
    print(f"prebuilt_fixtures: {out}/speech-corpus and {out}/vectors.txt; run the tests with "
          f"LMLOW_TEST_FIXTURES={out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
