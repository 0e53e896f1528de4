"""The model statistics of Meister et al. (2023) and Kobayashi et al. (2023), and
:class:`FrequencyTracker`, which records them during training (``--track-frequency``): at
updates 0, 1, 2, 4, 8, ... and at every epoch end, the statistics of Meister et al.'s Fig. 1
and Figs. 13-14 on a fixed validation sample, appended to ``RUN_DIR/frequency.jsonl``.

The model's "average predicted distribution" on a text is the mean over its tokens of
p(. | context) (Kobayashi's "word prediction distribution"); Meister's Fig. 1 instead averages
the per-token divergence KL(r || p(. | context)) over tokens; both are recorded.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lmlow.analysis.stats import kl_divergence, pearson, softmax, spearman, unigram_distribution
from lmlow.evaluate import EVAL_BATCH, EVAL_BPTT
from lmlow.files import append_jsonl, read_jsonl

SAMPLE_TOKENS = 4000          # validation tokens the training-time tracker scores


@dataclass
class ScaleStats:
    """What one pass over a text gives for one bias scale lambda."""
    bias_scale: float
    logprobs: np.ndarray           # ln p(target | context) per token
    mean_distribution: np.ndarray  # mean over tokens of p(. | context)
    kl_unigram_token: float        # mean over tokens of KL(unigram || p(. | context))
    kl_uniform_token: float        # mean over tokens of KL(uniform || p(. | context))

    @property
    def cross_entropy(self) -> float:
        return -float(np.mean(self.logprobs))


def distribution_stats(model, ids, eos_id: int, unigram: np.ndarray, scales=(1.0,),
                       batch_size: int = EVAL_BATCH, bptt: int = EVAL_BPTT,
                       device=None) -> dict[float, ScaleStats]:
    """Score ``ids`` once through the LSTM and, for each bias scale lambda, the softmax of
    W h + lambda b over the whole vocabulary: per-token log-probability of the target, the
    average predicted distribution and the per-token divergences from unigram and uniform.
    Leaves the model in eval mode."""
    import torch

    from lmlow.evaluate import lstm_outputs  # torch is imported only when a model is scored

    n, v = len(ids), len(unigram)
    u = torch.as_tensor(unigram, dtype=torch.float64)
    neg_entropy = float((u[u > 0] * u[u > 0].log()).sum())
    uf = u.float().to(device or next(model.parameters()).device)
    acc = {s: {"lp": np.full(n, np.nan), "mean": torch.zeros(v, dtype=torch.float64),
               "klu": 0.0, "klf": 0.0} for s in scales}
    with torch.no_grad():
        bias = model.decoder.bias.float()
        for output, y, pos in lstm_outputs(model, ids, eos_id, batch_size, bptt, device=device):
            wh = torch.nn.functional.linear(output, model.decoder.weight).float()
            for s in scales:
                logp = torch.log_softmax(wh + s * bias, dim=-1)
                a = acc[s]
                a["lp"][pos] = logp.gather(-1, y.unsqueeze(-1)).squeeze(-1).cpu().numpy()
                a["mean"] += logp.exp().sum(0, dtype=torch.float64).cpu()
                cross = (logp @ uf).double().sum()       # sum over tokens of u . ln p
                a["klu"] += neg_entropy * len(y) - float(cross)
                a["klf"] += -math.log(v) * len(y) - float(logp.mean(-1).double().sum())
    return {s: ScaleStats(s, a["lp"], (a["mean"] / n).numpy(), a["klu"] / n, a["klf"] / n)
            for s, a in acc.items()}


def bias_stats(bias: np.ndarray, unigram: np.ndarray) -> dict:
    """The bias's L2 norm, KL(unigram || softmax(b)) (Meister Figs. 13-14), and its Spearman
    and Pearson correlation with the log-unigram distribution over words seen in training."""
    bias = np.asarray(bias, np.float64)
    seen = unigram > 0
    return {"bias_norm": float(np.linalg.norm(bias)),
            "bias_kl_unigram": kl_divergence(unigram, softmax(bias)),
            "bias_spearman": spearman(bias[seen], np.log(unigram[seen])),
            "bias_pearson": pearson(bias[seen], np.log(unigram[seen]))}


def frequency_record(model, ids, eos_id: int, unigram: np.ndarray, batch_size: int = EVAL_BATCH,
                     bptt: int = EVAL_BPTT, device=None) -> dict:
    """One row of frequency.jsonl: Meister Fig. 1 and Figs. 13-14 on the text ``ids``."""
    st = distribution_stats(model, ids, eos_id, unigram, (1.0,), batch_size, bptt, device)[1.0]
    uniform = np.full(len(unigram), 1 / len(unigram))
    return {"tokens": len(ids), "cross_entropy": st.cross_entropy,
            "kl_unigram_token": st.kl_unigram_token, "kl_uniform_token": st.kl_uniform_token,
            "kl_unigram_avg": kl_divergence(unigram, st.mean_distribution),
            "kl_uniform_avg": kl_divergence(uniform, st.mean_distribution),
            **bias_stats(model.decoder.bias.detach().cpu().numpy(), unigram)}


class FrequencyTracker:
    """Appends :func:`frequency_record` rows to RUN_DIR/frequency.jsonl at updates 0, 1, 2, 4,
    8, ... (:meth:`at_step`) and whenever asked (:meth:`record`, at epoch ends).

    It scores the first ``tokens`` validation tokens in eval mode without gradients and puts
    the model back in training mode; it draws no random numbers, so a tracked run trains
    exactly as an untracked one. (Under NT-ASGD it sees the raw weights, not the averages.)"""

    def __init__(self, model, valid_ids, counts, eos_id: int, path: Path,
                 batch_size: int = EVAL_BATCH,
                 bptt: int = EVAL_BPTT, device=None, tokens: int = SAMPLE_TOKENS, fresh: bool = True):
        self.model, self.eos_id, self.device = model, eos_id, device
        self.ids = np.asarray(valid_ids[:tokens], dtype=np.int64)
        self.unigram = unigram_distribution(counts)
        self.batch_size, self.bptt = batch_size, bptt
        self.path = Path(path)
        # a new run starts a new file (train() clears the folder); a resumed one continues it
        self.done = set() if fresh else {r["step"] for r in read_jsonl(self.path)}

    @staticmethod
    def due(step: int) -> bool:
        return step == 0 or (step & (step - 1)) == 0

    def at_step(self, step: int, epoch: float, elapsed: float) -> None:
        if self.due(step):
            self.record(step, epoch, elapsed, "step")

    def record(self, step: int, epoch: float, elapsed: float, event: str = "epoch") -> None:
        if step in self.done:           # one row per update count
            return
        training = self.model.training
        try:
            row = frequency_record(self.model, self.ids, self.eos_id, self.unigram,
                                   self.batch_size, self.bptt, self.device)
        finally:
            self.model.train(training)
        row = {"step": step, "epoch": round(epoch, 4), "elapsed": round(elapsed, 1),
               "event": event, **row}
        append_jsonl(self.path, row)
        self.done.add(step)
