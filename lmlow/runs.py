"""Opening a run folder as a scorer: ``lmlow.load(RUN_DIR)`` gives an :class:`LSTMRun` or a
KenLM :class:`lmlow.ngram_run.NgramRun`, and ``lmlow.interpolate(a, b)`` their word-by-word
mixture. All are :class:`lmlow.evaluate.Scorer` subclasses, so evaluation, scoring and
reports treat them alike."""
from __future__ import annotations

import json
import numbers
import typing
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lmlow.config import (MAP_INPUTS_HELP, MAP_OUTPUTS_HELP, bool_value, check_values, in_range,
                          path_value, setting)
from lmlow.data.corpus import SPLITS
from lmlow.data.vocab import Vocabulary
from lmlow.errors import LmlowError
from lmlow.evaluate import (LineReader, Scorer, log_probs, lstm_logprobs, mix_logprobs,
                            tune_weight)
from lmlow.files import atomic_write_json, file_digest, read_json, to_json
from lmlow.rundir import CHECKPOINTS, LSTM, NGRAM, RunDir, evaluation_name

if typing.TYPE_CHECKING:
    from lmlow.input_map import MappedInputs


class LSTMRun(Scorer):
    """A trained (or initialised) AWD-LSTM run. LSTM-only options: the checkpoint, the device,
    the evaluation batch size (default: the run's; each batch column is warmed up over the
    128 or more tokens before it, so another size gives nearly, not exactly, the same numbers;
    1 reads the text in one unbroken pass), the output-bias scale lambda of Kobayashi et al. (1: the trained model) and
    ``map_unseen_inputs``/``map_unseen_outputs`` (lmlow.input_map; what each did:
    ``mapped_inputs``/``mapped_outputs``)."""

    carries_state = True

    def __init__(self, run_dir: Path, checkpoint: str | None = None, device: str = "auto",
                 batch_size: int | None = None, bias_scale: float = 1.0,
                 map_unseen_inputs: bool = False, map_unseen_outputs: bool = False):
        # torch, imported here, not with the module: the CLI starts without it
        from lmlow.checkpoint import checkpoint_state, fast_matmuls, load_model
        from lmlow.input_map import map_unseen

        self.run = RunDir(run_dir).require(LSTM)
        self.run_dir = self.run.path
        self.checkpoint = checkpoint or self.run.default_checkpoint()
        path = self.run.checkpoint(self.checkpoint)
        if checkpoint is None and not path.exists() and self.run.last.exists():
            raise LmlowError(f"{path}: missing, though the run validated (metrics.jsonl); "
                             "--checkpoint last scores its last state")
        self.config, self.vocab, self.model = load_model(path, device)
        if self.run.vocab.exists() and Vocabulary.load(self.run.vocab).words != self.vocab.words:
            raise LmlowError(f"{self.run.vocab} does not match the vocabulary of "
                             f"{self.checkpoint}.pt")
        if batch_size is not None and batch_size < 1:
            raise LmlowError(f"--batch-size {batch_size}: must be at least 1")
        self.device = next(self.model.parameters()).device
        fast_matmuls(self.device)                # TF32 on Ampere+ GPUs (checkpoint.py)
        self.corpus_path = Path(self.config.corpus)
        self.unk_threshold = self.config.unk_threshold
        self.batch_size = batch_size or self.config.eval_batch_size
        self.bias_scale = bias_scale
        maps = map_unseen_inputs or map_unseen_outputs
        self.mapped_inputs, self.mapped_outputs = map_unseen(
            self.model, self.config, self.vocab.words, self.vocab.count_array(), str(self.run_dir),
            inputs=map_unseen_inputs, outputs=map_unseen_outputs,
            recorded=self.run.recorded_vectors() if maps else None,
            state=checkpoint_state(path) if maps else None)

    def token_logprobs(self, ids: np.ndarray, reset_lines: bool = False) -> np.ndarray:
        return lstm_logprobs(self.model, ids, self.vocab.eos_id, self.batch_size,
                             self.config.bptt, reset_lines=reset_lines,
                             bias_scale=self.bias_scale, device=self.device)

    def reader(self) -> "LSTMReader":
        return LSTMReader(self)


class LSTMReader(LineReader):
    """An LSTM (or Transformer) run reading a line: its state carried from word to word (the
    LSTM's hidden state, the Transformer's key/value memory), fed in chunks of the run's BPTT
    length as scoring feeds it; the line starts after ``<eos>``, as scored lines do."""

    def __init__(self, run: LSTMRun):
        super().__init__(run)
        run.model.eval()
        self.hidden, self.output = run.model.init_hidden(1), None
        self._read([run.vocab.eos_id])

    def _read(self, ids: list[int]) -> None:
        import torch

        run = self.scorer
        x = torch.tensor(ids, dtype=torch.long, device=run.device).view(-1, 1)
        with torch.no_grad():
            for t in range(0, len(ids), run.config.bptt):
                output, self.hidden, _, _ = run.model(x[t:t + run.config.bptt], self.hidden)
        self.output = output[-1]                       # (1, d): after the last word read

    def next_logprobs(self) -> np.ndarray:
        import torch

        with torch.no_grad():
            lp = log_probs(self.scorer.model, self.output, self.scorer.bias_scale)
        return lp[0].double().cpu().numpy()          # a copy: log_probs reuses its buffers


class InterpolatedRun(Scorer):
    """Two scorers over the same vocabulary mixed word by word: p = w p_a + (1 - w) p_b (the
    classic LSTM + n-gram interpolation). Without ``weight``, w is tuned by EM on the
    validation split of ``corpus`` (default: the first run's), its lines read as
    ``reset_lines`` says: as later evaluations will read them (``score`` and ``next_words``
    read every line fresh, as ``reset_lines=True`` tunes for; `lmlow score` and `predict`
    do so)."""

    def __init__(self, a: Scorer, b: Scorer, weight: float | None = None,
                 reset_lines: bool = False, corpus: Path | None = None):
        for name, run in (("a", a), ("b", b)):
            if not isinstance(run, Scorer):
                raise LmlowError(f"lmlow.interpolate: {name} = {run!r:.60}: expected a model "
                                 "(lmlow.load(RUN_DIR))")
        if weight is not None and (isinstance(weight, bool) or not isinstance(weight, numbers.Real)):
            raise LmlowError(f"lmlow.interpolate: weight = {weight!r}: expected a number "
                             "between 0 and 1, or None (tuned)")
        if a.vocab.words != b.vocab.words:
            i = next((i for i, (x, y) in enumerate(zip(a.vocab.words, b.vocab.words)) if x != y),
                     min(len(a.vocab.words), len(b.vocab.words)))
            raise LmlowError(f"{a.run_dir} and {b.run_dir} have different vocabularies (from word "
                             f"{i + 1}); interpolation needs the same tokens: train both on the "
                             "same corpus with the same --unk-threshold, or the same --vocab FILE")
        if weight is not None and not 0 <= weight <= 1:   # (the command's flag checks its own)
            raise LmlowError(f"lmlow.interpolate: weight = {weight:g}: must be between 0 and 1")
        bool_value(reset_lines, "lmlow.interpolate", "reset_lines")
        self.a, self.b = a, b
        self.run_dir, self.vocab = a.run_dir, a.vocab
        self.corpus_path, self.unk_threshold = a.corpus_path, a.unk_threshold
        self.carries_state = a.carries_state or b.carries_state
        self.mapped_inputs = a.mapped_inputs     # only the first model is ever mapped
        self.mapped_outputs = a.mapped_outputs
        self.weight = weight if weight is not None else self.tune("valid", reset_lines, corpus)

    def preparation(self) -> dict:
        """The first run's record; the second's, where it has one, must say the same."""
        mine = self.a.preparation()
        theirs = RunDir(self.b.run_dir).recorded_preparation()   # None: the first run's decides
        if theirs is not None and theirs != mine:
            raise LmlowError(f"{self.a.run_dir} and {self.b.run_dir}: their corpora were "
                             f"tokenised differently ({mine} against {theirs}); --raw cannot "
                             "read a line as both read their text")
        return mine

    def tune(self, split: str, reset_lines: bool = False, corpus: Path | None = None) -> float:
        """The weight EM finds on ``split`` of ``corpus`` (default: the first run's)."""
        if corpus is None and not Path(self.corpus_path).is_dir():
            raise LmlowError(f"{self.corpus_path}: no such corpus folder (the one "
                             f"{self.run_dir} was trained on), whose validation split tunes "
                             "the mixture's weight; give --weight W, or restore the folder")
        ids = self.corpus(corpus).encode(split).ids
        return tune_weight(self.a.token_logprobs(ids, reset_lines),
                           self.b.token_logprobs(ids, reset_lines))

    def token_logprobs(self, ids: np.ndarray, reset_lines: bool = False) -> np.ndarray:
        return mix_logprobs(self.a.token_logprobs(ids, reset_lines),
                            self.b.token_logprobs(ids, reset_lines), self.weight)

    def reader(self) -> "MixedReader":
        return MixedReader(self)


class MixedReader(LineReader):
    """The mixture reading a line: both runs read it, their next-word distributions mixed."""

    def __init__(self, mixed: InterpolatedRun):
        super().__init__(mixed)
        self.a, self.b = mixed.a.reader(), mixed.b.reader()

    def _read(self, ids: list[int]) -> None:
        self.a._read(ids)
        self.b._read(ids)

    def next_logprobs(self) -> np.ndarray:
        return mix_logprobs(self.a.next_logprobs(), self.b.next_logprobs(), self.scorer.weight)

    def fork(self) -> "MixedReader":
        other = super().fork()
        other.a, other.b = self.a.fork(), self.b.fork()
        return other


def load(run_dir: Path, checkpoint: str | None = None, device: str = "auto", **lstm_options) -> Scorer:
    """Open a run folder as a scorer. ``checkpoint`` (default: best, or last for a run stopped
    before its first validation), ``device`` and ``lstm_options`` (``batch_size``,
    ``bias_scale``, ``map_unseen_inputs``, ``map_unseen_outputs``) apply to LSTM runs; an
    n-gram run refuses a checkpoint or LSTM option."""
    run = RunDir(path_value(run_dir, "lmlow.load", "run_dir")).require()
    _check_load_options(checkpoint, lstm_options)
    lstm_options = {k: v for k, v in lstm_options.items() if v is not None}   # not given
    if run.kind == NGRAM:
        from lmlow.ngram_run import NgramRun

        given = [k for k, v in {"checkpoint": checkpoint, **lstm_options}.items()
                 if v is not None and v is not False and not (k == "bias_scale" and v == 1.0)]
        if given:
            raise LmlowError(f"{run}: an n-gram run; --{given[0].replace('_', '-')} applies to "
                             "LSTM runs only")
        return NgramRun(run.path)
    return LSTMRun(run.path, checkpoint, device, **lstm_options)


LOAD_OPTIONS = ("batch_size", "bias_scale", "map_unseen_inputs", "map_unseen_outputs")
BIAS_SCALES = "[-10, 10]"      # Kobayashi et al.'s lambda: generate's --bias-scale takes these


def _check_load_options(checkpoint, options: dict) -> None:
    """:func:`load`'s keywords, each checked as its flag is: a NaN bias scale scored every
    word NaN, a float batch size or an unknown keyword was a TypeError deep inside."""
    where = "lmlow.load"
    unknown = [k for k in options if k not in LOAD_OPTIONS]
    if unknown:
        raise LmlowError(f"{where}: unknown keyword {unknown[0]!r} (it takes checkpoint, "
                         f"device, {', '.join(LOAD_OPTIONS)})")
    if checkpoint is not None and checkpoint not in CHECKPOINTS:
        raise LmlowError(f"{where}: checkpoint = {checkpoint!r}: expected "
                         f"{' or '.join(map(repr, CHECKPOINTS))}")
    batch = options.get("batch_size")          # None, here and below: not given
    if batch is not None and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        raise LmlowError(f"{where}: batch_size = {batch!r}: expected an integer >= 1")
    scale, scales = options.get("bias_scale"), BIAS_SCALES
    if scale is not None and (isinstance(scale, bool) or not isinstance(scale, (int, float))
                              or not in_range(scale, scales)):
        raise LmlowError(f"{where}: bias_scale = {scale!r}: expected a number in {scales}")
    for key in ("map_unseen_inputs", "map_unseen_outputs"):
        if options.get(key) is not None:
            bool_value(options[key], where, key)


def evaluation_record(ev, mapped: "MappedInputs | None" = None,
                      mapped_outputs: "MappedInputs | None" = None) -> dict:
    """An evaluation as `lmlow eval --json` prints it, with what --map-unseen-inputs and
    --map-unseen-outputs did when used (the record a run folder keeps as
    ``eval_mapped*_*.json``, ``evaluation_name``)."""
    return (ev.to_dict() | ({"mapped_inputs": asdict(mapped)} if mapped else {})
            | ({"mapped_outputs": asdict(mapped_outputs)} if mapped_outputs else {}))


def _is_evaluation(data) -> bool:
    """A cached evaluation has its perplexity (a number, or null for a NaN), its token counts
    and, where it has frequency bins, bins of that shape: a damaged or hand-edited file was a
    KeyError or TypeError traceback in the report (its tokens, a bin's perplexity)."""
    def number(x, nullable=True) -> bool:
        return (x is None and nullable) or isinstance(x, (int, float)) and not isinstance(x, bool)

    def count(x) -> bool:
        return isinstance(x, int) and not isinstance(x, bool) and x >= 0

    def bins(key) -> bool:
        b = data.get(key, [])
        return isinstance(b, list) and all(
            isinstance(x, dict) and isinstance(x.get("bin"), str) and count(x.get("tokens"))
            and number(x.get("perplexity")) for x in b)
    return (isinstance(data, dict) and "perplexity" in data and number(data["perplexity"])
            and count(data.get("tokens")) and count(data.get("unk_tokens"))
            and bins("bins") and bins("context_bins"))


STAMP_KEYS = ("checkpoint_mtime", "checkpoint_sha256")


def model_stamp(model: Path) -> dict:
    """What an evaluation cache records of the model file it was made from (``STAMP_KEYS``)."""
    return {"checkpoint_mtime": model.stat().st_mtime, "checkpoint_sha256": file_digest(model)}


def made_from(record: dict, model: Path) -> bool:
    """Whether a cached evaluation was made from this model file: the same mtime, or else the
    same sha256 (a checkout, a copy or a restored backup gives the same bytes a new mtime;
    measured again, the evaluation would cost minutes a run and, on another CPU, rewrite a
    committed evaluation in its 7th digit). A cache from before the sha256 has the mtime only."""
    if record.get("checkpoint_mtime") == model.stat().st_mtime:
        return True
    return (isinstance(record.get("checkpoint_sha256"), str)
            and record["checkpoint_sha256"] == file_digest(model))


def evaluation(run: RunDir, split: str, map_unseen_inputs: bool = False,
               map_unseen_outputs: bool = False) -> dict:
    """The run's evaluation on a split (an LSTM's best checkpoint, or the n-gram model), cached
    beside it and recomputed if the model file changed (``made_from``). (The cache is named
    ``eval_best_*`` whichever checkpoint is the best one; with the maps, as ``evaluation_name``
    says.) A finished run whose model files were not kept (a committed experiment: ``*.pt`` and
    KenLM's files stay out of git) is reported from its cached evaluation, the record of the
    model it was made from."""
    ngram = run.kind == NGRAM
    checkpoint = None if ngram else run.default_checkpoint()
    model = (run.binary if run.binary.exists() else run.arpa) if ngram else run.checkpoint(checkpoint)
    cache = run.evaluation_cache(evaluation_name(map_unseen_inputs, map_unseen_outputs), split)
    if not model.exists():
        if cache.exists():
            data = read_json(cache)
            if not _is_evaluation(data):
                raise LmlowError(f"{cache}: not an evaluation as lmlow writes one (its perplexity, "
                                 "token counts or bins missing or not numbers); "
                                 f"damaged or edited? {model.name} is gone, so train the run again")
            return data
        raise LmlowError(f"{run.path}: neither {model.name} nor its evaluation {cache.name}; "
                         f"train the run again (a sweep command resumes it)")
    if cache.exists():
        data = read_json(cache)
        if _is_evaluation(data) and made_from(data, model):
            return data                   # else stale or damaged: measured again, replaced
    stamp = model_stamp(model)
    scorer = load(run.path, checkpoint=checkpoint, map_unseen_inputs=map_unseen_inputs,
                  map_unseen_outputs=map_unseen_outputs)
    # cleaned as a later call reads it back (NaN: null), then kept
    data = json.loads(to_json(evaluation_record(scorer.evaluate(split), scorer.mapped_inputs,
                                                scorer.mapped_outputs)
                              | stamp))
    atomic_write_json(cache, data)
    return data


@dataclass
class ModelOptions:
    """Which model a scoring command asks (`lmlow score` and `predict`; `eval` adds its own):
    the run, its unseen rows mapped or not, alone or mixed word by word with a second run (its
    flags are generated from these fields)."""
    interpolate: Path | None = setting(None, "mix RUN_DIR word by word with another run over "
                                       "the same vocabulary (e.g. a KenLM n-gram): p = w p_1 "
                                       "+ (1 - w) p_2", parse=Path, metavar="RUN_DIR2")
    weight: float | None = setting(None, "with --interpolate: the weight w of RUN_DIR (none: "
                                   "tuned by EM on the validation split, of eval's --corpus "
                                   "where given, else of the run's corpus, its lines read as "
                                   "this command reads them)", metavar="W")
    map_unseen_inputs: bool = setting(False, MAP_INPUTS_HELP, switch=True)
    map_unseen_outputs: bool = setting(False, MAP_OUTPUTS_HELP, switch=True)
    RANGES: typing.ClassVar[dict] = {"weight": "[0, 1]"}


@dataclass
class ScoreOptions(ModelOptions):
    """What `lmlow score` (and `predict`) read: the model's options and how its text comes."""
    raw: bool = setting(False, "the text is raw, as typed or recognised: tokenise and "
                        "normalise it as `lmlow prepare` made the run's corpus (its tokenizer, "
                        "--lowercase, --numbers, --strip-punct; recorded in the run folder), "
                        "not split on spaces as given", switch=True)
    ids: bool = setting(False, "each line of the file starts with an identifier (an n-best "
                        "list's utt7-3), copied into its record as \"id\", not scored",
                        switch=True)


@dataclass
class EvalOptions(ModelOptions):
    """What `lmlow eval` scores (its flags are generated from these fields)."""
    split: str = setting("valid", "the split to score")
    reset_lines: bool = setting(False, "start every line from a fresh state, as an n-gram "
                                "model does", switch=True)
    batch_size: int | None = setting(None, "LSTM runs: evaluation batch size (none: the "
                                     "run's, which its validations used; another size agrees "
                                     "closely, not exactly: each column is warmed up over 128+ "
                                     "tokens; 1: one unbroken pass)", metavar="N")
    RANGES: typing.ClassVar[dict] = {**ModelOptions.RANGES, "batch_size": "[1, inf)"}
    CHOICES: typing.ClassVar[dict] = {"split": SPLITS}


def open_scorer(run_dir: Path, checkpoint: str | None = None, device: str = "auto",
                opts: ModelOptions = EvalOptions(), corpus: Path | None = None) -> tuple[Scorer, str]:
    """What `lmlow eval`, `score` or `predict` scores and its name: a run, or with
    ``opts.interpolate`` its word-by-word mixture with a second run (``opts.weight`` tuned on
    the validation split of ``corpus``, `eval --corpus`'s folder, else the run's, when not
    given, its lines read as the command reads them: `score` and `predict` read every line
    from a fresh state, `eval` as ``--reset-lines`` says)."""
    check_values(opts)
    if opts.weight is not None and not opts.interpolate:
        raise LmlowError("--weight needs --interpolate RUN_DIR2")
    if opts.interpolate and Path(opts.interpolate).resolve() == Path(run_dir).resolve():
        raise LmlowError(f"--interpolate {opts.interpolate}: the run being scored itself "
                         "(a mixture of a run with itself is that run)")
    run = load(run_dir, checkpoint, device, batch_size=getattr(opts, "batch_size", None),
               map_unseen_inputs=opts.map_unseen_inputs,
               map_unseen_outputs=opts.map_unseen_outputs)
    if not opts.interpolate:
        return run, str(run_dir)
    mixed = InterpolatedRun(run, load(opts.interpolate, device=device), opts.weight,
                            reset_lines=getattr(opts, "reset_lines", True), corpus=corpus)
    return mixed, f"{run_dir} x {mixed.weight:.3f} + {opts.interpolate} x {1 - mixed.weight:.3f}"
