"""``lmlow train``: the AWD-LSTM training loop, its optimisers, checkpoints and resume.

A run folder is the unit of work: ``config.json`` (the resolved Config), ``vocab.txt``,
``metrics.jsonl`` (one JSON object per evaluation), ``best.pt`` (the best model by validation
perplexity, averaged weights under ASGD) and ``last.pt`` (everything needed to continue:
model, optimiser and ASGD state, RNG states, epoch, position in the epoch and hidden state).
Checkpoints hold only tensors and plain data and are written atomically; they load with
``torch.load(..., weights_only=True)``.
"""
from __future__ import annotations

import json
import math
import os
import random
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from lmlow.config import Config
from lmlow.data.corpus import Corpus
from lmlow.data.textio import atomic_write_text
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError
from lmlow.evaluate import lstm_logprobs
from lmlow.model import AWDLSTM, count_parameters, detach_hidden, log_unigram, pretrained_matrix
from lmlow.progress import shown

CHECKPOINT_FORMAT = 1
LOGIT_CHUNK_ELEMENTS = 1 << 26   # logits computed at once in the loss (256 MB of fp32)


# --------------------------------------------------------------------------- set-up

def pick_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise LmlowError("--device cuda: no CUDA GPU is available to torch")
    return torch.device(name)


def pick_precision(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype, or None for plain fp32. bf16 needs no loss scaling; on CPUs with
    AMX tiles it runs the LSTM and softmax matmuls about 1.5x faster than fp32."""
    if name == "auto":
        if device.type == "cuda":
            return torch.float16
        amx = getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()
        return torch.bfloat16 if amx else None
    if name == "fp16" and device.type != "cuda":
        raise LmlowError("--precision fp16 needs a CUDA device; use bf16 on a CPU")
    return {"fp32": None, "bf16": torch.bfloat16, "fp16": torch.float16}[name]


def load_embeddings(cfg: Config):
    if not cfg.embeddings:
        return None
    from lmlow.embeddings import load_vectors
    return load_vectors(Path(cfg.embeddings))


def open_corpus(cfg: Config, kv=None, vocab: Vocabulary | None = None) -> Corpus:
    extra = kv.index_to_key if (kv is not None and cfg.extend_vocab) else ()
    return Corpus(Path(cfg.corpus), cfg.unk_threshold, extra, vocab=vocab)


def build_model(cfg: Config, vocab: Vocabulary, kv=None, seed: int | None = None):
    """The AWD-LSTM of ``cfg`` for ``vocab``, initialised and frozen as ``cfg`` says.

    Returns (model, report) where report says what was pretrained and how much of the
    vocabulary the vectors covered.
    """
    g = torch.Generator().manual_seed(cfg.seed if seed is None else seed)
    torch.manual_seed(cfg.seed if seed is None else seed)
    emb = kv.vector_size if (kv is not None and cfg.pretrained_input) else cfg.emb_size
    out = kv.vector_size if (kv is not None and cfg.pretrained_output) else (cfg.out_size or emb)
    if cfg.tie and emb != out:
        raise LmlowError(f"tied embeddings need equal sizes, got input {emb} and output {out}")
    model = AWDLSTM(len(vocab), emb, cfg.hidden_size, cfg.layers, out, cfg.tie, cfg.dropout,
                    cfg.dropouth, cfg.dropouti, cfg.dropoute, cfg.wdrop)
    report = {"vocabulary": len(vocab), "emb_size": emb, "out_size": out}
    with torch.no_grad():
        if kv is not None and (cfg.pretrained_input or cfg.pretrained_output):
            matrix, found = pretrained_matrix(vocab.words, kv, g)
            counts = vocab.count_array()
            covered = np.array([w in kv.key_to_index for w in vocab.words])
            report["coverage_types_pct"] = 100.0 * found / len(vocab)
            report["coverage_tokens_pct"] = 100.0 * counts[covered].sum() / max(1, counts.sum())
            if cfg.pretrained_input:
                model.encoder.weight.copy_(matrix)
            if cfg.pretrained_output and not cfg.tie:
                model.decoder.weight.copy_(matrix)
        if cfg.unigram_bias:
            model.decoder.bias.copy_(log_unigram(torch.from_numpy(vocab.count_array())))
            if not cfg.tie and not cfg.pretrained_output:
                # small contextual logits at step 0, so the model starts as the unigram model
                model.decoder.weight.mul_(0.1)
    model.encoder.weight.requires_grad_(not (cfg.freeze_input or (cfg.tie and cfg.freeze_output)))
    model.decoder.weight.requires_grad_(not (cfg.freeze_output or (cfg.tie and cfg.freeze_input)))
    model.decoder.bias.requires_grad_(not cfg.freeze_output_bias)
    report.update(count_parameters(model))
    return model, report


def checkpoint_config(cfg: Config, state_dict: dict) -> Config:
    """``cfg`` with the sizes a saved model has and no pretrained init: what rebuilds a
    checkpoint's model without reading the vectors again (its weights come from the file)."""
    return Config(**{**cfg.to_dict(), "emb_size": state_dict["encoder.weight"].shape[1],
                     "out_size": state_dict["decoder.weight"].shape[1], "init": ["random"],
                     "embeddings": None, "extend_vocab": False})


# --------------------------------------------------------------------------- batches

def batchify(ids: np.ndarray, batch_size: int) -> np.ndarray:
    """(T, B) view of the stream: column b is the b-th contiguous slice (no copy of a memmap)."""
    n = len(ids) // batch_size
    if n < 2:
        raise LmlowError(f"training split too small for batch size {batch_size}")
    return np.asarray(ids[: n * batch_size]).reshape(batch_size, n).T


def seq_length(rng: random.Random, bptt: int) -> int:
    """AWD-LSTM's variable BPTT: mostly N(bptt, 5), sometimes N(bptt/2, 5), at least 5."""
    base = bptt if rng.random() < 0.95 else bptt / 2
    return max(5, int(rng.gauss(base, 5)))


# --------------------------------------------------------------------------- loss

def lm_loss(model, output, targets, cfg: Config, prior: torch.Tensor | None) -> torch.Tensor:
    """Cross-entropy (with optional label smoothing) over the vocabulary. In training it is
    ChunkedSoftmaxCE, which computes the softmax once and its gradients from it, in row chunks
    of at most LOGIT_CHUNK_ELEMENTS logits, so a 100k-word softmax never holds all its logits
    at once; without gradients, the plain loss."""
    flat, y = output.reshape(-1, output.size(-1)), targets.reshape(-1)
    vocab = model.decoder.weight.size(0)
    rows = max(1, LOGIT_CHUNK_ELEMENTS // vocab)
    if not torch.is_grad_enabled():
        return _chunk_loss(flat, y, model, cfg, prior) / y.numel()
    eps = cfg.label_smoothing
    target_prior = None
    if eps:
        target_prior = prior if cfg.smoothing_prior == "unigram" else flat.new_full((vocab,), 1.0 / vocab)
    dtype = torch.get_autocast_dtype(flat.device.type) if torch.is_autocast_enabled(flat.device.type) else None
    total = ChunkedSoftmaxCE.apply(flat, model.decoder.weight, model.decoder.bias, y, eps,
                                   target_prior, rows, dtype)
    return total / y.numel()


class ChunkedSoftmaxCE(torch.autograd.Function):
    """Summed (label-smoothed) cross-entropy of ``h @ W.T + b``, chunk by chunk, with the
    gradients of h, W and b computed in the forward pass from each chunk's softmax
    (d loss / d logits = softmax - target), then scaled in backward. Matmuls run in ``dtype``
    (the autocast dtype) when given; the softmax and all accumulators are fp32."""

    @staticmethod
    def forward(ctx, h, weight, bias, y, eps, prior, rows, dtype):
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        mm = dtype or torch.float32
        w = weight.to(mm)
        gh = torch.empty(h.shape, dtype=torch.float32, device=h.device) if need_h else None
        gw = torch.zeros(weight.shape, dtype=torch.float32, device=h.device) if need_w else None
        gb = torch.zeros(bias.shape, dtype=torch.float32, device=h.device) if need_b else None
        total = torch.zeros((), dtype=torch.float32, device=h.device)
        with torch.autocast(h.device.type, enabled=False):
            for i in range(0, h.size(0), rows):
                hc, yc = h[i:i + rows].to(mm), y[i:i + rows]
                g = (hc @ w.t()).float()                  # logits
                g += bias.float()                         # in place: 3x faster on CPU
                g = torch.log_softmax(g, dim=-1)
                loss = -(1 - eps) * g.gather(1, yc.unsqueeze(1)).sum()
                if eps:
                    loss = loss - eps * (g @ prior.float()).sum()
                total += loss
                g.exp_()                                  # softmax
                g.scatter_add_(1, yc.unsqueeze(1), g.new_full((yc.numel(), 1), -(1 - eps)))
                if eps:
                    g -= eps * prior.float()
                if need_b:
                    gb += g.sum(0)
                g = g.to(mm)
                if need_h:
                    gh[i:i + rows] = (g @ w).float()
                if need_w:
                    gw += (g.t() @ hc).float()
        ctx.save_for_backward(*(t if t is not None else torch.empty(0) for t in (gh, gw, gb)))
        ctx.dtypes = (h.dtype, weight.dtype, bias.dtype)
        ctx.needs = (need_h, need_w, need_b)
        return total

    @staticmethod
    def backward(ctx, grad):
        grads = [g.mul(grad).to(dt) if need else None
                 for g, dt, need in zip(ctx.saved_tensors, ctx.dtypes, ctx.needs)]
        return (*grads, None, None, None, None, None)


def _chunk_loss(h, y, model, cfg: Config, prior) -> torch.Tensor:
    logits = model.decoder(h).float()
    eps = cfg.label_smoothing
    if eps == 0:
        return F.cross_entropy(logits, y, reduction="sum")
    if cfg.smoothing_prior == "uniform":
        return F.cross_entropy(logits, y, reduction="sum", label_smoothing=eps)
    logp = F.log_softmax(logits, dim=-1)
    nll = -logp.gather(-1, y.unsqueeze(-1)).squeeze(-1)
    smooth = -(logp * prior).sum(-1)
    return ((1 - eps) * nll + eps * smooth).sum()


# --------------------------------------------------------------------------- state

@dataclass
class RunState:
    epoch: int = 0                  # completed epochs
    step: int = 0                   # updates so far
    position: int = 0               # index into the epoch's batches (0: epoch start)
    best_valid: float = math.inf    # best validation cross-entropy (nats)
    valid_history: list = field(default_factory=list)
    asgd: bool = False
    stale_epochs: int = 0
    train_seconds: float = 0.0
    lr: float = 0.0                 # the base rate; schedules change it at epoch ends
    epoch_loss: float = 0.0         # running sums of the current epoch (kept across resume)
    epoch_tokens: int = 0
    epoch_seconds: float = 0.0
    tokens: int = 0                 # training tokens over the whole run


def atomic_save(obj, path: Path) -> None:
    tmp = Path(f"{path}.tmp{os.getpid()}")
    torch.save(obj, tmp)
    os.replace(tmp, path)


def load_checkpoint(path: Path) -> dict:
    path = Path(path)
    if not path.exists():
        raise LmlowError(f"{path}: no such checkpoint")
    try:
        ck = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        raise LmlowError(f"{path}: not a readable lmlow checkpoint ({type(e).__name__})") from None
    if not isinstance(ck, dict) or ck.get("format") != CHECKPOINT_FORMAT:
        raise LmlowError(f"{path}: not an lmlow checkpoint (or from another version)")
    return ck


# --------------------------------------------------------------------------- trainer

class Trainer:
    def __init__(self, cfg: Config, run_dir: Path, resume: dict | None = None, quiet: bool = False):
        self.cfg, self.run_dir, self.quiet = cfg, Path(run_dir), quiet
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        self.device = pick_device(cfg.device)
        self.kv = None if resume else load_embeddings(cfg)  # a resumed model has its weights
        vocab = Vocabulary(resume["vocab"], resume["counts"], cfg.unk_threshold) if resume else None
        self.corpus = open_corpus(cfg, self.kv, vocab)
        self.vocab = self.corpus.vocab
        self.train_ids = _head(self.corpus.encode("train").ids, cfg.train_fraction, self.vocab.eos_id)
        self.valid_ids = self.corpus.encode("valid").ids
        self.model, self.init_report = build_model(
            checkpoint_config(cfg, resume["model"]) if resume else cfg, self.vocab, self.kv)
        self.model.to(self.device)
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.state = RunState(lr=cfg.lr)
        self.optimizer = self._make_optimizer(asgd=False)
        self.rng = random.Random(cfg.seed)
        self.hidden = None
        counts = torch.from_numpy(self.vocab.count_array()).double()
        self.prior = (counts / counts.sum()).float().to(self.device) if cfg.smoothing_prior == "unigram" else None
        self.amp_dtype = pick_precision(cfg.precision, self.device)
        self.scaler = torch.amp.GradScaler("cuda") if self.amp_dtype == torch.float16 else None
        self.tracker = None
        if cfg.track_frequency:   # Meister et al.'s Fig. 1 statistics (lmlow.analysis)
            from lmlow.analysis import FrequencyTracker
            self.tracker = FrequencyTracker(self.model, self.valid_ids, self.vocab.count_array(),
                                            self.vocab.eos_id, self.run_dir, cfg.eval_batch_size,
                                            cfg.bptt, self.device, fresh=resume is None)
        if resume:
            self._restore(resume)

    # ---- optimisers
    def _make_optimizer(self, asgd: bool):
        cfg = self.cfg
        if not self.params:
            return None
        if cfg.optimizer == "sgd":
            if asgd:
                return torch.optim.ASGD(self.params, lr=self.state.lr, t0=0, lambd=0.0,
                                        weight_decay=cfg.wdecay)
            return torch.optim.SGD(self.params, lr=self.state.lr, weight_decay=cfg.wdecay)
        cls = torch.optim.Adam if cfg.optimizer == "adam" else torch.optim.AdamW
        # the fused kernel (CPU and CUDA) does the whole update in one pass per tensor
        fused = self.device.type in ("cpu", "cuda")
        return cls(self.params, lr=self.state.lr, weight_decay=cfg.wdecay, fused=fused)

    # ---- checkpoints
    def _checkpoint(self) -> dict:
        return {
            "format": CHECKPOINT_FORMAT, "config": self.cfg.to_dict(), "vocab": self.vocab.words,
            "counts": self.vocab.counts, "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict() if self.optimizer else None,
            "state": self.state.__dict__.copy(),
            "rng": {"python": _py_state(self.rng), "torch": torch.get_rng_state(),
                    "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else []},
            "hidden": [(h.cpu(), c.cpu()) for h, c in self.hidden] if self.hidden else None,
        }

    def _restore(self, ck: dict) -> None:
        self.model.load_state_dict(ck["model"])
        self.state = RunState(**ck["state"])
        if self.state.asgd:
            self.optimizer = self._make_optimizer(asgd=True)
        if self.optimizer and ck["optimizer"]:
            self.optimizer.load_state_dict(ck["optimizer"])
        self.rng.setstate(_py_unstate(ck["rng"]["python"]))
        torch.set_rng_state(ck["rng"]["torch"])
        if ck["rng"]["cuda"] and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(ck["rng"]["cuda"])
        if ck["hidden"] is not None:
            self.hidden = [(h.to(self.device), c.to(self.device)) for h, c in ck["hidden"]]

    def _save_best(self) -> None:
        with self.averaged():
            atomic_save({"format": CHECKPOINT_FORMAT, "config": self.cfg.to_dict(),
                         "vocab": self.vocab.words, "counts": self.vocab.counts,
                         "model": self.model.state_dict(), "state": self.state.__dict__.copy()},
                        self.run_dir / "best.pt")

    # ---- evaluation
    @contextmanager
    def averaged(self):
        """Evaluate with ASGD's averaged weights, then put the raw weights back."""
        if not isinstance(self.optimizer, torch.optim.ASGD):
            yield
            return
        saved = [p.detach().clone() for p in self.params]
        with torch.no_grad():
            for p in self.params:
                if "ax" in self.optimizer.state[p]:
                    p.copy_(self.optimizer.state[p]["ax"])
        try:
            yield
        finally:
            with torch.no_grad():
                for p, s in zip(self.params, saved):
                    p.copy_(s)

    def validate(self) -> float:
        with self.averaged():
            lp = lstm_logprobs(self.model, self.valid_ids, self.vocab.eos_id,
                               self.cfg.eval_batch_size, self.cfg.bptt, device=self.device)
        self.model.train()
        return -float(np.mean(lp))

    # ---- the loop
    def run(self) -> dict:
        cfg = self.cfg
        self.run_dir.mkdir(parents=True, exist_ok=True)
        if cfg.max_epochs == 0:
            loss = self.validate()
            self._log_metrics({"epoch": 0, "step": 0, "valid_loss": loss, "valid_ppl": math.exp(loss)})
            self.state.best_valid = loss
            self._save_best()
            atomic_save(self._checkpoint(), self.run_dir / "last.pt")
            return self.summary()
        if self.optimizer is None:
            raise LmlowError("every parameter is frozen: nothing to train")
        data = batchify(self.train_ids, cfg.batch_size)
        self.n_batches = data.shape[0] - 1
        if self.tracker and self.state.step == 0:  # learning curves start at the initialisation
            loss = self.validate()
            self._log_metrics({"epoch": 0, "step": 0, "valid_loss": loss, "valid_ppl": math.exp(loss),
                               "lr": self.state.lr, "elapsed": 0.0})
        start = time.time() - self.state.train_seconds
        while self.state.epoch < cfg.max_epochs and not (cfg.max_steps and self.state.step >= cfg.max_steps):
            finished = self._train_epoch(data, start)
            if not finished:
                break
            if self._epoch_end():
                break
            if cfg.max_time and time.time() - start > cfg.max_time * 60:
                self._say(f"time budget of {cfg.max_time:g} min reached")
                break
        return self.summary()

    def _train_epoch(self, data: np.ndarray, start: float) -> bool:
        """One pass over the training batches from ``state.position``; False if a budget ended it."""
        cfg, st, model = self.cfg, self.state, self.model
        model.train()
        if st.position == 0 or self.hidden is None:
            self.hidden = model.init_hidden(cfg.batch_size)
        if st.position == 0:
            st.epoch_loss, st.epoch_tokens, st.epoch_seconds = 0.0, 0, 0.0
        t0 = time.time() - st.epoch_seconds
        n = data.shape[0] - 1
        bar = _bar(n, st.epoch + 1, self.quiet)
        bar.update(st.position)
        last_save = time.time()
        while st.position < n - 1:
            if self.tracker:   # at updates 0, 1, 2, 4, ...; no random numbers drawn
                self.tracker.at_step(st.step, st.epoch + st.position / n, st.train_seconds)
            seq = min(seq_length(self.rng, cfg.bptt), n - st.position)
            x = torch.from_numpy(np.ascontiguousarray(data[st.position:st.position + seq], np.int64))
            y = torch.from_numpy(np.ascontiguousarray(data[st.position + 1:st.position + 1 + seq], np.int64))
            loss_value = self._update(x.to(self.device), y.to(self.device), seq)
            st.epoch_loss += loss_value * x.numel()
            st.epoch_tokens += x.numel()
            st.tokens += x.numel()
            st.position += seq
            st.step += 1
            st.train_seconds, st.epoch_seconds = time.time() - start, time.time() - t0
            bar.update(seq)
            if st.step % 20 == 0:
                bar.set_postfix(loss=f"{st.epoch_loss / st.epoch_tokens:.2f}",
                                tok_s=f"{st.epoch_tokens / st.epoch_seconds:.0f}")
            if cfg.eval_every and st.step % cfg.eval_every == 0:
                loss = self.validate()
                self._log_metrics({"epoch": st.epoch + st.position / n, "step": st.step,
                                   "valid_loss": loss, "valid_ppl": math.exp(loss),
                                   "lr": st.lr, "elapsed": round(st.train_seconds, 1)})
            if time.time() - last_save > 600:      # a killed run loses at most 10 minutes
                atomic_save(self._checkpoint(), self.run_dir / "last.pt")
                last_save = time.time()
            out_of_time = cfg.max_time and st.train_seconds > cfg.max_time * 60
            if out_of_time or (cfg.max_steps and st.step >= cfg.max_steps):
                bar.close()
                atomic_save(self._checkpoint(), self.run_dir / "last.pt")
                if self.tracker:   # the weights the run stops with
                    self.tracker.record(st.step, st.epoch + st.position / n, st.train_seconds, "end")
                if out_of_time:  # the budget is spent: keep what the partial epoch learnt
                    self._final_validation(st.epoch + st.position / n)
                self._say(f"stopped in epoch {st.epoch + 1} at update {st.step}; "
                          f"`lmlow train --resume {self.run_dir}` continues")
                return False
        bar.close()
        self.epoch_stats = {"train_loss": st.epoch_loss / max(1, st.epoch_tokens),
                            "tokens_per_s": st.epoch_tokens / max(1e-9, st.epoch_seconds)}
        return True

    def _update(self, x, y, seq: int) -> float:
        cfg, st, model = self.cfg, self.state, self.model
        lr = st.lr * seq / cfg.bptt                 # the rate follows the sequence length
        if cfg.schedule == "cosine":
            lr *= 0.5 * (1 + math.cos(math.pi * min(1.0, self._budget_used())))
        if cfg.warmup_steps and st.step < cfg.warmup_steps:
            lr *= (st.step + 1) / cfg.warmup_steps
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.hidden = detach_hidden(self.hidden)
        with torch.autocast(self.device.type, enabled=self.amp_dtype is not None,
                            dtype=self.amp_dtype or torch.float32):
            output, self.hidden, raw, dropped = model(x, self.hidden)
            loss = lm_loss(model, output, y, cfg, self.prior)
            total = loss
            if cfg.alpha:
                total = total + cfg.alpha * dropped.float().pow(2).mean()
            if cfg.beta:
                total = total + cfg.beta * (raw[1:] - raw[:-1]).float().pow(2).mean()
        if not torch.isfinite(total):
            raise LmlowError(f"loss became {total.item()} at update {st.step + 1} (epoch "
                             f"{st.epoch + 1}); lower --lr or --clip. The last good state is "
                             f"{self.run_dir / 'last.pt'} (nothing newer was written)")
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler:
            self.scaler.scale(total).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            total.backward()
        if cfg.clip:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.clip)
        if self.scaler:
            self.scaler.step(self.optimizer)
            self.scaler.update()
        else:
            self.optimizer.step()
        return loss.item()

    def _budget_used(self) -> float:
        """The fraction of the run's budget spent: the largest of time, updates and epochs.
        A cosine schedule over it ends at rate 0 exactly when the budget does, which under a
        fixed compute budget beats a constant or plateau-decayed rate."""
        cfg, st = self.cfg, self.state
        used = [(st.epoch + st.position / max(1, self.n_batches)) / cfg.max_epochs]
        if cfg.max_time:
            used.append(st.train_seconds / (cfg.max_time * 60))
        if cfg.max_steps:
            used.append(st.step / cfg.max_steps)
        return max(used)

    def _final_validation(self, epoch: float) -> None:
        """Validate the weights a time budget stopped at, and keep them if they are the best.

        (A run stopped by --max-steps, or killed, skips this, so that resuming it replays
        exactly what an uninterrupted run would have done.)"""
        loss = self.validate()
        self._log_metrics({"epoch": round(epoch, 3), "step": self.state.step, "valid_loss": loss,
                           "valid_ppl": math.exp(loss), "lr": self.state.lr,
                           "elapsed": round(self.state.train_seconds, 1), "partial_epoch": True})
        if loss < self.state.best_valid:
            self.state.best_valid = loss
            self._save_best()

    def _epoch_end(self) -> bool:
        """Validate, log, save; switch to ASGD or decay the rate; True to stop early."""
        cfg, st = self.cfg, self.state
        st.epoch += 1
        st.position = 0
        self.hidden = None
        loss = self.validate()
        if self.tracker:
            self.tracker.record(st.step, st.epoch, st.train_seconds, "epoch")
        improved = loss < st.best_valid
        self._log_metrics({"epoch": st.epoch, "step": st.step, "train_loss": self.epoch_stats["train_loss"],
                           "train_ppl": math.exp(min(50, self.epoch_stats["train_loss"])),
                           "valid_loss": loss, "valid_ppl": math.exp(loss), "lr": st.lr,
                           "optimizer": "asgd" if st.asgd else cfg.optimizer,
                           "tokens_per_s": round(self.epoch_stats["tokens_per_s"]),
                           "elapsed": round(st.train_seconds, 1)})
        if improved:
            st.best_valid, st.stale_epochs = loss, 0
            self._save_best()
        else:
            st.stale_epochs += 1
        # NT-ASGD (Merity et al.): average once validation has not improved for `nonmono` epochs
        if (cfg.optimizer == "sgd" and cfg.asgd and not st.asgd and len(st.valid_history) > cfg.nonmono
                and loss > min(st.valid_history[:-cfg.nonmono])):
            self._say(f"switching to averaged SGD at epoch {st.epoch}")
            st.asgd = True
            self.optimizer = self._make_optimizer(asgd=True)
        st.valid_history.append(loss)
        if cfg.schedule == "step" and st.epoch % cfg.step_size == 0:
            st.lr *= cfg.gamma
        elif cfg.schedule == "plateau" and not improved:
            st.lr *= cfg.gamma
        atomic_save(self._checkpoint(), self.run_dir / "last.pt")
        if cfg.patience and st.stale_epochs >= cfg.patience:
            self._say(f"early stop: {cfg.patience} epochs without improvement")
            return True
        return False

    # ---- reporting
    def _log_metrics(self, row: dict) -> None:
        with open(self.run_dir / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        if "valid_ppl" in row:
            extra = f" train ppl {row['train_ppl']:.1f}" if "train_ppl" in row else ""
            speed = f" {row['tokens_per_s']} tok/s" if "tokens_per_s" in row else ""
            self._say(f"epoch {row['epoch']:.2f} step {row['step']}: valid ppl "
                      f"{row['valid_ppl']:.2f}{extra}{speed}")

    def _say(self, msg: str) -> None:
        if not self.quiet:
            print(msg, flush=True)

    def summary(self) -> dict:
        return {"run_dir": str(self.run_dir), "epochs": self.state.epoch, "steps": self.state.step,
                "best_valid_ppl": math.exp(self.state.best_valid) if self.state.best_valid < math.inf else None,
                "train_seconds": round(self.state.train_seconds, 1), "tokens": self.state.tokens,
                "tokens_per_s": round(self.state.tokens / max(1e-9, self.state.train_seconds)),
                **self.init_report}


def _head(ids: np.ndarray, fraction: float, eos_id: int) -> np.ndarray:
    """The first ``fraction`` of a token stream, cut at a line end."""
    if fraction >= 1:
        return ids
    cut = int(len(ids) * fraction)
    ends = np.flatnonzero(ids[:cut] == eos_id)
    if not len(ends):
        raise LmlowError(f"--train-fraction {fraction:g} leaves no complete training line")
    return ids[:ends[-1] + 1]


def _py_state(rng: random.Random):
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _py_unstate(s):
    return (s[0], tuple(s[1]), s[2])


def _bar(total: int, epoch: int, quiet: bool):
    from tqdm import tqdm
    return tqdm(total=total, desc=f"epoch {epoch}", unit="step", leave=False,
                disable=quiet or not shown(), dynamic_ncols=True)


# --------------------------------------------------------------------------- entry points

def prepare_run_dir(run_dir: Path, force: bool) -> None:
    run_dir = Path(run_dir)
    if run_dir.exists() and any(run_dir.iterdir()):
        if not force:
            raise LmlowError(f"{run_dir} is not empty; use --resume {run_dir} to continue it, "
                             "or --force to start over in it")
        for name in ("summary.json", "best.pt", "last.pt", "metrics.jsonl", "config.json", "vocab.txt"):
            (run_dir / name).unlink(missing_ok=True)
    run_dir.mkdir(parents=True, exist_ok=True)


def train(cfg: Config, run_dir: Path, force: bool = False, quiet: bool = False) -> dict:
    """Train a new run in ``run_dir``."""
    prepare_run_dir(run_dir, force)
    trainer = Trainer(cfg, run_dir, quiet=quiet)
    cfg.save(Path(run_dir) / "config.json")
    trainer.vocab.save(Path(run_dir) / "vocab.txt")
    if not quiet:
        r = trainer.init_report
        cov = (f"; vectors cover {r['coverage_types_pct']:.1f}% of vocabulary types, "
               f"{r['coverage_tokens_pct']:.1f}% of training tokens" if "coverage_types_pct" in r else "")
        print(f"{cfg.describe()}; vocabulary {r['vocabulary']}; parameters {r['trainable']:,} "
              f"trainable, {r['frozen']:,} frozen{cov}; device {trainer.device}", flush=True)
    return _finish(trainer)


def resume(run_dir: Path, quiet: bool = False, **budget) -> dict:
    """Continue a run from ``run_dir/last.pt``; ``budget`` may raise max_epochs/max_time."""
    ck = load_checkpoint(Path(run_dir) / "last.pt")
    cfg = Config.from_dict(ck["config"], str(Path(run_dir) / "last.pt"))
    for k, v in budget.items():
        if v is not None:
            setattr(cfg, k, v)
    trainer = Trainer(cfg, run_dir, resume=ck, quiet=quiet)
    cfg.save(Path(run_dir) / "config.json")
    return _finish(trainer)


def _finish(trainer: Trainer) -> dict:
    """Run to the end of the budget; ``summary.json`` marks a finished run (sweeps skip it)."""
    summary = trainer.run()
    atomic_write_text(trainer.run_dir / "summary.json", json.dumps(summary, indent=1) + "\n")
    return summary
