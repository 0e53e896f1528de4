"""``lmlow train``: the AWD-LSTM training loop, its optimisers and learning rates, and resume.

The run folder (:mod:`lmlow.rundir`) holds ``config.json`` (the Config as built), ``vocab.txt``,
``metrics.jsonl`` (one JSON object per evaluation), ``best.pt`` (the best model by validation
perplexity, averaged weights under ASGD), ``last.pt`` (everything needed to continue: model,
optimiser and ASGD state, RNG states, epoch, position in the epoch and hidden state) and, once
the budget is spent, ``summary.json``. Building models and reading and writing checkpoints
live in :mod:`lmlow.checkpoint`, the loss in :mod:`lmlow.loss`.
"""
from __future__ import annotations

import dataclasses
import math
import os
import random
import signal
import sys
import time
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from lmlow.asgd import ScalerAwareASGD
from lmlow.checkpoint import (build_model, checkpoint_config, checkpoint_vocabulary,
                              device_name, fast_matmuls, load_checkpoint, make_scaler,
                              model_sizes, pick_device, pick_precision, precision_name,
                              save_checkpoint)
from lmlow.config import (RESUME_CHANGES, Config, check_settings, file_values, keyword_errors,
                          model_shape, path_value, same_run_differs)
from lmlow.cpus import available_cpus
from lmlow.data.corpus import Corpus, training_ids
from lmlow.data.vocab import Vocabulary
from lmlow.distributed import (SINGLE, World, all_max, all_sum, check_gpus, columns, gather, join,
                               leave, rank_seed, require_processes, world_from_env, wrap)
from lmlow.errors import Interrupted, LmlowError, Said, caught_signals, silence_stdout
from lmlow.evaluate import exp_loss, lstm_logprobs, valid_bins
from lmlow.files import append_jsonl, atomic_write_json, atomic_write_text, to_json
from lmlow.frozen_rows import FrozenRows, describe_rows
from lmlow.loss import lm_losses
from lmlow.model import detach_hidden, join_states, map_state
from lmlow.progress import shown
from lmlow.rundir import RunDir

SYNC_EVERY = 20     # updates between the host's looks at the device's numbers (and the ranks')
SAVE_EVERY = 600    # seconds of training between saves of last.pt within an epoch


# --------------------------------------------------------------------------- set-up

def _sgd_fuses() -> bool:
    """Whether this torch's SGD has a fused kernel (torch 2.4 on)."""
    import inspect

    return "fused" in inspect.signature(torch.optim.SGD).parameters


def deterministic_kernels() -> None:
    """Only kernels that give the same bits every time (a GPU's defaults may sum in any
    order): what makes a resumed GPU run bitwise equal to an uninterrupted one. cuBLAS needs
    its workspace fixed before its first use in the process."""
    os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.use_deterministic_algorithms(True)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False


def load_embeddings(cfg: Config):
    if not cfg.embeddings:
        return None
    from lmlow.embeddings import load_vectors
    return load_vectors(Path(cfg.embeddings), cfg.allow_pickle)


def open_corpus(cfg: Config, kv=None, vocab: Vocabulary | None = None) -> Corpus:
    """The run's corpus; its vocabulary ``vocab`` where the run has one (a resume), else the
    one the settings build (the UNK rule and the vectors' words, or ``--vocab``'s list)."""
    extra = kv.index_to_key if (kv is not None and cfg.extend_vocab) else ()
    return Corpus(Path(cfg.corpus), cfg.unk_threshold, extra, vocab=vocab, vocab_file=cfg.vocab)


def built_config(cfg: Config, kv=None) -> Config:
    """``cfg`` with the embedding sizes the model really has (pretrained vectors fix the size
    of what they initialise), so config.json says what was built."""
    emb, out = model_sizes(cfg, kv)
    return dataclasses.replace(cfg, emb_size=emb,
                               out_size=cfg.out_size if cfg.out_size is None and out == emb else out,
                               corpus=str(Path(cfg.corpus).resolve()),   # movable run folders
                               embeddings=str(Path(cfg.embeddings).resolve()) if cfg.embeddings else None,
                               vocab=str(Path(cfg.vocab).resolve()) if cfg.vocab else None)


# --------------------------------------------------------------------------- schedule and budget

def learning_rate(cfg: Config, base: float, step: int, seq: int, used: float) -> float:
    """The rate of update ``step`` (0-based) over a sequence of ``seq`` tokens: the base rate
    (after any step/plateau decays, :func:`decayed_rate`) scaled by seq / bptt (AWD-LSTM's rule
    for variable-length sequences), by the cosine schedule over the fraction ``used`` of the
    budget (0 at its end), and by a linear warm-up over the first ``warmup_steps`` updates."""
    lr = base * seq / cfg.bptt
    if cfg.schedule == "cosine":
        lr *= 0.5 * (1 + math.cos(math.pi * min(1.0, used)))
    if cfg.warmup_steps and step < cfg.warmup_steps:
        lr *= (step + 1) / cfg.warmup_steps
    return lr


def decayed_rate(cfg: Config, base: float, epoch: int, improved: bool) -> float:
    """The base rate after epoch ``epoch`` (1-based) ends: the step schedule multiplies it by
    gamma every ``step_size`` epochs, the plateau schedule after an epoch without improvement."""
    if cfg.schedule == "step" and epoch % cfg.step_size == 0:
        return base * cfg.gamma
    if cfg.schedule == "plateau" and not improved:
        return base * cfg.gamma
    return base


def budget_used(cfg: Config, epochs: float, steps: int, seconds: float) -> float:
    """The fraction of the budget spent: the largest of epochs, updates and time. A cosine
    schedule over it ends at rate 0 exactly when the budget does."""
    used = [epochs / cfg.max_epochs] if cfg.max_epochs else [1.0]
    if cfg.max_time:
        used.append(seconds / (cfg.max_time * 60))
    if cfg.max_steps:
        used.append(steps / cfg.max_steps)
    return max(used)


def budget_spent(cfg: Config, epochs: int, steps: int, seconds: float) -> str | None:
    """Which budget has run out (``epochs``, ``steps`` or ``time``), or None: the one check."""
    if epochs >= cfg.max_epochs:
        return "epochs"
    if cfg.max_steps and steps >= cfg.max_steps:
        return "steps"
    if cfg.max_time and seconds > cfg.max_time * 60:
        return "time"
    return None


def say(line: str) -> bool:
    """Print a line of progress; False once stdout's reader has gone (`lmlow train ... | head`):
    the training goes on quietly, where a closed pipe killed it between two checkpoints (an
    epoch's validation logged, its best.pt never written)."""
    try:
        print(line, flush=True)
        return True
    except BrokenPipeError:
        silence_stdout()
        return False


# --------------------------------------------------------------------------- batches

def check_batches(tokens: int, cfg: Config) -> None:
    """An update needs three tokens in each column of the batch (an epoch reads up to the
    column's last input and target, and stops short of a one-token remainder): said with the
    flags that decide it, before anything is written."""
    if tokens // cfg.batch_size < 3:
        part = (f" (--train-fraction {cfg.train_fraction:g} of it)"
                if cfg.train_fraction < 1 else "")
        raise LmlowError(f"{cfg.corpus}: the training split has {tokens:,} tokens{part}, too "
                         f"few for --batch-size {cfg.batch_size} (at least "
                         f"{3 * cfg.batch_size:,}: three a column); lower --batch-size")


def batchify(ids: np.ndarray, batch_size: int) -> np.ndarray:
    """(T, B) view of the stream: column b is the b-th contiguous slice (no copy of a memmap).
    At least two rows: :func:`check_batches` refused a shorter split before the run began."""
    n = len(ids) // batch_size
    return np.asarray(ids[: n * batch_size]).reshape(batch_size, n).T


def seq_length(rng: random.Random, bptt: int) -> int:
    """AWD-LSTM's variable BPTT: mostly N(bptt, 5), sometimes N(bptt/2, 5), at least 5."""
    base = bptt if rng.random() < 0.95 else bptt / 2
    return max(5, int(rng.gauss(base, 5)))


# --------------------------------------------------------------------------- state

@dataclass
class RunState:
    epoch: int = 0                  # completed epochs
    step: int = 0                   # updates so far
    position: int = 0               # index into the epoch's batches (0: epoch start)
    best_valid: float = math.inf    # best validation cross-entropy (nats)
    ref_valid: float = math.inf     # the last best that counted as an improvement (--min-improvement)
    valid_history: list = field(default_factory=list)
    asgd: bool = False
    stale_epochs: int = 0
    epoch_improved: bool = False    # a validation of this epoch (mid-epoch too) set a new best
    train_seconds: float = 0.0
    lr: float = 0.0                 # the base rate; schedules change it at epoch ends
    epoch_loss: float = 0.0         # running sums of the current epoch (kept across resume),
    epoch_tokens: int = 0           # over all processes
    epoch_seconds: float = 0.0
    tokens: int = 0                 # training tokens over the whole run
    skipped: int = 0                # updates the fp16 loss scaler skipped (inf/nan gradients)
    precisions: list = field(default_factory=list)   # the resolved precision of each session


# --------------------------------------------------------------------------- trainer

class Trainer:
    """One run's training: built from a Config (new) or a ``last.pt`` (``resume``); ``run()``
    trains until a budget is spent, validating, logging and checkpointing as it goes.

    On several processes (``world``, :mod:`lmlow.distributed`) every rank builds a Trainer,
    trains its columns of the batch through DDP and takes part in every validation and save;
    only rank 0 writes files and prints.

    The update never waits for the device: the loss and a non-finite check stay on it, and
    the host reads them every ``SYNC_EVERY`` updates (:meth:`_sync`), before each save and
    each validation, so a NaN is caught before anything is written."""

    def __init__(self, cfg: Config, run_dir: Path, resume: dict | None = None, quiet: bool = False,
                 world: World = SINGLE, device: torch.device | None = None):
        self.world = world
        self.rundir, self.quiet = RunDir(run_dir), quiet or not world.main
        self.run_dir = self.rundir.path
        torch.set_num_threads(cfg.threads or max(1, available_cpus() // world.local_size))
        self.threads = torch.get_num_threads()     # CPU sums split by thread: part of the bits
        self.device = device or pick_device(cfg.device)
        if cfg.deterministic:
            deterministic_kernels()
        fast_matmuls(self.device, cfg.deterministic)
        self.columns = columns(world, cfg.batch_size)
        self.kv = None if resume else load_embeddings(cfg)  # a resumed model has its weights
        asked = cfg.emb_size
        self.cfg = cfg = cfg if resume else built_config(cfg, self.kv)
        vocab = checkpoint_vocabulary(resume, cfg) if resume else None
        self.corpus = open_corpus(cfg, self.kv, vocab)
        self.vocab = self.corpus.vocab
        self.train_ids = training_ids(self.corpus, cfg.train_fraction)   # counts: this part's
        self.valid_ids = self.corpus.encode("valid").ids
        self.model, self.init_report = build_model(
            checkpoint_config(cfg, resume["model"]) if resume else cfg, self.vocab, self.kv,
            frozen_rows=_saved_mask(resume))
        if cfg.emb_size != asked and not resume:   # the vectors' size, said at the start
            self.init_report["emb_size_asked"] = asked
        if not resume:      # how much of the text the vocabulary reads as <unk> (a short --vocab
            #                 list can make it most of it, and the perplexity small and hollow):
            #                 the vocabulary's count of it, taken on these training ids
            unk = int(self.vocab.counts[self.vocab.unk_id])
            self.init_report["unk_tokens_pct"] = round(100 * unk / max(1, len(self.train_ids)), 3)
        if self.init_report.get("coverage_types_pct") == 0:
            raise LmlowError(f"{cfg.embeddings}: covers none of the {len(self.vocab)} vocabulary "
                             "words, so the 'pretrained' embeddings would be random; check that "
                             "the vectors were trained on text prepared like the corpus "
                             "(lowercase, tokenizer)")
        self.model.to(self.device)
        if world.distributed:    # one initialisation (seeded above), then masks per rank
            torch.manual_seed(rank_seed(cfg.seed, world.rank))
        self.net = wrap(world, self.model, self.device)   # what the update calls
        self.params = [p for p in self.model.parameters() if p.requires_grad]
        self.state = RunState(lr=cfg.lr)
        self.optimizer = self._make_optimizer(asgd=False)
        if cfg.max_epochs:                  # both checked before the run folder is made
            if self.optimizer is None:
                raise LmlowError("every parameter is frozen: nothing to train")
            check_batches(len(self.train_ids), cfg)
        self.rng = random.Random(cfg.seed)
        self.hidden = None
        self.last_rate = None      # the rate of the last update (metrics' "lr")
        self.metrics_rows = 0      # rows in metrics.jsonl: last.pt records how many it knows
        counts = torch.from_numpy(self.vocab.count_array()).double()
        self.prior = (counts / counts.sum()).float().to(self.device) if cfg.smoothing_prior == "unigram" else None
        self.amp_dtype = pick_precision(cfg.precision, self.device)
        self.scaler = make_scaler(self.amp_dtype, self.device)
        self.pending_loss = torch.zeros((), dtype=torch.float64, device=self.device)
        self.pending_skipped = torch.zeros((), dtype=torch.int64, device=self.device)
        self.first_bad = torch.full((), -1, dtype=torch.int64, device=self.device)
        self.stop: list[int] = []
        self.agreed_signal = 0
        # CPU processes (gloo) agree on a signal after every update, not only every SYNC_EVERY:
        # a one-number all-reduce costs nothing beside a CPU update, and 20 slow updates could
        # outlast the time a launcher or a cluster gives a stop. (On GPUs it would make every
        # update wait for the device: there the ranks agree every SYNC_EVERY updates.)
        self.signal_each_update = world.distributed and self.device.type == "cpu"
        self.clocks = None     # (start of training, start of the epoch), by time.time()
        self.tracker = None
        self.valid_bins: dict[str, float] = {}   # of the last validation (validate())
        if cfg.track_frequency and world.main:   # Meister et al.'s Fig. 1 statistics
            from lmlow.analysis.frequency import FrequencyTracker
            self.tracker = FrequencyTracker(self.model, self.valid_ids, self.vocab.count_array(),
                                            self.vocab.eos_id, self.rundir.frequency_file,
                                            cfg.eval_batch_size, cfg.bptt, self.device,
                                            fresh=resume is None)
        if resume:
            self._restore(resume)
        here = precision_name(self.amp_dtype)
        if not self.state.precisions or self.state.precisions[-1] != here:
            self.state.precisions.append(here)    # a resume in another precision is recorded
        # after the restore: the held rows are the checkpoint's (the run's first values)
        mask = self.model.frozen_input_rows
        self.frozen_rows = None if mask is None else FrozenRows(self.model.encoder.weight, mask)
        self.saved_at = self.state.train_seconds
        self._settle_buckets()

    # ---- optimisers
    def _make_optimizer(self, asgd: bool):
        cfg = self.cfg
        if not self.params:
            return None
        if cfg.optimizer == "sgd":
            if asgd:
                # capturable on CUDA: its step counters live on the GPU, so an update does not
                # wait for the device (.item() per parameter otherwise), and load_state_dict
                # moves a resumed run's counters there too; scaler-aware, so that fp16's loss
                # scaler hands it the overflow flag on the device instead of reading it
                return ScalerAwareASGD(self.params, lr=self.state.lr, t0=0, lambd=0.0,
                                       weight_decay=cfg.wdecay,
                                       capturable=self.device.type == "cuda")
            # fused on CUDA: with fp16 the loss scaler hands it the overflow flag on the
            # device, where the unfused SGD makes the scaler wait for the GPU every update
            # (benchmarks/gpu_waits.py); on the CPU unfused, as every CPU table was made
            # (torch 2.4 and later; an older torch steps unfused and waits)
            fused = self.device.type == "cuda" and _sgd_fuses()
            return torch.optim.SGD(self.params, lr=self.state.lr, weight_decay=cfg.wdecay,
                                   **({"fused": True} if fused else {}))
        cls = torch.optim.Adam if cfg.optimizer == "adam" else torch.optim.AdamW
        # the fused kernel (CPU and CUDA) does the whole update in one pass per tensor
        fused = self.device.type in ("cpu", "cuda")
        return cls(self.params, lr=self.state.lr, weight_decay=cfg.wdecay, fused=fused)

    def start_averaging(self) -> None:
        """NT-ASGD's switch: from the next update on, SGD keeps the average of the weights
        (ASGD), which validation and the saved best model use; a resume keeps it on."""
        self.state.asgd = True
        self.optimizer = self._make_optimizer(asgd=True)

    # ---- checkpoints
    def _rank_state(self) -> dict:
        """What differs between ranks: random streams and this rank's columns of the state."""
        cuda = self.device.type == "cuda"
        return {"python": _py_state(self.rng), "torch": torch.get_rng_state(),
                "cuda": [torch.cuda.get_rng_state(self.device)] if cuda else [],
                # fp32 whatever the autocast dtype, so any precision can continue from it (a
                # bf16 value is exact in fp32, and autocast casts it back to the same bits)
                "hidden": (map_state(lambda t: t.float().cpu(), self.hidden)
                           if self.hidden else None)}

    def _checkpoint(self) -> dict | None:
        """Everything a resume needs, on rank 0 (None elsewhere): every rank's random state
        and the hidden state of the whole batch (the ranks' columns side by side)."""
        ranks = gather(self.world, self._rank_state())
        if ranks is None:
            return None
        hidden = [r.pop("hidden") for r in ranks]
        if hidden[0] is not None:           # batch columns are dim 1 of every state tensor
            hidden = join_states(hidden, lambda parts: torch.cat(parts, 1))
        return {
            **self._model_payload(),
            "optimizer": self.optimizer.state_dict() if self.optimizer else None,
            "scaler": self.scaler.state_dict() if self.scaler else None,
            "processes": self.world.size,
            "rng": ranks[0], "ranks": ranks if self.world.distributed else None,
            "hidden": hidden[0] if hidden[0] is None else hidden,
            "frozen_input_rows": self.frozen_rows.mask if self.frozen_rows else None,
            "threads": self.threads,
            "init_report": self.init_report,
            "metrics_rows": self.metrics_rows,
            # which parameters ASGD's state is of, in its order: `--checkpoint last` of an
            # averaging run evaluates the average, as validation does (checkpoint.load_model)
            "trained_parameters": [n for n, p in self.model.named_parameters() if p.requires_grad],
        }

    RESUME_STATE = ("model", "state", "optimizer", "rng", "ranks", "hidden")

    def _restore(self, ck: dict) -> None:
        missing = [k for k in self.RESUME_STATE if k not in ck]
        if missing:           # a best.pt copied over a lost last.pt: a KeyError traceback
            raise LmlowError(f"{self.rundir.last}: a checkpoint without the training state "
                             f"({', '.join(missing)}), as best.pt is; a run resumes only from "
                             "the last.pt it saved")
        require_processes(ck, self.rundir.last, self.world.size)
        self._note_threads(ck.get("threads"))
        if ck["hidden"] is not None:        # before anything is written (metrics truncated)
            self._check_state_format(ck["hidden"])
        self.model.load_state_dict(ck["model"])
        self.init_report = ck.get("init_report") or self.init_report   # what the vectors gave
        self.state = RunState(**{"ref_valid": ck["state"]["best_valid"], **ck["state"]})
        if self.world.main:
            self._truncate_metrics(ck)
        if self.state.asgd:
            self.optimizer = self._make_optimizer(asgd=True)
        if self.optimizer and ck["optimizer"]:
            self.optimizer.load_state_dict(ck["optimizer"])
        if self.scaler and ck.get("scaler"):
            self.scaler.load_state_dict(ck["scaler"])
        rng = ck["ranks"][self.world.rank] if self.world.distributed else ck["rng"]
        self.rng.setstate(_py_unstate(rng["python"]))
        torch.set_rng_state(rng["torch"])
        if rng["cuda"] and self.device.type == "cuda":
            torch.cuda.set_rng_state(rng["cuda"][0], self.device)
        if ck["hidden"] is not None:
            cols = self.columns
            self.hidden = map_state(lambda t: t[:, cols].to(self.device), ck["hidden"])

    def _note_threads(self, before: int | None) -> None:
        """A CPU run resumed on another number of threads splits its sums otherwise: it goes
        on correctly but no longer ends bitwise where an uninterrupted run would (``--threads
        0`` takes the cores this job was given, which a resubmitted job may change). Said
        once, on stderr; nothing is refused."""
        if before and before != self.threads and self.device.type == "cpu" and self.world.main:
            print(f"lmlow: note: {self.rundir.last} was trained on {before} thread(s), this "
                  f"resume uses {self.threads}: the numbers will differ from an uninterrupted "
                  f"run's in the last bits (--threads {before} keeps them)", file=sys.stderr)

    def _check_state_format(self, hidden) -> None:
        """The carried state must have this model's per-position size: the Transformer's
        memory held each block's inputs (width) until it carried keys and values (2 x width),
        and a checkpoint from before would fail deep inside the first step."""
        fresh = self.model.init_hidden(1)
        same = []
        join_states([hidden, fresh], lambda ts: same.append(ts[0].shape[2:] == ts[1].shape[2:]))
        if not all(same):
            raise LmlowError(f"{self.rundir.last}: its carried state was written by an older lmlow "
                             "(the Transformer's memory held block inputs, now keys and values); "
                             "resume it with that version, or train it again")

    def _save_best(self) -> None:
        if not self.world.main:
            return
        with self.averaged():
            save_checkpoint(self._model_payload(), self.rundir.best)

    def _model_payload(self) -> dict:
        """What any checkpoint holds: the settings, the vocabulary, the weights, the state
        (``last.pt`` adds what a resume needs)."""
        return {"config": self.cfg.to_dict(), "vocab": self.vocab.words,
                "counts": self.vocab.counts, "model": self.model.state_dict(),
                "state": self.state.__dict__.copy()}

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
        """Validation cross-entropy (nats per token); also keeps the perplexity per
        training-frequency bin of the predicted word (``self.valid_bins``), which every
        metrics row with a validation shows: how each frequency class is learned over time."""
        with self.averaged():
            lp = lstm_logprobs(self.model, self.valid_ids, self.vocab.eos_id,
                               self.cfg.eval_batch_size, self.cfg.bptt, device=self.device,
                               world=self.world)
        self.model.train()
        loss = -float(np.mean(lp))
        if not math.isfinite(loss):     # weights that diverged in an update whose own loss
            #                             was finite: refused before they are logged or saved
            st = self.state
            raise LmlowError(f"validation loss became nan or inf after update {st.step} "
                             f"(epoch {st.epoch + 1}): the weights diverged; lower --lr or "
                             f"--clip. {self._last_good()}")
        self.valid_bins = valid_bins(self.valid_ids, lp, self.vocab.count_array())
        return loss

    # ---- the loop
    def run(self) -> dict:
        """Train until a budget is spent. SIGINT (Ctrl-C) and SIGTERM (a cluster's
        preemption) end the current update, save ``last.pt`` there and stop: nothing is lost.
        (On several processes the ranks stop together at the next of their meetings: after
        the next update on CPU processes, within ``SYNC_EVERY`` updates on GPUs.)"""
        with caught_signals() as stop:
            self.stop = stop
            return self._run()

    def _check_signal(self) -> None:
        """Stop here if a signal came: at once in one process; on several, where the ranks
        agreed on it (the last :meth:`_sync`), so that all stop after the same update."""
        signum = self.agreed_signal if self.world.distributed else (self.stop[0] if self.stop else 0)
        if signum:
            self._save_last()
            name = signal.Signals(signum).name
            if not self.world.main:     # process 0 wrote last.pt, and its line says so
                raise Said(f"{name} at update {self.state.step}", 128 + signum)
            raise Interrupted(f"{name} at update {self.state.step}: saved {self.rundir.last}; "
                              f"{self._continues()}", 128 + signum)

    def _continues(self) -> str:
        """The command that continues the run: with ``--nproc N`` where N processes wrote its
        last.pt (a resume on another number of processes is refused, so the bare command
        this said after a `--nproc` run did not continue it)."""
        nproc = f" --nproc {self.world.size}" if self.world.size > 1 else ""
        return f"`lmlow train --resume {self.run_dir}{nproc}` continues"

    def _agree_on_signal(self) -> None:
        """The ranks agree whether any of them was signalled (between two :meth:`_sync`)."""
        self.agreed_signal = int(all_max(self.world, [self.stop[0] if self.stop else 0])[0])

    def _sync(self) -> None:
        """Bring the device's running numbers to the host, one wait for the device every few
        updates instead of one per update: the summed loss and the first update whose loss was
        not finite (refused here, before anything is saved). On several processes, also sum
        the loss over the ranks and agree on the clock (the slowest rank's) and on a signal."""
        st, world = self.state, self.world
        loss, bad, skipped = torch.stack([self.pending_loss, self.first_bad.double(),
                                          self.pending_skipped.double()]).cpu().tolist()
        self.pending_loss.zero_()
        self.pending_skipped.zero_()
        st.skipped += int(skipped)
        if world.distributed:
            loss = float(all_sum(world, np.array([loss]))[0][0])
            now, (start, epoch_start) = time.time(), self.clocks or (None, None)
            bad, st.train_seconds, st.epoch_seconds, signum = all_max(world, [
                bad, now - start if start else st.train_seconds,
                now - epoch_start if epoch_start else st.epoch_seconds,
                self.stop[0] if self.stop else 0])
            self.agreed_signal = int(signum)
        st.epoch_loss += loss
        if bad >= 0:
            raise LmlowError(f"loss became nan or inf at update {int(bad) + 1} (epoch "
                             f"{st.epoch + 1}); lower --lr or --clip. {self._last_good()}")

    def _run(self) -> dict:
        cfg = self.cfg
        if self.world.main:
            self.rundir.create()
        if cfg.max_epochs == 0:
            loss = self.validate()
            self._log_metrics({"epoch": 0, "step": 0, "valid_loss": loss, "valid_ppl": exp_loss(loss)})
            self.state.best_valid = self.state.ref_valid = loss
            self._save_best()
            self._save_last()
            return self.summary()
        data = batchify(self.train_ids, cfg.batch_size)[:, self.columns]
        self.n_batches = data.shape[0] - 1
        if cfg.track_frequency and self.state.step == 0:  # curves start at the initialisation
            loss = self.validate()
            self._log_metrics({"epoch": 0, "step": 0, "valid_loss": loss, "valid_ppl": exp_loss(loss),
                               "lr": self.state.lr, "elapsed": 0.0})
        st = self.state
        self.clocks = (time.time() - st.train_seconds, None)   # validations count as time
        while not self.stopped_by():     # a run resumed after its early stop stays stopped
            if not self._train_epoch(data) or self._epoch_end():
                break
            self._check_signal()
            if budget_spent(cfg, st.epoch, st.step, st.train_seconds) == "time":
                self._say(f"time budget of {cfg.max_time:g} min reached")
        return self.summary()

    def _batch(self, data: np.ndarray, start: int, seq: int) -> torch.Tensor:
        """Rows [start, start + seq) on the device; to a GPU from pinned memory, without
        waiting for the copy."""
        t = torch.from_numpy(np.ascontiguousarray(data[start:start + seq], np.int64))
        if self.device.type == "cuda":
            return t.pin_memory().to(self.device, non_blocking=True)
        return t

    def _train_epoch(self, data: np.ndarray) -> bool:
        """One pass over the training batches from ``state.position``; False if a budget ended it."""
        cfg, st, model = self.cfg, self.state, self.model
        model.train()
        if st.position == 0 or self.hidden is None:
            self.hidden = model.init_hidden(data.shape[1])
        if st.position == 0:
            st.epoch_loss, st.epoch_tokens, st.epoch_seconds = 0.0, 0, 0.0
        self.clocks = (self.clocks[0], time.time() - st.epoch_seconds)
        n = data.shape[0] - 1
        bar = _bar(n, st.epoch + 1, self.quiet)
        bar.update(st.position)
        while st.position < n - 1:
            if self.tracker:   # at updates 0, 1, 2, 4, ...; no random numbers drawn
                self.tracker.at_step(st.step, st.epoch + st.position / n, st.train_seconds)
            seq = min(seq_length(self.rng, cfg.bptt), n - st.position)
            self._update(self._batch(data, st.position, seq), self._batch(data, st.position + 1, seq), seq)
            st.epoch_tokens += seq * cfg.batch_size      # the global batch: every rank's columns
            st.tokens += seq * cfg.batch_size
            st.position += seq
            st.step += 1
            if not self.world.distributed:   # several processes agree on the clock in _sync
                st.train_seconds, st.epoch_seconds = (time.time() - c for c in self.clocks)
            bar.update(seq)
            if st.step % SYNC_EVERY == 0:
                self._sync()
                bar.set_postfix(loss=f"{st.epoch_loss / st.epoch_tokens:.2f}",
                                tok_s=f"{st.epoch_tokens / max(1e-9, st.epoch_seconds):.0f}")
            if cfg.eval_every and st.step % cfg.eval_every == 0:
                self._sync()
                self._mid_epoch_validation(st.epoch + st.position / n)
            if st.train_seconds - self.saved_at > SAVE_EVERY:   # a killed run loses little
                self._save_last()
            spent = budget_spent(cfg, st.epoch, st.step, st.train_seconds)
            if spent in ("steps", "time"):
                bar.close()
                self._sync()
                if not (cfg.eval_every and st.step % cfg.eval_every == 0):   # not just done
                    self._mid_epoch_validation(st.epoch + st.position / n, counts=False)
                self._save_last()          # after the validation: last.pt knows the best
                if self.tracker:   # the weights the run stops with
                    self.tracker.record(st.step, st.epoch + st.position / n, st.train_seconds, "end")
                self._say(f"stopped in epoch {st.epoch + 1} at update {st.step}; "
                          f"{self._continues()}")
                return False
            if self.world.distributed and st.step % SYNC_EVERY and self.signal_each_update:
                self._agree_on_signal()
            if not self.world.distributed or st.step % SYNC_EVERY == 0 or self.signal_each_update:
                self._check_signal()
        bar.close()
        self._sync()
        self.epoch_stats = {"train_loss": st.epoch_loss / max(1, st.epoch_tokens),
                            "tokens_per_s": st.epoch_tokens / max(1e-9, st.epoch_seconds)}
        return True

    def _update(self, x, y, seq: int) -> None:
        """One optimiser step on (x, y); nothing here waits for the device (in fp16 the loss
        scaler does, to decide whether to skip the step)."""
        cfg, st = self.cfg, self.state
        used = budget_used(cfg, st.epoch + st.position / max(1, self.n_batches), st.step,
                           st.train_seconds)
        lr = learning_rate(cfg, st.lr, st.step, seq, used)
        self.last_rate = lr * cfg.bptt / seq
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.hidden = detach_hidden(self.hidden)
        total, nll = self._losses(x, y)
        self.pending_loss += nll.double() * x.numel()
        bad = ~torch.isfinite(total.detach()) & (self.first_bad < 0)
        self.first_bad = torch.where(bad, st.step, self.first_bad)
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler:
            self.scaler.scale(total).backward()
            self.scaler.unscale_(self.optimizer)
        else:
            total.backward()
        if self.frozen_rows:
            self.frozen_rows.zero_grad()
        if cfg.clip:
            torch.nn.utils.clip_grad_norm_(self.params, cfg.clip)
        if self.scaler:
            # a skipped step lowers the scale; compared on the device (get_scale() would wait
            # for it twice an update) and read with the loss every SYNC_EVERY updates
            scale = self.scaler._scale.clone()
            self.scaler.step(self.optimizer)
            self.scaler.update()
            self.pending_skipped += (self.scaler._scale < scale).sum()
        else:
            self.optimizer.step()
        if self.frozen_rows:
            self.frozen_rows.restore(self.optimizer)

    def _losses(self, x, y) -> tuple[torch.Tensor, torch.Tensor]:
        """The forward pass of an update from ``self.hidden`` (which it advances): the
        objective it backpropagates and the plain cross-entropy that train_ppl is of."""
        cfg = self.cfg
        with torch.autocast(self.device.type, enabled=self.amp_dtype is not None,
                            dtype=self.amp_dtype or torch.float32):
            output, self.hidden, raw, dropped = self.net(x, self.hidden)
            loss, nll = lm_losses(self.model, output, y, cfg.label_smoothing, self.prior,
                                  self._grad_scale())
            total = loss
            if cfg.alpha:
                total = total + cfg.alpha * dropped.float().pow(2).mean()
            if cfg.beta:
                total = total + cfg.beta * (raw[1:] - raw[:-1]).float().pow(2).mean()
        return total, nll

    def _settle_buckets(self) -> None:
        """On several processes, one throw-away forward and backward before the first update,
        so that every update of a run, new or resumed, sums its gradients the same way. Why:
        DDP lays its gradient buckets out anew after its first backward (in the order the
        gradients became ready), and with 3 or more processes the ring all-reduce adds the
        ranks' values of an element in an order that depends on where it lies in its bucket
        (with 2, a + b is b + a). Without this, a new run's first update used the first
        layout and the later ones the second, and a resumed run's first update the first
        again: it drifted from the run it continued (measured: weights up to 6e-4 apart 900
        updates on). Nothing here moves the run: random states are put back (the dropout
        masks drawn here), the hidden state is the caller's, the gradients are dropped and
        no optimiser steps (the same forward as an update's, so the same graph: the
        gradients become ready in the order every update has them)."""
        if not self.world.distributed or not self.params or not self.cfg.max_epochs:
            return
        cols = self.columns.stop - self.columns.start
        x = torch.zeros((self.cfg.bptt, cols), dtype=torch.int64, device=self.device)
        cuda = self.device.type == "cuda"
        kept = self.hidden
        with torch.random.fork_rng(devices=[self.device] if cuda else [],
                                   device_type=self.device.type):
            self.hidden = self.model.init_hidden(cols)
            total, _ = self._losses(x, x)
            total.backward()
        self.hidden = kept
        self.model.zero_grad(set_to_none=True)

    def _grad_scale(self) -> torch.Tensor | None:
        """The fp16 loss scaler's scale, on the device (the loss rounds its gradient with it);
        made here if the scaler has not made it yet (it does at its first ``scale``)."""
        if not self.scaler:
            return None
        if self.scaler._scale is None:
            self.scaler._lazy_init_scale_growth_tracker(self.device)
        return self.scaler._scale

    def _rate(self) -> float:
        """The learning rate the last update used, at the mean BPTT length (an update of
        another length scales it by length / bptt): after warm-up and the cosine schedule,
        which the base rate ``state.lr`` (logged as ``base_lr``) leaves out."""
        return self.state.lr if self.last_rate is None else self.last_rate

    def _scaler_metrics(self) -> dict:
        """What the fp16 loss scaler did, for the metrics rows (nothing without one)."""
        if not self.scaler:
            return {}
        return {"loss_scale": self.scaler.get_scale(), "skipped_steps": self.state.skipped}

    def _mid_epoch_validation(self, epoch: float, counts: bool = True) -> None:
        """Validate inside an epoch (``--eval-every``, or where a step or time budget stops
        the run) and keep the weights in ``best.pt`` if they are the best so far: best means
        best, wherever it was measured. Validation draws no random numbers, and the one made
        where a budget stops the run (``counts`` False) does not count for the patience rule
        and the plateau schedule, which an uninterrupted run never saw it: a run stopped and
        resumed trains exactly as an uninterrupted one (its metrics hold one more row, marked
        ``partial_epoch``)."""
        st = self.state
        loss = self.validate()
        self._log_metrics({"epoch": round(epoch, 3), "step": st.step, "valid_loss": loss,
                           "valid_ppl": exp_loss(loss), "lr": self._rate(), "base_lr": st.lr,
                           "elapsed": round(st.train_seconds, 1), "partial_epoch": True,
                           **self._scaler_metrics()})
        if counts and self._improves(loss):
            st.ref_valid, st.epoch_improved = loss, True
        if loss < st.best_valid:
            st.best_valid = loss
            self._save_best()

    def _improves(self, loss: float) -> bool:
        """A new best that counts for the patience rule and the plateau schedule: below the
        last counted best by more than ``min_improvement`` of its perplexity (with 0, any new
        best)."""
        return loss < self.state.ref_valid + math.log1p(-self.cfg.min_improvement)

    def _epoch_end(self) -> bool:
        """Validate, log, save; switch to ASGD or decay the rate; True to stop early."""
        cfg, st = self.cfg, self.state
        st.epoch += 1
        st.position = 0
        self.hidden = None
        loss = self.validate()
        if self.tracker:
            self.tracker.record(st.step, st.epoch, st.train_seconds, "epoch")
        significant = self._improves(loss)
        improved = significant or st.epoch_improved     # this epoch set a new best that counts
        if significant:
            st.ref_valid = loss
        self._log_metrics({"epoch": st.epoch, "step": st.step, "train_loss": self.epoch_stats["train_loss"],
                           "train_ppl": math.exp(min(50, self.epoch_stats["train_loss"])),
                           "valid_loss": loss, "valid_ppl": exp_loss(loss),
                           "lr": self._rate(), "base_lr": st.lr,
                           "optimizer": "asgd" if st.asgd else cfg.optimizer,
                           "precision": precision_name(self.amp_dtype),   # may change on resume
                           "tokens_per_s": round(self.epoch_stats["tokens_per_s"]),
                           "elapsed": round(st.train_seconds, 1), **self._scaler_metrics()})
        if loss < st.best_valid:
            st.best_valid = loss
            self._save_best()
        # an epoch whose every update was still in the warm-up (the rate rising) says nothing
        # about a plateau of the rate: it neither counts as stale nor decays the rate. (A
        # Transformer's first epochs are short and noisy; one such epoch halved the rate
        # before it had peaked, by chance, and decided a whole table's recipe.)
        warming = st.step <= cfg.warmup_steps
        st.stale_epochs = 0 if improved else st.stale_epochs + (not warming)
        st.epoch_improved = False
        # NT-ASGD (Merity et al.): average once validation has not improved for `nonmono` epochs
        if (cfg.optimizer == "sgd" and cfg.asgd and not st.asgd and len(st.valid_history) > cfg.nonmono
                and loss > min(st.valid_history[:-cfg.nonmono])):
            self._say(f"switching to averaged SGD at epoch {st.epoch}")
            self.start_averaging()
        st.valid_history.append(loss)
        st.lr = decayed_rate(cfg, st.lr, st.epoch, improved or warming)
        self._save_last()
        if self.stopped_by() == "patience":
            self._say(f"early stop: {cfg.patience} epochs without improvement")
            return True
        return False

    # ---- reporting
    def _save_last(self) -> None:
        """Save ``last.pt`` (every rank takes part; rank 0 writes)."""
        self._sync()
        ck = self._checkpoint()
        if ck is not None:
            save_checkpoint(ck, self.rundir.last)
        self.saved_at = self.state.train_seconds

    def start(self) -> None:
        """The first checkpoint, before any update: a run killed at any moment from here on
        resumes (from the start, if nothing later was saved)."""
        self._save_last()

    def _truncate_metrics(self, ck: dict) -> None:
        """Drop the metrics rows written after the checkpoint a resume starts from: they are
        written again, so the file never holds a row twice. The checkpoint says how many rows
        it knows (a row logged at its own update after it was saved, the first validation of
        a tracked run, is written again too); one from before, those up to its update."""
        rows = self.rundir.metrics()
        if isinstance(ck.get("metrics_rows"), int):
            keep = rows[:ck["metrics_rows"]]
        else:
            keep = [r for r in rows if r.get("step", 0) <= ck["state"]["step"]]
        self.metrics_rows = len(keep)
        if len(keep) != len(rows):
            atomic_write_text(self.rundir.metrics_file, "".join(to_json(r) + "\n" for r in keep))

    def _last_good(self) -> str:
        if self.rundir.last.exists():
            return f"The last good state is {self.rundir.last} (nothing newer was written)"
        return "No checkpoint was written"

    def _log_metrics(self, row: dict) -> None:
        if not self.world.main:
            return
        if "valid_ppl" in row:
            row = {**row, "valid_bins": self.valid_bins}
        append_jsonl(self.rundir.metrics_file, row)
        self.metrics_rows += 1
        if "valid_ppl" in row:
            extra = f" train ppl {row['train_ppl']:.1f}" if "train_ppl" in row else ""
            speed = f" {row['tokens_per_s']} tok/s" if "tokens_per_s" in row else ""
            self._say(f"epoch {row['epoch']:.2f} step {row['step']}: valid ppl "
                      f"{row['valid_ppl']:.2f}{extra}{speed}")

    def _say(self, msg: str) -> None:
        if not self.quiet and not say(msg):
            self.quiet = True

    def stopped_by(self) -> str | None:
        """Why training ended: "patience" (early stopping, the run's own convergence rule) or
        the budget that ran out ("epochs", "steps", "time")."""
        st, cfg = self.state, self.cfg
        if cfg.patience and st.stale_epochs >= cfg.patience:
            return "patience"
        return budget_spent(cfg, st.epoch, st.step, st.train_seconds)

    def summary(self) -> dict:
        best = self.rundir.best if self.rundir.best.exists() else self.rundir.last
        return {"run_dir": str(self.run_dir), "checkpoint": str(best),
                "epochs": self.state.epoch, "steps": self.state.step,
                "best_valid_ppl": exp_loss(self.state.best_valid) if self.state.best_valid < math.inf else None,
                "train_seconds": round(self.state.train_seconds, 1), "tokens": self.state.tokens,
                "tokens_per_s": round(self.state.tokens / max(1e-9, self.state.train_seconds)),
                "stopped_by": self.stopped_by(),
                "precision": precision_name(self.amp_dtype),
                **({"precisions": self.state.precisions} if len(self.state.precisions) > 1 else {}),
                "device": device_name(self.device), "torch": torch.__version__,
                "vocabulary_digest": self.vocab.digest(), **self.init_report}


def _saved_mask(ck: dict | None):
    """The partial freeze's row mask a checkpoint saved (None: none, or a new run)."""
    mask = (ck or {}).get("frozen_input_rows")
    return None if mask is None else np.asarray(mask, bool)


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

def train(cfg: Config, run_dir: Path, force: bool = False, quiet: bool = False) -> dict:
    """Train a new run in ``run_dir``. Everything (corpus, vectors, model) is built and checked
    before the folder is touched; with ``force`` an earlier run there is set aside and deleted
    only once the new run has written its first checkpoint, and put back if it fails before.
    Under torchrun every process calls this; rank 0 alone locks and writes the folder, and a
    program of your own should then end with ``lmlow.distributed.end_process(0)`` (why: there)."""
    hint = f"use --resume {run_dir} to continue it, or "
    run = RunDir(run_dir).check_new(force, hint)    # every rank, before any rank writes
    world, device = join(cfg.device)
    trainer = Trainer(cfg, run.path, quiet=quiet, world=world, device=device)
    with _on_main(world, run.lock):
        if world.main:
            run.check_new(force, hint)                # again, under the lock
        with _on_main(world, run.replacing):
            if world.main:
                trainer.cfg.save(run.config, trainer.init_report)
                trainer.vocab.save(run.vocab)
                run.record_corpus(trainer.cfg.corpus, vectors=trainer.cfg.embeddings)
            trainer.start()
        if not trainer.quiet:
            r = trainer.init_report
            cov = (f"; vectors cover {r['coverage_types_pct']:.1f}% of vocabulary types, "
                   f"{r['coverage_tokens_pct']:.1f}% of training tokens"
                   if "coverage_types_pct" in r else "")
            procs = f" x {world.size} processes" if world.distributed else ""
            rows = f"; {describe_rows(r['input_rows'])}" if "input_rows" in r else ""
            arch = "" if trainer.cfg.arch == "lstm" else f"{trainer.cfg.arch}, "
            listed = f" (the words of {trainer.cfg.vocab})" if trainer.cfg.vocab else ""
            if r.get("unk_tokens_pct"):
                listed += f", <unk> {r['unk_tokens_pct']:.1f}% of training tokens"
            shape = model_shape(dataclasses.asdict(trainer.cfg))
            if "emb_size_asked" in r:           # --emb-size (or the preset's) gave way to the vectors
                shape = shape.replace("-d embeddings", "-d embeddings (the vectors' size, not "
                                      f"the {r['emb_size_asked']} of the settings)", 1)
            say(f"{arch}{trainer.cfg.describe()}; {shape}; vocabulary {r['vocabulary']}{listed}; parameters "
                f"{r['trainable']:,} trainable, {r['frozen']:,} frozen{cov}{rows}; device "
                f"{trainer.device}{procs}; precision {_precision(trainer)}")
        return _finish(trainer)


def resume(run_dir: Path, quiet: bool = False, corpus: Path | None = None, **changes) -> dict:
    """Continue a run from its ``last.pt``, as configured; only the budget (``max_epochs``,
    ``max_time``, ``max_steps``; e.g. raised to train longer) and where and how it computes
    (``precision``, ``device``, ``threads``) may change. ``corpus``: where
    the run's corpus is now, if it moved (checked against the run's fingerprint). Under
    torchrun, with as many processes as the run was trained with."""
    return _resume(run_dir, quiet, corpus, changes, "lmlow.resume")


def _resume(run_dir: Path, quiet: bool, corpus: Path | None, changes: dict,
            where: str | None) -> dict:
    """:func:`resume`; ``where``: the Python function whose keywords ``changes`` are, named by
    a range error (None: the command's flags, named as flags)."""
    changes = {k: v for k, v in changes.items() if v is not None}
    refused = [k for k in changes if k not in RESUME_CHANGES]
    if refused:
        raise LmlowError("--resume continues a run as configured; only --max-epochs, "
                         "--max-time, --max-steps, --precision, --device and --threads may be "
                         f"given with it, not --{refused[0].replace('_', '-')}")
    api = where or "lmlow.resume"
    check_settings(changes, api)                # from Python: of the right type
    run = RunDir(path_value(run_dir, api, "run_dir"))
    corpus = None if corpus is None else path_value(corpus, api, "corpus")
    run.require_folder()
    world = world_from_env()
    if world.main:
        run.check_unlocked()
        run.recover()                         # a killed `train --force` set it aside?
    if not run.last.exists():
        raise LmlowError(f"{run.last}: no such checkpoint; {_why_no_last(run)}")
    with _on_main(world, run.lock):
        if world.main:
            run.remove_stale_temporaries()
        ck = load_checkpoint(run.last)
        cfg = Config.from_dict(ck["config"], str(run.last))
        _same_run(run, cfg)
        cfg = dataclasses.replace(cfg, **changes)
        moved = run.checked_corpus(corpus) if corpus is not None and world.main else None
        if corpus is not None:
            cfg.corpus = str(moved[0] if moved else Path(corpus).resolve())
        elif not Path(cfg.corpus).is_dir():
            raise LmlowError(f"{cfg.corpus}: no such corpus folder (the one {run.path} was "
                             "trained on); if it moved, give its new place: `lmlow train "
                             f"NEW_CORPUS --resume {run.path}`")
        elif world.main:        # where it was, but prepared again in place: other text
            run.checked_corpus(Path(cfg.corpus))
        with keyword_errors(where, changes if where else ()):   # a flag's error names the flag
            cfg = cfg.validate()
        if cfg.max_epochs == 0:     # its untrained-model path would overwrite best.pt
            raise LmlowError(f"--max-epochs 0 saves an untrained model; --resume continues "
                             f"training: give more than the {ck['state']['epoch']} epochs "
                             f"{run.path} has trained")
        world, device = join(cfg.device)
        trainer = Trainer(cfg, run.path, resume=ck, quiet=quiet, world=world, device=device)
        if world.main:
            if moved:            # recorded once the resumed run is known to start
                run.record_corpus(*moved)
            cfg.save(run.config, trainer.init_report)
            # a finished run trained further is no longer what its summary says: killed, it
            # read as finished (best.pt newer than the numbers reports took); written anew
            # when it ends
            run.summary_file.unlink(missing_ok=True)
        return _finish(trainer)


def _why_no_last(run: RunDir) -> str:
    """What to do about a folder --resume cannot continue, by what it holds."""
    best = "; `lmlow eval` scores its best.pt" if run.best.exists() else ""
    if run.finished:
        return f"{run.path} finished (summary.json) and keeps no last.pt to train further{best}"
    if held := run.lost_checkpoint():
        return (f"{run.path} holds {held} but lost its last.pt, so it cannot resume{best}; "
                "another --out trains the run again")
    return "not a run folder, or a run that has not started: train it without --resume"


def _same_run(run: RunDir, cfg: Config) -> None:
    """``last.pt`` must be this run's: its settings those of ``config.json`` (but for what a
    resume may change), or a checkpoint copied from another run would continue that run and
    overwrite this one's rows and best.pt."""
    if not run.config.exists():
        return
    mine = Config.load(run.config).to_dict()
    theirs = cfg.to_dict()
    differ = same_run_differs(mine, theirs)
    if differ:
        k = differ[0]
        raise LmlowError(f"{run.last}: not this run's checkpoint: it has {k} = {theirs.get(k)!r} "
                         f"where {run.config} has {mine[k]!r}")


def _on_main(world: World, context):
    """``context()`` on rank 0, nothing elsewhere: the run folder's lock and replacement."""
    return context() if world.main else nullcontext()


def _precision(trainer: Trainer) -> str:
    return precision_name(trainer.amp_dtype) + (" with loss scaling" if trainer.scaler else "")


def _finish(trainer: Trainer) -> dict:
    """Run to the end of the budget; ``summary.json``, written last, marks a finished run."""
    summary = trainer.run()
    if trainer.world.main:
        atomic_write_json(trainer.rundir.summary_file, summary)
    leave(trainer.world)
    return summary


def run_command(corpus: Path | None, out: Path | None, resume_dir: Path | None = None,
                config: Path | None = None, preset: str | None = None, settings: dict | None = None,
                force: bool = False, quiet: bool = False, nproc: int = 1,
                argv: list[str] = ()) -> dict | None:
    """``lmlow train``: a new run or a resumed one, in this process or, with ``nproc`` > 1,
    in N processes under torchrun (``argv`` is the command to run there). The summary on the
    process that reports (rank 0 of this one), else None."""
    from lmlow.config import build_config
    from lmlow.distributed import check_resumable, relaunch

    settings = dict(settings or {})
    if resume_dir:
        if force:                     # (accepted, and did nothing)
            raise LmlowError("--force: --resume continues the run in its own folder and "
                             "overwrites nothing; leave --force out")
        if nproc > 1:
            check_resumable(RunDir(resume_dir).last, nproc, settings.get("device"))
            return relaunch(nproc, argv)
        summary = _resume(resume_dir, quiet, corpus,
                          dict(out=out, config=config, preset=preset, **settings), None)
        return summary if world_from_env().main else None
    if out is None:
        raise LmlowError("give --out RUN_DIR (or --resume RUN_DIR)")
    if corpus is not None:
        settings["corpus"] = str(corpus)
    notes = []
    cfg = build_config(preset, config, notes=notes, **settings)
    if not cfg.corpus:
        raise LmlowError("give a CORPUS folder (or corpus in --config)")
    if nproc > 1:
        _check_launchable(cfg, out, force, nproc)
        return relaunch(nproc, argv)               # (its first process says the notes)
    for note in notes if world_from_env().main else ():
        print(f"lmlow: note: {note}", file=sys.stderr)    # (--quiet too: a sweep's runs)
    summary = train(cfg, out, force=force, quiet=quiet)
    return summary if world_from_env().main else None


def fit(corpus: str | Path | None, out: str | Path, preset: str | None = None,
        config: str | Path | None = None, force: bool = False, quiet: bool = False,
        **settings) -> dict:
    """``lmlow train CORPUS --out OUT`` from Python (``lmlow.fit``): ``settings`` are a config
    file's keys (``tie=False, freeze_input=True, init="glove,unigram"``), checked as a config
    file's are (an unknown key or a value of another type is one LmlowError naming it), then
    the run is what the command would make: the same defaults, checks, folder and files.
    Returns the run's summary (what ``summary.json`` holds); ``lmlow.load(out)`` scores it."""
    where = "lmlow.fit"
    settings = check_settings(file_values(settings), where)
    corpus = None if corpus is None else path_value(corpus, where, "corpus")
    config = None if config is None else path_value(config, where, "config")
    out = path_value(out, where, "out")
    with keyword_errors(where, settings):
        return run_command(corpus, out, config=config, preset=preset, settings=settings,
                           force=force, quiet=quiet)


def _check_launchable(cfg: Config, out: Path, force: bool, nproc: int) -> None:
    """What would fail in every one of the N processes is said once, here."""
    columns(World(0, nproc), cfg.batch_size)          # a batch that does not split
    check_gpus(cfg.device, nproc)
    if not Path(cfg.corpus).is_dir():
        raise LmlowError(f"{cfg.corpus}: no such corpus folder")
    RunDir(out).check_new(force, f"use --resume {out} to continue it, or ")


def done_line(summary: dict) -> str:
    ppl = summary["best_valid_ppl"]
    return (f"done: {summary['epochs']} epochs, {summary['steps']} updates, "
            f"{summary['train_seconds']:.0f}s; best valid ppl "
            f"{'n/a' if ppl is None else f'{ppl:.2f}'} -> {summary['checkpoint']}")

