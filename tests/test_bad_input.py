"""The bad-input table: every case through the real command line, each must end with exit 1
(lmlow's own check) or 2 (argparse's), one line on stderr naming the offending file, line or
flag, no traceback, and (where it had an output) nothing left behind."""
import gzip
import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import cli, write_corpus

# (argv, what the one line must name, a path that must not exist afterwards)
# Placeholders: C corpus, R LSTM run, N n-gram run, V vectors, X nowhere, O a fresh output
# path, F an existing plain file, B a non-UTF-8 corpus, NAN NaN vectors, T a TOML file with
# lr = "fast", U a TOML file with an unknown key, G a malformed grid file, K a pickle, D an
# empty folder, M the corpus with its train split changed, L a link to nothing, W a
# vectors file of words without values, GR a grid file whose run has lr = -1, DR a config file
# with dropout = 1.5, S a sweep folder whose one run (R without its checkpoints) has a damaged
# evaluation, RAW0 R without its corpus's preparation record, RBAD R with a damaged one, CP the
# corpus with a damaged prepare.json, CL the corpus recorded as prepared without --lowercase;
# word lists for --vocab: E blank lines only, SP only <eos> and <unk>;
# P a named pipe; EV a corpus whose valid.txt is empty;
# GZ a folder of documents, one of them a truncated .gz.
CASES = [
    # prepare
    (["prepare", "X/a.txt", "--out", "O"], "X/a.txt: no such file", "O"),
    (["prepare", "C/train.txt", "--out", "F"], "F", None),
    (["prepare", "C/train.txt", "--out", "D", "--no-split", "--force"], "D", None),
    (["prepare", "C/train.txt", "--out", "O", "--valid", "abc"], "'abc'", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--valid", "1.5"], "'1.5'", "O"),
    # a count with a decimal point or an exponent: 1.0 made a valid split of one line
    (["prepare", "C/train.txt", "--out", "O", "--valid", "1.0"], "written as a whole number (1)", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--test", "2e3"], "written as a whole number (2000)", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--test", "1e300"],    # not its 301 digits
     "'1e300': a token count is written as a whole number; a fraction", "O"),
    # an empty split made a corpus every later command refused
    (["prepare", "C/train.txt", "--out", "O", "--valid", "0"], "--valid 0: a corpus needs valid text", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--test", "0.0"], "--test 0: a corpus needs test text", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--tokenizer", "bogus"], "--tokenizer", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--documents", "pages"], "--documents", "O"),
    (["prepare", "B/train.txt", "--out", "O"], "not valid UTF-8", "O"),
    (["prepare", "C/train.txt", "--out", "C"], "train.txt, which is the input", None),
    # nothing left to split: the error names the input and why
    (["prepare", "C/valid.txt", "--exclude", "C/valid.txt", "--out", "O"],
     "C/valid.txt: no text left after tokenisation and filtering (", "O"),
    # vocab, unk, stats
    (["vocab", "X"], "X: no such corpus folder", None),
    (["vocab", "C", "--unk-threshold", "-1"], "--unk-threshold", None),
    (["vocab", "C", "--extend-vocab"], "--extend-vocab needs --embeddings", None),
    (["vocab", "C", "--out", "F"], "exists; pass --force", None),
    # the words alone are read for a vocabulary (their values unparsed: test_embeddings), but
    # a run that loads the vectors refuses NaN, even one that only extends its vocabulary
    (["train", "C", "--out", "O", "--preset", "tiny", "--extend-vocab", "--embeddings", "NAN"],
     "NaN", "O"),
    (["vocab", "C", "--embeddings", "K", "--extend-vocab"], "--allow-pickle", None),
    (["vocab", "C", "--embeddings", "W", "--extend-vocab"], "W:1: 'the' has no values", None),   # 0-d vectors
    (["train", "C", "--out", "O", "--init", "glove", "--embeddings", "W"], "W:1:", "O"),
    (["vocab", "B"], "not valid UTF-8", None),
    (["unk", "C", "--out", "C", "--force"], "must differ from the corpus folder", None),
    (["unk", "C", "--out", "O", "--threshold", "x"], "--threshold", "O"),
    (["stats", "C", "--thresholds=0,-1"], "each K must be >= 0", None),   # a K=-1 row before
    # `--out -` wrote a file or folder named '-' where the Unix habit expects the terminal
    (["vocab", "C", "--out", "-"], "'-' is standard output", None),
    (["train", "C", "--out", "-", "--preset", "tiny"], "'-' is standard output", None),
    # a K above every word's count (once a model of <unk> and <eos>, valid perplexity 1.99)
    (["unk", "C", "--out", "O", "--threshold", "100000000"], "UNK threshold 100000000", "O"),
    (["train", "C", "--out", "O", "--unk-threshold", "100000000"], "every token would be <unk>", "O"),
    # integers past what torch takes (an overflow traceback before)
    (["train", "C", "--out", "O", "--preset", "tiny", "--threads", "100000000000000000000"],
     "--threads 100000000000000000000: must be in [0, 4096]", "O"),
    (["train", "C", "--out", "O", "--preset", "tiny", "--emb-size", "100000000000000000000"],
     "--emb-size 100000000000000000000: must be >= 1 and fit in 64 bits", "O"),
    (["embed", "C/train.txt", "--out", "O/v.txt", "--threads", "9999"], "--threads 9999", "O"),
    (["embed", "C/train.txt", "--out", "O/v.txt", "--tmp-dir", "F"], "F: not a folder", "O"),
    # glove-train's C int: 3e9 epochs wrapped to none, and the random start was written
    (["embed", "C/train.txt", "--out", "O/v.txt", "--epochs", "3000000000"],
     "--epochs 3000000000: must be in [1, 2147483647]", "O"),
    (["embed", "C/train.txt", "--out", "O/v.txt", "--dim", "4294967396"], "--dim", "O"),
    # a model larger than the machine (torch's allocator error, a page long, before): its
    # weights counted before it is made (test_faults has the allocator's own messages)
    (["train", "C", "--out", "O", "--preset", "tiny", "--hidden-size", "100000000"],
     "out of memory: the model has", "O"),
    (["ngram", "C", "--out", "O", "--unk-threshold", "100000000"], "every token would be <unk>", "O"),
    # --vocab: a word list that fixes the vocabulary (W: "the", "of")
    (["vocab", "C", "--vocab", "X/w.txt"], "X/w.txt: no such vocabulary file", None),
    (["vocab", "C", "--vocab", "D"], "D: is a folder, expected a vocabulary file", None),
    (["vocab", "C", "--vocab", "E"], "E: no word in the vocabulary file", None),
    (["stats", "C", "--vocab", "SP"], "SP: no word besides <eos> and <unk>", None),
    (["vocab", "C", "--vocab", "B/train.txt"], "B/train.txt:1: not valid UTF-8", None),
    # a device, where a file is expected: read until memory ran out (the OOM killer) before
    (["vocab", "C", "--vocab", "/dev/zero"], "/dev/zero: not a regular file", None),
    (["vocab", "C", "--embeddings", "/dev/zero", "--extend-vocab"], "/dev/zero: not a regular file", None),
    (["neighbours", "/dev/zero", "the"], "/dev/zero: not a regular file (a device)", None),
    # a run folder where a vector file was expected is called a folder
    (["neighbours", "R", "the"], "R: not a regular file (a folder)", None),
    (["train", "C", "--out", "O", "--config", "/dev/zero"], "/dev/zero: not a regular file", "O"),
    (["stats", "C", "--pretrain", "/dev/zero"], "/dev/zero: not a regular file", None),
    # a text file given as vectors: its first line's words are not values (it read as words
    # with one-value vectors that covered nothing: coverage 0%, no error)
    (["stats", "C", "--embeddings", "C/train.txt"], "C/train.txt:1: ", None),
    (["prepare", "/dev/zero", "--out", "O"], "/dev/zero: a device or socket", "O"),
    (["score", "R", "/dev/zero"], "/dev/zero: a device or socket", None),
    (["predict", "R", "--file", "/dev/zero"], "/dev/zero: a device or socket", None),
    # a pipe (or device: --out /dev/null) where an output goes: the rename replaced the node
    (["vocab", "C", "--out", "P", "--force"], "P: a device, pipe or socket", None),
    (["prepare", "C/train.txt", "--out", "P", "--no-split", "--force"], "P: a device, pipe", None),
    (["embed", "C/train.txt", "--out", "P", "--force"], "P: a device, pipe or socket", None),
    # a folder where a file goes, with --force: a traceback from the rename before
    (["vocab", "C", "--out", "D", "--force"], "D: is a folder, where lmlow writes a file", None),
    (["embed", "C/train.txt", "--out", "D", "--force"], "D: is a folder, where lmlow writes", None),
    (["unk", "C", "--out", "O", "--vocab", "E"], "E: no word", "O"),
    (["train", "C", "--out", "O", "--preset", "tiny", "--vocab", "X/w.txt"],
     "X/w.txt: no such vocabulary file", "O"),
    (["train", "C", "--out", "O", "--preset", "tiny", "--vocab", "W", "--unk-threshold", "2"],
     "--unk-threshold 2 builds one from the training text: give one of them", "O"),
    (["train", "C", "--out", "O", "--preset", "tiny", "--vocab", "W", "--extend-vocab",
      "--embeddings", "V"], "--extend-vocab adds to one built from the training text", "O"),
    (["ngram", "C", "--out", "O", "--vocab", "W", "--unk-threshold", "2"], "give one of them", "O"),
    # the vectors' words have training count 0: any K >= 1 made --extend-vocab add nothing
    (["train", "C", "--out", "O", "--preset", "tiny", "--embeddings", "V", "--extend-vocab",
      "--unk-threshold", "2"], "--unk-threshold 2 makes every word counted fewer", "O"),
    (["vocab", "C", "--embeddings", "V", "--extend-vocab", "--unk-threshold", "1"],
     "give --unk-threshold 0 with it", None),
    (["stats", "C", "--embeddings", "V", "--extend-vocab", "--unk-threshold", "5"],
     "--extend-vocab adds the vectors' words", None),
    (["sweep", "C", "--grid", "six", "--out", "O", "--embeddings", "V", "--preset", "tiny",
      "--vocab", "X/w.txt"], "X/w.txt: no such vocabulary file", "O"),
    (["sweep", "C", "--grid", "unk", "--out", "O", "--embeddings", "V", "--preset", "tiny",
      "--vocab", "W"], "--unk-threshold 1 builds one", "O"),
    # an empty path: Path("") is the current folder (a run's files were written into it),
    # and an empty --vocab was taken for none
    (["train", "C", "--out", "", "--preset", "tiny"], "argument --out: an empty path", None),
    (["train", "C", "--out", "O", "--preset", "tiny", "--vocab", ""],
     "argument --vocab: an empty value", "O"),
    (["stats", "C", "--vocab", ""], "argument --vocab: an empty path", None),
    (["sweep", "C", "--grid", "six", "--out", "O", "--executor", "slurm", "--partition", ""],
     "argument --partition: an empty value", "O"),
    # an output that is an input: the word list replaced the training split; a run's files
    # went among the corpus's splits
    (["vocab", "C", "--out", "C/train.txt", "--force"], "C/train.txt: is the input", None),
    (["vocab", "C", "--out", "W", "--vocab", "W", "--force"], "is the input", None),
    (["train", "C", "--out", "C", "--preset", "tiny", "--force"],
     "holds a corpus (train.txt); a run needs a folder of its own", None),
    (["ngram", "C", "--out", "C", "--force"], "holds a corpus (train.txt)", None),
    # found by fuzzing every flag: an empty list item dropped (--prune 0,,1 pruned bigrams),
    # an input read twice (test lines in train), --no-split's sizes ignored, an empty Path
    # setting named '.', a blank --out made a folder named ' '
    (["ngram", "C", "--out", "O", "--order", "3", "--prune", "0,,1"],
     "--prune '0,,1': expected counts per order", "O"),
    (["stats", "C", "--thresholds", "0,,1"], "an empty item in '0,,1'", None),
    (["prepare", "C/train.txt", "C/./train.txt", "--out", "O"],
     "is the input", "O"),
    (["prepare", "C", "C/train.txt", "--out", "O"], "lies inside the input", "O"),
    (["prepare", "C/train.txt", "C", "--out", "O"], "corpus: holds the input", "O"),
    (["prepare", "C/train.txt", "--out", "O/all.txt", "--no-split", "--valid", "0.2"],
     "--valid sizes a split, and --no-split writes one file", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--exclude", ""], "argument --exclude: an empty",
     "O"),
    (["train", "C", "--out", " ", "--preset", "tiny"], "argument --out: an empty path", None),
    (["stats", "C", "--allow-pickle"], "--allow-pickle lets --embeddings FILE be", None),
    (["sweep", "S", "--status", "--cancel"], "--status and --cancel: give one", None),
    # flags that did nothing: vocab's list settings without the list, --force on a resume
    (["vocab", "C", "--counts"], "--counts: a setting of the word list --out FILE writes", None),
    (["vocab", "C", "--force"], "--force: a setting of the word list", None),
    (["train", "--resume", "R", "--force"], "--force: --resume continues the run in its own", None),
    (["stats", "C", "--thresholds", "1,x"], "--thresholds", None),
    (["stats", "C", "--pretrain", "X/p.txt"], "X/p.txt: no such file", None),
    (["stats", "D"], "missing train.txt", None),
    # embed, neighbours
    (["embed", "X/t.txt", "--out", "O/v.txt"], "X/t.txt: no such file", "O"),
    (["embed", "D", "--out", "O/v.txt"], "D: is a folder, expected a text file (a folder of "
     "documents becomes one with `lmlow prepare", "O"),
    (["embed", "C/train.txt", "--out", "O/v.txt", "--dim", "0"], "--dim", "O"),
    (["embed", "C/train.txt", "--out", "O/v.txt", "--epochs", "0"], "--epochs", "O"),
    (["embed", "C/train.txt", "--out", "O/v.txt", "--window", "-1"], "--window", "O"),
    (["embed", "C/train.txt", "--out", "O/v.txt", "--learning-rate", "nan"], "--learning-rate", "O"),
    (["embed", "C/train.txt", "--out", "O/v.txt", "--min-count", "1000000"], "--min-count", "O"),
    (["embed", "C/train.txt", "--out", "V"], "exists; pass --force", None),
    (["neighbours", "X/v.txt", "the"], "X/v.txt: no such file", None),
    (["neighbours", "K", "the"], "--allow-pickle", None),
    (["neighbours", "V", "the", "-n", "x"], "--top", None),
    # train: settings (every one from the report that found them)
    (["train", "X", "--out", "O", "--preset", "tiny"], "X: no such corpus folder", "O"),
    (["train", "C", "--out", "O", "--lr", "-1"], "--lr -1", "O"),
    # the Transformer's flags (issue 28)
    (["train", "C", "--out", "O", "--arch", "rnn"], "--arch 'rnn'", "O"),
    (["train", "C", "--out", "O", "--preset", "transformer-tiny", "--heads", "0"], "--heads 0", "O"),
    (["train", "C", "--out", "O", "--preset", "transformer-tiny", "--heads", "3"],
     "split into --heads 3 heads", "O"),
    (["train", "C", "--out", "O", "--preset", "transformer-tiny", "--heads", "32"],
     "heads of an even size", "O"),
    (["train", "C", "--out", "O", "--preset", "transformer-tiny", "--context", "0"],
     "--context 0", "O"),
    # a flag only the other backbone reads would do nothing
    (["train", "C", "--out", "O", "--preset", "tiny", "--heads", "2"],
     "--heads 2: only --arch transformer has it", "O"),
    (["train", "C", "--out", "O", "--arch", "lstm", "--context", "64"],
     "--context 64: only --arch transformer", "O"),
    (["train", "C", "--out", "O", "--preset", "transformer-tiny", "--wdrop", "0.5"],
     "--wdrop 0.5: only --arch lstm has it", "O"),
    # ... also from a config file (ignored there without a word), not a run's config.json
    (["train", "C", "--out", "O", "--preset", "tiny", "--config", "HD"],
     "heads.toml: heads = 8: only --arch transformer has it (this run is --arch lstm)", "O"),
    (["train", "C", "--out", "O", "--preset", "transformer-tiny", "--config", "WT"],
     "wdrop.toml: wdrop = 0.3: only --arch lstm has it", "O"),
    (["train", "C", "--out", "O", "--config", "TN"],
     "tie-no.toml: tie = 'no': expected true or false, unquoted", "O"),
    (["sweep", "C", "--grid", "six", "--out", "O", "--embeddings", "V", "--context", "64"],
     "--context 64: only --arch transformer has it, and no run of this grid", "O"),
    (["train", "C", "--out", "O", "--lr", "nan"], "--lr nan", "O"),
    (["train", "C", "--out", "O", "--lr", "inf"], "--lr inf: must be > 0 and finite", "O"),
    # a 400-digit int: math.isfinite's OverflowError was a traceback, for every int flag
    (["train", "C", "--out", "O", "--max-steps", "9" * 400], "must be >= 0 and at most 1e+30", "O"),
    (["stats", "C", "--thresholds", "1," + "9" * 400], "each K must be >= 0 and at most 1e+30", None),
    (["train", "C", "--out", "O", "--lr", "0"], "--lr 0", "O"),
    (["train", "C", "--out", "O", "--clip", "-1"], "--clip -1", "O"),
    (["train", "C", "--out", "O", "--max-steps", "-1"], "--max-steps -1", "O"),
    (["train", "C", "--out", "O", "--max-time", "-3"], "--max-time -3", "O"),
    (["train", "C", "--out", "O", "--eval-every", "-5"], "--eval-every -5", "O"),
    (["train", "C", "--out", "O", "--threads", "-1"], "--threads -1", "O"),
    (["train", "C", "--out", "O", "--dropout", "1.5"], "--dropout", "O"),
    (["train", "C", "--out", "O", "--wdrop", "-0.1"], "--wdrop", "O"),
    (["train", "C", "--out", "O", "--batch-size", "0"], "--batch-size", "O"),
    (["train", "C", "--out", "O", "--layers", "0"], "--layers", "O"),
    (["train", "C", "--out", "O", "--train-fraction", "2"], "--train-fraction", "O"),
    (["train", "C", "--out", "O", "--gamma", "0"], "--gamma", "O"),
    (["train", "C", "--out", "O", "--nonmono", "0"], "--nonmono", "O"),
    (["train", "C", "--out", "O", "--label-smoothing", "1"], "--label-smoothing", "O"),
    (["train", "C", "--out", "O", "--patience", "-2"], "--patience", "O"),
    (["train", "C", "--out", "O", "--seed", "-4"], "--seed", "O"),
    (["train", "C", "--out", "O", "--optimizer", "lbfgs"], "--optimizer", "O"),
    (["train", "C", "--out", "O", "--schedule", "linear"], "--schedule", "O"),
    (["train", "C", "--out", "O", "--precision", "fp16", "--device", "cpu"], "--precision fp16", "O"),
    (["train", "C", "--out", "O", "--nproc", "0"], "--nproc", "O"),
    (["sweep", "C", "--grid", "six", "--out", "O", "--executor", "slurm", "--time", "1:xx"],
     "--time 1:xx: not a SLURM time limit", "O"),
    (["sweep", "C", "--status"], "not a sweep folder", None),
    (["sweep", "X/sw", "--status"], "X/sw: no such folder; expected a sweep folder", None),
    (["sweep", "X/sw", "--cancel"], "X/sw: no such folder; expected a sweep folder", None),
    (["sweep", "C", "--cancel"], "C: not a sweep folder", None),
    (["train", "C", "--out", "O", "--preset", "tiny", "--batch-size", "5", "--nproc", "2"],
     "--batch-size 5 cannot be split evenly over --nproc 2", "O"),
    (["train", "C", "--out", "O", "--tie", "maybe"], "--tie", "O"),
    (["train", "C", "--out", "O", "--lr", "fast"], "--lr", "O"),
    (["train", "C", "--out", "O", "--init", "bert"], "--init", "O"),
    (["train", "C", "--out", "O", "--init", "glove"], "--init glove/glove-output needs --embeddings", "O"),
    # vectors nothing reads (no --init glove*, no --extend-vocab): loaded and used for nothing
    (["train", "C", "--out", "O", "--preset", "tiny", "--embeddings", "V"],
     "nothing in this run reads the vectors; add --init glove", "O"),
    (["train", "C", "--out", "O", "--tie", "yes", "--init", "glove-output", "--embeddings", "V"],
     "a tied model has one matrix", "O"),
    (["train", "C", "--out", "O", "--config", "X/c.toml"], "X/c.toml: no such file", "O"),
    (["train", "C", "--out", "O", "--config", "T"], "lr = 'fast'", "O"),
    (["train", "C", "--out", "O", "--config", "U"], "unknown setting 'learning_rate'", "O"),
    # a repeated JSON key: the last won (TOML refused it); a grid's second run of one name
    # dropped the first from the plan
    (["train", "C", "--out", "O", "--config", "DJ"], "dup.json: key 'lr' given twice", "O"),
    (["sweep", "C", "--grid", "DG", "--out", "O", "--preset", "tiny", "--dry-run"],
     "grid.json: key 'a' given twice", "O"),
    # train: inputs and outputs
    (["train", "B", "--out", "O", "--preset", "tiny"], "not valid UTF-8", "O"),
    (["train", "C", "--out", "O", "--preset", "tiny", "--tie", "no", "--init", "glove",
      "--embeddings", "NAN"], "NaN", "O"),
    (["train", "C", "--out", "O", "--preset", "tiny", "--tie", "no", "--init", "glove",
      "--embeddings", "X/v.txt"], "X/v.txt: no such file", "O"),
    (["train", "C", "--out", "O", "--preset", "tiny", "--tie", "no", "--init", "glove",
      "--embeddings", "K"], "--allow-pickle", "O"),
    (["train", "C", "--out", "O", "--preset", "tiny", "--tie", "no", "--init", "glove",
      "--embeddings", "Z"], "covers none of the", "O"),
    (["train", "C", "--out", "R", "--preset", "tiny"], "is not empty", None),
    (["train", "C", "--out", "F", "--preset", "tiny"], "exists and is not a folder", None),
    (["train", "C", "--preset", "tiny"], "--out", None),
    (["train", "--resume", "X"], "X: no such run folder", None),
    (["train", "--resume", "F"], "F: a file, not a run folder", None),
    (["eval", "F"], "F: a file, not a run folder", None),
    (["train", "--resume", "R", "--lr", "1"], "not --lr", None),
    (["train", "--resume", "R", "--device", "tpu"], "--device 'tpu': choose one of", None),  # not "lmlow.resume: device = "
    # the untrained-model path on a trained run: it logged an 'epoch 0' row after the run's
    # epochs and wrote the last model over best.pt
    (["train", "--resume", "R", "--max-epochs", "0"], "--max-epochs 0 saves an untrained model; "
     "--resume continues training: give more than the", None),
    (["train", "--resume", "D"], "no such checkpoint", None),
    (["train", "M", "--resume", "R"], "train.txt is not the one", None),
    # ngram
    (["ngram", "C", "--out", "O", "--order", "9"], "--order", "O"),
    (["ngram", "C", "--out", "O", "--order", "five"], "--order", "O"),
    (["ngram", "C", "--out", "O", "--prune", "0,2,1"], "non-decreasing", "O"),
    (["ngram", "C", "--out", "O", "--memory", "lots"], "--memory", "O"),
    (["ngram", "C", "--out", "O", "--unk-threshold", "-2"], "--unk-threshold", "O"),
    (["ngram", "C", "--out", "N"], "is not empty", None),
    (["ngram", "X", "--out", "O"], "X: no such corpus folder", "O"),
    # eval, score
    (["eval", "X"], "X: no such run folder", None),
    (["eval", "D"], "not a run folder", None),
    (["eval", "R", "--split", "dev"], "--split", None),
    (["eval", "R", "--batch-size", "0"], "--batch-size", None),
    (["eval", "R", "--weight", "0.5"], "--weight needs --interpolate", None),
    (["eval", "R", "--interpolate", "N", "--weight", "2"], "--weight 2", None),
    (["eval", "N", "--checkpoint", "last"], "--checkpoint applies to LSTM runs only", None),
    (["eval", "R", "--corpus", "X"], "X: no such corpus folder", None),
    (["eval", "R", "--corpus", "F"], "F: a file, not a corpus folder", None),   # "no such" before
    (["eval", "R", "--map-unseen-inputs"], "needs a run whose input rows were initialised", None),
    (["eval", "N", "--map-unseen-inputs"], "--map-unseen-inputs applies to LSTM runs only", None),
    (["score", "N", "C/test.txt", "--map-unseen-inputs"], "--map-unseen-inputs applies to LSTM", None),
    (["score", "R", "X/s.txt"], "X/s.txt: no such file", None),
    (["score", "X", "C/test.txt"], "X: no such run folder", None),
    (["score", "R", "C/test.txt", "--weight", "0.5"], "--weight needs --interpolate", None),
    # predict
    (["predict", "X", "the"], "X: no such run folder", None),
    (["predict", "R", "the", "--top", "0"], "--top 0: must be >= 1", None),
    (["predict", "R", "the", "<eos>"], "the context holds <eos>", None),
    (["predict", "R", "the", "--file", "C/test.txt"], "not both", None),
    (["predict", "R", "--file", "X/c.txt"], "X/c.txt: no such file", None),
    (["predict", "R", "--file", "B/train.txt"], "not valid UTF-8", None),
    (["predict", "R", "the", "--weight", "0.5"], "--weight needs --interpolate", None),
    (["predict", "N", "the", "--map-unseen-outputs"], "--map-unseen-outputs applies to LSTM", None),
    (["predict", "R", "the", "--interpolate", "X"], "X: no such run folder", None),
    (["predict", "R", "the", "--interpolate", "R"], "the run being scored itself", None),
    (["eval", "R", "--interpolate", "R/."], "the run being scored itself", None),
    # --raw: text read as the corpus was prepared, from the record the run keeps
    (["score", "RAW0", "C/test.txt", "--raw"], "no record of how its corpus was tokenised", None),
    (["predict", "RAW0", "The", "--raw"], "no record of how its corpus was tokenised", None),
    (["predict", "RBAD", "The", "--raw"], "RBAD/data.json: prepared: not the record", None),
    (["score", "R", "B/train.txt", "--raw"], "not valid UTF-8", None),
    (["train", "CP", "--out", "O", "--preset", "tiny"], "CP/prepare.json: not the record", "O"),
    (["ngram", "CP", "--out", "O"], "CP/prepare.json: not the record", "O"),
    (["unk", "CP", "--out", "O"], "CP/prepare.json: not the record", "O"),
    (["eval", "R", "--corpus", "CL"], "CL: prepared otherwise than the corpus", None),
    (["predict", "R", "--partial"], "--partial: the context has no word being typed", None),
    (["prepare", "C/train.txt", "--out", "O", "--like", "C", "--ptb"], "leave out --ptb", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--like", "X"], "no such corpus folder", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--like", "B"], "no prepare.json", "O"),
    (["prepare", "C/train.txt", "--out", "O", "--like", "CP"], "CP/prepare.json: not the", "O"),
    (["predict", "R", "the", "--ids"], "--ids needs --file", None),
    (["analyze", "R", "--corpus", "CL", "--out", "O"], "CL: prepared otherwise", "O"),
    # sweep, report
    (["sweep", "C", "--grid", "table9", "--out", "O"], "--grid", "O"),
    (["sweep", "C", "--grid", "six", "--out", "O", "--seeds", "1,a"], "--seeds", "O"),
    (["sweep", "C", "--grid", "unk", "--out", "O", "--values", "a,b"], "--values", "O"),
    (["sweep", "C", "--grid", "six", "--out", "O", "--jobs", "0"], "--jobs", "O"),
    (["sweep", "C", "--grid", "G", "--out", "O"], "[runs.NAME]", "O"),
    (["sweep", "C", "--grid", "six", "--out", "O"], "needs --embeddings", "O"),
    # what the runs read, checked before the plan, the logs or a run that does not read it
    (["sweep", "X", "--grid", "six", "--out", "O", "--embeddings", "V", "--preset", "tiny",
      "--max-steps", "1"], "X: no such corpus folder", "O"),
    (["sweep", "C", "--grid", "six", "--out", "O", "--embeddings", "X/v.txt", "--preset", "tiny",
      "--max-steps", "1"], "X/v.txt: no such file", "O"),
    (["sweep", "D", "--grid", "six", "--out", "O", "--embeddings", "V", "--preset", "tiny",
      "--max-steps", "1"], "D: missing train.txt", "O"),
    (["sweep", "C", "--grid", "X/g.toml", "--out", "O"], "X/g.toml: no such file", "O"),
    # a grid file's or --values' value out of range: refused before the plan (each run failed)
    (["sweep", "C", "--grid", "GR", "--out", "O", "--preset", "tiny"],
     "range-grid.toml [runs.a]: lr = -1.0: must be > 0", "O"),
    (["sweep", "C", "--grid", "datasize", "--values", "1.5", "--out", "O", "--embeddings", "V"],
     "--values 1.5: must be in (0, 1]", "O"),
    # a config file's value names the file and key (it named a flag never given: --dropout 1.5)
    (["train", "C", "--out", "O", "--config", "DR"], "dropout.toml: dropout = 1.5: must be", "O"),
    # a combination the file's settings make: the file named beside the flags (it named only
    # "--init", a flag never given)
    (["train", "C", "--out", "O", "--config", "IN", "--preset", "tiny"],
     "init.toml: init = 'glove,unigram')", "O"),
    (["report", "D"], "no finished runs", None),
    (["report", "D", "--threads", "5000"], "--threads: must be in [0, 4096], got 5000", None),
    (["eval", "R", "--threads", "-1"], "--threads: must be at least 0, got -1", None),
    (["report", "X"], "X: no such folder", None),
    (["report", "F"], "F: not a folder", None),
    (["report", "S", "--paired", ""], "--paired '': empty; give the configuration", None),
    (["report", "S"], "eval_best_valid.json: not an evaluation as lmlow writes one", None),
    # analyze, compare, generate, bias-sweep
    (["analyze", "N"], "N: an n-gram run, not an LSTM run", None),
    (["analyze", "R", "--tokens", "-1"], "--tokens", None),
    (["compare", "X"], "X: no such run folder", None),
    (["compare", "R", "--steps", "0"], "--steps", None),
    (["compare", "R", "R"], "given twice", None),
    # a folder with no run, or an n-gram run: it said "D/metrics.jsonl: no validation
    # evaluations (train the run first)"
    (["compare", "D"], "D: not a run folder", None),
    (["compare", "N"], "an n-gram run has no learning curve", None),
    (["generate", "N"], "N: an n-gram run, not an LSTM run", None),
    (["generate", "R", "--top-p", "0"], "--top-p", None),
    (["generate", "R", "--temperature", "-1"], "--temperature", None),
    (["generate", "R", "--words", "-1"], "--words", None),
    (["generate", "R", "--seed", "-1"], "--seed -1", None),       # numpy's traceback before
    (["generate", "R", "--raw"], "--raw: says how to read --prompt", None),   # ignored before
    (["bias-sweep", "R", "--seed", "4294967296"], "--seed 4294967296", None),
    (["bias-sweep", "R", "--lambdas", "1,1"], "--lambdas", None),
    (["bias-sweep", "R", "--lambdas", "1,nan"], "--lambdas", None),
    # an output where the first name that exists is a dangling link (mkdir's "File exists"
    # came out as a traceback from train, ngram, sweep, embed and vocab) or a file; embed
    # refuses it before it trains
    (["train", "C", "--out", "L", "--preset", "tiny"], "L: a symbolic link to", None),
    (["train", "C", "--out", "L/run", "--preset", "tiny"], "L: a symbolic link to", None),
    (["ngram", "C", "--out", "L"], "L: a symbolic link to", None),
    (["sweep", "C", "--grid", "six", "--embeddings", "V", "--preset", "tiny", "--out", "L"],
     "L: a symbolic link to", None),
    (["prepare", "C/train.txt", "--out", "L"], "L: a symbolic link to", None),
    (["unk", "C", "--out", "L"], "L: a symbolic link to", None),
    (["embed", "C/train.txt", "--out", "L/v.txt"], "L: a symbolic link to", None),
    (["vocab", "C", "--out", "L/v.txt"], "L: a symbolic link to", None),
    # the vectors' words without --extend-vocab: nothing read them (the report said "0 from
    # embeddings only", as if they had been added)
    (["vocab", "C", "--embeddings", "V"], "`lmlow vocab` reads the vectors' words only to add", None),
    (["unk", "C", "--out", "O", "--embeddings", "V"], "with --extend-vocab; give both", "O"),
    # a dangling link at the output itself is the user's too (replaced, without --force)
    (["vocab", "C", "--out", "L"], "dangling exists; pass --force to overwrite it", None),
    (["embed", "C/train.txt", "--out", "L"], "dangling exists; pass --force to overwrite it", None),
    (["vocab", "C", "--out", "F/v.txt"], "F: exists and is not a folder", None),
    (["analyze", "R", "--out", "L"], "L: a symbolic link to", None),
    (["export", "N", "--out", "O/m.pt2"], "an n-gram run; its model.bin and model.arpa", "O"),
    (["export", "X", "--out", "O/m.pt2"], "X: no such run folder", "O"),
    (["export", "R", "--out", "O/m.ts"], "O/m.ts: name it NAME.pt2", "O"),
    (["export", "R", "--out", "V"], "V: name it NAME.pt2", None),
    (["analyze", "R", "--out", "F"], "F: exists and is not a folder", None),   # a traceback before
    (["analyze", "R", "--out", "P"], "P: exists and is not a folder", None),
    (["bias-sweep", "R", "--out", "L"], "L: a symbolic link to", None),
    (["compare", "R", "--out", "L"], "L: a symbolic link to", None),
    # outputs the file system refuses in other ways: a name over its 255 bytes, and a folder
    # (/proc) that takes no new entries, whose ENOENT was a traceback before; the folders a
    # command made on the way are removed again
    (["vocab", "C", "--out", "O/" + "x" * 256 + "/v.txt"], "file name too long", "O"),
    (["train", "C", "--out", "O/" + "x" * 256, "--preset", "tiny"], "file name too long", "O"),
    (["prepare", "C/train.txt", "--out", "O/" + "x" * 256], "file name too long", "O"),
    # a name the file system takes, but not with lmlow's temporary suffix: said so, with by how
    # much (it was "File name too long" for a name that is not)
    (["export", "R", "--out", "O/" + "x" * 250 + ".pt2"],
     "bytes too long for the temporary file lmlow writes first", "O"),
    (["export", "R", "--out", "/proc/self/lmlow-test/m.pt2"], "cannot create the folder", None),
    (["ngram", "C", "--out", "/proc/self/lmlow-test"], "cannot create the folder", None),
    (["analyze", "R", "--out", "/proc/self/lmlow-test"], "cannot create the folder", None),
    (["unk", "C", "--out", "/proc/self/lmlow-test", "--threshold", "1"], "cannot create the folder", None),
    # a training split too small for the batch: one line before the run folder existed (it
    # was left behind, with a checkpoint); an n-gram on a corpus without validation tokens
    # left a whole model behind before saying so
    (["train", "C", "--out", "O", "--preset", "tiny", "--batch-size", "1000000"],
     "too few for --batch-size 1000000", "O"),
    (["ngram", "EV", "--out", "O", "--order", "3"], "EV/valid.txt: empty file", "O"),
    # a negative split seed, accepted alone among lmlow's seeds
    (["prepare", "C/train.txt", "--out", "O", "--seed", "-1"], "--seed -1: must be in [0,", "O"),
    # a truncated .gz among prepare's documents (an EOFError traceback before)
    (["prepare", "GZ", "--out", "O"], "GZ/b.txt.gz:1: cannot read", "O"),
    # and inputs whose names are too long (a traceback before)
    (["score", "R", "x" * 300], "file name too long", None),
    (["vocab", "x" * 300], "file name too long", None),
    (["train", "C", "--out", "O", "--config", "x" * 300], "file name too long", "O"),
]


@pytest.fixture(scope="module")
def places(speech_corpus, tmp_path_factory):
    from lmlow.config import build_config
    from lmlow.ngram import train_ngram
    from lmlow.train import train

    root = tmp_path_factory.mktemp("bad")
    run, ngram = root / "run", root / "kn3"
    train(build_config("tiny", corpus=str(speech_corpus), max_epochs=0, threads=1), run, quiet=True)
    train_ngram(speech_corpus, ngram, order=3, quiet=True)
    words = (speech_corpus / "train.txt").read_text().split()[:30]
    vec = root / "v.txt"
    vec.write_text("".join(f"{w} 0.1 0.2 0.3\n" for w in dict.fromkeys(words)))
    foreign = root / "foreign.txt"
    foreign.write_text("zzqx 0.1 0.2 0.3\nqqzx 0.3 0.2 0.1\n")
    nan = root / "nan.txt"
    nan.write_text("the 0.1 0.2 0.3\nof nan 0.2 0.3\n")
    bad = write_corpus(root / "latin1", "caf\xe9 au lait\n", "a b\n", "b a\n")
    (bad / "train.txt").write_bytes("caf\xe9 au lait\n".encode("latin-1"))
    moved = root / "changed"
    shutil.copytree(speech_corpus, moved)
    with open(moved / "train.txt", "a") as f:
        f.write("one more line\n")
    unrecorded, tampered, badly = root / "unrecorded", root / "tampered", root / "badly"
    for copy, prepared in ((unrecorded, None), (tampered, {"tokenizer": "nltk"})):
        shutil.copytree(run, copy, ignore=shutil.ignore_patterns(".lock"))
        data = json.loads((copy / "data.json").read_text())
        data.pop("prepared")                 # the fixture corpus was made by lmlow prepare
        data["corpus"] = str(root / "gone")  # and no corpus to read one from
        (copy / "data.json").write_text(json.dumps(data | ({"prepared": prepared}
                                                           if prepared else {})))
    shutil.copytree(speech_corpus, badly)
    (badly / "prepare.json").write_text('{"tokenizer": 1}\n')
    cased = root / "cased"                   # the same text, recorded as not lowercased
    shutil.copytree(speech_corpus, cased)
    record = json.loads((cased / "prepare.json").read_text())
    (cased / "prepare.json").write_text(json.dumps(record | {"lowercase": False}))
    (root / "lr.toml").write_text('lr = "fast"\n')
    (root / "unknown.toml").write_text("learning_rate = 1\n")
    (root / "grid.toml").write_text("[other]\nx = 1\n")
    (root / "file.txt").write_text("not a folder\n")
    (root / "vectors.kv").write_bytes(b"\x80\x04K\x01.")      # a pickle (of the number 1)
    (root / "empty").mkdir()
    (root / "dangling").symlink_to(root / "gone")
    (root / "words.txt").write_text("the\nof\n")           # words without values
    (root / "gz-docs").mkdir()        # a folder of documents, one a truncated gzip stream
    (root / "gz-docs" / "a.txt").write_text("one document\n")
    (root / "gz-docs" / "b.txt.gz").write_bytes(gzip.compress(b"another document\n")[:-12])
    write_corpus(root / "empty-valid", "a b c\nb c a\n", "", "a b\n")
    (root / "blank.txt").write_text("\n  \n\n")                # a word list without a word
    (root / "specials.txt").write_text("<eos>\n<unk>\n")       # nor one besides the specials
    (root / "range-grid.toml").write_text("[runs.a]\nlr = -1.0\n")
    (root / "dropout.toml").write_text("dropout = 1.5\n")
    (root / "init.toml").write_text('init = "glove,unigram"\n')
    (root / "heads.toml").write_text("heads = 8\ncontext = 64\n")
    (root / "dup.json").write_text('{"lr": -1, "lr": 0.01, "preset": "tiny"}\n')
    (root / "grid.json").write_text('{"runs": {"a": {"tie": true}, "a": {"tie": false}}}\n')
    (root / "wdrop.toml").write_text("wdrop = 0.3\n")
    (root / "tie-no.toml").write_text('tie = "no"\n')             # --tie no's spelling
    pipe = tmp_path_factory.mktemp("pipe") / "out"   # not under root: reading it would block
    os.mkfifo(pipe)
    sweep = root / "damaged-sweep"           # a KeyError traceback in the report before
    shutil.copytree(run, sweep / "standard.seed1", ignore=shutil.ignore_patterns("*.pt", ".lock"))
    (sweep / "standard.seed1" / "eval_best_valid.json").write_text('{"x": 1}\n')
    return {"C": speech_corpus, "R": run, "N": ngram, "V": vec, "NAN": nan, "B": bad,
            "M": moved, "T": root / "lr.toml", "U": root / "unknown.toml", "G": root / "grid.toml",
            "F": root / "file.txt", "K": root / "vectors.kv", "Z": foreign, "D": root / "empty",
            "X": root / "nowhere", "L": root / "dangling",
            "W": root / "words.txt", "EV": root / "empty-valid", "GZ": root / "gz-docs", "E": root / "blank.txt", "SP": root / "specials.txt",
            "P": pipe, "GR": root / "range-grid.toml", "DR": root / "dropout.toml",
            "IN": root / "init.toml", "HD": root / "heads.toml", "WT": root / "wdrop.toml",
            "DJ": root / "dup.json", "DG": root / "grid.json", "TN": root / "tie-no.toml",
            "S": sweep, "RAW0": unrecorded, "RBAD": tampered, "CP": badly, "CL": cased,
            "root": root}


def _snapshot(root) -> dict:
    """Every fixture file's path and content (folders as None): a command that rewrote,
    truncated or appended to a fixture changes it, not only one that added or removed one.
    (Checked: load_vectors made to append a byte to its file fails two cases; comparing
    names, the old check passed them.)"""
    return {str(p.relative_to(root)): (os.readlink(p) if p.is_symlink() else
                                       None if p.is_dir() else p.read_bytes())
            for p in sorted(root.rglob("*")) if not p.name.endswith(".lock")}


def fill(arg: str, places: dict, out) -> str:
    head, _, tail = arg.partition("/")
    if head == "O":
        return str(out / tail) if tail else str(out)
    if head in places and head != "root":
        return str(places[head] / tail) if tail else str(places[head])
    return arg


@pytest.mark.parametrize("argv, names, absent", CASES, ids=[" ".join(c[0])[:60] for c in CASES])
def test_bad_input_is_one_line_and_changes_nothing(argv, names, absent, places, tmp_path, capsys):
    out = tmp_path / "out"
    args = [fill(a, places, out) for a in argv]
    head, sep, rest = names.partition(":")
    names = fill(head, places, out) + sep + rest if sep and " " not in head else names
    before = _snapshot(places["root"])
    code, _, err = cli(*args, capsys=capsys)
    assert code in (1, 2), (code, err)
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert names.lower() in err.lower(), err
    if absent:
        assert not out.exists(), f"{out} was left behind"
    assert _snapshot(places["root"]) == before, "a fixture file changed"


def test_no_traceback_from_the_real_executable(places):
    """The table runs in-process; one case through a real subprocess, as a user would."""
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "train", str(places["C"]), "--out",
                        str(places["root"] / "o"), "--lr", "nan"], capture_output=True, text=True)
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--lr nan: must be > 0 and finite" in r.stderr


def test_gzip_corpus_error_names_the_file(tmp_path, capsys):
    root = write_corpus(tmp_path / "gz", "a b\n", "a\n", "b\n")
    (root / "train.txt").unlink()
    (root / "train.txt.gz").write_bytes(gzip.compress(b"a b\n")[:-6])      # truncated stream
    code, _, err = cli("vocab", root, capsys=capsys)
    assert code == 1 and "train.txt.gz" in err and err.count("\n") == 1, err


def test_a_damaged_evaluation_beside_its_checkpoint_is_measured_again(places, tmp_path):
    """A cached evaluation without its perplexity, where the model is still there, is damaged,
    not a result: measured again and replaced, even when its checkpoint stamp matches (it was
    returned as it was, and the report raised KeyError)."""
    import json

    from lmlow.rundir import RunDir
    from lmlow.runs import evaluation

    run = tmp_path / "run"
    shutil.copytree(places["R"], run, ignore=shutil.ignore_patterns(".lock"))
    first = evaluation(RunDir(run), "valid")
    cache = run / "eval_best_valid.json"
    assert json.loads(cache.read_text()) == first
    cache.write_text(json.dumps({"x": 1, "checkpoint_mtime": first["checkpoint_mtime"]}))
    assert evaluation(RunDir(run), "valid") == first == json.loads(cache.read_text())


def test_an_evaluation_outlives_a_new_mtime_of_the_same_bytes_but_not_other_bytes(places,
                                                                                  tmp_path):
    """A checkout, a copy or a restored backup gives the model file a new mtime and the same
    bytes: its cached evaluation is kept (keyed by the mtime alone, every restored workspace
    measured its runs again, minutes each, and on another CPU rewrote committed evaluations in
    their 7th digit). A record of other bytes, or one with no sha256 (from before it was kept)
    and another mtime, is measured again."""
    import hashlib

    from lmlow.rundir import RunDir
    from lmlow.runs import evaluation

    run = tmp_path / "run"
    shutil.copytree(places["R"], run, ignore=shutil.ignore_patterns(".lock"))
    first = evaluation(RunDir(run), "valid")
    model = RunDir(run).checkpoint(RunDir(run).default_checkpoint())
    cache = run / "eval_best_valid.json"
    assert first["checkpoint_sha256"] == hashlib.sha256(model.read_bytes()).hexdigest()
    assert first["checkpoint_mtime"] == model.stat().st_mtime
    marked = first | {"perplexity": 1234.5}       # a number the model does not give: kept or not
    cache.write_text(json.dumps(marked))
    later = model.stat().st_mtime + 3600
    os.utime(model, (later, later))                # as a checkout leaves it: same bytes
    assert evaluation(RunDir(run), "valid") == marked == json.loads(cache.read_text())
    for stale in (marked | {"checkpoint_sha256": "0" * 64},
                  {k: v for k, v in marked.items() if k != "checkpoint_sha256"}):
        cache.write_text(json.dumps(stale))
        again = evaluation(RunDir(run), "valid")
        assert again == json.loads(cache.read_text())
        assert again["perplexity"] == pytest.approx(first["perplexity"], rel=1e-9)
        assert again["checkpoint_mtime"] == model.stat().st_mtime != first["checkpoint_mtime"]
        assert again["checkpoint_sha256"] == first["checkpoint_sha256"]
