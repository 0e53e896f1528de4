"""The partial freeze (``--freeze-input-rows pretrained``): the rows initialised from vectors
stay bitwise the vectors under every optimiser and mode, the rows without a vector train, and
every run says how many rows of each kind it has. The oracle is the vector file itself, read
through gensim, and the training counts counted here from the text."""
import json
import os
import subprocess
import sys
from collections import Counter

import numpy as np
import pytest
import torch
from conftest import lmlow

from lmlow.checkpoint import load_checkpoint
from lmlow.config import build_config
from lmlow.data.textio import EOS, iter_sentences
from lmlow.embeddings import load_vectors
from lmlow.errors import LmlowError
from lmlow.frozen_rows import FrozenRows
from lmlow.train import Trainer, resume, train


def partial(corpus, vectors, **kw):
    return build_config("tiny", None, corpus=str(corpus), embeddings=str(vectors), tie=False,
                        freeze_input=True, freeze_input_rows="pretrained", init="glove",
                        dropoute=0.0, **kw)


def check_rows(encoder: torch.Tensor, words: list[str], vectors, start: torch.Tensor | None,
               train_counts: Counter):
    """Rows of words in the vector file equal their vectors bit for bit; rows of words
    without one that occur in the training text moved from where they started."""
    kv = load_vectors(vectors)
    held = moved = 0
    for i, w in enumerate(words):
        if w in kv.key_to_index:
            assert torch.equal(encoder[i], torch.tensor(kv[w], dtype=torch.float32)), w
            held += 1
        elif start is not None and train_counts.get(w, 0) > 0:
            assert not torch.equal(encoder[i], start[i]), f"{w}: a row without a vector did not train"
            moved += 1
    assert held > 0 and (start is None or moved > 0)
    return held, moved


@pytest.fixture(scope="module")
def train_counts(speech_corpus):
    c = Counter(t for s in iter_sentences(speech_corpus / "train.txt") for t in s)
    return c


@pytest.mark.parametrize("optimizer,extra", [
    ("sgd", dict(lr=5.0, wdecay=0.05, clip=0.25)),          # SGD's weight decay moves all rows
    ("adam", dict(wdecay=0.05, clip=0.1)),                  # Adam's L2 term is a gradient
    ("adamw", dict(wdecay=0.5, clip=0.0)),                  # decoupled decay, no clipping
], ids=["sgd", "adam", "adamw"])
def test_pretrained_rows_hold_and_the_others_train(optimizer, extra, speech_corpus, vectors,
                                                    train_counts, tmp_path):
    cfg = partial(speech_corpus, vectors, optimizer=optimizer, max_steps=8, **extra)
    t = Trainer(cfg, tmp_path / "r", quiet=True)
    start = t.model.encoder.weight.detach().clone()
    out_start = t.model.decoder.weight.detach().clone()
    t.run()
    check_rows(t.model.encoder.weight.detach(), t.vocab.words, vectors, start, train_counts)
    assert not torch.equal(out_start, t.model.decoder.weight.detach())   # the output trains
    # the last update's gradient (kept until the next) is zero on the held rows, so clipping
    # measured only what trains, as with a whole frozen matrix
    kv = load_vectors(vectors)
    held = torch.tensor([w in kv.key_to_index for w in t.vocab.words])
    grad = t.model.encoder.weight.grad
    assert torch.count_nonzero(grad[held]) == 0 and torch.count_nonzero(grad[~held]) > 0
    best = load_checkpoint(tmp_path / "r" / "best.pt")["model"]["encoder.weight"]
    check_rows(best, t.vocab.words, vectors, None, train_counts)


def test_nt_asgd_averages_keep_the_rows(speech_corpus, vectors, train_counts, tmp_path):
    """Averaged SGD with weight decay: the running average (what validation and best.pt use)
    holds the rows too, not only the raw weights."""
    cfg = partial(speech_corpus, vectors, optimizer="sgd", lr=5.0, wdecay=0.05, max_steps=8,
                  eval_every=4)
    t = Trainer(cfg, tmp_path / "r", quiet=True)
    start = t.model.encoder.weight.detach().clone()
    t.start_averaging()   # as NT-ASGD does when validation stalls
    t.run()
    assert isinstance(t.optimizer, torch.optim.ASGD)
    ax = t.optimizer.state[t.model.encoder.weight]["ax"]
    for m in (t.model.encoder.weight.detach(), ax):
        check_rows(m, t.vocab.words, vectors, start, train_counts)
    best = load_checkpoint(tmp_path / "r" / "best.pt")["model"]["encoder.weight"]
    check_rows(best, t.vocab.words, vectors, start, train_counts)


def test_frozen_rows_against_torch_optimisers_directly():
    """The mechanism alone, on a random matrix, for every optimiser torch has that lmlow
    uses, with weight decay: the held rows end bitwise where they began, the rest moved."""
    torch.manual_seed(0)
    mask = np.array([True, False, True, True, False, False])
    for make in (lambda p: torch.optim.SGD(p, lr=1.0, weight_decay=0.1),
                 lambda p: torch.optim.ASGD(p, lr=1.0, t0=0, lambd=0.0, weight_decay=0.1),
                 lambda p: torch.optim.Adam(p, lr=0.1, weight_decay=0.1),
                 lambda p: torch.optim.AdamW(p, lr=0.1, weight_decay=0.5)):
        w = torch.nn.Parameter(torch.randn(6, 4))
        start = w.detach().clone()
        opt = make([w])
        rows = FrozenRows(w, mask)
        for _ in range(3):
            opt.zero_grad()
            (w ** 2).sum().backward()
            rows.zero_grad()
            assert torch.count_nonzero(w.grad[torch.from_numpy(mask)]) == 0
            opt.step()
            rows.restore(opt)
        assert torch.equal(w.detach()[mask], start[mask])
        assert not torch.equal(w.detach()[~mask], start[~mask])
        if "ax" in opt.state[w]:
            assert torch.equal(opt.state[w]["ax"][mask], start[mask])


@pytest.mark.skipif(not torch.ops.mkldnn._is_mkldnn_bf16_supported(),
                    reason="this CPU has no bf16 (AVX-512 BF16 or AMX)")
def test_rows_hold_under_bf16_autocast(speech_corpus, vectors, train_counts, tmp_path):
    cfg = partial(speech_corpus, vectors, precision="bf16", wdecay=0.05, max_steps=6)
    t = Trainer(cfg, tmp_path / "r", quiet=True)
    start = t.model.encoder.weight.detach().clone()
    t.run()
    check_rows(t.model.encoder.weight.detach(), t.vocab.words, vectors, start, train_counts)


def test_a_resumed_partial_freeze_ends_where_an_uninterrupted_one_does(speech_corpus, vectors,
                                                                        train_counts, tmp_path):
    """AdamW with weight decay, stopped mid-epoch and resumed from last.pt (which has no
    vectors to read: the mask comes from the checkpoint) ends bitwise where one run does."""
    kw = dict(optimizer="adamw", wdecay=0.3, max_epochs=2, seed=4)
    train(partial(speech_corpus, vectors, **kw), tmp_path / "full", quiet=True)
    train(partial(speech_corpus, vectors, max_steps=9, **kw), tmp_path / "part", quiet=True)
    summary = resume(tmp_path / "part", quiet=True, max_steps=0)
    a, b = (load_checkpoint(tmp_path / p / "last.pt") for p in ("full", "part"))
    assert all(torch.equal(a["model"][k], b["model"][k]) for k in a["model"])
    check_rows(b["model"]["encoder.weight"], b["vocab"], vectors, None, train_counts)
    assert torch.equal(torch.as_tensor(a["frozen_input_rows"]), torch.as_tensor(b["frozen_input_rows"]))
    # the resumed run's summary still says what the vectors gave (read from the checkpoint)
    full = json.loads((tmp_path / "full" / "summary.json").read_text())
    assert summary["input_rows"] == full["input_rows"]
    assert summary["coverage_types_pct"] == full["coverage_types_pct"]


def test_two_processes_hold_the_rows(speech_corpus, vectors, train_counts, tmp_path):
    """DDP over gloo, 2 ranks: the rows hold on both (rank 0's checkpoint is checked)."""
    env = {"PATH": "/usr/bin:/bin", "LMLOW_CACHE_DIR": os.environ["LMLOW_CACHE_DIR"],
           "OMP_NUM_THREADS": "1"}
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone",
                        "--nproc-per-node", "2", "-m", "lmlow", "train", str(speech_corpus),
                        "--preset", "tiny", "--max-steps", "6", "--tie", "no", "--freeze-input",
                        "--freeze-input-rows", "pretrained", "--init", "glove", "--embeddings",
                        str(vectors), "--wdecay", "0.1", "--dropoute", "0", "--out",
                        str(tmp_path / "two")], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    ck = load_checkpoint(tmp_path / "two" / "last.pt")
    check_rows(ck["model"]["encoder.weight"], ck["vocab"], vectors, None, train_counts)


def test_every_run_says_which_rows_are_frozen(speech_corpus, vectors, train_counts, tmp_path):
    """Start line, config.json and summary.json give the rows frozen pretrained, frozen
    random and trained, and their share of training tokens (<eos> counted), for the whole
    freeze and the partial one, counted here from the vector file and the text."""
    kv = load_vectors(vectors)
    n_lines = sum(1 for _ in iter_sentences(speech_corpus / "train.txt"))
    base = ["train", speech_corpus, "--preset", "tiny", "--max-steps", "2", "--tie", "no",
            "--freeze-input", "--init", "glove", "--embeddings", vectors]
    whole = lmlow(*base, "--out", tmp_path / "whole", check=True)
    part = lmlow(*base, "--freeze-input-rows", "pretrained", "--out", tmp_path / "part", check=True)
    vocab = (tmp_path / "whole" / "vocab.txt").read_text().split("\n")
    vocab = [w for w in vocab if w]
    with_vec = [w for w in vocab if w in kv.key_to_index]
    count = {**train_counts, EOS: n_lines}
    total = sum(count.get(w, 0) for w in vocab)
    share = 100 * sum(count.get(w, 0) for w in with_vec) / total
    for run, out, frozen_random, trained in (("whole", whole, len(vocab) - len(with_vec), 0),
                                             ("part", part, 0, len(vocab) - len(with_vec))):
        for doc in ("config.json", "summary.json"):
            rows = json.loads((tmp_path / run / doc).read_text())["input_rows"]
            assert rows["frozen_pretrained"] == len(with_vec)
            assert rows["frozen_random"] == frozen_random and rows["trained"] == trained
            assert rows["frozen_pretrained_tokens_pct"] == pytest.approx(share, abs=1e-3)
        assert f"input rows: {len(with_vec):,} frozen pretrained ({share:.1f}%)" in out.stdout
    # config.json stays a config: a run can be trained again from it
    again = lmlow("train", "--config", tmp_path / "part" / "config.json", "--max-steps", "1",
                  "--out", tmp_path / "again")
    assert again.returncode == 0, again.stderr


@pytest.mark.parametrize("flags,message", [
    (["--freeze-input-rows", "pretrained", "--tie", "no", "--init", "glove"], "add --freeze-input"),
    (["--freeze-input-rows", "pretrained", "--tie", "no", "--freeze-input"], "add --init glove"),
    (["--freeze-input-rows", "some"], "choose one of all, pretrained"),
])
def test_a_partial_freeze_without_its_parts_is_refused(flags, message, speech_corpus, vectors,
                                                       tmp_path):
    r = lmlow("train", speech_corpus, "--preset", "tiny", "--embeddings", vectors, *flags,
              "--out", tmp_path / "r")
    assert r.returncode != 0 and message in r.stderr and "Traceback" not in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()
