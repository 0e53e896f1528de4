"""A partial freeze of the input embedding (``--freeze-input-rows pretrained``): the rows
initialised from pretrained vectors stay fixed, the others (words without a vector) train.

Freezing a whole matrix is ``requires_grad=False``; a part of one cannot be, so the trainer
does two things at every update. Before clipping, the frozen rows' gradient is set to zero, so
the clipped norm is the norm of what trains (as with a whole frozen matrix). After the
optimiser's step, the frozen rows are written back from a saved copy, in the weights and in
NT-ASGD's running average: weight decay (SGD's, Adam's L2, AdamW's decoupled one) and averaging
move a row even when its gradient is zero, so zeroing alone would not keep it fixed. The rows
are then bitwise the ones the run started with, whatever the optimiser, precision or number of
processes (every rank holds the same weights and does the same).
"""
from __future__ import annotations

import numpy as np
import torch


class FrozenRows:
    """The rows ``index`` of ``weight`` held at their current values."""

    def __init__(self, weight: torch.nn.Parameter, mask: np.ndarray | torch.Tensor):
        mask = torch.as_tensor(np.asarray(mask, dtype=bool))
        if mask.shape != (weight.shape[0],):
            raise ValueError(f"frozen-row mask of shape {tuple(mask.shape)} for a matrix of "
                             f"{weight.shape[0]} rows")
        self.weight = weight
        self.mask = mask
        self.index = mask.nonzero().squeeze(1).to(weight.device)
        self.values = weight.detach()[self.index].clone()

    def zero_grad(self) -> None:
        """No gradient reaches the frozen rows (call after backward, before clipping)."""
        if self.weight.grad is not None:
            self.weight.grad.index_fill_(0, self.index, 0.0)

    @torch.no_grad()
    def restore(self, optimizer) -> None:
        """Write the frozen rows back after an optimiser step, in the weights and in any
        same-shaped running average the optimiser keeps (ASGD's ``ax``)."""
        self.weight.index_copy_(0, self.index, self.values)
        state = optimizer.state.get(self.weight, {}) if optimizer is not None else {}
        ax = state.get("ax")
        if ax is not None:
            ax.index_copy_(0, self.index, self.values.to(ax.dtype))


def row_report(frozen: np.ndarray | None, pretrained: np.ndarray | None, counts: np.ndarray,
               matrix_frozen: bool) -> dict:
    """How many input rows are frozen pretrained, frozen random and trained, and what share of
    the training tokens (``counts``: the vocabulary's training counts, ``<eos>`` included) each
    group's words make up. ``frozen`` is the partial-freeze mask (None: the whole matrix is
    frozen if ``matrix_frozen``, else nothing); ``pretrained`` says which rows had a vector."""
    n = len(counts)
    pre = np.zeros(n, bool) if pretrained is None else np.asarray(pretrained, bool)
    if frozen is None:
        frozen = np.full(n, bool(matrix_frozen))
    frozen = np.asarray(frozen, bool)
    groups = {"frozen_pretrained": frozen & pre, "frozen_random": frozen & ~pre,
              "trained": ~frozen}
    total = max(1, int(counts.sum()))
    out = {}
    for name, m in groups.items():
        out[name] = int(m.sum())
        out[f"{name}_tokens_pct"] = round(100.0 * float(counts[m].sum()) / total, 3)
    return out


def describe_rows(r: dict) -> str:
    """``input rows: 6,455 frozen pretrained (89.5% of training tokens), ...``."""
    parts = [f"{r[k]:,} {k.replace('_', ' ')} ({r[k + '_tokens_pct']:.1f}%)"
             for k in ("frozen_pretrained", "frozen_random", "trained")]
    return "input rows: " + ", ".join(parts) + " of training tokens"
