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

import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from lmlow.errors import LmlowError


@dataclass
class Sampling:
    temperature: float = 1.0   # 0: greedy
    top_k: int = 0             # 0: all words
    top_p: float = 1.0         # 1: all words
    bias_scale: float = 1.0    # lambda in W h + lambda b
    no_unk: bool = False       # never sample <unk>

    # beyond these the logits overflow to inf/NaN in fp32 (a temperature of 1e-300, a bias
    # scale of 1e308): refused instead of sampling garbage
    TEMPERATURE = (0.01, 100.0)
    BIAS_SCALE = (-10.0, 10.0)

    def validate(self) -> "Sampling":
        lo, hi = self.TEMPERATURE
        if not (self.temperature == 0 or lo <= self.temperature <= hi):
            raise LmlowError(f"--temperature {self.temperature:g}: must be 0 (greedy) or in "
                             f"[{lo:g}, {hi:g}]")
        if self.top_k < 0:
            raise LmlowError("--top-k must be >= 0 (0: no limit)")
        if not 0 < self.top_p <= 1:
            raise LmlowError("--top-p must be in (0, 1]")
        lo, hi = self.BIAS_SCALE
        if not (math.isfinite(self.bias_scale) and lo <= self.bias_scale <= hi):
            raise LmlowError(f"--bias-scale {self.bias_scale:g}: must be in [{lo:g}, {hi:g}] "
                             "(Kobayashi et al.'s lambda: 1 as trained, 0 no bias)")
        return self


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
        drop_sorted = before >= top_p               # the first word is never dropped
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, -math.inf)
    return logits


def sample_generators(seed: int, n: int):
    """One torch generator per sample, seeded from (seed, index)."""
    import torch

    states = [np.random.SeedSequence([seed, i]).generate_state(1)[0] for i in range(n)]
    return [torch.Generator().manual_seed(int(s)) for s in states]


def sample_ids(model, vocab, prompt_ids: list[int], words: int, samples: int = 1, seed: int = 1,
               sampling: Sampling | None = None, device=None) -> list[list[int]]:
    """``samples`` continuations of ``words`` token ids each, after ``<eos>`` + ``prompt_ids``."""
    import torch

    sampling = (sampling or Sampling()).validate()
    if words < 0 or samples < 1:
        raise LmlowError("--words must be >= 0 and --samples >= 1")
    device = device or next(model.parameters()).device
    gens = sample_generators(seed, samples)
    model.eval()
    out = np.zeros((samples, words), np.int64)
    with torch.no_grad():
        hidden = model.init_hidden(samples)
        context = torch.tensor([vocab.eos_id, *prompt_ids], dtype=torch.long, device=device)
        output, hidden, _, _ = model(context.unsqueeze(1).expand(-1, samples).contiguous(), hidden)
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


def generate(run, prompt: str = "", words: int = 50, samples: int = 1, seed: int = 1,
             temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0,
             bias_scale: float = 1.0, no_unk: bool = False, checkpoint: str | None = None,
             device: str = "auto") -> list[list[str]]:
    """Sample ``samples`` continuations of ``prompt`` (tokenised like the corpus; unknown
    words read as ``<unk>``) of ``words`` tokens each from a run (a folder or an open
    LSTMRun); returns their tokens."""
    run = open_run(run, checkpoint, device)
    sampling = Sampling(temperature, top_k, top_p, bias_scale, no_unk)
    ids = sample_ids(run.model, run.vocab, run.vocab.encode(prompt.split()), words, samples, seed,
                     sampling, run.device)
    return [run.vocab.decode(s) for s in ids]


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
    lo, hi = Sampling.BIAS_SCALE
    if not all(lo <= v <= hi for v in values):
        raise LmlowError(f"--lambdas: {text!r}: each must be in [{lo:g}, {hi:g}]")
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


def bias_sweep(run_dir: Path, lambdas, samples: int = 100, words: int = 100, seed: int = 1,
               temperature: float = 1.0, top_k: int = 0, top_p: float = 1.0, prompt: str = "",
               no_unk: bool = False, split: str = "test", corpus: Path | None = None,
               out: Path | None = None, force: bool = False, checkpoint: str = "best",
               device: str = "auto") -> dict:
    """Kobayashi et al.'s Table 2 for an LSTM run: per lambda, Distinct-1/2 and n-gram diversity
    of ``samples`` sampled texts of ``words`` tokens, and the lambda-scaled model's perplexity
    and KL(unigram || mean prediction) on ``split``; plus a row for the split's own text cut
    into pieces of the same size. Writes OUT/bias_sweep.md, .csv, .json and samples.jsonl
    (OUT defaults to RUN_DIR/bias-sweep) and returns the JSON's content."""
    from lmlow.analysis.frequency import distribution_stats
    from lmlow.analysis.stats import kl_divergence, unigram_distribution
    from lmlow.files import atomic_write_json, atomic_write_text, refuse_overwrite, to_json
    from lmlow.model import log_unigram
    from lmlow.rundir import RunDir
    from lmlow.tables import markdown, to_csv

    import torch

    lambdas = parse_lambdas(lambdas) if isinstance(lambdas, str) else [float(x) for x in lambdas]
    if not lambdas:
        raise LmlowError("--lambdas: give at least one value")
    if samples < 1 or words < 1:
        raise LmlowError("--samples and --words must be at least 1")
    run_dir = Path(run_dir)
    out = Path(out) if out else RunDir(run_dir).bias_sweep_dir
    names = ["bias_sweep.md", "bias_sweep.csv", "bias_sweep.json", "samples.jsonl"]
    refuse_overwrite([out / n for n in names], force)
    run = open_run(run_dir, checkpoint, device)
    Sampling(temperature, top_k, top_p, 1.0, no_unk).validate()
    vocab, counts = run.vocab, run.vocab.count_array()
    log_u = log_unigram(torch.from_numpy(counts)).double().numpy()
    ids = np.asarray(run.corpus(corpus).encode(split).ids, dtype=np.int64)
    unigram = unigram_distribution(counts)
    stats = distribution_stats(run.model, ids, vocab.eos_id, unigram, lambdas,
                               run.config.eval_batch_size, run.config.bptt, run.device)
    prompt_ids = vocab.encode(prompt.split())
    rows, texts = [], []
    for lam in lambdas:
        sampling = Sampling(temperature, top_k, top_p, lam, no_unk)
        gen = sample_ids(run.model, vocab, prompt_ids, words, samples, seed, sampling, run.device)
        st = stats[lam]
        rows.append({"lambda": lam, **text_row(gen, vocab, log_u),
                     "ppl": math.exp(st.cross_entropy),
                     "KL(unigram || mean p)": kl_divergence(unigram, st.mean_distribution)})
        texts += [{"lambda": lam, "sample": i, "text": render(vocab.decode(s))}
                  for i, s in enumerate(gen)]
    human = [ids[i * words:(i + 1) * words].tolist() for i in range(min(samples, len(ids) // words))]
    if human:
        rows.append({"lambda": f"{split} text", **text_row(human, vocab, log_u), "ppl": None,
                     "KL(unigram || mean p)": None})
    result = {"run": str(run_dir), "checkpoint": checkpoint, "split": split,
              "split_tokens": int(len(ids)), "samples": samples, "words": words, "seed": seed,
              "prompt": prompt, "sampling": asdict(Sampling(temperature, top_k, top_p, 1.0, no_unk)),
              "rows": rows}
    table = [[("" if r[c] is None else r[c]) for c in SWEEP_COLUMNS] for r in rows]
    headers = [f"{split} ppl" if c == "ppl" else c for c in SWEEP_COLUMNS]
    result["markdown"] = markdown(headers, table, digits=4)
    out.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out / "bias_sweep.md", result["markdown"] + "\n")
    atomic_write_text(out / "bias_sweep.csv", to_csv(headers, table))
    atomic_write_json(out / "bias_sweep.json", result)
    atomic_write_text(out / "samples.jsonl", "".join(to_json(t) + "\n" for t in texts))
    return result


__all__ = ["Sampling", "bias_sweep", "filter_logits", "generate", "parse_lambdas", "render",
           "sample_ids"]
