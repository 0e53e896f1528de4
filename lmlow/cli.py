"""The ``lmlow`` command: a thin argparse front. Each subcommand parses, calls one library
function, and prints a table (or JSON). Flags of settings are generated from their dataclasses
(:mod:`lmlow.flags`). Errors are one line; ``--debug`` shows the traceback."""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from lmlow.errors import LmlowError
from lmlow.flags import (add_allow_pickle, add_corpus, add_output, add_run, add_settings, at_least,
                         int_list, settings_from, str_list)


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: the flag, what is wrong, and where help is."""

    def error(self, message: str):
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
    p = sub.add_parser("prepare", help="raw text or documents -> corpus folder (train/valid/test.txt)",
                       description="Tokenise and normalise raw text and split it by document into "
                       "OUT/train.txt, valid.txt, test.txt (one paragraph per line, tokens "
                       "separated by spaces). Streams its input.")
    p.add_argument("inputs", nargs="+", type=Path, metavar="INPUT",
                   help="text files (documents separated by blank lines, see --documents) or "
                   "folders (one document per file, recursively)")
    add_output(p, "output corpus folder (or a single file with --no-split)",
               json="print the report as JSON")
    p.add_argument("--tokenizer", default="whitespace",
                   choices=["whitespace", "spacy", "stanza", "scispacy"],
                   help="whitespace: split on spaces; spacy: spaCy's rule-based English tokenizer "
                   "(no model needed); stanza: Stanford's neural tokenizer (needs its English "
                   "model installed); scispacy: biomedical rules where scispacy installs "
                   "(default: whitespace)")
    p.add_argument("--lowercase", action="store_true", help="lowercase every token")
    p.add_argument("--numbers", action="store_true", help="replace number tokens by N")
    p.add_argument("--strip-punct", action="store_true",
                   help="drop tokens made only of Unicode punctuation (. , ; \" ( %% & #); symbols "
                   "such as $ + = > stay")
    p.add_argument("--ptb", action="store_true",
                   help="PTB-style normalisation: --lowercase --numbers --strip-punct")
    p.add_argument("--valid", default="0.1", help="valid size: a fraction of all tokens (0.1) "
                   "or a token count (80000) (default: 0.1)")
    p.add_argument("--test", default="0.1", help="test size, as --valid (default: 0.1)")
    p.add_argument("--seed", type=int, default=1, help="seed of the document split (default: 1)")
    p.add_argument("--documents", default="auto", choices=["auto", "file", "blank", "line"],
                   help="what a document is in an input file: blank = paragraphs separated by "
                   "blank lines (auto's choice for files), line = each line, file = the whole "
                   "file (auto's choice inside folders)")
    p.add_argument("--dedup", action="store_true",
                   help="drop repeated paragraphs (after tokenisation), keeping the first")
    p.add_argument("--exclude", type=Path, action="append", default=[], metavar="FILE",
                   help="drop paragraphs that appear in FILE (a tokenised text, e.g. another "
                   "corpus's valid.txt and test.txt, to keep pretraining text free of them); "
                   "repeatable")
    p.add_argument("--no-split", action="store_true",
                   help="write everything to the single file --out (e.g. a pretraining text)")
    p.set_defaults(func=cmd_prepare)


def _vocab_parser(sub) -> None:
    p = sub.add_parser("vocab", help="build the vocabulary of a corpus (train split only)",
                       description="Build the vocabulary from the training split only, with the "
                       "UNK rule, optionally extended with embedding words. Order: count "
                       "descending, then word.")
    add_corpus(p, "whose words --extend-vocab adds")
    add_output(p, "write the vocabulary here, one word per line", required=False,
               json="print the summary as JSON", force="overwrite --out if it exists")
    p.add_argument("--counts", action="store_true", help="write 'word<TAB>count' lines")
    p.set_defaults(func=cmd_vocab)


def _unk_parser(sub) -> None:
    p = sub.add_parser("unk", help="write a copy of a corpus with the UNK rule applied",
                       description="Write OUT/train.txt, valid.txt, test.txt with every word "
                       "whose training count is below K replaced by <unk> (and words in no "
                       "vocabulary too). Training and evaluation take --unk-threshold directly; "
                       "this copy is for other tools.")
    add_corpus(p, "whose words --extend-vocab adds", ("--threshold", "--unk-threshold"))
    add_output(p, "output corpus folder", json="print the per-split UNK report as JSON")
    p.set_defaults(func=cmd_unk)


def _stats_parser(sub) -> None:
    p = sub.add_parser("stats", help="rare-word statistics, UNK/OOV rates, embedding coverage",
                       description="Rare-word statistics of a corpus (Kummerfeld et al. 2020, "
                       "Table 4: %% of types/tokens occurring five times or fewer), the share of "
                       "types/tokens the UNK rule replaces for several K (Table 3), OOV rates of "
                       "valid/test, and coverage by an embedding file.")
    add_corpus(p, "whose coverage of the corpus to report")
    p.add_argument("--pretrain", type=Path, metavar="FILE",
                   help="in-domain pretraining text, for Table 4's Pretrain and Train-in-Pre columns")
    p.add_argument("--thresholds", type=int_list, default=[0, 1, 2, 5], metavar="LIST",
                   help="the K values of the UNK-rule table, comma-separated (default: 0,1,2,5)")
    p.add_argument("--json", action="store_true", help="print everything as one JSON object")
    p.set_defaults(func=cmd_stats)


def _embed_parser(sub) -> None:
    p = sub.add_parser("embed", help="train in-domain GloVe vectors on text",
                       description="Train GloVe word vectors with Stanford's GloVe tools "
                       "(co-occurrence counts with 1/distance weighting in a symmetric window, "
                       "separate word and context vectors fitted by weighted least squares with "
                       "AdaGrad; written as their sum) on tokenised text read as corpora are read. "
                       "Words seen fewer than --min-count times get no vector; <unk> gets the mean "
                       "of the 100 rarest words' vectors (GloVe's convention), or its own trained "
                       "vector when the text contains <unk>. Writes GloVe text (--out) and "
                       "lmlow's fast, pickle-free .npz beside it.")
    p.add_argument("texts", nargs="+", type=Path, metavar="TEXT",
                   help="tokenised text files (e.g. from lmlow prepare --no-split), streamed")
    add_output(p, "output vectors, GloVe text format")
    p.add_argument("--tmp-dir", type=Path, default=None,
                   help="where the co-occurrence files go (default: the system's temp folder)")
    from lmlow.glove import GloveConfig
    add_settings(p.add_argument_group("GloVe settings"), GloveConfig)
    p.set_defaults(func=cmd_embed)


def _neighbours_parser(sub) -> None:
    p = sub.add_parser("neighbours", aliases=["neighbors"], help="nearest neighbours of words",
                       description="Print the nearest neighbours (cosine similarity) of each "
                       "WORD in a vector file: a quick look at whether vectors make sense.")
    p.add_argument("vectors", type=Path, help="vector file (GloVe/word2vec text, .bin, .npz)")
    add_allow_pickle(p)
    p.add_argument("words", nargs="+", metavar="WORD")
    p.add_argument("-n", "--top", type=int, default=8, help="neighbours per word (default: 8)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.set_defaults(func=cmd_neighbours)


    """train, ngram, eval, score, sweep, report."""


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
                       f"{recommendation.summary().replace('%', '%%')}")
    p.add_argument("corpus", nargs="?", type=Path, help="corpus folder (with --resume: only if "
                   "the run's corpus moved, its new place, checked against the run's fingerprint)")
    p.add_argument("--out", type=Path, metavar="RUN_DIR", help="run folder to create")
    p.add_argument("--resume", type=Path, metavar="RUN_DIR",
                   help="continue a stopped run from RUN_DIR/last.pt (budget flags may be raised)")
    p.add_argument("--config", type=Path, metavar="FILE", help="settings file (.toml or .json)")
    p.add_argument("--preset", choices=list(PRESETS), help=preset_help())
    p.add_argument("--force", action="store_true", help="start over in a non-empty --out folder")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    p.add_argument("--nproc", type=at_least(1), default=1, metavar="N",
                   help="train with N processes on this machine, one per GPU (or CPU processes), "
                   "through torchrun's launcher and DistributedDataParallel; range [1, number of "
                   "GPUs] (CPU processes: N x --threads at most the cores). --batch-size is the global batch and must be a multiple of N; "
                   "--resume needs the N the run was trained with. Several machines: run "
                   "`torchrun --nnodes ... -m lmlow train ...` yourself (README, GPUs)")
    _add_config_args(p)
    p.set_defaults(func=cmd_train)


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

    p.add_argument("corpus", type=Path, help="corpus folder with train/valid/test.txt")
    add_output(p, "run folder to create", force="replace an existing run in --out")
    p.add_argument("--quiet", action="store_true", help="print nothing but errors")
    add_settings(p, NgramOptions)
    p.set_defaults(func=cmd_ngram)


def _eval_parser(sub) -> None:
    p = sub.add_parser("eval", help="perplexity of a run on a split (incl./excl. <unk>, by frequency)",
                       description="Perplexity of RUN_DIR's best model on a split: every token "
                       "scored once (the first from a start-of-text <eos>), <eos> counted, "
                       "including and excluding <unk> targets, and by training frequency of the "
                       "target (unseen, 1, 2-5, 6-20, 21-100, >100). With --interpolate, "
                       "the word-by-word mixture of two runs over the same vocabulary.")
    add_run(p)
    p.add_argument("--split", default="valid", choices=["train", "valid", "test"])
    p.add_argument("--corpus", type=Path, help="evaluate on another corpus folder (same vocabulary)")
    p.add_argument("--reset-lines", action="store_true",
                   help="start every line from a fresh state, as an n-gram model does")
    p.add_argument("--batch-size", type=at_least(1), help="LSTM runs: evaluation batch size "
                   "(default: the run's; results agree to float rounding)")
    p.add_argument("--interpolate", type=Path, metavar="RUN_DIR2",
                   help="mix RUN_DIR word by word with another run over the same vocabulary "
                   "(e.g. a KenLM n-gram): p = w p_1 + (1 - w) p_2")
    p.add_argument("--weight", type=float, metavar="W",
                   help="with --interpolate: the weight w of RUN_DIR (default: tuned by EM on "
                   "the validation split)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_eval)


def _score_parser(sub) -> None:
    p = sub.add_parser("score", help="per-word log-probabilities of the sentences of a file",
                       description="Score every line of FILE (tokenised like the corpus) as a "
                       "sentence from a fresh state, like KenLM's full_scores: one JSON object "
                       "per line with the words (and </s> as <eos>), natural-log and log10 "
                       "probabilities, OOV flags and totals.")
    add_run(p)
    p.add_argument("file", type=Path, help="text file, one sentence per line")
    p.set_defaults(func=cmd_score)


def _sweep_parser(sub) -> None:
    from lmlow.config import PRESETS

    p = sub.add_parser("sweep", help="train a grid of configurations (one run folder each)",
                       description="Train every configuration of a grid, for each seed, as "
                       "ordinary `lmlow train` runs in SWEEP_DIR/CONFIG.seedN. Finished runs are "
                       "skipped and interrupted ones resumed, so the same command continues a "
                       "sweep. Grids (Kummerfeld et al. 2020): table1 (the 20 valid tying/"
                       "freezing/pretraining combinations), six (section 3's six), unk (six x "
                       "K, --values 0,1,2,5), pretrain (six x each --embeddings file), datasize "
                       "(six x training fractions, --values 0.25,0.5,1), or a TOML file with "
                       "[runs.NAME] tables of train settings. Any train flag after the options "
                       "applies to every run.",
                       epilog="Example: lmlow sweep data/ptb --grid six --out sweeps/ptb-six "
                       "--embeddings vectors/ptb.200d.txt --seeds 1,2,3 --max-time 5")
    p.add_argument("corpus", type=Path, help="corpus folder (with --status or --cancel: the "
                   "sweep folder)")
    p.add_argument("--grid", help="table1, six, unk, pretrain, datasize or FILE.toml")
    p.add_argument("--out", type=Path, help="sweep folder (created)")
    p.add_argument("--preset", default="small", choices=list(PRESETS),
                   help="defaults of every run (default: small)")
    p.add_argument("--embeddings", type=str_list, default=[], metavar="FILE[,FILE...]",
                   help="vectors for pretrained configurations (several for --grid pretrain)")
    p.add_argument("--seeds", type=int_list, default=[1], metavar="LIST",
                   help="comma-separated seeds (default: 1)")
    p.add_argument("--values", type=str_list, default=None, metavar="LIST",
                   help="the unk grid's K values or the datasize grid's fractions, comma-separated")
    p.add_argument("--unigram", action="store_true",
                   help="add the log-unigram output bias init to every configuration (the "
                   "paper's grids do not use it)")
    p.add_argument("--jobs", type=at_least(1), default=1,
                   help="runs at a time; CPU threads are split between them (default: 1)")
    p.add_argument("--dry-run", action="store_true",
                   help="print the `lmlow train` commands, one per line (for another scheduler, "
                   "GNU parallel), and run nothing")
    p.add_argument("--executor", choices=["local", "slurm"], default="local",
                   help="local: run here, --jobs at a time (default); slurm: submit one SLURM job "
                   "array (one task per run not finished or queued) and return")
    p.add_argument("--status", action="store_true", help="print every run's state (finished, "
                   "running on which job/node, pending, failed with its log's last lines, "
                   "stopped) from the run folders and the scheduler")
    p.add_argument("--cancel", action="store_true", help="cancel the sweep's queued and running "
                   "SLURM tasks (runs keep their last.pt; the sweep command resumes them)")
    g = p.add_argument_group("SLURM (--executor slurm; each task trains one run)")
    g.add_argument("--partition", help="partition (sbatch --partition)")
    g.add_argument("--time", help="time limit per task, SLURM's format (e.g. 4:00:00); a run "
                   "that needs longer saves and requeues itself before it")
    g.add_argument("--gpus-per-run", type=at_least(0), default=0, metavar="N",
                   help="GPUs per task (--gres=gpu:N); more than 1 trains with --nproc N (DDP); "
                   "range [0, GPUs per node]")
    g.add_argument("--cpus-per-run", type=at_least(1), metavar="N",
                   help="CPU cores per task (--cpus-per-task; also the run's --threads); range [1, cores "
                   "per node] (default: the partition's)")
    g.add_argument("--mem", help="memory per task (e.g. 16G)")
    g.add_argument("--array-parallelism", type=at_least(1), metavar="N",
                   help="at most N tasks at once (the array's %%N throttle); range [1, inf) (default: no "
                   "limit)")
    g.add_argument("--account", help="account to charge (sbatch --account)")
    g.add_argument("--qos", help="quality of service (sbatch --qos)")
    g.add_argument("--sbatch-arg", action="append", default=[], metavar="ARG",
                   help="an extra sbatch option for the job script, e.g. --sbatch-arg=--constraint=a100 "
                   "(repeatable)")
    g.add_argument("--slurm-setup", action="append", default=[], metavar="LINE",
                   help="a shell line run before each task, e.g. 'module load cuda' or 'source "
                   "venv/bin/activate' (repeatable)")
    _add_config_args(p, skip=("embeddings", "seed"))
    p.set_defaults(func=cmd_sweep)


def _sweep_task_parser(sub) -> None:
    p = sub.add_parser("sweep-task", help="one task of a SLURM sweep (the job script runs it)",
                       description="Train the INDEX-th run folder listed in RUNS_FILE of SWEEP_DIR "
                       "(new, resumed, or nothing if finished), passing SIGTERM on and requeueing "
                       "itself on SIGUSR1 (the time limit is near). `lmlow sweep --executor slurm` "
                       "writes job scripts that call it.")
    p.add_argument("sweep_dir", type=Path)
    p.add_argument("runs_file", type=Path)
    p.add_argument("index", type=at_least(0))
    p.add_argument("--gpus", type=at_least(0), default=0, help="GPUs of the task (>1: --nproc)")
    p.add_argument("--threads", type=at_least(1), help="CPU threads of a new run")
    p.set_defaults(func=cmd_sweep_task)


def _report_parser(sub) -> None:
    p = sub.add_parser("report", help="results table and learning curves of a sweep",
                       description="Write SWEEP_DIR/results.md, results.csv and results.json (one "
                       "row per configuration: its embedding roles, parameters, valid/test "
                       "perplexity of the best checkpoints as mean and sd over seeds, tokens/s, "
                       "minutes; worst first, as in the paper's Table 1) and curves.png (the "
                       "validation curves of all runs).")
    p.add_argument("sweep_dir", type=Path, help="sweep folder")
    p.add_argument("--baseline", type=Path, action="append", default=None,
                   help="a run folder (e.g. `lmlow ngram` output) added as a row; give it once per "
                   "baseline (e.g. one 5-gram per --train-fraction)")
    p.set_defaults(func=cmd_report)


    """analyze, compare, generate, bias-sweep."""


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
    add_run(p, "LSTM run folder")
    p.add_argument("--split", default="valid", choices=["train", "valid", "test"],
                   help="the text the predictions are measured on (default: valid)")
    add_output(p, "output folder (default: RUN_DIR/analysis)", required=False,
               json="print the summary numbers as JSON",
               force="overwrite an earlier analysis in --out")
    p.add_argument("--tokens", type=at_least(0), default=0,
                   help="use only the first N tokens of the split (default: 0 = all)")
    p.add_argument("--bins", type=at_least(1), default=20,
                   help="equal-width log-frequency bins of the binned plots (default: 20)")
    p.add_argument("--corpus", type=Path, help="read the split from another corpus folder")
    p.set_defaults(func=cmd_analyze)


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
    p.add_argument("runs", nargs="+", type=Path, metavar="RUN_DIR", help="run folders")
    p.add_argument("--steps", type=at_least(1), default=None, metavar="N",
                   help="also the ALC over updates 0..N (the curve is interpolated at N; empty "
                   "for a run that stopped before N)")
    p.add_argument("--metric", default="loss", choices=["loss", "ppl"],
                   help="the curve to integrate: validation cross-entropy in nats, or "
                   "perplexity (default: loss)")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--csv", action="store_true", help="print CSV instead of Markdown")
    fmt.add_argument("--json", action="store_true", help="print JSON (with the curves)")
    p.add_argument("--out", type=Path, metavar="DIR",
                   help="also write DIR/compare.md, compare.csv, compare.json, curves.png "
                   "(validation perplexity against updates and minutes) and, for runs trained "
                   "with --track-frequency, frequency_curves.png (their frequency.jsonl)")
    p.add_argument("--force", action="store_true", help="overwrite files in --out")
    p.set_defaults(func=cmd_compare)


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
    add_run(p, "LSTM run folder")
    _add_sampling_args(p)
    p.add_argument("--prompt", default="", metavar="TEXT",
                   help="text to continue, tokenised like the corpus (words the vocabulary "
                   "lacks are read as <unk>; default: none)")
    p.add_argument("--words", type=at_least(0), default=50,
                   help="tokens to generate per sample, <eos> included (default: 50)")
    p.add_argument("--samples", type=at_least(1), default=1, help="number of samples (default: 1)")
    p.add_argument("--bias-scale", type=float, default=1.0, metavar="LAMBDA",
                   help="multiply the output bias by LAMBDA: 1 is the trained model, 0 drops "
                   "the bias (Kobayashi et al. 2023) (default: 1; range [-10, 10])")
    p.add_argument("--json", action="store_true",
                   help="print one JSON object per sample (sample, seed, tokens, text)")
    p.set_defaults(func=cmd_generate)


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
    add_run(p, "LSTM run folder")
    p.add_argument("--lambdas", type=_lambdas, default=[0, 0.25, 0.5, 0.75, 1], metavar="LIST",
                   help="comma-separated bias scales, each in [-10, 10] (default: 0,0.25,0.5,0.75,1)")
    p.add_argument("--samples", type=at_least(1), default=100, help="samples per lambda (default: 100)")
    p.add_argument("--words", type=at_least(1), default=100, help="tokens per sample (default: 100)")
    _add_sampling_args(p)
    p.add_argument("--prompt", default="", metavar="TEXT",
                   help="text every sample continues (default: none, start of a text)")
    p.add_argument("--split", default="test", choices=["train", "valid", "test"],
                   help="split of the perplexity column (default: test)")
    p.add_argument("--corpus", type=Path, help="read the split from another corpus folder")
    add_output(p, "output folder (default: RUN_DIR/bias-sweep)", required=False,
               json="print the result as JSON", force="overwrite an earlier sweep in --out")
    p.set_defaults(func=cmd_bias_sweep)


COMMANDS = (_prepare_parser, _vocab_parser, _unk_parser, _stats_parser, _embed_parser, _neighbours_parser, _train_parser, _ngram_parser, _eval_parser, _score_parser, _sweep_parser, _sweep_task_parser, _report_parser, _analyze_parser, _compare_parser, _generate_parser, _bias_sweep_parser)


def _add_config_args(p: argparse.ArgumentParser, skip: tuple[str, ...] = ()) -> None:
    """One flag per Config field: the dataclass is the single source of truth."""
    from lmlow.config import Config

    g = p.add_argument_group("settings (default: Merity et al.'s PTB values; presets change some)")
    add_settings(g, Config, skip=("corpus", "preset", *skip))


def _lambdas(text: str) -> list[float]:
    from lmlow.generate import parse_lambdas

    try:
        return parse_lambdas(text)
    except LmlowError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--lambdas: ")) from None


def _version() -> str:
    from lmlow import __version__
    return __version__


def _corpus(args):
    from lmlow.data.corpus import Corpus
    from lmlow.embeddings import vector_words

    if args.extend_vocab and not args.embeddings:
        raise LmlowError("--extend-vocab needs --embeddings FILE")
    words = vector_words(args.embeddings, args.allow_pickle) if args.embeddings else None
    corpus = Corpus(args.corpus, args.unk_threshold, words if args.extend_vocab else ())
    return corpus, words


def cmd_prepare(args) -> None:
    from dataclasses import asdict

    from lmlow.data.prepare import parse_size, prepare
    from lmlow.data.tokenize import Normalisation
    from lmlow.tables import markdown

    norm = Normalisation.ptb() if args.ptb else Normalisation(args.lowercase, args.numbers,
                                                              args.strip_punct)
    report = prepare(args.inputs, args.out, tokenizer=args.tokenizer, norm=norm,
                     valid=parse_size(args.valid), test=parse_size(args.test), seed=args.seed,
                     documents=args.documents, dedup=args.dedup, exclude=args.exclude,
                     no_split=args.no_split, force=args.force)
    if args.json:
        print(json.dumps(asdict(report), indent=2))
        return
    print(f"{report.documents} documents, {report.paragraphs} lines, {report.tokens} tokens "
          f"-> {args.out}")
    if args.dedup or args.exclude:
        print(f"removed {report.duplicates_removed} duplicate and {report.excluded_removed} "
              "excluded paragraphs")
    rows = [[s, d["documents"], d["lines"], d["tokens"]] for s, d in report.splits.items()]
    print(markdown(["split", "documents", "lines", "tokens"], rows))


def cmd_vocab(args) -> None:
    from lmlow.files import refuse_overwrite

    if args.out:
        refuse_overwrite([args.out], args.force)
    corpus, _ = _corpus(args)
    vocab = corpus.vocab
    if args.out:
        vocab.save(args.out, with_counts=args.counts)
    train = corpus.counts("train")
    summary = {"vocabulary_size": len(vocab), "unk_threshold": args.unk_threshold,
               "train_types": len(train.counts), "unk_count": vocab.counts[vocab.unk_id],
               "embedding_only_words": sum(1 for w in vocab.words if w not in train.counts
                                           and w not in ("<eos>", "<unk>")),
               "top": vocab.words[:10]}
    if args.json:
        print(json.dumps(summary, indent=2))
        return
    print(f"vocabulary: {len(vocab)} words (K={args.unk_threshold}; {len(train.counts)} word "
          f"types in train; <unk> count {summary['unk_count']}; "
          f"{summary['embedding_only_words']} from embeddings only)")
    print("most frequent:", " ".join(vocab.words[:10]))
    if args.out:
        print(f"wrote {args.out}")


def cmd_unk(args) -> None:
    from dataclasses import asdict

    from lmlow.data.corpus import SPLITS
    from lmlow.files import refuse_overwrite
    from lmlow.tables import markdown

    out = args.out
    refuse_overwrite([out / f"{s}.txt" for s in SPLITS], args.force)
    if out.resolve() == args.corpus.resolve():
        raise LmlowError(f"{out}: --out must differ from the corpus folder")
    corpus, _ = _corpus(args)
    stats = corpus.write_unk_replaced(out)
    if args.json:
        print(json.dumps({s: asdict(st) for s, st in stats.items()}, indent=2))
        return
    rows = [[s, st.tokens, st.replaced_tokens + st.oov_tokens, st.literal_unk,
             100 * st.unk_tokens / st.words if st.words else 0.0] for s, st in stats.items()]
    print(markdown(["split", "tokens (with <eos>)", "replaced", "literal <unk>", "<unk> % of words"],
                   rows))
    print(f"wrote {out}/train.txt, valid.txt, test.txt (K={args.unk_threshold})")


def cmd_stats(args) -> None:
    from lmlow.data.corpus import count_words
    from lmlow.data.stats import corpus_stats, format_stats

    corpus, words = _corpus(args)
    pretrain = count_words(args.pretrain) if args.pretrain else None
    stats = corpus_stats(corpus, pretrain, words, args.thresholds)
    print(json.dumps(stats, indent=2) if args.json else format_stats(stats))


def cmd_embed(args) -> None:
    from lmlow.files import refuse_overwrite
    from lmlow.glove import GloveConfig, save_vectors, train_glove

    cfg = GloveConfig(**settings_from(args, GloveConfig)).validate()
    refuse_overwrite([args.out, args.out.with_suffix(".npz")], args.force)  # before hours of work
    kv, rep = train_glove(args.texts, cfg, work_dir=args.tmp_dir)
    paths = save_vectors(kv, args.out, force=args.force)
    print(f"{rep.vocabulary} words x {cfg.dim} dims from {rep.tokens} tokens "
          f"({rep.cooccurrences} co-occurring pairs); counting {rep.seconds_counting:.0f}s, "
          f"{cfg.resolved_epochs()} epochs {rep.seconds_training:.0f}s (final cost "
          f"{rep.costs[-1] if rep.costs else float('nan'):.4f}); peak memory {rep.peak_memory_mb:.0f} MB")
    print("wrote " + ", ".join(map(str, paths)))


def cmd_neighbours(args) -> None:
    from lmlow.embeddings import load_vectors, neighbours

    kv = load_vectors(args.vectors, args.allow_pickle)
    result = {w: neighbours(kv, w, args.top) for w in args.words}
    if args.json:
        print(json.dumps(result, indent=2))
        return
    for w, near in result.items():
        print(f"{w}: " + (", ".join(f"{n} {s:.2f}" for n, s in near) if near else "(no vector)"))


def _settings(args) -> dict:
    from lmlow.config import Config

    return settings_from(args, Config, skip=("corpus", "preset"))


def cmd_train(args) -> None:
    from lmlow.config import build_config
    from lmlow.rundir import RunDir
    from lmlow.train import resume, train

    settings = _settings(args)
    if args.resume:
        given = {"out": args.out, "config": args.config, "preset": args.preset}
        if args.nproc > 1:
            _check_resumable(args.resume, args.nproc)
            return _launch(args)
        summary = resume(args.resume, quiet=args.quiet, corpus=args.corpus, **settings, **given)
    else:
        if args.out is None:
            raise LmlowError("give --out RUN_DIR (or --resume RUN_DIR)")
        if args.corpus is not None:
            settings["corpus"] = str(args.corpus)
        cfg = build_config(args.preset, args.config, **settings)
        if not cfg.corpus:
            raise LmlowError("give a CORPUS folder (or corpus in --config)")
        if args.nproc > 1:    # what would fail in every process is said once, here
            from lmlow.distributed import World, columns

            columns(World(0, args.nproc), cfg.batch_size)      # a batch that does not split
            if not Path(cfg.corpus).is_dir():
                raise LmlowError(f"{cfg.corpus}: no such corpus folder")
            RunDir(args.out).check_new(args.force, f"use --resume {args.out} to continue it, or ")
            return _launch(args)
        summary = train(cfg, args.out, force=args.force, quiet=args.quiet)
    if not args.quiet and _rank() == 0:
        ppl = summary["best_valid_ppl"]
        print(f"done: {summary['epochs']} epochs, {summary['steps']} updates, "
              f"{summary['train_seconds']:.0f}s; best valid ppl "
              f"{'n/a' if ppl is None else f'{ppl:.2f}'} -> {summary['checkpoint']}")


def _rank() -> int:
    """This process's rank under torchrun (0 alone): only rank 0 reports."""
    from lmlow.distributed import world_from_env
    return world_from_env().rank


def _check_resumable(run_dir: Path, nproc: int) -> None:
    """--resume --nproc N: the run exists, has a checkpoint, and was trained with N processes."""
    from lmlow.checkpoint import load_checkpoint
    from lmlow.distributed import require_processes
    from lmlow.rundir import RunDir

    run = RunDir(run_dir)
    if not run.last.exists():
        raise LmlowError(f"{run.last}: no such checkpoint")
    require_processes(load_checkpoint(run.last), run.last, nproc)


def _launch(args) -> None:
    """``lmlow train ... --nproc N``: the same command in N processes under torchrun."""
    from lmlow.distributed import launch

    if "WORLD_SIZE" in os.environ:
        raise LmlowError("--nproc: already running under torchrun (WORLD_SIZE is set); give "
                         "the number of processes to torchrun only")
    argv, skip = [], False
    for a in args.argv:
        if skip:
            skip = False
        elif a == "--nproc":
            skip = True
        elif not a.startswith("--nproc="):
            argv.append(a)
    code = launch(args.nproc, argv)
    if code:
        e = LmlowError(f"the {args.nproc} training processes ended with exit status {code} "
                       "(the reason is above)")
        e.exit_code = code
        raise e


def cmd_ngram(args) -> None:
    from lmlow.ngram import NgramOptions, NgramRun, train_ngram

    cfg = train_ngram(args.corpus, args.out, **settings_from(args, NgramOptions),
                      force=args.force, quiet=args.quiet)
    if args.quiet:
        return
    ev = NgramRun(args.out).evaluate("valid")
    fallback = " with --discount_fallback" if cfg.discount_fallback else ""
    print(f"done: {cfg.order}-gram{fallback} in {cfg.train_seconds:.0f}s (lmplz peak memory "
          f"{cfg.lmplz_peak_rss_mb} MB); valid ppl {ev.perplexity:.2f} "
          f"({ev.perplexity_excluding_unk:.2f} excluding <unk>) -> {args.out}/model.bin")


def cmd_sweep(args) -> None:
    from lmlow.sweep import ELSEWHERE, dry_run, execute, plan

    if args.status or args.cancel:
        return _sweep_status(args.out or args.corpus, args.cancel)
    if not args.grid or not args.out:
        raise LmlowError("give --grid GRID and --out SWEEP_DIR (or --status / --cancel)")
    if args.executor == "slurm" and args.time:
        from lmlow.slurm import minutes

        minutes(args.time)                     # refused before the plan is written
    extra = {k: v for k, v in _settings(args).items() if k not in ("embeddings", "seed")}
    runs = plan(args.corpus, args.out, args.grid, args.seeds, args.preset, args.embeddings,
                args.values, extra, args.unigram)
    if args.dry_run:
        print("\n".join(dry_run(runs, args.out)))
        return
    if args.executor == "slurm":
        from lmlow.slurm import SlurmOptions, submit

        opts = SlurmOptions(args.partition, args.time, args.gpus_per_run, args.cpus_per_run,
                            args.mem, args.array_parallelism, args.account, args.qos,
                            args.sbatch_arg, args.slurm_setup)
        if submit(runs, args.out, opts) is not None:
            print(f"`lmlow sweep {args.out} --status` shows progress; the same sweep command "
                  "submits what is neither finished nor queued")
        return
    results = execute(runs, args.out, args.jobs, threads=extra.get("threads"))
    failed = [r.folder for r, code in results if code not in (0, ELSEWHERE)]
    if failed:
        raise LmlowError(f"{len(failed)} runs failed ({', '.join(failed[:3])}...); see "
                         f"{args.out}/logs/; the same command retries them")
    elsewhere = sum(code == ELSEWHERE for _, code in results)
    print(f"done{f'; {elsewhere} runs are being trained by another process' if elsewhere else ''};"
          f" `lmlow report {args.out}` writes the table")


def _sweep_status(sweep_dir: Path, cancel: bool) -> None:
    from lmlow.slurm import cancel as cancel_tasks, status
    from lmlow.tables import markdown

    if cancel:
        cancel_tasks(sweep_dir)
    rows = status(sweep_dir)
    cols = ["run", "state", "job", "node", "progress", "detail"]
    print(markdown(cols, [[r[c] for c in cols] for r in rows]))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    print(", ".join(f"{n} {state}" for state, n in counts.items()))


def cmd_sweep_task(args) -> None:
    from lmlow.slurm import run_task

    code = run_task(args.sweep_dir, args.runs_file, args.index, args.gpus, args.threads)
    if code:
        how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
        e = LmlowError(f"the run's `lmlow train` {how}; its output is in {args.sweep_dir}/logs/")
        e.exit_code = code if code > 0 else 128 - code
        raise e


def cmd_report(args) -> None:
    from lmlow.files import read_json
    from lmlow.report import mixed_precision, write_report

    for path in write_report(args.sweep_dir, args.baseline):
        print(f"wrote {path}")
    print((args.sweep_dir / "results.md").read_text())
    mixed = mixed_precision(read_json(args.sweep_dir / "results.json"))
    if mixed:
        print(f"lmlow: warning: {mixed}", file=sys.stderr)


def cmd_eval(args) -> None:
    from lmlow.runs import InterpolatedRun, load
    from lmlow.tables import markdown

    if args.weight is not None and not args.interpolate:
        raise LmlowError("--weight needs --interpolate RUN_DIR2")
    run = load(args.run_dir, args.checkpoint, args.device, batch_size=args.batch_size)
    name = str(args.run_dir)
    if args.interpolate:
        run = InterpolatedRun(run, load(args.interpolate, device=args.device), args.weight,
                              reset_lines=args.reset_lines)
        name = f"{args.run_dir} x {run.weight:.3f} + {args.interpolate} x {1 - run.weight:.3f}"
    ev = run.evaluate(args.split, args.corpus, reset_lines=args.reset_lines)
    if args.json:
        extra = {"interpolate": str(args.interpolate), "weight": run.weight} if args.interpolate else {}
        print(json.dumps(ev.to_dict() | extra))
        return
    print(f"{name} on {args.split}: perplexity {ev.perplexity:.2f} "
          f"({ev.perplexity_excluding_unk:.2f} excluding <unk>); {ev.tokens} tokens, "
          f"{ev.unk_tokens} <unk> targets ({ev.oov_tokens} out of vocabulary)"
          + ("; lines scored independently" if run.lines_independent(args.reset_lines) else ""))
    print(markdown(["training frequency", "tokens", "perplexity"],
                   [[b["bin"], b["tokens"], b["perplexity"]] for b in ev.bins], digits=4))


def cmd_score(args) -> None:
    from lmlow.data.textio import iter_lines
    from lmlow.evaluate import LN10
    from lmlow.runs import load

    run = load(args.run_dir, args.checkpoint, args.device)
    for lineno, tokens in iter_lines(args.file):
        scored = run.score(tokens)
        ln = [p for _, p, _ in scored]
        print(json.dumps({"line": lineno, "words": [w for w, _, _ in scored],
                          "logprob": [round(p, 6) for p in ln],
                          "log10prob": [round(p / LN10, 6) for p in ln],
                          "oov": [o for _, _, o in scored], "total_logprob": round(sum(ln), 6),
                          "total_log10prob": round(sum(ln) / LN10, 6)}))


def _add_sampling_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--temperature", type=float, default=1.0, metavar="T",
                   help="divide the logits by T: below 1 sharper, above 1 flatter; 0 is greedy "
                   "(default: 1; 0 or in [0.01, 100])")
    p.add_argument("--top-k", type=int, default=0, metavar="K",
                   help="sample among the K most probable words only; 1 is greedy (default: 0 = "
                   "all)")
    p.add_argument("--top-p", type=float, default=1.0, metavar="P",
                   help="nucleus sampling: among the most probable words whose probabilities "
                   "add up to P (default: 1 = all)")
    p.add_argument("--no-unk", action="store_true", help="never sample <unk>")
    p.add_argument("--seed", type=int, default=1, help="random seed (default: 1)")


def cmd_analyze(args) -> None:
    from lmlow.analysis import analyze
    from lmlow.files import to_json

    r = analyze(args.run_dir, args.split, args.out, args.tokens, args.bins, args.corpus,
                args.checkpoint or "best", args.device, args.force)
    keys = ["bias_spearman", "bias_pearson", "bias_norm", "bias_kl_unigram", "kl_unigram_avg",
            "kl_unigram_avg_no_bias", "kl_uniform_avg", "kl_uniform_avg_no_bias", "perplexity",
            "perplexity_no_bias"]
    if args.json:
        print(to_json({k: r[k] for k in ["run", "split", "tokens", *keys]}))
        return
    from lmlow.tables import markdown

    print(f"{args.run_dir} ({', '.join(r['init'])} init) on {args.split}, {r['tokens']} tokens:")
    print(markdown(["", "with bias", "bias dropped"], [
        ["KL(unigram || mean prediction)", r["kl_unigram_avg"], r["kl_unigram_avg_no_bias"]],
        ["KL(uniform || mean prediction)", r["kl_uniform_avg"], r["kl_uniform_avg_no_bias"]],
        ["perplexity", r["perplexity"], r["perplexity_no_bias"]]], digits=4))
    print(f"bias vs log unigram: Spearman {r['bias_spearman']:.3f}, Pearson "
          f"{r['bias_pearson']:.3f}; ||b|| {r['bias_norm']:.2f}; KL(unigram || softmax(b)) "
          f"{r['bias_kl_unigram']:.3f}")
    print(f"wrote {args.out or args.run_dir / 'analysis'}/analysis.json and plots")


def cmd_compare(args) -> None:
    from lmlow.analysis import compare, compare_markdown, compare_table, write_compare
    from lmlow.files import to_json
    from lmlow.tables import to_csv

    rows = compare(args.runs, args.steps, args.metric)
    if args.out:
        write_compare(rows, args.out, args.steps, args.metric, args.force)
    if args.json:
        print(to_json(rows))
    elif args.csv:
        print(to_csv(*compare_table(rows, args.steps)), end="")
    else:
        print(compare_markdown(rows, args.steps, args.metric))


def cmd_generate(args) -> None:
    from lmlow.generate import generate, render
    from lmlow.runs import LSTMRun

    run = LSTMRun(args.run_dir, args.checkpoint, args.device)
    words = args.prompt.split()
    unknown = [w for w in words if w not in run.vocab]
    if unknown and not args.json:
        print(f"(read as <unk>, not in the vocabulary: {' '.join(unknown[:10])})", file=sys.stderr)
    samples = generate(run, args.prompt, args.words, args.samples, args.seed, args.temperature,
                       args.top_k, args.top_p, args.bias_scale, args.no_unk)
    for i, tokens in enumerate(samples):
        text = render(words + tokens)
        if args.json:
            print(json.dumps({"sample": i, "seed": args.seed, "prompt": args.prompt,
                              "tokens": tokens, "text": text}))
        else:
            print(("\n" if i else "") + text)


def cmd_bias_sweep(args) -> None:
    from lmlow.files import to_json
    from lmlow.generate import bias_sweep

    r = bias_sweep(args.run_dir, args.lambdas, args.samples, args.words, args.seed,
                   args.temperature, args.top_k, args.top_p, args.prompt, args.no_unk, args.split,
                   args.corpus, args.out, args.force, args.checkpoint or "best", args.device)
    if args.json:
        print(to_json(r))
        return
    print(r["markdown"])
    print(f"wrote {args.out or args.run_dir / 'bias-sweep'}/bias_sweep.md, .csv, .json, samples.jsonl")


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    code = _run(args)
    if "WORLD_SIZE" in os.environ:    # a training process under torchrun
        from lmlow.distributed import end_process
        end_process(code)
    return code


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so its cleanup runs (temporary files removed,
    child programs killed) as for Ctrl-C; not an Exception, so nothing swallows it."""


def _terminate(signum, _frame):
    raise Terminated()


def _run(args) -> int:
    """The command's exit code: its one-line error, if any, printed."""
    import signal

    if args.func not in (cmd_train, cmd_sweep, cmd_sweep_task):    # those stop in their own way
        try:
            signal.signal(signal.SIGTERM, _terminate)
        except ValueError:                   # not the main thread (a library caller)
            pass
    try:
        args.func(args)
    except LmlowError as e:
        if args.debug:
            raise
        rank = f"process {os.environ['RANK']}: " if os.environ.get("RANK", "0") != "0" else ""
        print(f"lmlow: error: {rank}{e}", file=sys.stderr)
        return getattr(e, "exit_code", 1)
    except BrokenPipeError:  # e.g. `lmlow stats ... | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except KeyboardInterrupt:
        print("lmlow: interrupted", file=sys.stderr)
        return 130
    except Terminated:
        print("lmlow: terminated (SIGTERM); nothing partial was kept", file=sys.stderr)
        return 143
    return 0


if __name__ == "__main__":
    sys.exit(main())
