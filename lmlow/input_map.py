"""Map the input rows of the words a run never read into the space its training moved the
other rows to (``lmlow eval/score --map-unseen-inputs``; experiments/freezing/mapped-rows.md),
and the output rows of the words it never predicted (``--map-unseen-outputs``).

A word that has a vector but never occurs in the LM's training text keeps its initial vector
in a model whose input rows train (no text trains it; weight decay only shrinks it), while
every row it should sit among has moved: the LSTM reads it in a space it no longer uses. A
frozen input avoids that, at a cost on the frequent words. This keeps the trained rows and
moves only the unread ones: a least-squares affine map from initial to trained rows, fitted
on the words read at least FIT_MIN times, applied to the vectors of the words read 0 times.
Nothing is trained again; the model file is not changed.

The output side: a word that never occurs as a target is, in training, only ever a wrong
answer. Its output row (initialised from its vector with ``--init glove-output``) is pushed away
from every hidden state at each update and never pulled back, under Adam much further than
under SGD. ``--map-unseen-outputs`` gives those rows their vectors through the same kind of map,
fitted on the output rows of the words predicted at least FIT_MIN times; the bias stays as
trained. Measured on the 60k-word tables (mapped-rows.md; validation, against the model as
trained): alone, under Adam it lowers perplexity by 14.6-24.2% (2.8-10.9% without the
``<unk>`` targets), under the paper's recipe by 0.7-2.8%, all on ``<unk>``; with the input
map, under the paper's recipe by 1.4-3.8% (0.9-1.8% without ``<unk>``). Either way the words
seen 1-5 times in training get worse (alone under Adam by 3.8-17.8%, with the input map under
the paper's recipe by 6.4-12.1%): the mass the mapped rows take comes partly from them.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from lmlow.config import MAP_FIT_MIN as FIT_MIN, Config   # (with its help: read without torch)
from lmlow.errors import LmlowError
from lmlow.model import pretrained_matrix

@dataclass
class MappedInputs:
    """What ``map_unseen_inputs`` did: rows replaced, words the map was fitted on, and the
    share of the fitted rows' variance the map explains (R^2)."""
    rows: int
    fit_words: int
    r2: float

    def text(self) -> str:
        return (f"input rows of {self.rows} words never read in training mapped into the "
                f"trained space (linear map fitted on {self.fit_words} words read >= {FIT_MIN} "
                f"times, R^2 {self.r2:.3f})")


class MappedOutputs(MappedInputs):
    """What ``map_unseen_outputs`` did (the same three numbers, for the output rows)."""

    def text(self) -> str:
        return (f"output rows of {self.rows} words never predicted in training mapped into the "
                f"trained space (linear map fitted on {self.fit_words} words predicted >= "
                f"{FIT_MIN} times, R^2 {self.r2:.3f})")


def affine_map(initial: torch.Tensor, trained: torch.Tensor) -> torch.Tensor:
    """The least-squares affine map (a (dim+1) x dim matrix, bias in its last row) taking
    the rows of ``initial`` to those of ``trained``, in float64."""
    x = torch.cat([initial.double(), torch.ones(len(initial), 1, dtype=torch.float64)], 1)
    return torch.linalg.lstsq(x, trained.double()).solution


def apply_map(w: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    return torch.cat([rows.double(), torch.ones(len(rows), 1, dtype=torch.float64)], 1) @ w


def mappable(cfg: Config, where: str, side: str = "inputs") -> None:
    """Refuse, in one line, a run the map of ``side`` ("inputs" or "outputs") does not apply
    to (``EmbeddingRoles.map_refusal``: untied, initialised from vectors, trained)."""
    reason = cfg.roles.map_refusal(side, vectors=bool(cfg.embeddings))
    if reason:
        raise LmlowError(f"{where}: {reason}")


def read_once(state: dict, counts: np.ndarray, where: str, flag: str) -> None:
    """Refuse, in one line, a checkpoint saved before its run had read its training text once
    (its ``RunState``: no completed ``epoch``). The counts that pick the rows are the whole
    text's (or its --train-fraction part's): stopped inside its first epoch (--max-steps,
    --max-time), a run leaves the rows of words it did not reach yet as they were, and fits on
    rows that never moved (R^2 0.995 after 9 tokens read), a silently wrong model."""
    if state.get("epoch", 0) < 1:
        raise LmlowError(f"{where}: {flag} needs a run trained for at least one full epoch: "
                         "the map picks its rows by the counts of the whole training text "
                         f"({int(counts.sum()):,} tokens), and this checkpoint was saved after "
                         f"reading {state.get('tokens', 0):,}")


SAME = 0.99    # cosine of the unread rows with the file's vectors, at least


def _check_same_vectors(initial: torch.Tensor, trained: torch.Tensor, path: Path) -> None:
    """The unread words' rows must still be the file's vectors, up to the shrinking of weight
    decay (SGD's and AdamW's keep their direction; the freezing runs: cosine 1.0000; without
    decay they are the vectors): a file changed since the run was initialised would map other
    vectors, a silently wrong model."""
    if not len(initial):
        return
    a, b = initial.flatten().double(), trained.flatten().double()
    cosine = float(a @ b / (a.norm() * b.norm()))
    if not cosine >= SAME:         # NaN (rows of zeros) too
        raise LmlowError(f"{path}: the run's input rows of its unread words are not these "
                         f"vectors (cosine {cosine:.3f}); was the file changed since the run "
                         "was initialised from it?")


def run_vectors(cfg: Config, words: list[str], flag: str = "--map-unseen-inputs",
                recorded: dict | None = None) -> tuple[torch.Tensor, np.ndarray]:
    """The run's vectors aligned with ``words`` and the mask of the words that have one
    (other rows are filler), from the --embeddings file it was initialised from. ``recorded``:
    that file's fingerprint as the run's data.json keeps it (RunDir.recorded_vectors): a file
    changed since is refused (the map would place other vectors, a silently wrong model; the
    cosine check of the input map misses a file whose words were reshuffled, R^2 0.96 -> 0.11,
    and the output map and Adam with weight decay have none)."""
    path = Path(cfg.embeddings)
    if not path.exists():
        raise LmlowError(f"{path}: the run's --embeddings file is not there; "
                         f"{flag} needs the vectors it was initialised from")
    if recorded is not None:
        from lmlow.files import file_fingerprint

        got = file_fingerprint(path)["sha256"]
        if got != recorded["sha256"]:
            raise LmlowError(f"{path}: not the file this run was initialised from (sha256 "
                             f"{got[:12]}..., the run's data.json records {recorded['sha256'][:12]}"
                             f"...); {flag} needs those vectors")
    from lmlow.embeddings import load_vectors    # gensim: only when the map is asked for

    return pretrained_matrix(words, load_vectors(path, cfg.allow_pickle),
                             torch.Generator().manual_seed(0))


def map_rows(weight: torch.Tensor, vectors: torch.Tensor, found: np.ndarray, counts: np.ndarray,
             where: str) -> MappedInputs:
    """Replace, in ``weight`` (in place), the rows of the words with a vector and a training
    count of 0 by their vectors through the least-squares affine map vector -> row of the
    words with a vector read at least FIT_MIN times."""
    trained = weight.detach().float().cpu().double()
    rows, fit = (torch.from_numpy(found & m) for m in (counts == 0, counts >= FIT_MIN))
    if int(fit.sum()) < 2 * (vectors.shape[1] + 1):
        raise LmlowError(f"{where}: only {int(fit.sum())} words with a vector were read at "
                         f"least {FIT_MIN} times; too few to fit a map of {vectors.shape[1]}-d "
                         "vectors")
    w = affine_map(vectors[fit], trained[fit])
    residual = trained[fit] - apply_map(w, vectors[fit])
    spread = trained[fit] - trained[fit].mean(0)
    r2 = 1.0 - float(residual.pow(2).sum() / spread.pow(2).sum())
    with torch.no_grad():
        weight[rows.to(weight.device)] = apply_map(w, vectors[rows]).to(weight.dtype).to(weight.device)
    return MappedInputs(rows=int(rows.sum()), fit_words=int(fit.sum()), r2=r2)


def _same_width(initial: torch.Tensor, weight: torch.Tensor, cfg: Config, side: str) -> None:
    if initial.shape[1] != weight.shape[1]:
        raise LmlowError(f"{cfg.embeddings}: {initial.shape[1]}-d vectors, but the run's {side} "
                         f"rows are {weight.shape[1]}-d")


def map_unseen_inputs(model: torch.nn.Module, cfg: Config, words: list[str], counts: np.ndarray,
                      where: str, vectors: tuple[torch.Tensor, np.ndarray] | None = None
                      ) -> MappedInputs:
    """Replace, in ``model`` (in place), the input rows of the words with a vector and a
    training count of 0 by their vectors mapped into the trained space (module docstring).
    ``counts`` are the run's training counts, aligned with ``words``; ``vectors``, the run's
    vectors as ``run_vectors`` gives them (read from the file when not given)."""
    mappable(cfg, where)
    initial, found = vectors or run_vectors(cfg, words)
    weight = model.encoder.weight
    _same_width(initial, weight, cfg, "input")
    if not (cfg.optimizer == "adam" and cfg.wdecay > 0):
        # Adam's L2 decay moves every coordinate by about lr a step whatever its size: the
        # unread rows lose their direction (cosine ~0 in a test run), so nothing to check
        unread = torch.from_numpy(found & (counts == 0))
        _check_same_vectors(initial[unread], weight.detach().float().cpu()[unread],
                            Path(cfg.embeddings))
    return map_rows(weight, initial, found, counts, where)


def map_unseen_outputs(model: torch.nn.Module, cfg: Config, words: list[str],
                       counts: np.ndarray, where: str,
                       vectors: tuple[torch.Tensor, np.ndarray] | None = None) -> MappedOutputs:
    """Replace, in ``model`` (in place), the output rows of the words with a vector and a
    training count of 0 by their vectors mapped into the trained output space (module
    docstring). No check that those rows are still the file's vectors: training pushed them
    away from every hidden state, so they are not (the dimensions are checked)."""
    mappable(cfg, where, "outputs")
    initial, found = vectors or run_vectors(cfg, words, "--map-unseen-outputs")
    weight = model.decoder.weight
    _same_width(initial, weight, cfg, "output")
    return MappedOutputs(**vars(map_rows(weight, initial, found, counts, where)))


def map_unseen(model: torch.nn.Module, cfg: Config, words: list[str], counts: np.ndarray,
               where: str, inputs: bool = False, outputs: bool = False,
               recorded: dict | None = None, state: dict | None = None
               ) -> tuple[MappedInputs | None, MappedOutputs | None]:
    """The maps asked for (``--map-unseen-inputs``, ``--map-unseen-outputs``), each refused
    before any file is read, the run's vectors read once for both (``recorded``: as
    :func:`run_vectors`'s; ``state``: the training state the checkpoint was saved in, which
    must have read its text once, :func:`read_once`)."""
    if inputs:
        mappable(cfg, where)
    if outputs:
        mappable(cfg, where, "outputs")
    if not (inputs or outputs):
        return None, None
    flag = "--map-unseen-inputs" if inputs else "--map-unseen-outputs"
    read_once(state or {}, counts, where, flag)
    vectors = run_vectors(cfg, words, flag, recorded)
    return (map_unseen_inputs(model, cfg, words, counts, where, vectors) if inputs else None,
            map_unseen_outputs(model, cfg, words, counts, where, vectors) if outputs else None)
