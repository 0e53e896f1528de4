"""Sampling text from an LSTM run, with the output bias scaled (Kobayashi et al. 2023).

The next-word distribution is softmax((W h + lambda b) / T), where b is the output bias and
lambda (``bias_scale``) Kobayashi et al.'s coefficient: 1 is the model as trained, 0 drops the
bias (the "unigram expert" of Meister et al. 2023). Then top-k keeps the k most probable words
and top-p (nucleus sampling) the smallest set whose probability reaches p (in that order, as
Hugging Face's generate does); T = 0 or top-k 1 is greedy decoding.

Generation starts after ``<eos>`` (the start of a text, as evaluation does), then reads the
prompt, if any. ``<eos>`` is a token like any other: it is sampled (a line break) and counted.
Each sample has its own random generator, seeded from (seed, sample index), so sample i is the
same whatever the number of samples, and the same seed gives the same text.

:func:`bias_sweep` reproduces Kobayashi et al.'s Table 2 for an LSTM: for each lambda, the
diversity of sampled text (Distinct-1/2 and n-gram diversity, :mod:`lmlow.analysis`) and the
perplexity of the lambda-scaled model on a split (a softmax is normalised for every lambda, so
this is a proper perplexity).
"""
from __future__ import annotations

import dataclasses
import json
import math
import typing
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from lmlow.config import SEED_RANGE, check_settings, check_values, in_range, setting
from lmlow.errors import LmlowError
from lmlow.evaluate import exp_loss
from lmlow.runs import BIAS_SCALES


TEMPERATURES = "[0.01, 100]"    # besides 0 (greedy); beyond, logits overflow in fp32


@dataclass
class Sampling:
    """How the next word is drawn: softmax((W h + lambda b) / T), then top-k, then top-p. The
    flags of `lmlow generate` and `lmlow bias-sweep` are generated from these fields."""
    temperature: float = setting(1.0, "divide the logits by T: below 1 sharper, above 1 "
                                 f"flatter; 0 is greedy; 0 or in {TEMPERATURES}", metavar="T")
    top_k: int = setting(0, "sample among the K most probable words only; 1 is greedy, 0 all",
                         metavar="K")
    top_p: float = setting(1.0, "nucleus sampling: among the most probable words whose "
                           "probabilities add up to P; 1 all", metavar="P")
    bias_scale: float = setting(1.0, "multiply the output bias by LAMBDA: 1 is the trained "
                                "model, 0 drops the bias (Kobayashi et al. 2023)",
                                metavar="LAMBDA")
    no_unk: bool = setting(False, "never sample <unk>", switch=True)
    RANGES: typing.ClassVar[dict] = {"top_k": "[0, inf)", "top_p": "(0, 1]",
                                     "bias_scale": BIAS_SCALES}

    def validate(self) -> "Sampling":
        """Beyond the ranges the logits overflow to inf/NaN in fp32 (a temperature of 1e-300,
        a bias scale of 1e308): refused instead of sampling garbage."""
        if not (self.temperature == 0 or in_range(self.temperature, TEMPERATURES)):
            raise LmlowError(f"--temperature {self.temperature:g}: must be 0 (greedy) or in "
                             f"{TEMPERATURES}")
        check_values(self)
        return self


@dataclass
class GenerateOptions:
    """What `lmlow generate` samples (its flags are generated from these fields)."""
    prompt: str = setting("", "text to continue, tokenised like the corpus (words the "
                          "vocabulary lacks are read as <unk>)", metavar="TEXT")
    raw: bool = setting(False, "the prompt is raw text: tokenise and normalise it as `lmlow "
                        "prepare` made the run's corpus (as `lmlow score --raw`)", switch=True)
    words: int = setting(50, "tokens to generate per sample, <eos> included", metavar="N")
    samples: int = setting(1, "number of samples", metavar="N")
    seed: int = setting(1, "random seed: the same seed gives the same text, and sample i is "
                        "the same whatever --samples is")
    RANGES: typing.ClassVar[dict] = {"words": "[0, inf)", "samples": "[1, inf)", "seed": SEED_RANGE}

    def validate(self) -> "GenerateOptions":
        check_values(self)
        if self.raw and not self.prompt:       # it did nothing, without a word
            raise LmlowError("--raw: says how to read --prompt; give a --prompt, or leave "
                             "--raw out")
        return self


def _lambdas_flag(text: str) -> tuple:
    return tuple(parse_lambdas(text))


@dataclass
class BiasSweepOptions:
    """What `lmlow bias-sweep` measures (its flags are generated from these fields)."""
    lambdas: tuple = setting((0.0, 0.25, 0.5, 0.75, 1.0), "comma-separated bias scales, each "
                             "in [-10, 10]", parse=_lambdas_flag, metavar="LIST")
    samples: int = setting(100, "samples per lambda", metavar="N")
    words: int = setting(100, "tokens per sample", metavar="N")
    seed: int = setting(1, "random seed of the samples")
    prompt: str = setting("", "text every sample continues (none: the start of a text)",
                          metavar="TEXT")
    split: str = setting("test", "split of the perplexity column")
    RANGES: typing.ClassVar[dict] = {"words": "[1, inf)", "samples": "[1, inf)", "seed": SEED_RANGE}
    CHOICES: typing.ClassVar[dict] = {"split": ("train", "valid", "test")}

    def validate(self) -> "BiasSweepOptions":
        check_values(self)
        if not self.lambdas:
            raise LmlowError("--lambdas: give at least one value")
        self.lambdas = tuple(parse_lambdas(",".join(map(str, self.lambdas))))   # ranges, repeats
        return self


def split_options(options: dict, *classes, where: str = "lmlow.generate") -> list:
    """Keyword options shared out to the settings dataclasses that own them (each
    validated); one line for a keyword none of them has, or a value of another type
    (``prompt=None``, ``top_k=2.5``, ``seed=True`` from Python: tracebacks, or a seed of 1)."""
    names = [{f.name for f in fields(c)} for c in classes]
    unknown = set(options) - set().union(*names)
    if unknown:
        raise LmlowError(f"unknown option {sorted(unknown)[0]!r}")
    out = []
    for c, n in zip(classes, names):
        given = {k: v for k, v in options.items() if k in n}
        typed = {k: v for k, v in given.items() if k != "lambdas"}   # numbers or their text
        out.append(c(**{**given, **check_settings(typed, where, c)}).validate())
    return out


def filter_logits(logits, temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0):
    """Rows of logits (B, V) with temperature applied and the words top-k/top-p drop set to
    -inf. Temperature 0 keeps only each row's most probable word."""
    import torch

    logits = logits.float()
    if temperature == 0:
        top_k, temperature = 1, 1.0
    logits = logits / temperature
    if top_k and top_k < logits.size(-1):
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]
        logits = logits.masked_fill(logits < kth, -math.inf)
    if top_p < 1:
        probs, order = torch.sort(torch.softmax(logits, -1), dim=-1, descending=True)
        before = probs.cumsum(-1) - probs           # mass of the words ranked above
        drop_sorted = before >= top_p
        drop_sorted[..., 0] = False     # the first word never: a top_p that float32 holds as
        #                                 0 (1e-320) dropped it too, and sampling raised on NaN
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, -math.inf)
    return logits


def sample_generators(seed: int, indices) -> list:
    """One torch generator per sample index, seeded from (seed, index)."""
    import torch

    states = [np.random.SeedSequence([seed, i]).generate_state(1)[0] for i in indices]
    return [torch.Generator().manual_seed(int(s)) for s in states]


LOGITS_AT_ONCE = 1 << 24   # samples x vocabulary per step: 64 MB a float32 buffer, a few alive


def sample_batch_size(vocab_size: int) -> int:
    """How many samples are drawn together: as many as keep one step's logits within
    ``LOGITS_AT_ONCE`` (100,000 samples of a 12k vocabulary in one batch took 10 GB)."""
    return max(1, LOGITS_AT_ONCE // max(1, vocab_size))


def iter_sample_ids(model, vocab, prompt_ids: list[int], words: int, samples: int = 1,
                    seed: int = 1, sampling: Sampling | None = None,
                    device=None) -> typing.Iterator[list[int]]:
    """``samples`` continuations of ``words`` token ids each, after ``<eos>`` + ``prompt_ids``,
    yielded in order a batch at a time (:func:`sample_batch_size`), so memory stays bounded
    and a caller can print each as it comes. Sample i depends on (seed, i) only, not on how
    many are drawn or how they are batched."""
    sampling = (sampling or Sampling()).validate()
    if words < 0 or samples < 1:
        raise LmlowError("--words must be >= 0 and --samples >= 1")
    device = device or next(model.parameters()).device
    batch = sample_batch_size(len(vocab))
    for start in range(0, samples, batch):
        indices = range(start, min(samples, start + batch))
        yield from _sample_batch(model, vocab, prompt_ids, words, indices, seed, sampling, device)


def _sample_batch(model, vocab, prompt_ids, words, indices, seed, sampling, device):
    import torch

    gens = sample_generators(seed, indices)
    n = len(gens)
    model.eval()
    out = np.zeros((n, words), np.int32 if len(vocab) < 2**31 else np.int64)
    with torch.no_grad():
        hidden = model.init_hidden(n)
        context = torch.tensor([vocab.eos_id, *prompt_ids], dtype=torch.long, device=device)
        output, hidden, _, _ = model(context.unsqueeze(1).expand(-1, n).contiguous(), hidden)
        last = output[-1]
        for t in range(words):
            logits = model.logits(last, sampling.bias_scale).float()
            if sampling.no_unk:
                logits[:, vocab.unk_id] = -math.inf
            logits = filter_logits(logits, sampling.temperature, sampling.top_k, sampling.top_p)
            probs = torch.softmax(logits, -1).cpu()
            nxt = [int(torch.multinomial(probs[i], 1, generator=g)) for i, g in enumerate(gens)]
            out[:, t] = nxt
            output, hidden, _, _ = model(torch.tensor([nxt], dtype=torch.long, device=device), hidden)
            last = output[-1]
    return out.tolist()


def sample_ids(model, vocab, prompt_ids: list[int], words: int, samples: int = 1, seed: int = 1,
               sampling: Sampling | None = None, device=None) -> list[list[int]]:
    """:func:`iter_sample_ids` as a list."""
    return list(iter_sample_ids(model, vocab, prompt_ids, words, samples, seed, sampling, device))


def render(tokens: list[str]) -> str:
    """Tokens as text: spaces between words, a line break for each ``<eos>``."""
    from lmlow.data.textio import EOS

    lines, line = [], []
    for t in tokens:
        if t == EOS:
            lines.append(" ".join(line))
            line = []
        else:
            line.append(t)
    return "\n".join(lines + [" ".join(line)])


def open_run(run, checkpoint: str | None = None, device: str = "auto"):
    """An :class:`lmlow.runs.LSTMRun` from a run folder (or the run itself)."""
    from lmlow.runs import LSTMRun

    return run if isinstance(run, LSTMRun) else LSTMRun(run, checkpoint, device)


def generate(run, checkpoint: str | None = None, device: str = "auto",
             **options) -> list[list[str]]:
    """Sample continuations from a run (a folder or an open LSTMRun); returns their tokens.
    ``options``: :class:`GenerateOptions` (prompt, tokenised like the corpus, unknown words
    read as ``<unk>``; words; samples; seed) and :class:`Sampling` fields."""
    return list(iter_generate(run, checkpoint, device, **options))


def iter_generate(run, checkpoint: str | None = None, device: str = "auto",
                  **options) -> typing.Iterator[list[str]]:
    """:func:`generate`, one sample's tokens at a time, as they are drawn."""
    opts, sampling = split_options(options, GenerateOptions, Sampling)
    run = open_run(run, checkpoint, device)
    if run.bias_scale != 1.0:           # an LSTMRun opened with lmlow.load(..., bias_scale=)
        if "bias_scale" in options and options["bias_scale"] != run.bias_scale:
            raise LmlowError(f"lmlow.generate: the run was opened with bias_scale "
                             f"{run.bias_scale:g} and bias_scale = {options['bias_scale']!r} "
                             "is given; give one of them")
        sampling = dataclasses.replace(sampling, bias_scale=run.bias_scale)
    for ids in iter_sample_ids(run.model, run.vocab, run.vocab.encode(prompt_words(run, opts)),
                               opts.words, opts.samples, opts.seed, sampling, run.device):
        yield run.vocab.decode(ids)


def prompt_words(run, opts: GenerateOptions) -> list[str]:
    """The prompt's words: split on spaces, or with ``raw`` tokenised as the corpus was."""
    return next(iter(run.tokenise([opts.prompt]))) if opts.raw else opts.prompt.split()


# --------------------------------------------------------------------------- bias sweep

SWEEP_COLUMNS = ["lambda", "Distinct-1", "Distinct-2", "n-gram diversity", "ppl",
                 "KL(unigram || mean p)", "mean ln unigram", "<eos> %", "<unk> %"]


def parse_lambdas(text: str) -> list[float]:
    try:
        values = [float(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise LmlowError(f"--lambdas: expected comma-separated numbers, got {text!r}") from None
    if not values or not all(math.isfinite(v) for v in values):
        raise LmlowError(f"--lambdas: expected comma-separated finite numbers, got {text!r}")
    scales = Sampling.RANGES["bias_scale"]
    if not all(in_range(v, scales) for v in values):
        raise LmlowError(f"--lambdas: {text!r}: each must be in {scales}")
    if len(set(values)) != len(values):
        raise LmlowError(f"--lambdas: {text!r} repeats a value")
    return values


def text_row(samples: list[list[int]], vocab, log_u: np.ndarray) -> dict:
    """Diversity and frequency statistics of token-id samples."""
    from lmlow.analysis.stats import distinct_n, ngram_diversity

    flat = np.array([t for s in samples for t in s], dtype=np.int64)
    return {"Distinct-1": distinct_n(samples, 1), "Distinct-2": distinct_n(samples, 2),
            "n-gram diversity": ngram_diversity(samples),
            "mean ln unigram": float(log_u[flat].mean()) if len(flat) else float("nan"),
            "<eos> %": 100 * float(np.mean(flat == vocab.eos_id)) if len(flat) else float("nan"),
            "<unk> %": 100 * float(np.mean(flat == vocab.unk_id)) if len(flat) else float("nan"),
            "tokens": int(len(flat))}


def bias_sweep(run_dir: Path, out: Path | None = None, force: bool = False,
               corpus: Path | None = None, checkpoint: str | None = None, device: str = "auto",
               **options) -> dict:
    """Kobayashi et al.'s Table 2 for an LSTM run: per lambda, Distinct-1/2 and n-gram diversity
    of sampled texts, and the lambda-scaled model's perplexity and KL(unigram || mean
    prediction) on a split; plus a row for the split's own text cut into pieces of the same
    size. ``options``: :class:`BiasSweepOptions` and :class:`Sampling` fields (not
    ``bias_scale``: the lambdas are the scales). Writes OUT/bias_sweep.md, .csv, .json and
    samples.jsonl (OUT defaults to RUN_DIR/bias-sweep), all or none of them, and returns the
    JSON's content."""
    from lmlow.files import atomic_write_json, atomic_write_text, staged_outputs, to_json
    from lmlow.rundir import RunDir
    from lmlow.sweepdir import refuse_foreign_output
    from lmlow.tables import to_csv

    if isinstance(options.get("lambdas"), str):
        options["lambdas"] = parse_lambdas(options["lambdas"])
    if "bias_scale" in options:
        raise LmlowError("bias-sweep: the lambdas are the bias scales; no --bias-scale")
    opts, sampling = split_options(options, BiasSweepOptions, Sampling,
                                   where="lmlow.generate.bias_sweep")
    trusted = out is not None
    if trusted:
        refuse_foreign_output(out, "bias-sweep")
    out = Path(out) if out else RunDir(run_dir).bias_sweep_dir
    names = ["bias_sweep.md", "bias_sweep.csv", "bias_sweep.json", "samples.jsonl"]
    with staged_outputs(out, names, force, trusted) as stage:
        run = open_run(Path(run_dir), checkpoint, device)
        result, texts, headers, table = _bias_sweep(run, opts, sampling, corpus, run.checkpoint)
        atomic_write_text(stage / names[0], result["markdown"] + "\n")
        atomic_write_text(stage / names[1], to_csv(headers, table))
        atomic_write_json(stage / names[2], result)
        atomic_write_text(stage / names[3], "".join(to_json(t) + "\n" for t in texts))
    return result


def _bias_sweep(run, opts: BiasSweepOptions, sampling: Sampling, corpus, checkpoint):
    """The sweep's rows (with the split's own text as the last), its samples and its table."""
    from lmlow.analysis.frequency import distribution_stats
    from lmlow.analysis.stats import kl_divergence, unigram_distribution
    from lmlow.model import log_unigram
    from lmlow.tables import markdown

    import torch

    vocab, counts = run.vocab, run.vocab.count_array()
    log_u = log_unigram(torch.from_numpy(counts)).double().numpy()
    ids = np.asarray(run.encoded(opts.split, corpus).ids, dtype=np.int64)
    unigram = unigram_distribution(counts)
    stats = distribution_stats(run.model, ids, vocab.eos_id, unigram, opts.lambdas,
                               run.config.eval_batch_size, run.config.bptt, run.device)
    prompt_ids = vocab.encode(opts.prompt.split())
    rows, texts = [], []
    for lam in opts.lambdas:
        scaled = dataclasses.replace(sampling, bias_scale=lam)
        gen = sample_ids(run.model, vocab, prompt_ids, opts.words, opts.samples, opts.seed,
                         scaled, run.device)
        st = stats[lam]
        rows.append({"lambda": lam, **text_row(gen, vocab, log_u),
                     "ppl": exp_loss(st.cross_entropy),
                     "KL(unigram || mean p)": kl_divergence(unigram, st.mean_distribution)})
        texts += [{"lambda": lam, "sample": i, "text": render(vocab.decode(s))}
                  for i, s in enumerate(gen)]
    n, w = opts.samples, opts.words
    human = [ids[i * w:(i + 1) * w].tolist() for i in range(min(n, len(ids) // w))]
    if human:
        rows.append({"lambda": f"{opts.split} text", **text_row(human, vocab, log_u),
                     "ppl": None, "KL(unigram || mean p)": None})
    result = {"run": str(run.run_dir), "checkpoint": checkpoint, "split": opts.split,
              "split_tokens": int(len(ids)), "samples": n, "words": w, "seed": opts.seed,
              "prompt": opts.prompt, "sampling": asdict(sampling), "rows": rows}
    table = [[("" if r[c] is None else r[c]) for c in SWEEP_COLUMNS] for r in rows]
    headers = [f"{opts.split} ppl" if c == "ppl" else c for c in SWEEP_COLUMNS]
    result["markdown"] = markdown(headers, table, digits=4)
    return result, texts, headers, table


def sample_texts(run_dir: Path, checkpoint: str | None = None, device: str = "auto",
                 as_json: bool = False, **options) -> tuple[str | None, typing.Iterator[str]]:
    """``lmlow generate``: a note naming the prompt's words the vocabulary lacks (None if
    all are known) and the printable text of each sample (a JSON line each with ``as_json``),
    yielded as it is drawn; ``options`` as :func:`generate`'s. The options and the run are
    checked before this returns."""
    from lmlow.runs import LSTMRun

    run = LSTMRun(run_dir, checkpoint, device)
    opts, _ = split_options(options, GenerateOptions, Sampling)
    given = prompt_words(run, opts)
    unknown = [w for w in given if w not in run.vocab]
    note = (f"(read as <unk>, not in the vocabulary: {' '.join(unknown[:10])})"
            if unknown else None)

    def texts():
        for i, tokens in enumerate(iter_generate(run, **options)):
            text = render(given + tokens)
            yield (json.dumps({"sample": i, "seed": opts.seed, "prompt": opts.prompt,
                               "tokens": tokens, "text": text}) if as_json
                   else ("\n" if i else "") + text)
    return note, texts()


__all__ = ["BiasSweepOptions", "GenerateOptions", "Sampling", "bias_sweep", "filter_logits",
           "generate", "iter_generate", "iter_sample_ids", "parse_lambdas", "prompt_words",
           "render", "sample_ids", "sample_texts"]
