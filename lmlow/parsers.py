"""The grammar of the ``lmlow`` command: every subcommand's name, description, positional
arguments and flags. Settings flags are generated from the dataclasses that own them
(:func:`lmlow.flags.add_settings`), so their defaults, ranges and help are written once, in
the module that does the work; :mod:`lmlow.cli` dispatches what this parses."""
from __future__ import annotations

import argparse
import re
import textwrap
from pathlib import Path

from lmlow.flags import (add_allow_pickle, add_corpus, add_output, add_run, add_settings,
                         add_threads, at_least, input_path, output_path, path_arg,
                         unk_thresholds)


class Formatter(argparse.HelpFormatter):
    """argparse's help, wrapped at spaces only: a flag (``--map-unseen-inputs``), a path or a
    command line in the help is never split at a hyphen, so it can be copied as printed."""

    def _split_lines(self, text, width):
        return textwrap.wrap(self._whitespace_matcher.sub(" ", text).strip(), width,
                             break_on_hyphens=False, break_long_words=False)

    def _fill_text(self, text, width, indent):
        return textwrap.fill(self._whitespace_matcher.sub(" ", text).strip(), width,
                             initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False, break_long_words=False)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the flag, what is wrong, and where help is; help text
    wrapped by :class:`Formatter`."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str):
        # a value out of its range reads as lmlow's own checks do: "--lr -1: must be > 0"
        message = re.sub(r"^argument (--[\w-]+): (\S+) must be ", r"\1 \2: must be ", message)
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    ap = Parser(prog="lmlow", description="Low-compute word-level LSTM "
                                 "language models: data, in-domain embeddings, AWD-LSTM, KenLM.")
    ap.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    ap.add_argument("--version", action="version", version=f"lmlow {_version()}")
    sub = ap.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return ap


def _prepare_parser(sub) -> None:
    from lmlow.data.prepare import PrepareOptions

    p = sub.add_parser("prepare", help="raw text or documents -> corpus folder (train/valid/test.txt)",
                       description="Tokenise and normalise raw text and split it by document into "
                       "OUT/train.txt, valid.txt, test.txt (one paragraph per line, tokens "
                       "separated by spaces). Streams its input.")
    p.add_argument("inputs", nargs="+", type=input_path, metavar="INPUT",
                   help="text files (documents separated by blank lines, see --documents) or "
                   "folders (one document per file, recursively); - reads standard input")
    add_output(p, "output corpus folder (or a single file with --no-split); not an input "
               "folder nor inside one, whose files are all read",
               json="print the report as JSON")
    add_settings(p, PrepareOptions)
    p.set_defaults(run="prepare")


def _vocab_parser(sub) -> None:
    p = sub.add_parser("vocab", help="build the vocabulary of a corpus (train split only)",
                       description="Build the vocabulary from the training split only, with the "
                       "UNK rule, optionally extended with embedding words. Order: count "
                       "descending, then word.")
    add_corpus(p, "whose words --extend-vocab adds")
    add_output(p, "write the vocabulary here, one word per line", required=False,
               json="print the summary as JSON", force="overwrite --out if it exists")
    p.add_argument("--counts", action="store_true", help="write 'word<TAB>count' lines")
    p.set_defaults(run="vocab")


def _unk_parser(sub) -> None:
    p = sub.add_parser("unk", help="write a copy of a corpus with the UNK rule applied",
                       description="Write OUT/train.txt, valid.txt, test.txt with every word "
                       "whose training count is below K replaced by <unk> (and words in no "
                       "vocabulary too). Training and evaluation take --unk-threshold directly; "
                       "this copy is for other tools.")
    add_corpus(p, "whose words --extend-vocab adds", ("--threshold", "--unk-threshold"))
    add_output(p, "output corpus folder", json="print the per-split UNK report as JSON")
    p.set_defaults(run="unk")


def _stats_parser(sub) -> None:
    p = sub.add_parser("stats", help="rare-word statistics, UNK/OOV rates, embedding coverage",
                       description="Rare-word statistics of a corpus (Kummerfeld et al. 2020, "
                       "Table 4: % of types/tokens occurring five times or fewer), the share of "
                       "types/tokens the UNK rule replaces for several K (Table 3), OOV rates of "
                       "valid/test, and coverage by an embedding file.")
    add_corpus(p, "whose coverage of the corpus to report")
    p.add_argument("--pretrain", type=path_arg, metavar="FILE",
                   help="in-domain pretraining text, for Table 4's Pretrain and Train-in-Pre columns")
    from lmlow.data.stats import THRESHOLDS
    p.add_argument("--thresholds", type=unk_thresholds, default=list(THRESHOLDS), metavar="LIST",
                   help="the K values of the UNK-rule table, comma-separated (default: "
                   f"{','.join(map(str, THRESHOLDS))}; each >= 0, as --unk-threshold)")
    p.add_argument("--json", action="store_true", help="print everything as one JSON object")
    p.set_defaults(run="stats")


def _embed_parser(sub) -> None:
    p = sub.add_parser("embed", help="train in-domain GloVe vectors on text",
                       description="Train GloVe word vectors with Stanford's GloVe tools "
                       "(co-occurrence counts with 1/distance weighting in a symmetric window, "
                       "separate word and context vectors fitted by weighted least squares with "
                       "AdaGrad; written as their sum) on tokenised text read as corpora are read. "
                       "Words seen fewer than --min-count times get no vector; <unk> gets the mean "
                       "of the 100 rarest words' vectors (GloVe's convention), or its own trained "
                       "vector when the text contains <unk>. Writes GloVe text (--out NAME.txt) and "
                       "lmlow's fast, pickle-free NAME.npz beside it.")
    p.add_argument("texts", nargs="+", type=path_arg, metavar="TEXT",
                   help="tokenised text files (e.g. from lmlow prepare --no-split), streamed")
    add_output(p, "output vectors, GloVe text format")
    p.add_argument("--tmp-dir", type=path_arg, default=None,
                   help="where the co-occurrence files go (default: the system's temp folder); "
                   "may be shared by several embeds (a cluster's scratch): a killed one's "
                   "folder is removed by the next, a live one's never")
    from lmlow.glove import GloveConfig
    add_settings(p.add_argument_group("GloVe settings"), GloveConfig)
    p.set_defaults(run="embed")


def _neighbours_parser(sub) -> None:
    p = sub.add_parser("neighbours", aliases=["neighbors"], help="nearest neighbours of words",
                       description="Print the nearest neighbours (cosine similarity) of each "
                       "WORD in a vector file: a quick look at whether vectors make sense.")
    p.add_argument("vectors", type=path_arg, help="vector file (GloVe/word2vec text, .bin, .npz)")
    add_allow_pickle(p)
    p.add_argument("words", nargs="+", metavar="WORD")
    from lmlow.embeddings import NEIGHBOURS
    p.add_argument("-n", "--top", type=at_least(1), default=NEIGHBOURS,
                   help=f"neighbours per word (default: {NEIGHBOURS}; >= 1)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(run="neighbours")


def _train_parser(sub) -> None:
    from lmlow import recommendation
    from lmlow.config import PRESETS, preset_help

    p = sub.add_parser("train", help="train an AWD-LSTM language model into a run folder",
                       description="Train an AWD-LSTM on CORPUS into --out RUN_DIR (config.json, "
                       "vocab.txt, metrics.jsonl, best.pt, last.pt). Settings come from the "
                       "defaults (Merity et al.'s PTB model), then --preset, then --config FILE "
                       "(TOML or JSON with the names below, underscores for dashes), then flags.",
                       epilog=f"What the converged tables recommend: "
                       f"{recommendation.command('data/ptb', 'vectors.txt', 'runs/ours')}. "
                       f"{recommendation.summary()}")
    p.add_argument("corpus", nargs="?", type=path_arg, help="corpus folder (with --resume: only if "
                   "the run's corpus moved, its new place, checked against the run's fingerprint)")
    p.add_argument("--out", type=output_path, metavar="RUN_DIR", help="run folder to create")
    p.add_argument("--resume", type=path_arg, metavar="RUN_DIR",
                   help="continue a stopped run from RUN_DIR/last.pt (budget flags may be raised)")
    p.add_argument("--config", type=path_arg, metavar="FILE", help="settings file (.toml or .json)")
    p.add_argument("--preset", choices=list(PRESETS), help=preset_help())
    p.add_argument("--force", action="store_true", help="start over in a non-empty --out folder")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--nproc", type=at_least(1), default=1, metavar="N",
                   help="train with N processes on this machine, one per GPU (or CPU processes), "
                   "through torchrun's launcher and DistributedDataParallel; range [1, number of "
                   "GPUs] (CPU processes: N x --threads at most the cores). --batch-size is the global batch and must be a multiple of N; "
                   "--resume needs the N the run was trained with. Several machines: run "
                   "`torchrun --nnodes ... -m lmlow train ...` yourself (docs/gpus.md)")
    _add_config_args(p)
    p.set_defaults(run="train")


def _ngram_parser(sub) -> None:
    p = sub.add_parser("ngram", help="train a KenLM modified Kneser-Ney n-gram baseline",
                       description="Estimate a modified Kneser-Ney n-gram model with KenLM's "
                       "lmplz on CORPUS/train.txt into --out RUN_DIR (model.arpa, model.bin, "
                       "vocab.txt, config.json), on the same tokens as the LSTM (vocabulary, UNK "
                       "rule, <unk>, one <eos> per line), then print its validation perplexity. "
                       "`lmlow eval` and `lmlow score` take the run like an LSTM run; KenLM "
                       "scores every line from a fresh start (compare with `lmlow eval LSTM_RUN "
                       "--reset-lines`). Example: lmlow ngram data/ptb --order 5 --out runs/ptb-kn5")
    from lmlow.ngram import NgramOptions

    p.add_argument("corpus", type=path_arg, help="corpus folder with train/valid/test.txt")
    add_output(p, "run folder to create", force="replace an existing run in --out")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    add_settings(p, NgramOptions)
    p.set_defaults(run="ngram")


def _eval_parser(sub) -> None:
    p = sub.add_parser("eval", help="perplexity of a run on a split (incl./excl. <unk>, by frequency)",
                       description="Perplexity of RUN_DIR's best model on a split: every token "
                       "scored once (the first from a start-of-text <eos>), <eos> counted, "
                       "including and excluding <unk> targets, and by training frequency of the "
                       "target (unseen, 1, 2-5, 6-20, 21-100, >100). With --interpolate, "
                       "the word-by-word mixture of two runs over the same vocabulary.")
    from lmlow.runs import EvalOptions

    add_run(p)
    p.add_argument("--corpus", type=path_arg, help="evaluate on another corpus folder (same vocabulary)")
    add_settings(p, EvalOptions)
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(run="eval")


def _score_parser(sub) -> None:
    p = sub.add_parser("score", help="per-word log-probabilities of the sentences of a file",
                       description="Score every line of FILE (tokenised like the corpus, "
                       "or raw text with --raw) as a sentence from a fresh state, like KenLM's "
                       "full_scores: one JSON object per line with the words (and </s> as "
                       "<eos>), natural-log and log10 probabilities, OOV flags and totals; then "
                       "on stderr the file's perplexity with and without its out-of-vocabulary "
                       "words, as KenLM's query prints them. With --interpolate, the word-by-"
                       "word mixture of two runs over the same vocabulary (an LSTM and its "
                       "n-gram, as a reranker or recogniser combines them).",
                       epilog="Examples: lmlow score runs/ptb nbest.txt  |  lmlow score runs/ptb "
                       "typed.txt --raw  |  lmlow score runs/ptb nbest.txt --interpolate "
                       "runs/ptb-kn5 --weight 0.7  |  lmlow score runs/ptb nbest.txt --ids "
                       "--totals > lm-scores.tsv")
    from lmlow.runs import ScoreOptions

    add_run(p)
    p.add_argument("file", type=input_path, help="text file, one sentence per line; - (or "
                   "/dev/stdin) reads standard input, answering each line as it arrives")
    add_settings(p, ScoreOptions)
    p.add_argument("--totals", action="store_true",
                   help="one tab-separated line per sentence instead of its JSON object: its "
                   "identifier (--ids) or line number, total natural-log and log10 probability "
                   "(<eos> included), tokens (with <eos>) and out-of-vocabulary words; what an "
                   "n-best reranker adds to its acoustic scores (default: no)")
    p.set_defaults(run="score")


def _predict_parser(sub) -> None:
    from lmlow.predict import PredictOptions

    p = sub.add_parser("predict", help="the most probable next words after a context",
                       description="List the most probable next words after a context (the "
                       "start of a line, tokenised like the corpus, or raw with --raw), read "
                       "from a fresh state as `lmlow score` reads a line: what a keyboard would "
                       "suggest. Works with LSTM and n-gram runs and, with --interpolate, "
                       "their mixture. <eos> in the list means the line ends there; "
                       "out-of-vocabulary context words are read as <unk>.",
                       epilog="Examples: lmlow predict runs/ptb the stock market  |  lmlow "
                       "predict runs/ptb --file prefixes.txt --top 5 --json  |  lmlow predict "
                       "runs/ptb the --interpolate runs/ptb-kn5")
    add_run(p)
    p.add_argument("context", nargs="*", metavar="WORD", help="the context's words (none: "
                   "the first word of a line)")
    p.add_argument("--file", type=input_path, help="a file of contexts, one per line (instead "
                   "of WORDs); - reads standard input")
    add_settings(p, PredictOptions)
    p.add_argument("--json", action="store_true", help="print one JSON object per context: "
                   "its words, their OOV flags, and the next words with prob and logprob "
                   "(natural log)")
    p.set_defaults(run="predict")


def _sweep_parser(sub) -> None:
    from lmlow.slurm import SlurmOptions
    from lmlow.sweep import SweepOptions

    p = sub.add_parser("sweep", help="train a grid of configurations (one run folder each)",
                       description="Train every configuration of a grid, for each seed, as "
                       "ordinary `lmlow train` runs in SWEEP_DIR/CONFIG.seedN. Finished runs are "
                       "skipped and interrupted ones resumed (with the precision, device, threads "
                       "and budget this command gives; nothing else may differ), so the same "
                       "command continues a sweep. Grids (Kummerfeld et al. 2020): table1 (the 20 valid tying/"
                       "freezing/pretraining combinations), six (section 3's six), unk (six x "
                       "K, --values 0,1,2,5), pretrain (six x each --embeddings file), datasize "
                       "(six x training fractions, --values 0.25,0.5,1), or a TOML file with "
                       "[runs.NAME] tables of train settings. Any train flag after the options "
                       "applies to every run, except: a named grid refuses those its "
                       "configurations set themselves (--tie, --init, --freeze-input, "
                       "--freeze-output; unk's --unk-threshold, datasize's --train-fraction; "
                       "--unigram adds the unigram bias), and a grid file's run table wins over "
                       "the flags for the keys it sets (an invalid flag value is refused "
                       "either way).",
                       epilog="Example: lmlow sweep data/ptb --grid six --out sweeps/ptb-six "
                       "--embeddings vectors/ptb.200d.txt --seeds 1,2,3 --max-time 5")
    p.add_argument("corpus", type=path_arg, help="corpus folder (with --status or --cancel: the "
                   "sweep folder)")
    p.add_argument("--out", type=output_path, help="sweep folder (created)")
    add_settings(p, SweepOptions)
    p.add_argument("--dry-run", action="store_true",
                   help="print the `lmlow train` commands, one per line (for another scheduler, "
                   "GNU parallel), after the checks the sweep makes (corpus, vectors, a "
                   "changed setting), and run or write nothing")
    p.add_argument("--status", action="store_true", help="print every run's state (finished, "
                   "running on which job/node, pending, failed with its log's last lines, "
                   "stopped, not started or submitted) from the run folders, how their last "
                   "training ended, and the scheduler")
    p.add_argument("--cancel", action="store_true", help="cancel the sweep's queued and running "
                   "SLURM tasks (runs keep their last.pt; the sweep command resumes them)")
    add_settings(p.add_argument_group("SLURM (refused without --executor slurm; each task "
                                      "trains one run)"),
                 SlurmOptions)
    from lmlow.config import defaults

    preset = SweepOptions().preset        # a sweep's runs start from it, not the paper's
    _add_config_args(p, skip=("embeddings", "seed"), defaults=defaults(preset),
                     heading=f"settings of every run (default: the {preset} preset's values; "
                     "--preset changes them)")
    p.set_defaults(run="sweep")


def _sweep_task_parser(sub) -> None:
    p = sub.add_parser("sweep-task", help="one task of a SLURM sweep (the job script runs it)",
                       description="Train the INDEX-th run folder listed in RUNS_FILE of SWEEP_DIR "
                       "(new, resumed, or nothing if finished), passing SIGTERM on and requeueing "
                       "itself on SIGUSR1 (the time limit is near). `lmlow sweep --executor slurm` "
                       "writes job scripts that call it.")
    p.add_argument("sweep_dir", type=path_arg)
    p.add_argument("runs_file", type=path_arg)
    p.add_argument("index", type=at_least(0))
    p.add_argument("--gpus", type=at_least(0), default=0, help="GPUs of the task (>1: --nproc)")
    p.add_argument("--threads", type=at_least(1), help="CPU cores of the task: the run's --threads "
                   "(with --gpus N above 1, each process's is 1/N of them)")
    p.set_defaults(run="sweep-task")


def _report_parser(sub) -> None:
    p = sub.add_parser("report", help="results table and learning curves of a sweep",
                       description="Write SWEEP_DIR/results.md, results.csv and results.json (one "
                       "row per configuration: its embedding roles, parameters, valid/test "
                       "perplexity of the best checkpoints as mean and sd over seeds, tokens/s, "
                       "minutes; worst first, as in the paper's Table 1, with a warning where rows are "
                       "over different tokens) and curves.png (the validation curves of all "
                       "runs).")
    p.add_argument("sweep_dir", type=path_arg, help="sweep folder")
    p.add_argument("--baseline", type=path_arg, action="append", default=None,
                   help="a run folder (e.g. `lmlow ngram` output) added as a row; give it once per "
                   "baseline (e.g. one 5-gram per --train-fraction)")
    p.add_argument("--paired", metavar="CONFIG",
                   help="a configuration of the sweep (e.g. standard) to compare every other with, "
                   "seed by seed: the difference per seed, its mean, the margin (the half-width "
                   "of the 95%% t-interval of the differences, at least 0.5%% of the perplexity; "
                   "with one seed 2%%) and a verdict: better, worse or no clear difference; in a grid of "
                   "groups (ours.K2, ours.data0.5) against CONFIG of the same group (standard.K2) "
                   "(a section of results.md, a `paired` entry per row of results.json) "
                   "(default: none)")
    p.add_argument("--map-unseen-inputs", action="store_true",
                   help="score the runs of every untied configuration whose input rows "
                   "trained from --init glove vectors as `lmlow eval --map-unseen-inputs` does "
                   "(the others as trained; a *scored with* column says which); with the "
                   "recommendation's flags (README) a sweep is scored as it scores its model "
                   "(default: no)")
    p.add_argument("--map-unseen-outputs", action="store_true",
                   help="the same for the untied configurations whose output rows trained from "
                   "--init glove-output vectors, as `lmlow eval --map-unseen-outputs` does "
                   "(default: no)")
    add_threads(p, "the runs it scores (a run's evaluation not yet cached beside it, or "
                "with the maps)")
    p.add_argument("--wait", action="store_true",
                   help="if another lmlow command is writing into SWEEP_DIR (another report of "
                   "it, e.g. from a second queue of runs), wait for it to end instead of "
                   "refusing (default: refuse in one line)")
    p.set_defaults(run="report")


def _analyze_parser(sub) -> None:
    p = sub.add_parser("analyze", help="how an LSTM run's output bias carries word frequency",
                       description="Frequency analyses of RUN_DIR's best model on a split, written "
                       "to OUT/analysis.json with PNG plots: Spearman and Pearson correlation of "
                       "the output bias b with the log-unigram distribution of the training split "
                       "(Kobayashi et al. 2023, Table 3; bias_vs_frequency.png); KL(unigram || "
                       "mean predicted distribution) with and without b (their Table 1; "
                       "prediction_vs_frequency.png is their Fig. 1); the mean log-probability "
                       "of the ground-truth word against its log-unigram probability, binned, with "
                       "all parameters and with b dropped (Meister et al. 2023, Fig. 4; "
                       "logprob_vs_frequency.png); and, for a run trained with --track-frequency, "
                       "the curves of frequency.jsonl (Meister Fig. 1 and Figs. 13-14; "
                       "frequency_curves.png).",
                       epilog="Example: lmlow analyze runs/ptb-unigram --split valid")
    from lmlow.analysis.commands import AnalyzeOptions

    add_run(p, "LSTM run folder")
    add_settings(p, AnalyzeOptions)
    p.add_argument("--corpus", type=path_arg, help="read the split from another corpus folder")
    add_output(p, "output folder (default: RUN_DIR/analysis)", required=False,
               json="print the summary numbers as JSON",
               force="overwrite an earlier analysis in --out")
    p.set_defaults(run="analyze")


def _compare_parser(sub) -> None:
    p = sub.add_parser("compare", help="learning efficiency of runs: area under the learning curve",
                       description="Compare the validation learning curves (metrics.jsonl) of "
                       "runs: the area under the curve by the trapezoidal rule divided by the "
                       "interval's length (Meister et al. 2023's ALC; the curve's mean value, so "
                       "lower is better for loss and perplexity) over the first --steps updates, "
                       "over all updates and over wall-clock time, and the final and best "
                       "validation perplexity. Curves start at the first evaluation: train with "
                       "--track-frequency (which also validates the untrained model at update 0) "
                       "and --eval-every N for dense curves. Prints a Markdown table.",
                       epilog="Example: lmlow compare runs/ptb-unigram runs/ptb-zero --steps 1000 "
                       "--out experiments/frequency/compare")
    from lmlow.analysis.commands import CompareOptions

    p.add_argument("runs", nargs="+", type=path_arg, metavar="RUN_DIR", help="run folders")
    add_settings(p, CompareOptions)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="print CSV instead of Markdown")
    fmt.add_argument("--json", action="store_true", help="print JSON (with the curves)")
    p.add_argument("--out", type=output_path, metavar="DIR",
                   help="also write DIR/compare.md, compare.csv, compare.json, curves.png "
                   "(validation perplexity against updates and minutes) and, for runs trained "
                   "with --track-frequency, frequency_curves.png (their frequency.jsonl)")
    p.add_argument("--force", action="store_true", help="overwrite files in --out")
    p.set_defaults(run="compare")


def _generate_parser(sub) -> None:
    p = sub.add_parser("generate", help="sample text from an LSTM run",
                       description="Sample text from RUN_DIR's best model: the next-word "
                       "distribution is softmax((W h + LAMBDA b) / T) with b the output bias, "
                       "then top-k, then top-p (nucleus) filtering. Generation starts after "
                       "<eos> (the start of a text) and the prompt; <eos> is printed as a line "
                       "break. The same --seed gives the same text; sample i is the same "
                       "whatever --samples is.",
                       epilog="Example: lmlow generate runs/ptb --prompt 'the company said' "
                       "--words 40 --top-p 0.9 --seed 3 --samples 2")
    from lmlow.generate import GenerateOptions, Sampling

    add_run(p, "LSTM run folder")
    add_settings(p, GenerateOptions)
    add_settings(p.add_argument_group("sampling"), Sampling)
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per sample (sample, seed, tokens, text)")
    p.set_defaults(run="generate")


def _export_parser(sub) -> None:
    p = sub.add_parser("export", help="a run's model as one file PyTorch alone runs",
                       description="Write one step of RUN_DIR's model, as evaluation runs it, "
                       "as a torch.export program (.pt2) that torch.export.load runs without "
                       "lmlow: step(ids, *state) reads one word id per line (any number of lines "
                       "at once) and gives the natural-log probabilities of the next word and "
                       "the new state (an LSTM's h and c, a Transformer's memory and how much of "
                       "it is filled); the file also holds the vocabulary (vocabulary.txt), the "
                       "ids of <eos> and <unk> and the state's shapes (lmlow.json). The numbers "
                       "are lmlow score's (docs/training.md).",
                       epilog="Example: lmlow export runs/ptb --out ptb.pt2 --map-unseen-outputs")
    from lmlow.runs import ModelOptions

    add_run(p, "LSTM or Transformer run folder", device=False)           # exported for the CPU, in fp32
    add_output(p, "the file to write (.pt2)", force="overwrite --out if it exists")
    add_settings(p, ModelOptions, skip=("interpolate", "weight"))
    p.set_defaults(run="export")


def _bias_sweep_parser(sub) -> None:
    p = sub.add_parser("bias-sweep", help="diversity and perplexity as the output bias is scaled",
                       description="Kobayashi et al. (2023) Table 2 for an LSTM run: for each "
                       "LAMBDA, sample --samples texts of --words tokens with logits W h + LAMBDA "
                       "b and measure Distinct-1 and Distinct-2 (unique n-grams / all n-grams, "
                       "within samples, pooled), n-gram diversity (the product of Distinct-n for "
                       "n = 2, 3, 4), the mean ln unigram probability and the <eos> and <unk> "
                       "shares of the sampled tokens; and the perplexity and KL(unigram || mean "
                       "prediction) of the LAMBDA-scaled model on --split. A last row measures "
                       "the split's own text cut into pieces of the same size. Writes "
                       "OUT/bias_sweep.md, .csv, .json and samples.jsonl and prints the table.",
                       epilog="Example: lmlow bias-sweep runs/ptb --lambdas 0,0.25,0.5,0.75,1 "
                       "--samples 100 --words 100 --top-p 0.9")
    from lmlow.generate import BiasSweepOptions, Sampling

    add_run(p, "LSTM run folder")
    add_settings(p, BiasSweepOptions)
    add_settings(p.add_argument_group("sampling"), Sampling, skip=("bias_scale",))
    p.add_argument("--corpus", type=path_arg, help="read the split from another corpus folder")
    add_output(p, "output folder (default: RUN_DIR/bias-sweep)", required=False,
               json="print the result as JSON", force="overwrite an earlier sweep in --out")
    p.set_defaults(run="bias-sweep")


COMMANDS = (_prepare_parser, _vocab_parser, _unk_parser, _stats_parser, _embed_parser, _neighbours_parser, _train_parser, _ngram_parser, _eval_parser, _score_parser, _predict_parser, _sweep_parser, _sweep_task_parser, _report_parser, _analyze_parser, _compare_parser, _generate_parser, _bias_sweep_parser, _export_parser)


def _add_config_args(p: argparse.ArgumentParser, skip: tuple[str, ...] = (),
                     defaults: dict | None = None,
                     heading: str = "settings (default: Merity et al.'s PTB values; presets "
                                    "change some)") -> None:
    """One flag per Config field: the dataclass is the single source of truth; ``defaults``:
    the values shown where a command starts from a preset (a sweep's runs)."""
    from lmlow.config import Config

    add_settings(p.add_argument_group(heading), Config, skip=("corpus", "preset", *skip),
                 defaults=defaults)


def _version() -> str:
    from lmlow import __version__
    return __version__


