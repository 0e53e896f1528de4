"""Shared fixtures: an isolated cache per test session and small real corpora."""
from __future__ import annotations

from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"
SPEECHES = DATA / "speeches"


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("LMLOW_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "cache"))


def write_corpus(root: Path, train: str, valid: str, test: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name, text in (("train", train), ("valid", valid), ("test", test)):
        (root / f"{name}.txt").write_text(text, encoding="utf-8")
    return root


@pytest.fixture(scope="session")
def speech_corpus(tmp_path_factory) -> Path:
    """Washington's six addresses, spaCy-tokenised, PTB-normalised, split by paragraph."""
    from lmlow.data.prepare import prepare
    from lmlow.data.tokenize import Normalisation

    out = tmp_path_factory.mktemp("speech") / "corpus"
    prepare([SPEECHES], out, tokenizer="spacy", norm=Normalisation.ptb(), valid=0.15, test=0.15,
            seed=3, documents="line", show_progress=False)
    return out
