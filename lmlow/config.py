"""The one configuration of a training run: the CLI, TOML config files and checkpoints all
read and write this dataclass, so a run folder's ``config.json`` is the run.

Embedding configurations (Kummerfeld et al. 2020, Table 1): ``tie`` shares one matrix between
input and output; ``freeze_input``/``freeze_output`` keep a matrix fixed (for a tied model both
name the shared matrix); ``init`` lists ``glove`` (input from pretrained vectors),
``glove-output`` (output from the same vectors), ``unigram`` (output bias = log unigram
distribution) or ``random``. Freezing the output weights never freezes the output bias, unless
``freeze_output_bias`` says so.
"""
from __future__ import annotations

import json
import math
import os
import re
import tomllib
import types
import typing
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, field, fields
from pathlib import Path

from lmlow.errors import LmlowError
from lmlow.files import atomic_write_json, require_regular

INIT_CHOICES = ("glove", "glove-output", "unigram", "random")


def setting(default, help: str, **kw):
    """A dataclass field that is also a command-line flag: ``help`` is its --help text;
    ``metavar`` and ``parse`` (a function from the flag's text to the value) are optional."""
    return field(default=default, metadata={"help": help, **kw})


_f = setting


def yes_no(text: str) -> bool:
    """``yes``/``no`` as a bool (for settings whose flag reads best as a word)."""
    if text in ("yes", "no"):
        return text == "yes"
    raise ValueError(f"expected yes or no, got {text!r}")


yes_no.__name__ = "yes or no"   # what argparse names in its one-line error


# The backbones, by the Config field ``arch``: each a class with ``from_config(cfg, vocab_size,
# emb_size, out_size)``, ``parameter_count`` with the same arguments (checked against the
# machine's memory before the model is made) and the model interface of lmlow.model.AWDLSTM
# (encoder, decoder, init_hidden, forward, logits). A new backbone is one module and one line
# here.
ARCHS = {"lstm": "lmlow.model:AWDLSTM", "transformer": "lmlow.transformer:TransformerLM"}
# Settings that one backbone alone reads. Given explicitly for the other they would do nothing,
# silently, so build_config refuses them; a sweep passes its own flags of this kind only to
# the runs of that backbone (a grid may mix them).
ARCH_ONLY = {"heads": "transformer", "context": "transformer", "wdrop": "lstm"}


# lmlow.input_map's fit threshold and its two flags' help, here so that the CLI's parser reads
# them without importing torch: the map is fitted on the words read this often or more (their
# rows have moved with the text)
MAP_FIT_MIN = 6
MAP_INPUTS_HELP = ("untied runs (LSTM or Transformer) whose input rows trained from --init glove "
                   "vectors: move the rows of the words that have a vector but never occur in "
                   "the training text (no text trained them) into the trained space, by a "
                   f"linear map fitted on the words read >= {MAP_FIT_MIN} times; nothing is "
                   "retrained (experiments/freezing/mapped-rows.md)")
MAP_OUTPUTS_HELP = ("untied runs (LSTM or Transformer) whose output rows trained from --init "
                    "glove-output vectors: replace the output rows of the words that never "
                    "occur as a target in the training text (only ever pushed away from every "
                    "prediction) by their vectors through a linear map fitted on the output "
                    f"rows of the words predicted >= {MAP_FIT_MIN} times; the bias stays as "
                    "trained; nothing is retrained (experiments/freezing/mapped-rows.md)")


UNK_HELP = ("UNK rule: a word whose training count is below K becomes <unk> in every split "
            "(a word absent from train counts 0); 0 replaces nothing")


VOCAB_HELP = ("a fixed vocabulary: the words of FILE (one per line, the first field of each: "
              "a plain list, `lmlow vocab --out`, a lexicon or a symbol table), with <eos> and "
              "<unk>; every other word is <unk>, listed words the training text lacks are "
              "words with count 0 (instead of --unk-threshold and --extend-vocab)")


def check_vocabulary_source(vocab, unk_threshold: int, extend_vocab: bool, embeddings) -> None:
    """One way to decide the vocabulary: a word list (``--vocab``) fixes it, so the UNK rule
    and the vectors' words, which build one from the text, are refused beside it; and
    ``--extend-vocab`` takes its words from the vectors. Every command that reads a corpus
    (train, ngram, vocab, unk, stats) asks here."""
    if extend_vocab and not embeddings:
        raise LmlowError("--extend-vocab needs --embeddings FILE")
    if extend_vocab and unk_threshold:       # (it added nothing, and said nothing)
        raise LmlowError(f"--extend-vocab adds the vectors' words, whose training count is 0, "
                         f"and --unk-threshold {unk_threshold} makes every word counted fewer "
                         f"than {unk_threshold} times <unk>: give --unk-threshold 0 with it "
                         "(the paper's K=0), or leave --extend-vocab out")
    if vocab and unk_threshold:
        raise LmlowError(f"--vocab {vocab} fixes the vocabulary; --unk-threshold {unk_threshold} "
                         "builds one from the training text: give one of them")
    if vocab and extend_vocab:
        raise LmlowError(f"--vocab {vocab} fixes the vocabulary; --extend-vocab adds to one "
                         "built from the training text: give one of them (list the vectors' "
                         "words in the file instead)")


# Seeds are what numpy's SeedSequence and torch.manual_seed both take: 32-bit, not negative
SEED_RANGE = "[0, 4294967295]"
# CPU threads (0: one share of the cores): more than any machine has; torch.set_num_threads
# takes a 32-bit count and raised an overflow traceback beyond it
THREADS_RANGE = "[0, 4096]"


@dataclass
class Config:
    # data
    corpus: str = _f("", "corpus folder with train/valid/test.txt")
    unk_threshold: int = _f(0, UNK_HELP, metavar="K")
    embeddings: str | None = _f(None, "pretrained vectors (GloVe text, word2vec text/.bin, "
                                "lmlow .npz; gensim .kv with --allow-pickle)")
    train_fraction: float = _f(1.0, "train on the first fraction of the training lines (the "
                               "vocabulary and UNK rule still come from the whole split; what "
                               "counts words, the unigram bias, the coverage of training tokens "
                               "and the frequency bins, counts that fraction)")
    extend_vocab: bool = _f(False, "add the embedding words to the vocabulary (count 0; K=0 only)")
    vocab: str | None = _f(None, VOCAB_HELP, metavar="FILE")
    allow_pickle: bool = _f(False, "allow --embeddings to be a gensim .kv/.model file: a pickle, "
                            "which can run code when loaded (only for files you trust)")
    # embedding configuration
    tie: bool = _f(True, "share one matrix between input and output embeddings (yes or no)",
                   parse=yes_no, metavar="{yes,no}")
    freeze_input: bool = _f(False, "keep the input embeddings fixed")
    freeze_input_rows: str = _f("all", "which input rows --freeze-input keeps fixed: all, or "
                                "pretrained (only the rows initialised from --embeddings; the "
                                "rows of words without a vector, <eos> among them unless the "
                                "vectors have it, train)")
    freeze_output: bool = _f(False, "keep the output embeddings fixed (not the bias)")
    freeze_output_bias: bool = _f(False, "keep the output bias fixed too")
    init: tuple[str, ...] = _f(("random",), "initialisation, comma-separated: glove, "
                               "glove-output, unigram, random", metavar="LIST")
    # model
    arch: str = _f("lstm", "the backbone: lstm (AWD-LSTM) or transformer (pre-norm, banded "
                   "causal attention over a carried memory, rotary positions)")
    emb_size: int = _f(400, "input embedding size (the vectors' size when --init glove)")
    out_size: int | None = _f(None, "output embedding size (default: emb size)")
    hidden_size: int = _f(1150, "LSTM hidden size of all but the last layer; the Transformer's "
                          "width")
    layers: int = _f(3, "number of LSTM layers or Transformer blocks")
    heads: int = _f(4, "Transformer: attention heads (the width must split into heads of an "
                    "even size)")
    context: int = _f(128, "Transformer: each token attends to itself and this many tokens "
                      "before it (the memory carried across BPTT chunks)")
    dropout: float = _f(0.4, "locked dropout on the LSTM output")
    dropouth: float = _f(0.3, "locked dropout between LSTM layers")
    dropouti: float = _f(0.65, "locked dropout on the input embeddings")
    dropoute: float = _f(0.1, "embedding dropout (whole words)")
    wdrop: float = _f(0.5, "LSTM: weight drop (DropConnect) on hidden-to-hidden weights")
    # optimisation
    optimizer: str = _f("sgd", "sgd (with NT-ASGD), adam or adamw")
    lr: float = _f(30.0, "learning rate")
    schedule: str = _f("none", "learning-rate schedule: none, step, plateau, or cosine (to 0 at "
                       "the end of the budget: --max-time, --max-steps or --max-epochs)")
    warmup_steps: int = _f(0, "linear warm-up over this many updates")
    step_size: int = _f(1, "step schedule: epochs between decays")
    gamma: float = _f(0.5, "step/plateau schedule: decay factor")
    nonmono: int = _f(5, "NT-ASGD: switch to averaging after this many epochs without improvement")
    asgd: bool = _f(True, "sgd: switch to averaged SGD when validation stalls (NT-ASGD)")
    clip: float = _f(0.25, "gradient norm clipping (0: off)")
    wdecay: float = _f(1.2e-6, "weight decay")
    alpha: float = _f(2.0, "AR: activation regularisation weight")
    beta: float = _f(1.0, "TAR: temporal activation regularisation weight")
    label_smoothing: float = _f(0.0, "label smoothing epsilon: the loss's target is (1 - eps) "
                                "x the true word + eps x the prior (Koehn 2020, 10.2.3); 0: off")
    smoothing_prior: str = _f("uniform", "label smoothing prior: uniform (all words alike) or "
                              "unigram (the training split's word frequencies)")
    batch_size: int = _f(80, "training batch size")
    bptt: int = _f(70, "mean BPTT length (varied per batch, as in AWD-LSTM)")
    eval_batch_size: int = _f(10, "evaluation batch size")
    # budget and run
    max_epochs: int = _f(750, "stop after this many epochs (0: save the untrained model)")
    max_time: float = _f(0.0, "stop after this many minutes of training (0: no limit)")
    max_steps: int = _f(0, "stop after this many updates (0: no limit); --resume continues")
    patience: int = _f(0, "early stopping: epochs without improvement (0: off); an epoch "
                       "that ends inside the warm-up (--warmup-steps) is not counted, nor "
                       "does it decay the plateau schedule's rate")
    min_improvement: float = _f(0.0, "early stopping and the plateau schedule: an epoch counts "
                                "as improving only if it lowers validation perplexity by more "
                                "than this fraction below the last best that counted (0.001: "
                                "0.1 percent; NT-ASGD's average creeps down by less for long)")
    eval_every: int = _f(0, "also evaluate every N updates within an epoch (0: per epoch only)")
    track_frequency: bool = _f(False, "record the model's distance from the unigram and uniform "
                               "distributions, its cross-entropy and the output bias's norm and "
                               "KL from unigram on the first 4000 validation tokens, at updates "
                               "0, 1, 2, 4, 8, ... and every epoch end, in RUN_DIR/frequency.jsonl "
                               "(`lmlow analyze` plots them); also validates the untrained model")
    seed: int = _f(1, "random seed")
    device: str = _f("auto", "auto (a GPU if torch sees one), cpu or cuda; under torchrun each "
                     "process takes GPU LOCAL_RANK")
    precision: str = _f("auto", "autocast precision: auto (bf16 on GPUs that have it, else fp16 "
                        "with loss scaling; bf16 on CPUs with AMX and on AMD CPUs with AVX-512 BF16, "
                        "else fp32), fp32, bf16 or "
                        "fp16 (CUDA only); weights, optimiser and softmax stay fp32")
    deterministic: bool = _f(False, "bitwise-reproducible GPU training: deterministic cuDNN and "
                             "cuBLAS kernels (slower; CPU runs are deterministic anyway)")
    threads: int = _f(0, "CPU threads (0: the cores this process may use, by CPU affinity and "
                      "cgroup quota, shared among the processes of a node under torchrun); "
                      "with several trainings on one machine, give each its share")
    preset: str | None = _f(None, "the preset the defaults came from")

    # the one place that says what each number may be (checked by validate(), shown by --help)
    RANGES: typing.ClassVar[dict[str, str]] = {
        "unk_threshold": "[0, inf)", "train_fraction": "(0, 1]",
        "emb_size": "[1, inf)", "out_size": "[1, inf)", "hidden_size": "[1, inf)",
        "layers": "[1, inf)", "heads": "[1, inf)", "context": "[1, inf)", **{d: "[0, 1)" for d in ("dropout", "dropouth", "dropouti",
                                                     "dropoute", "wdrop", "label_smoothing")},
        "lr": "(0, inf)", "warmup_steps": "[0, inf)", "step_size": "[1, inf)",
        "gamma": "(0, 1]", "nonmono": "[1, inf)", "clip": "[0, inf)", "wdecay": "[0, inf)",
        "alpha": "[0, inf)", "beta": "[0, inf)", "batch_size": "[1, inf)", "bptt": "[1, inf)",
        "eval_batch_size": "[1, inf)", "max_epochs": "[0, inf)", "max_time": "[0, inf)",
        "max_steps": "[0, inf)", "patience": "[0, inf)", "min_improvement": "[0, 1)", "eval_every": "[0, inf)",
        "seed": SEED_RANGE, "threads": THREADS_RANGE}
    CHOICES: typing.ClassVar[dict[str, tuple[str, ...]]] = {
        "freeze_input_rows": ("all", "pretrained"), "arch": tuple(ARCHS),
        "optimizer": ("sgd", "adam", "adamw"), "schedule": ("none", "step", "plateau", "cosine"),
        "smoothing_prior": ("uniform", "unigram"), "device": ("auto", "cpu", "cuda"),
        "precision": ("auto", "fp32", "bf16", "fp16")}

    def __post_init__(self):
        self.init = names(self.init)

    # ---- derived
    @property
    def pretrained_input(self) -> bool:
        return "glove" in self.init

    @property
    def pretrained_output(self) -> bool:
        return "glove-output" in self.init or (self.tie and self.pretrained_input)

    @property
    def unigram_bias(self) -> bool:
        return "unigram" in self.init

    @property
    def input_frozen(self) -> bool:
        """The input matrix is frozen, wholly or in part (a tied model's one matrix counts
        as input and output)."""
        return self.roles.input_frozen

    @property
    def partial_freeze(self) -> bool:
        """Only the pretrained input rows are frozen (``--freeze-input-rows pretrained``)."""
        return self.input_frozen and self.freeze_input_rows == "pretrained"

    @property
    def reads_vectors(self) -> bool:
        """Whether anything of this run reads ``--embeddings``: the pretrained rows (``--init
        glove``/``glove-output``; ``--freeze-input-rows pretrained`` and ``lmlow eval
        --map-unseen-*`` need them) or the vectors' words (``--extend-vocab``)."""
        return self.pretrained_input or self.pretrained_output or self.extend_vocab

    def refuse_unread_vectors(self) -> "Config":
        """A new run's ``--embeddings`` that nothing reads (no ``--init glove*``, no
        ``--extend-vocab``) was loaded, checked and recorded as the run's vectors, and changed
        nothing, silently; ``ngram``, ``vocab`` and ``unk`` refuse the same. Asked of
        the configurations :func:`build_config` makes (train, fit, the sweeps' plans), not of
        a saved run's, which keeps opening."""
        if self.embeddings and not self.reads_vectors:
            raise LmlowError(f"--embeddings {self.embeddings}: nothing in this run reads the "
                             "vectors; add --init glove (or glove-output) to start from them, "
                             "or --extend-vocab to add their words, or leave --embeddings out")
        return self

    def validate(self) -> "Config":
        """Refuse invalid combinations with a one-line reason."""
        if self.arch == "transformer" and (self.hidden_size % self.heads
                                           or (self.hidden_size // self.heads) % 2):
            raise LmlowError(f"--hidden-size {self.hidden_size} (the Transformer's width) must "
                             f"split into --heads {self.heads} heads of an even size")
        check_init(self.init)
        if (self.pretrained_input or "glove-output" in self.init) and not self.embeddings:
            raise LmlowError("--init glove/glove-output needs --embeddings FILE")
        if self.tie and "glove-output" in self.init and "glove" not in self.init:
            raise LmlowError("a tied model has one matrix: pretrained output means pretrained "
                             "input too (use --init glove, or --tie no)")
        if self.tie and self.out_size not in (None, self.emb_size):
            raise LmlowError("a tied model needs --out-size equal to --emb-size")
        for key in ("embeddings", "vocab"):       # "" was taken for none (Python, a file)
            if getattr(self, key) == "":
                raise OutOfRange(key, "", "''", "an empty path; name a file, or leave it out")
        check_vocabulary_source(self.vocab, self.unk_threshold, self.extend_vocab, self.embeddings)
        if self.freeze_input_rows == "pretrained":
            if not self.input_frozen:
                raise LmlowError("--freeze-input-rows pretrained says which rows --freeze-input "
                                 "keeps fixed: add --freeze-input")
            if not self.pretrained_input:
                raise LmlowError("--freeze-input-rows pretrained needs pretrained input rows: "
                                 "add --init glove and --embeddings FILE")
        check_values(self)
        return self

    @property
    def roles(self) -> "EmbeddingRoles":
        return EmbeddingRoles.of(self)

    def describe(self) -> str:
        """The embedding configuration in the paper's terms."""
        return self.roles.describe()

    # ---- persistence
    def to_dict(self) -> dict:
        d = asdict(self)
        d["init"] = list(self.init)
        return d

    @classmethod
    def from_dict(cls, d: dict, source: str = "config") -> "Config":
        try:
            return cls(**check_settings(_settings_only(d), source, cls)).validate()
        except OutOfRange as e:
            raise e.named(source) from None

    def save(self, path: Path, built: dict | None = None) -> None:
        """Write the settings; ``built`` adds what the run found when it built the model
        (keys of DERIVED, e.g. ``input_rows``), for people reading the file, not settings."""
        extra = {k: v for k, v in (built or {}).items() if k in DERIVED}
        atomic_write_json(path, self.to_dict() | extra, indent=2)

    @classmethod
    def load(cls, path: Path) -> "Config":
        return cls.from_dict(read_settings(path), str(path))


def check_init(init: tuple[str, ...]) -> None:
    """An ``--init`` list on its own: known names that agree. Empty (``init = ""`` or ``[]`` in
    a file) is refused here, where a config file or grid is checked, not later by each
    ``lmlow train`` the sweep starts (whose flag refuses an empty list)."""
    if not init:
        raise LmlowError(f"--init: expected comma-separated names, got nothing; choose from "
                         f"{', '.join(INIT_CHOICES)}")
    bad = [x for x in init if x not in INIT_CHOICES]
    if bad:
        raise LmlowError(f"--init: unknown {bad[0]!r}; choose from {', '.join(INIT_CHOICES)}")
    if "random" in init and ({"glove", "glove-output"} & set(init)):
        raise LmlowError("--init: 'random' contradicts 'glove'/'glove-output'")


# What --resume may change: the budget (to train longer), and where and how the arithmetic
# runs (a GPU bf16 run may continue on a CPU in fp32; the state is saved in fp32 for that).
# Every other setting is the run's for good (lmlow.train.resume, lmlow.sweep.as_started).
RESUME_CHANGES = ("max_epochs", "max_time", "max_steps", "precision", "device", "threads")
# Settings that are places, not the run's maths: a moved corpus or vectors file is the same run.
PLACES = ("corpus", "embeddings", "vocab")


def same_run_differs(mine: dict, theirs: dict) -> list[str]:
    """The settings (of two ``Config.to_dict()``) in which two configurations are different
    runs: all but RESUME_CHANGES and PLACES."""
    return [k for k in mine if k not in (*RESUME_CHANGES, *PLACES) and mine[k] != theirs.get(k)]


# What a run's config.json says of the model as built, beside its settings: which input rows
# are frozen pretrained, frozen random and trained (lmlow.frozen_rows.row_report).
DERIVED = ("input_rows",)


def _settings_only(d: dict) -> dict:
    return {k: v for k, v in d.items() if k not in DERIVED}


def read_settings(path: Path) -> dict:
    """The settings a TOML or JSON file gives (only those it names; a run's config.json may
    be given: what it records of the built model is not a setting and is left out)."""
    return check_settings(_settings_only(load_table(path)), path)


def file_values(settings: dict) -> dict:
    """Settings given from Python as a config file holds them: a path (``pathlib.Path``, any
    ``os.PathLike``) as its text, so ``embeddings=Path(...)`` passes :func:`check_settings`."""
    return {k: os.fspath(v) if isinstance(v, os.PathLike) else v for k, v in settings.items()}


def check_settings(data: dict, where, cls=None) -> dict:
    """Settings from a file: every key a field of ``cls`` (Config), every value of its type."""
    cls = cls or Config
    unknown = sorted(set(data) - {f.name for f in fields(cls)})
    if unknown:
        raise LmlowError(f"{where}: unknown setting {unknown[0]!r}")
    hints = typing.get_type_hints(cls)
    for key, value in data.items():
        if not has_type(value, hints[key]):
            raise LmlowError(f"{where}: {key} = {value!r}: expected {type_name(hints[key])}"
                             f"{_spelled_as_flag(key, value, hints[key])}")
    # a list of names given as its comma-separated text (`init = "glove,unigram"`, the flag's
    # form) comes back as the list: a reader before Config (a sweep's plan) took its letters
    return {k: names(v) if isinstance(v, str) and typing.get_origin(hints[k]) is tuple else v
            for k, v in data.items()}


def _spelled_as_flag(key: str, value, hint) -> str:
    """A yes/no written as text, as the command line spells it (``tie = "no"`` after ``--tie
    no``): the file's (or Python's) own boolean is meant, unquoted."""
    word = value.strip().lower() if isinstance(value, str) and hint is bool else ""
    return ", unquoted" if word in ("yes", "no", "true", "false") else ""


def names(value) -> tuple[str, ...]:
    """A list of names, or one comma-separated text of them, as a tuple."""
    if isinstance(value, str):
        return tuple(x.strip() for x in value.split(",") if x.strip())
    return tuple(value)


def has_type(value, hint) -> bool:
    args = typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(has_type(value, a) for a in args)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if typing.get_origin(hint) is tuple:        # a list of names, or one comma-separated text
        return isinstance(value, str) or (isinstance(value, (list, tuple))
                                          and all(isinstance(v, str) for v in value))
    if typing.get_origin(hint) is list:         # lines (SLURM's setup), numbers (KenLM's prune)
        item = (typing.get_args(hint) or (object,))[0]
        return isinstance(value, (list, tuple)) and all(has_type(v, item) for v in value)
    return isinstance(value, hint)


def type_name(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(type_name(a) for a in typing.get_args(hint))
    if typing.get_origin(hint) is tuple:
        return "a list of names"
    if typing.get_origin(hint) is list:
        item = (typing.get_args(hint) or (object,))[0]
        return {str: "a list of texts", int: "a list of integers"}.get(item, "a list")
    return {bool: "true or false", int: "an integer", float: "a number", str: "a text",
            type(None): "nothing"}.get(hint, str(hint))


# --------------------------------------------------------------------------- ranges

def _interval(text: str) -> tuple[float, float, bool, bool]:
    lo, hi = (x.strip() for x in text[1:-1].split(","))
    return float(lo), float(hi), text[0] == "[", text[-1] == "]"


def describe_range(text: str) -> str:
    """``[0, inf)`` -> ``>= 0``; ``(0, 1]`` -> ``in (0, 1]``."""
    lo, hi, lo_in, _ = _interval(text)
    if math.isinf(hi):
        return f"{'>=' if lo_in else '>'} {lo:g}"
    return f"in {text}"


# No setting may be larger than this, whatever its interval says: torch turns a rate or a
# decay into a float32 factor of the step, and beyond float32's 3.4e38 it stopped with a
# traceback ("value cannot be converted to type float without overflow", --lr 1e300, and
# already --lr 3e38 with SGD) instead of a one-line refusal.
LARGEST = 1e30


def _finite(value: float) -> bool:
    """Not inf or NaN; an int always (math.isfinite raised OverflowError on a 400-digit one,
    a traceback for ``--max-steps 999...9``; int-float comparisons are exact in Python)."""
    return isinstance(value, int) or math.isfinite(value)


def _inside(value: float, text: str) -> bool:
    """Whether ``value`` lies in the interval ``text``, its bounds alone."""
    lo, hi, lo_in, hi_in = _interval(text)
    return (value >= lo if lo_in else value > lo) and (value <= hi if hi_in else value < hi)


def in_range(value: float, text: str) -> bool:
    """Whether ``value`` is finite, at most :data:`LARGEST` in size and inside the interval
    ``text`` (``[0, 1)``, ...)."""
    return _finite(value) and abs(value) <= LARGEST and _inside(value, text)


def range_rule(value: float, text: str) -> str:
    """What a value outside interval ``text`` must be: ``must be > 0``, and ``and finite``
    where the interval is open to infinity and the value is inf or NaN (``--lr inf: must be
    > 0`` read as a contradiction), or ``and at most 1e+30`` where only its size is wrong."""
    if _finite(value) and abs(value) > LARGEST and _inside(value, text):
        return f"must be {describe_range(text)} and at most {LARGEST:g}"
    finite = " and finite" if text.endswith("inf)") and not _finite(value) else ""
    return f"must be {describe_range(text)}{finite}"


class OutOfRange(LmlowError):
    """A setting outside its range or choices. Its message names the flag (``--lr -1: must be
    > 0``); where the value came from a file or a Python call instead, :meth:`named` says so
    (``run.toml: lr = -1: must be > 0``, ``lmlow.fit: lr = -1: ...``)."""

    def __init__(self, key: str, value, shown: str, rule: str, flag: str | None = None):
        super().__init__(f"{flag or '--' + key.replace('_', '-')} {shown}: {rule}")
        self.key, self.value, self.rule = key, value, rule

    def named(self, where) -> LmlowError:
        return LmlowError(f"{where}: {self.key} = {self.value!r}: {self.rule}")


def text_value(value, where: str, what: str) -> str:
    """A name or a path given from Python, as text; anything else is one error naming the
    function and the argument (``lmlow.fit: out = 5: expected text or a path``), not a
    TypeError from deep inside."""
    if not isinstance(value, (str, os.PathLike)):
        raise LmlowError(f"{where}: {what} = {value!r}: expected text or a path")
    return os.fspath(value)


def bool_value(value, where: str, what: str) -> bool:
    """A yes/no given from Python: True or False, not any truthy value (``reset_lines="no"``
    was a reset)."""
    if not isinstance(value, bool):
        raise LmlowError(f"{where}: {what} = {value!r}: expected true or false")
    return value


def path_value(value, where: str, what: str) -> Path:
    """:func:`text_value` as a path, never empty (``Path("")`` is the current folder)."""
    text = text_value(value, where, what)
    if not text:
        raise LmlowError(f"{where}: {what} = '': an empty path; name a file or folder")
    return Path(text)


@contextmanager
def keyword_errors(where: str, keys):
    """Inside, an error about settings given as keywords to a Python function (``keys``: a
    dict of them, or their names) names the function and the keyword, not only the command's
    flag: a range or choice error is said with them (``lmlow.fit: lr = -1: must be > 0``); a
    refused combination keeps its words, which name flags, and adds the keywords among them
    (``--init glove/glove-output needs --embeddings FILE (lmlow.fit: init = ['glove'])``), as
    :func:`_from_file` adds a config file's keys."""
    try:
        yield
    except OutOfRange as e:
        if e.key in keys:
            raise e.named(where) from None
        raise
    except LmlowError as e:
        said = _with_keywords(e, where, keys)
        if said is e:
            raise
        raise said from None


def flags_named(error: Exception) -> set[str]:
    """The settings a message names as flags (``--emb-size`` -> ``emb_size``)."""
    return {m.replace("-", "_") for m in re.findall(r"--([a-z][a-z-]*)", str(error))}


def _with_keywords(error: LmlowError, where: str, keys) -> LmlowError:
    """``error`` with the keywords it names as flags, once (an inner keyword_errors may have
    added its own); another kind of LmlowError (an interruption, a locked run) stays itself."""
    if type(error) is not LmlowError or getattr(error, "keywords_named", False):
        return error
    named = flags_named(error)
    hit = [k for k in keys if k in named]
    if not hit:
        return error
    shown = ", ".join(f"{k} = {keys[k]!r}" if isinstance(keys, dict) else k for k in hit)
    said = LmlowError(f"{error} ({where}: {shown})")
    said.keywords_named = True
    return said


def check_values(obj, ranges: dict | None = None, choices: dict | None = None) -> None:
    """Every numeric setting of a settings dataclass in its range (finite, NaN refused) and
    every choice among its choices: one line (:class:`OutOfRange`) naming the flag, the value
    and what is allowed."""
    ranges = ranges if ranges is not None else getattr(obj, "RANGES", {})
    choices = choices if choices is not None else getattr(obj, "CHOICES", {})
    for name, text in ranges.items():
        value = getattr(obj, name)
        if value is None:
            continue
        if isinstance(value, int) and not -2**63 <= value < 2**63:    # torch's and numpy's ints
            raise OutOfRange(name, value, str(value), f"must be {describe_range(text)} and fit "
                             "in 64 bits")
        if not in_range(value, text):
            raise OutOfRange(name, value, f"{value:g}", range_rule(value, text))
    for name, allowed in choices.items():
        value = getattr(obj, name)
        if value not in allowed:
            raise OutOfRange(name, value, repr(value), f"choose one of {', '.join(allowed)}")


class _TwiceGiven(Exception):
    """A JSON object names a key twice."""


def _unique_keys(pairs: list) -> dict:
    """A JSON object's keys, each once: json keeps the last of a repeated key, so a second
    ``"lr"`` won silently and a grid's second ``"runs": {"a": ...}`` dropped the first run."""
    seen = {}
    for key, value in pairs:
        if key in seen:
            raise _TwiceGiven(key)
        seen[key] = value
    return seen


def load_table(path: Path) -> dict:
    """A TOML or JSON file's top-level table, with one-line errors."""
    from lmlow.data.textio import BOM, note_bom
    path = Path(path)
    if not path.is_dir():                 # a folder is named as one below
        require_regular(path)             # a device never ends
    try:
        text = path.read_text(encoding="utf-8")
        if text.startswith(BOM):          # Notepad's UTF-8: TOML and JSON parsers refuse it
            note_bom(path)
            text = text[1:]
        data = tomllib.loads(text) if path.suffix == ".toml" else \
            json.loads(text, object_pairs_hook=_unique_keys)
    except _TwiceGiven as e:
        raise LmlowError(f"{path}: key {e.args[0]!r} given twice in one table; give each "
                         "once") from None
    except FileNotFoundError:
        raise LmlowError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise LmlowError(f"{path}: is a folder; expected a .toml or .json settings file") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LmlowError(f"{path}: not a valid config file ({e})") from None
    if not isinstance(data, dict):
        raise LmlowError(f"{path}: expected a table of settings")
    return data


@dataclass(frozen=True)
class EmbeddingRoles:
    """What the input and output embeddings are in a configuration (Kummerfeld et al.'s
    Table 1 columns): derived here once for the trainer's message, sweep folder names and
    report columns. In a tied model, freezing either side freezes the one matrix."""

    tie: bool
    input_pretrained: bool
    input_frozen: bool
    output_pretrained: bool
    output_frozen: bool
    unigram_bias: bool
    frozen_rows: str = "all"     # with input_frozen: "all", or "pretrained" rows only

    @classmethod
    def of(cls, settings: "Config | dict") -> "EmbeddingRoles":
        """From a Config or from (partial) settings, missing ones at their defaults."""
        keys = ("tie", "freeze_input", "freeze_output", "init", "freeze_input_rows")
        if isinstance(settings, dict):
            base = {f.name: f.default for f in fields(Config) if f.name in keys}
            s = {**base, **{k: v for k, v in settings.items() if k in base}}
        else:
            s = {k: getattr(settings, k) for k in keys}
        tie, fin, fout, init = s["tie"], s["freeze_input"], s["freeze_output"], set(s["init"])
        in_pre = "glove" in init
        if tie:
            frozen = bool(fin or fout)
            rows = s["freeze_input_rows"] if frozen else "all"
            return cls(True, in_pre, frozen, in_pre, frozen, "unigram" in init, rows)
        rows = s["freeze_input_rows"] if fin else "all"
        return cls(False, in_pre, bool(fin), "glove-output" in init, bool(fout), "unigram" in init,
                   rows)

    @staticmethod
    def _part(pretrained: bool, frozen: bool, short: bool = False, rows: str = "all") -> str:
        if short:
            return (("pre" if pretrained else "rand") + ("-frozen" if frozen else "")
                    + ("-vecrows" if frozen and rows == "pretrained" else ""))
        return (("pretrained" if pretrained else "random") + (", frozen" if frozen else "")
                + (" (rows with a vector)" if frozen and rows == "pretrained" else ""))

    def _input(self, short: bool = False) -> str:
        return self._part(self.input_pretrained, self.input_frozen, short, self.frozen_rows)

    def describe(self) -> str:
        """``untied: input pretrained, frozen; output random; unigram bias``."""
        if self.tie:
            emb = f"tied ({self._input()})"
        else:
            emb = (f"untied: input {self._input()}; "
                   f"output {self._part(self.output_pretrained, self.output_frozen)}")
        return emb + ("; unigram bias" if self.unigram_bias else "")

    def slug(self) -> str:
        """A folder name: ``tied.pre-frozen``, ``untied.in-pre-frozen.out-rand``."""
        inp = self._input(short=True)
        if self.tie:
            return f"tied.{inp}"
        return f"untied.in-{inp}.out-{self._part(self.output_pretrained, self.output_frozen, True)}"

    def columns(self) -> dict[str, str]:
        """The report's tie / input / output / unigram bias columns."""
        return {"tie": "tied" if self.tie else "untied",
                "input": self._input(),
                "output": "= input" if self.tie else self._part(self.output_pretrained,
                                                                self.output_frozen),
                "unigram bias": "yes" if self.unigram_bias else "no"}

    def map_refusal(self, side: str, vectors: bool = True) -> str | None:
        """Why ``lmlow eval``'s map of unseen words (lmlow.input_map) does not apply to this
        configuration's ``side`` ("inputs" or "outputs"), or None where it does: the rows must
        be untied, initialised from vectors (``vectors``: the run names a file) and trained.
        The one statement of that rule: ``maps`` and the maps' refusals read it."""
        flag = f"--map-unseen-{side}"
        if side == "inputs":
            pretrained, frozen, init = self.input_pretrained, self.input_frozen, "glove"
        else:
            pretrained, frozen, init = self.output_pretrained, self.output_frozen, "glove-output"
        row = side[:-1]
        if not (pretrained and vectors):
            return (f"{flag} needs a run whose {row} rows were initialised from vectors "
                    f"(--init {init})")
        if self.tie:
            return (f"{flag} applies to untied runs (--tie no): in a tied model "
                    + ("the unread words' rows are trained as output rows" if side == "inputs"
                       else "the output rows are the input rows"))
        if frozen:
            return (f"{flag}: the {row} rows were frozen, so the "
                    + ("unread words already sit among the vectors the model reads"
                       if side == "inputs" else "unpredicted words' rows are still their vectors"))
        return None

    def maps(self, inputs: bool = True, outputs: bool = True) -> tuple[bool, bool]:
        """Which of the asked-for maps of ``lmlow eval --map-unseen-inputs/--map-unseen-outputs``
        apply (``map_refusal``)."""
        return (inputs and self.map_refusal("inputs") is None,
                outputs and self.map_refusal("outputs") is None)


PRESET_PURPOSE = {
    "paper": "Merity et al.'s PTB model, for a GPU (about a day there, far more on a CPU)",
    "small": "lmlow's recommendation on a CPU: useful in minutes on 2 cores",
    "tiny": "seconds, for tests and smoke runs",
    "transformer-small": "a Transformer with about small's parameters, for a CPU budget",
    "transformer-tiny": "a Transformer in seconds, for tests",
}

PRESETS: dict[str, dict] = {
    # Merity et al.'s PTB model; for a GPU (about a day there, far more on a CPU).
    "paper": {},
    # Learns something useful in minutes on 2 CPU cores; lmlow's recommended budget setting.
    # Under a CPU budget the number of updates limits perplexity, so: a 2x400 LSTM whose last
    # layer is the 200-d output size, batch 20, Adam with a cosine decay that ends with the
    # budget, bf16 matmuls on AMX and AMD AVX-512 BF16 CPUs (about 4,000 training tokens/s on 2
    # cores, PTB).
    # See experiments/ptb-budget/README.md for the measurements behind each choice.
    "small": dict(emb_size=200, hidden_size=400, layers=2, batch_size=20, bptt=35,
                  dropout=0.3, dropouth=0.2, dropouti=0.2, dropoute=0.05, wdrop=0.2,
                  optimizer="adam", lr=3e-3, wdecay=0.0, asgd=False, alpha=1.0, beta=1.0,
                  clip=0.25, schedule="cosine", max_epochs=40),
    # The Transformer under a CPU budget: about the parameters of `small`'s LSTM (3 blocks of
    # width 192), AdamW with a linear warm-up and a cosine decay that ends with the budget.
    "transformer-small": dict(arch="transformer", emb_size=200, hidden_size=192, layers=3,
                              heads=4, context=128, batch_size=20, bptt=64, dropout=0.1,
                              dropouth=0.1, dropouti=0.1, dropoute=0.0, wdrop=0.0,
                              optimizer="adamw", lr=1e-3, wdecay=0.01, warmup_steps=200,
                              asgd=False, alpha=0.0, beta=0.0, clip=1.0, schedule="cosine",
                              max_epochs=40),
    # Seconds, for tests and smoke runs.
    "transformer-tiny": dict(arch="transformer", emb_size=32, hidden_size=32, layers=2, heads=2,
                             context=16, batch_size=8, bptt=16, eval_batch_size=4, dropout=0.1,
                             dropouth=0.1, dropouti=0.1, dropoute=0.0, wdrop=0.0,
                             optimizer="adamw", lr=3e-3, warmup_steps=20, asgd=False, alpha=0.0,
                             beta=0.0, clip=1.0, max_epochs=2),
    "tiny": dict(emb_size=32, hidden_size=48, layers=2, batch_size=8, bptt=16, eval_batch_size=4,
                 dropout=0.1, dropouth=0.1, dropouti=0.1, dropoute=0.05, wdrop=0.1,
                 optimizer="adam", lr=3e-3, asgd=False, max_epochs=2),
}


def model_shape(v: dict) -> str:
    """``200-d embeddings, LSTM 400+400+200`` from settings ``v`` (a Config's or a preset's)."""
    sizes = [v["hidden_size"]] * (v["layers"] - 1) + [v["out_size"] or v["emb_size"]]
    body = (f"Transformer {v['layers']}x{v['hidden_size']}, {v['heads']} heads, context "
            f"{v['context']}" if v["arch"] == "transformer"
            else f"LSTM {'+'.join(map(str, sizes))}")
    return f"{v['emb_size']}-d embeddings, {body}"


def preset_help() -> str:
    """The --preset help, generated from the presets themselves so it cannot go stale."""
    def shape(name):
        v = {f.name: f.default for f in fields(Config)} | PRESETS[name]
        return f"{model_shape(v)}, {v['optimizer']} lr {v['lr']:g}, batch {v['batch_size']}"
    return "; ".join(f"{n}: {PRESET_PURPOSE[n]} ({shape(n)})" for n in PRESETS)


def defaults(preset: str | None) -> dict:
    if preset is None:
        return {}
    if preset not in PRESETS:
        raise LmlowError(f"unknown preset {preset!r}; choose one of {', '.join(PRESETS)}")
    return dict(PRESETS[preset], preset=preset)


# settings that only matter under another one: (whether this config reads it, the condition)
IDLE_UNLESS = {
    "step_size": (lambda c: c.schedule == "step", "--schedule step"),
    "gamma": (lambda c: c.schedule in ("step", "plateau"), "--schedule step or plateau"),
    "nonmono": (lambda c: c.optimizer == "sgd" and c.asgd, "--optimizer sgd with NT-ASGD"),
    "asgd": (lambda c: c.optimizer == "sgd", "--optimizer sgd"),
    "smoothing_prior": (lambda c: c.label_smoothing > 0, "--label-smoothing above 0"),
    "min_improvement": (lambda c: c.patience > 0 or c.schedule == "plateau",
                        "--patience above 0 or --schedule plateau"),
}


def idle_settings(cfg: Config, given: dict) -> list[str]:
    """One note for each setting the user gave (a flag, or a config file's value other than
    the preset's) that this configuration never reads: ``--gamma 0.1`` under ``--schedule
    none`` trained as if it were not there, without a word. Notes, not errors: a script may
    pass one set of flags to runs of several optimisers (experiments/ptb-budget/explore.sh)."""
    def flag(key, value):
        name = "--" + key.replace("_", "-")
        return (name if value else "--no-" + name[2:]) if isinstance(value, bool) else \
            f"{name} {value}"

    return [f"{flag(k, v)} does nothing here: it applies under {needs}"
            for k, v in given.items() if k in IDLE_UNLESS
            for reads, needs in [IDLE_UNLESS[k]] if not reads(cfg)]


def build_config(preset: str | None = None, file: Path | None = None, notes: list | None = None,
                 **overrides) -> Config:
    """Defaults <- preset <- config file <- explicit overrides (CLI flags), then validated;
    ``notes`` (a list) gets :func:`idle_settings`' lines."""
    from_file = read_settings(file) if file is not None else {}
    if preset is None and from_file.get("preset") not in (None, *PRESETS):
        raise LmlowError(f"{file}: preset = {from_file['preset']!r}: choose one of "
                         f"{', '.join(PRESETS)}")
    # --preset wins over the file's preset, for the values and for the name recorded
    values = defaults(preset or from_file.get("preset"))
    base = {f.name: f.default for f in fields(Config)} | values     # the preset's values
    values.update({k: v for k, v in from_file.items() if k != "preset" or preset is None})
    given = {k: v for k, v in overrides.items() if v is not None}
    values.update(given)
    try:
        cfg = Config(**values).validate().refuse_unread_vectors()
    except OutOfRange as e:                   # the file's value: name the file, not a flag
        if e.key in from_file and e.key not in given:
            raise e.named(file) from None
        raise
    except LmlowError as e:                   # a combination: say which of it the file set
        raise _from_file(e, file, from_file, given) from None
    for name, value in overrides.items():
        if value is not None and ignored_by(cfg.arch, name, value):
            raise LmlowError(f"--{name} {value}: only --arch {ARCH_ONLY[name]} has it (this run "
                             f"is --arch {cfg.arch}); leave it out")
    # the file's too (it was ignored without a word), unless it holds the preset's own value:
    # a run's config.json records every setting, the other backbone's among them
    for name, value in from_file.items():
        if name not in given and ignored_by(cfg.arch, name, value) and value != base.get(name):
            raise LmlowError(f"{file}: {name} = {value!r}: only --arch {ARCH_ONLY[name]} has it "
                             f"(this run is --arch {cfg.arch}); leave it out")
    if notes is not None:
        notes += idle_settings(cfg, {**{k: v for k, v in from_file.items() if v != base.get(k)},
                                     **given})
    return cfg


def _from_file(error: LmlowError, file, from_file: dict, given: dict) -> LmlowError:
    """A refused combination's message names flags (``--init glove needs --embeddings``);
    those of its settings that came from the config file, not the command line, are named
    with the file too, so that the user knows where to look."""
    named = flags_named(error)
    keys = [k for k in from_file if k in named and k not in given]
    if not keys:
        return error
    def as_written(v):                   # a tuple here was the file's comma-separated text
        return ",".join(v) if isinstance(v, tuple) else v

    values = ", ".join(f"{k} = {as_written(from_file[k])!r}" for k in keys)
    return LmlowError(f"{error} ({file}: {values})")


def ignored_by(arch: str, name: str, value) -> bool:
    """Whether backbone ``arch`` would do nothing with this explicitly given setting (one of
    ARCH_ONLY's, for the other backbone; --wdrop 0 says what the Transformer does anyway)."""
    return name in ARCH_ONLY and ARCH_ONLY[name] != arch and not (name == "wdrop" and value == 0)


def arch_of(settings: dict, preset: str | None) -> str:
    """The backbone that settings on top of a preset build."""
    return settings.get("arch") or defaults(preset).get("arch") or "lstm"


def table1_configurations() -> list[dict]:
    """The 20 valid (tie, freeze, pretrain) combinations of Kummerfeld et al.'s Table 1."""
    out = []
    for pre in (False, True):
        for frozen in (False, True):
            out.append(dict(tie=True, freeze_input=frozen, freeze_output=False,
                            init=("glove",) if pre else ("random",)))
    for in_pre in (False, True):
        for in_frozen in (False, True):
            for out_pre in (False, True):
                for out_frozen in (False, True):
                    init = tuple(x for x, on in (("glove", in_pre), ("glove-output", out_pre)) if on)
                    out.append(dict(tie=False, freeze_input=in_frozen, freeze_output=out_frozen,
                                    init=init or ("random",)))
    return out


def field_help(name: str) -> str:
    return next(f.metadata.get("help", "") for f in fields(Config) if f.name == name)


def field_default(name: str, preset: str | None = None):
    d = defaults(preset)
    if name in d:
        return d[name]
    f = next(f for f in fields(Config) if f.name == name)
    return f.default if f.default is not MISSING else None


__all__ = ["ARCH_ONLY", "Config", "PRESETS", "arch_of", "build_config", "ignored_by",
           "table1_configurations"]
