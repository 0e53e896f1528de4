"""``lmlow embed``: train GloVe vectors on in-domain text (Pennington et al. 2014).

The optimiser is glove-python's (package ``bicleaner-ai-glove``): a co-occurrence matrix
counted over a symmetric window with 1/distance weighting, then weighted least squares,
f(x) = min(1, (x / x_max)^alpha), fitted with AdaGrad. lmlow streams the text into it,
applies GloVe's minimum count, and writes the vectors in GloVe text and gensim formats.

Conventions: the text is read exactly as corpora are (whitespace tokens, one paragraph per
line, blank lines skipped), so vectors line up with the LM vocabulary when the text went
through the same ``lmlow prepare`` options. Words seen fewer than ``min_count`` times are
replaced by ``<unk>`` before counting co-occurrences, so ``<unk>`` gets a vector trained on the
UNK-replaced text (like the LM's own ``<unk>``), and window distances stay as in the text.
Windows do not cross line ends.
"""
from __future__ import annotations

import os
import time
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterator

import numpy as np

from lmlow.data.corpus import count_words
from lmlow.data.textio import UNK, iter_lines
from lmlow.errors import LmlowError, refuse_overwrite
from lmlow.progress import epochs_bar, progress


@dataclass
class GloveConfig:
    dim: int = 400            # the AWD-LSTM embedding size (Kummerfeld et al. 2020)
    window: int = 10          # GloVe paper: symmetric window of 10
    min_count: int = 5        # GloVe's released code default
    epochs: int | None = None  # GloVe paper: 50 below 300 dimensions, 100 otherwise
    x_max: float = 100.0
    alpha: float = 0.75
    learning_rate: float = 0.05
    threads: int = 0          # 0: all cores
    seed: int = 1

    def resolved_epochs(self) -> int:
        return self.epochs if self.epochs is not None else (50 if self.dim < 300 else 100)


@dataclass
class GloveReport:
    vocabulary: int
    tokens: int
    cooccurrences: int
    seconds_counting: float
    seconds_training: float
    config: dict


def _import_glove():
    try:
        from glove import Corpus as GloveCorpus
        from glove.glove_cython import fit_vectors
    except ImportError:
        raise LmlowError("training GloVe needs the glove module: pip install 'lmlow[glove]' "
                         "(package bicleaner-ai-glove)") from None
    return GloveCorpus, fit_vectors


def glove_vocabulary(counts: Counter, min_count: int) -> dict[str, int]:
    """Words kept by the minimum count, plus ``<unk>``, in count order (ids from 0)."""
    kept = sorted((w for w, c in counts.items() if c >= min_count and w != UNK),
                  key=lambda w: (-counts[w], w))
    return {w: i for i, w in enumerate(kept + [UNK])}


def _sentences(paths: list[Path], vocab: dict[str, int], bar) -> Iterator[list[str]]:
    for path in paths:
        for _, tokens in iter_lines(path):
            bar.tokens(len(tokens))
            yield [t if t in vocab else UNK for t in tokens]


def train_glove(texts: list[Path], cfg: GloveConfig = GloveConfig(), show_progress: bool = True):
    """Train vectors on ``texts``; return (gensim KeyedVectors, GloveReport)."""
    from gensim.models import KeyedVectors

    GloveCorpus, fit_vectors = _import_glove()
    texts = [Path(t) for t in texts]
    t0 = time.time()
    counts = Counter()
    for t in texts:
        counts.update(count_words(t, show_progress).counts)
    vocab = glove_vocabulary(counts, cfg.min_count)
    if len(vocab) < 2:
        raise LmlowError(f"no word occurs {cfg.min_count} times or more; lower --min-count")
    corpus = GloveCorpus(vocab)
    with progress("co-occurrences", show_progress, total=sum(counts.values())) as bar:
        corpus.fit(_sentences(texts, vocab, bar), window=cfg.window, ignore_missing=False)
    matrix = corpus.matrix
    t1 = time.time()
    vectors = _fit(matrix, cfg, fit_vectors, show_progress)
    t2 = time.time()
    if not np.isfinite(vectors).all():
        raise LmlowError("GloVe diverged (non-finite vectors); lower --learning-rate")
    words = [None] * len(vocab)
    for w, i in vocab.items():
        words[i] = w
    kv = KeyedVectors(cfg.dim)
    kv.add_vectors(words, vectors.astype(np.float32))
    report = GloveReport(len(vocab), sum(counts.values()), int(matrix.nnz), round(t1 - t0, 1),
                         round(t2 - t1, 1), asdict(cfg) | {"epochs": cfg.resolved_epochs()})
    return kv, report


def _fit(matrix, cfg: GloveConfig, fit_vectors, show_progress: bool) -> np.ndarray:
    """glove-python's AdaGrad epochs, one call per epoch so that progress can be shown."""
    rng = np.random.RandomState(cfg.seed)
    n = matrix.shape[0]
    vectors = (rng.rand(n, cfg.dim) - 0.5) / cfg.dim
    biases = np.zeros(n, dtype=np.float64)
    grad_v, grad_b = np.ones_like(vectors), np.ones_like(biases)
    order = np.arange(matrix.nnz, dtype=np.int32)
    threads = cfg.threads or os.cpu_count() or 1
    epochs = range(cfg.resolved_epochs())
    for _ in epochs_bar(epochs, "GloVe epochs", show_progress):
        rng.shuffle(order)
        fit_vectors(vectors, grad_v, biases, grad_b, matrix.row, matrix.col, matrix.data,
                    order, cfg.learning_rate, cfg.x_max, cfg.alpha, 10.0, threads)
    return vectors


def save_vectors(kv, out: Path, force: bool = False) -> list[Path]:
    """Write GloVe text (``out``) and a gensim file beside it (``out`` with suffix ``.kv``)."""
    out = Path(out)
    kv_path = out.with_suffix(".kv")
    refuse_overwrite([out, kv_path], force)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(f"{out}.tmp{os.getpid()}")
    kv.save_word2vec_format(str(tmp), write_header=False)
    os.replace(tmp, out)
    tmp_kv = Path(f"{kv_path}.tmp{os.getpid()}")
    kv.save(str(tmp_kv))
    for extra in tmp_kv.parent.glob(tmp_kv.name + ".*"):  # gensim's .npy side files
        os.replace(extra, kv_path.parent / (kv_path.name + extra.name[len(tmp_kv.name):]))
    os.replace(tmp_kv, kv_path)
    return [out, kv_path]
