"""GloVe training on real in-domain text learns relatedness; the CLI writes both formats."""
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from lmlow.embeddings import load_vectors
from lmlow.glove import GloveConfig, glove_vocabulary, save_vectors, train_glove

PRETRAIN = Path(__file__).parents[1] / "corpora" / "pydocs-mini" / "pretrain.txt.gz"
RELATED = [("request", "response"), ("query", "database"), ("template", "variable"),
           ("test", "fixture"), ("url", "http"), ("model", "field"), ("form", "validation"),
           ("session", "cookie"), ("server", "client"), ("app", "flask")]
UNRELATED = [("request", "fixture"), ("query", "cookie"), ("template", "http"), ("test", "session"),
             ("url", "validation"), ("model", "client"), ("form", "database"),
             ("session", "variable"), ("server", "field"), ("app", "response")]


def gap(kv) -> float:
    return (np.mean([kv.similarity(a, b) for a, b in RELATED])
            - np.mean([kv.similarity(a, b) for a, b in UNRELATED]))


@pytest.mark.slow
def test_trained_vectors_put_related_words_closer(tmp_path):
    kv, rep = train_glove([PRETRAIN], GloveConfig(dim=50, epochs=10, threads=2), show_progress=False)
    assert rep.tokens == 778411 and "<unk>" in kv.key_to_index
    assert gap(kv) > 0.05
    random_kv = kv.__class__(50)
    random_kv.add_vectors(kv.index_to_key, np.random.default_rng(0).normal(size=kv.vectors.shape))
    assert abs(gap(random_kv)) < 0.05          # the same test fails for random vectors
    paths = save_vectors(kv, tmp_path / "v.txt")
    for p in paths:
        again = load_vectors(p)
        np.testing.assert_allclose(again["request"], kv["request"], rtol=1e-5)


def test_min_count_keeps_frequent_words_in_glove_order():
    from collections import Counter
    v = glove_vocabulary(Counter({"b": 9, "a": 9, "c": 5, "d": 4, "<unk>": 7}), min_count=5)
    assert list(v) == ["a", "b", "<unk>", "c"]


def test_embed_cli_refuses_to_overwrite(tmp_path):
    out = tmp_path / "v.txt"
    out.write_text("mine\n")
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "embed", str(PRETRAIN), "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 1 and "--force" in r.stderr and out.read_text() == "mine\n"
