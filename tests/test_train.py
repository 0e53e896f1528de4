"""Training runs end to end: resume gives the same numbers, checkpoints are safe, bad states
and bad inputs stop with one line."""
import json
import math

import pytest
from conftest import lmlow, write_corpus
import torch

from lmlow.config import build_config
from lmlow.errors import LmlowError
from lmlow.runs import load
from lmlow.checkpoint import load_checkpoint
from lmlow.train import resume, train


def cfg_for(corpus, **kw):
    return build_config("tiny", None, corpus=str(corpus), **kw)


def metrics(run):
    return [json.loads(l) for l in (run / "metrics.jsonl").read_text().splitlines()]


def test_killed_run_resumes_to_the_same_numbers(speech_corpus, tmp_path):
    full = tmp_path / "full"
    train(cfg_for(speech_corpus, max_epochs=2, seed=7), full, quiet=True)
    part = tmp_path / "part"
    train(cfg_for(speech_corpus, max_epochs=2, seed=7, max_steps=45), part, quiet=True)
    ck = load_checkpoint(part / "last.pt")
    assert ck["state"]["step"] == 45 and ck["state"]["position"] > 0  # stopped mid-epoch
    resume(part, quiet=True, max_steps=0)
    a, b = metrics(full), metrics(part)
    assert [r["step"] for r in b if r.get("partial_epoch")] == [45]   # the stop validated
    b = [r for r in b if not r.get("partial_epoch")]
    assert [r["valid_ppl"] for r in a] == [r["valid_ppl"] for r in b]
    assert [r["train_loss"] for r in a] == pytest.approx([r["train_loss"] for r in b], rel=1e-9)
    sa, sb = (load_checkpoint(p / "last.pt")["model"] for p in (full, part))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_max_epochs_0_saves_the_initialised_model(speech_corpus, tmp_path):
    s = train(cfg_for(speech_corpus, max_epochs=0), tmp_path / "r", quiet=True)
    assert (tmp_path / "r" / "best.pt").exists()
    ev = load(tmp_path / "r").evaluate("valid")
    assert ev.perplexity == pytest.approx(s["best_valid_ppl"], rel=1e-6)
    # the metrics row has the perplexity per frequency bin, as `lmlow eval` scores the
    # checkpoint (the same model), and the bins' tokens weigh them back to the whole
    row = metrics(tmp_path / "r")[0]
    bins = {b["bin"]: b for b in ev.bins if b["tokens"]}
    assert row["valid_bins"] == pytest.approx({k: b["perplexity"] for k, b in bins.items()}, rel=1e-5)
    nats = sum(b["tokens"] * math.log(row["valid_bins"][k]) for k, b in bins.items())
    assert nats / ev.tokens == pytest.approx(row["valid_loss"], rel=1e-9)


def test_run_folder_contract(speech_corpus, tmp_path):
    run = tmp_path / "r"
    train(cfg_for(speech_corpus, max_epochs=1, unk_threshold=2), run, quiet=True)
    assert {p.name for p in run.iterdir()} >= {"config.json", "vocab.txt", "metrics.jsonl",
                                               "best.pt", "last.pt"}
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["unk_threshold"] == 2 and cfg["preset"] == "tiny"
    for name in ("best.pt", "last.pt"):
        torch.load(run / name, weights_only=True)  # plain data only: loads without running code
    words = (run / "vocab.txt").read_text().split("\n")[:-1]
    assert words == load(run).vocab.words
    scores = load(run).score("the senate of the united states")
    assert [w for w, _, _ in scores][-1] == "<eos>" and all(lp < 0 for _, lp, _ in scores)


def test_nan_loss_stops_with_a_clear_message(speech_corpus, tmp_path):
    cfg = cfg_for(speech_corpus, optimizer="sgd", lr=1e30, clip=0.0, max_epochs=1)
    with pytest.raises(LmlowError, match="loss became .* lower --lr"):
        train(cfg, tmp_path / "r", quiet=True)
    assert not (tmp_path / "r" / "best.pt").exists()


def test_weights_that_diverged_in_a_finite_update_are_not_saved(speech_corpus, tmp_path):
    """An update whose own loss is finite can leave NaN weights; when it is the last before a
    validation, the validation was NaN (logged as null), last.pt was written with those
    weights and, at a budget stop, summary.json with exit 0. The validation refuses them:
    last.pt keeps the state before the first update, and the message says so. (A finite loss
    too large for exp is kept: a diverged model's infinite perplexity,
    test_a_diverged_model_has_an_infinite_perplexity_not_a_traceback.)

    The NaN comes from torch's global optimizer-step hook, after the first update: a rate of
    1e30 diverged in the update's weights on one CPU and in the next update's loss on
    another (CI's), so it tested this path only where the arithmetic happened to fall so."""
    from torch.optim.optimizer import register_optimizer_step_post_hook

    def poison(optimizer, args, kwargs):
        with torch.no_grad():
            optimizer.param_groups[0]["params"][0].fill_(float("nan"))

    run = tmp_path / "r"
    handle = register_optimizer_step_post_hook(poison)
    try:
        with pytest.raises(LmlowError, match=r"validation loss became nan or inf after update 1 "
                           r"\(epoch 1\).*lower --lr.*last good state is .*last.pt"):
            train(cfg_for(speech_corpus, max_steps=1, eval_every=1), run, quiet=True)
    finally:
        handle.remove()
    assert not (run / "summary.json").exists() and not (run / "metrics.jsonl").exists()
    ck = load_checkpoint(run / "last.pt")
    assert ck["state"]["step"] == 0
    assert all(torch.isfinite(v).all() for v in ck["model"].values())


def test_a_corpus_prepared_again_in_place_is_not_read_as_the_runs_own(speech_corpus, tmp_path):
    """Only a corpus named on the command line was checked against data.json's fingerprint:
    a run's own corpus prepared again in place was resumed on and scored silently, its
    numbers (and eval_best_*.json) over other text under the run's name."""
    import shutil
    corpus = tmp_path / "c"
    shutil.copytree(speech_corpus, corpus)
    run = tmp_path / "r"
    train(cfg_for(corpus, max_steps=20), run, quiet=True)
    valid = corpus / "valid.txt"
    valid.write_text("".join(valid.read_text().splitlines(keepends=True)[:5]))
    with pytest.raises(LmlowError, match="valid.txt is not the one .* was trained on"):
        resume(run, quiet=True, max_steps=40)
    with pytest.raises(LmlowError, match="valid.txt: not the valid split .* --corpus"):
        load(run).evaluate("valid")
    load(run).evaluate("test")                 # the split scored is checked, not the others
    from lmlow import analysis                 # every command that reads a split of it
    with pytest.raises(LmlowError, match="valid.txt: not the valid split"):
        analysis.analyze(run, out=tmp_path / "a")
    assert not (tmp_path / "a").exists()
    assert load(run).evaluate("valid", corpus=corpus).tokens > 0     # named: other text


def test_a_resume_on_another_thread_count_says_its_bits_will_differ(speech_corpus, tmp_path,
                                                                     capsys):
    """The CPU's thread count splits the sums, so a resume on another count (what --threads
    0 gives a job resubmitted with other cores) no longer ends bitwise where an uninterrupted
    run would; that was silent. One note; the same count says nothing."""
    run = tmp_path / "r"
    train(cfg_for(speech_corpus, max_steps=10, threads=1), run, quiet=True)
    capsys.readouterr()
    resume(run, quiet=True, max_steps=20, threads=1)
    assert "thread" not in capsys.readouterr().err
    resume(run, quiet=True, max_steps=30, threads=2)
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "trained on 1 thread(s), this resume uses 2" in err
    assert "--threads 1 keeps them" in err


def test_vocabulary_that_does_not_match_the_checkpoint(speech_corpus, tmp_path):
    run = tmp_path / "r"
    train(cfg_for(speech_corpus, max_epochs=0), run, quiet=True)
    (run / "vocab.txt").write_text("<eos>\n<unk>\nother\n")
    with pytest.raises(LmlowError, match="does not match the vocabulary"):
        load(run)


def test_nonempty_run_dir_needs_force(speech_corpus, tmp_path):
    run = tmp_path / "r"
    train(cfg_for(speech_corpus, max_epochs=0), run, quiet=True)
    with pytest.raises(LmlowError, match="--resume .* or --force"):
        train(cfg_for(speech_corpus, max_epochs=0), run, quiet=True)




def test_cli_train_eval_score(speech_corpus, tmp_path):
    cache, run = tmp_path / "cache", tmp_path / "run"
    r = lmlow("train", speech_corpus, "--out", run, "--preset", "tiny", "--tie", "no",
              "--init", "unigram", "--max-epochs", "1", cache=cache)
    assert r.returncode == 0, r.stderr
    assert "untied: input random; output random; unigram bias" in r.stdout
    r = lmlow("eval", run, "--split", "test", "--json", cache=cache)
    ev = json.loads(r.stdout)
    assert {"perplexity", "perplexity_excluding_unk", "tokens", "unk_tokens", "split",
            "bins"} <= set(ev) and ev["split"] == "test"
    assert sum(b["tokens"] for b in ev["bins"]) == ev["tokens"]
    assert sum(b["tokens"] for b in ev["context_bins"]) == ev["tokens"]
    # counted from the text: targets whose previous word is outside the run's vocabulary
    vocab = set((run / "vocab.txt").read_text().split()) - {"<unk>"}
    stream = [w for line in (speech_corpus / "test.txt").read_text().splitlines()
              for w in line.split() + ["<eos>"]]
    after_unk = sum(w not in vocab for w in stream[:-1])
    assert after_unk and (ev["context_bins"][0]["bin"], ev["context_bins"][0]["tokens"]) == ("<unk>", after_unk)
    f = tmp_path / "s.txt"
    f.write_text("the senate\nof the union\n")
    lines = [json.loads(l) for l in lmlow("score", run, f, cache=cache).stdout.splitlines()]
    assert [l["words"] for l in lines] == [["the", "senate", "<eos>"], ["of", "the", "union", "<eos>"]]
    assert lines[0]["total_log10prob"] == pytest.approx(sum(lines[0]["log10prob"]), abs=1e-5)


def test_cli_refuses_invalid_combination_in_one_line(speech_corpus, tmp_path):
    r = lmlow("train", speech_corpus, "--out", tmp_path / "r", "--tie", "yes", "--init",
              "glove-output", "--embeddings", "v.txt", cache=tmp_path / "c")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "tied model" in r.stderr


def test_time_budget_keeps_the_partial_epoch(speech_corpus, tmp_path):
    run = tmp_path / "r"
    train(cfg_for(speech_corpus, max_epochs=5, max_time=0.0005), run, quiet=True)
    rows = metrics(run)
    assert rows[-1].get("partial_epoch") and 0 < rows[-1]["epoch"] < 1
    assert (run / "best.pt").exists() and (run / "last.pt").exists()


def test_best_means_best_wherever_it_was_measured(speech_corpus, tmp_path):
    """best.pt holds the weights of the lowest validation of the run, also when that was a
    mid-epoch (--eval-every) validation or the one where --max-steps stopped the run."""
    run = tmp_path / "r"
    summary = train(cfg_for(speech_corpus, max_epochs=2, eval_every=7, seed=3), run, quiet=True)
    rows = metrics(run)
    best = min(rows, key=lambda r: r["valid_loss"])
    assert load_checkpoint(run / "best.pt")["state"]["step"] == best["step"]
    assert summary["best_valid_ppl"] == pytest.approx(best["valid_ppl"])
    stopped = train(cfg_for(speech_corpus, max_epochs=2, max_steps=30, seed=3), tmp_path / "s",
                    quiet=True)
    assert stopped["best_valid_ppl"] is not None and (tmp_path / "s" / "best.pt").exists()
    assert metrics(tmp_path / "s")[-1] == {**metrics(tmp_path / "s")[-1], "step": 30,
                                           "partial_epoch": True}


def test_asgd_evaluates_and_saves_averaged_weights(speech_corpus, tmp_path):
    """The averaging context and ASGD state across a resume (the switch itself, from
    validation, is tested in test_behaviour.py)."""
    from lmlow.train import Trainer

    t = Trainer(cfg_for(speech_corpus, optimizer="sgd", lr=1.0, max_steps=6, max_epochs=1),
                tmp_path / "r", quiet=True)
    t.start_averaging()   # as NT-ASGD does when validation stalls
    t.run()
    raw = [p.detach().clone() for p in t.params]
    averages = [t.optimizer.state[p]["ax"] for p in t.params]
    assert any(not torch.equal(r, a) for r, a in zip(raw, averages))
    with t.averaged():
        assert all(torch.equal(p, a) for p, a in zip(t.params, averages))
    assert all(torch.equal(p, r) for p, r in zip(t.params, raw))
    resume(tmp_path / "r", quiet=True, max_steps=8)  # ASGD state survives the checkpoint
    assert load_checkpoint(tmp_path / "r" / "last.pt")["state"]["asgd"] is True
    # `--checkpoint last` scores the average, as the validation where the run stopped did
    # (and best.pt keeps): the raw weights scored otherwise
    last, best = load(tmp_path / "r", checkpoint="last"), load(tmp_path / "r", checkpoint="best")
    ck = load_checkpoint(tmp_path / "r" / "last.pt")
    assert last.evaluate("valid").perplexity == pytest.approx(best.evaluate("valid").perplexity, rel=1e-6)
    assert last.evaluate("valid").perplexity == pytest.approx(
        math.exp(metrics(tmp_path / "r")[-1]["valid_loss"]), rel=1e-5)
    raw = dict(ck["model"])
    assert any(not torch.equal(raw[n], p) for n, p in last.model.named_parameters())


def test_a_budget_stop_and_resume_trains_as_one_run_under_the_plateau_rule(speech_corpus, tmp_path):
    """The validation made where --max-steps stops a run decides best.pt only: counted for the
    plateau schedule and patience (as it was), it was a best the uninterrupted run never saw,
    and the resumed run skipped a decay of the rate."""
    kw = dict(max_epochs=3, seed=7, schedule="plateau", gamma=0.5, min_improvement=0.3)
    train(cfg_for(speech_corpus, **kw), tmp_path / "full", quiet=True)
    per_epoch = metrics(tmp_path / "full")[0]["step"]
    train(cfg_for(speech_corpus, max_steps=int(0.8 * per_epoch), **kw), tmp_path / "part", quiet=True)
    resume(tmp_path / "part", quiet=True, max_steps=0)
    a = metrics(tmp_path / "full")
    b = [r for r in metrics(tmp_path / "part") if not r.get("partial_epoch")]
    assert [(r["valid_ppl"], r["base_lr"]) for r in a] == [(r["valid_ppl"], r["base_lr"]) for r in b]
    sa, sb = (load_checkpoint(p / "last.pt")["state"] for p in (tmp_path / "full", tmp_path / "part"))
    timing = ("train_seconds", "epoch_seconds")
    assert {k: v for k, v in sa.items() if k not in timing} == {k: v for k, v in sb.items() if k not in timing}


def test_a_run_stopped_early_stays_stopped_when_resumed(speech_corpus, tmp_path):
    """Patience ended it at epoch 2 of 4 (see the test below): `--resume` with the same
    settings trains nothing more (it trained a third epoch)."""
    kw = dict(max_epochs=4, patience=1, seed=2, lr=0.01, min_improvement=0.9)
    run = tmp_path / "r"
    first = train(cfg_for(speech_corpus, **kw), run, quiet=True)
    rows = metrics(run)
    assert first["stopped_by"] == "patience" and first["epochs"] == 2
    again = resume(run, quiet=True)
    assert again["epochs"] == 2 and again["stopped_by"] == "patience" and metrics(run) == rows


def test_a_kill_after_a_row_is_logged_writes_it_once(speech_corpus, tmp_path, monkeypatch):
    """--track-frequency logs the initialisation's validation after the first last.pt: a run
    killed before its next checkpoint held that row twice once resumed. last.pt now says how
    many rows it knows."""
    from lmlow.train import Trainer

    def killed(self, data):
        raise KeyboardInterrupt
    run = tmp_path / "r"
    with monkeypatch.context() as m:
        m.setattr(Trainer, "_train_epoch", killed)
        with pytest.raises(KeyboardInterrupt):
            train(cfg_for(speech_corpus, max_epochs=1, track_frequency=True), run, quiet=True)
    assert [r["step"] for r in metrics(run)] == [0]
    resume(run, quiet=True)
    steps = [(r["epoch"], r["step"]) for r in metrics(run)]
    assert steps[0] == (0, 0) and len(steps) == len(set(steps)) == 2


def test_too_few_tokens_a_column_for_an_update_are_refused(tmp_path):
    """Two tokens a column (an input and its target) passed the check, then the epoch read
    none of them: a finished run of 0 updates and train ppl 1.0. Three are the least."""
    from conftest import write_corpus

    line = "the cat sat on the mat again\n"          # 7 words + <eos>: 8 tokens
    two = write_corpus(tmp_path / "two", line * 2, line, line)         # 16 = 2 x batch 8
    with pytest.raises(LmlowError, match="too few for --batch-size 8 .at least 24: three a column"):
        train(cfg_for(two), tmp_path / "r2", quiet=True)
    assert not (tmp_path / "r2").exists()
    three = write_corpus(tmp_path / "three", line * 3, line, line)
    assert train(cfg_for(three, max_epochs=1), tmp_path / "r3", quiet=True)["steps"] >= 1


def test_label_smoothing_logs_the_plain_cross_entropy(speech_corpus, tmp_path):
    """train_ppl is a perplexity, of the cross-entropy, as valid_ppl is: with label smoothing
    and no dropout, at a rate too small to move the weights, an epoch's training loss is the
    same with and without smoothing (it was the smoothed objective's)."""
    still = dict(max_epochs=1, seed=4, lr=1e-12, dropout=0.0, dropouth=0.0, dropouti=0.0,
                 dropoute=0.0, wdrop=0.0)
    rows = []
    for eps in (0.0, 0.3):
        train(cfg_for(speech_corpus, label_smoothing=eps, **still), tmp_path / f"r{eps}", quiet=True)
        rows.append(metrics(tmp_path / f"r{eps}")[-1])
    assert rows[1]["train_loss"] == pytest.approx(rows[0]["train_loss"], rel=1e-5)


def test_metrics_log_the_rate_the_updates_used(speech_corpus, tmp_path):
    """A cosine schedule over 3 epochs: the logged rate is the schedule's at each epoch's last
    update, 0.5 (1 + cos(pi e / 3)) x the base, worked out here; the base rate stays."""
    import math
    train(cfg_for(speech_corpus, max_epochs=3, schedule="cosine", lr=0.01), tmp_path / "r", quiet=True)
    rows = [r for r in metrics(tmp_path / "r") if "train_loss" in r]
    assert [r["base_lr"] for r in rows] == [0.01] * 3
    for r in rows:
        n = r["step"] / r["epoch"]                    # updates per epoch (constant here)
        used = (r["step"] - 1) / n / 3                # the last update's share of the budget
        assert r["lr"] == pytest.approx(0.005 * (1 + math.cos(math.pi * used)), rel=0.05, abs=1e-4)
    assert rows[-1]["lr"] < 0.001 < rows[0]["lr"]


def test_epochs_inside_the_warm_up_neither_count_as_stale_nor_decay_the_rate(speech_corpus, tmp_path):
    """An epoch whose updates all came while the rate was still rising is no plateau of the
    rate. With --min-improvement 0.9 no epoch after the first counts as improving: without a
    warm-up the plateau schedule halves the rate after epoch 2 and patience 2 stops the run at
    epoch 3; with a warm-up that ends with epoch 2's last update, epoch 2 is not judged, so the
    rate halves after epoch 3 and the run stops at epoch 4."""
    kw = dict(max_epochs=6, patience=2, seed=2, lr=0.01, schedule="plateau", gamma=0.5,
              min_improvement=0.9)
    cold = train(cfg_for(speech_corpus, **kw), tmp_path / "cold", quiet=True)
    rows = [r for r in metrics(tmp_path / "cold") if "train_loss" in r]
    assert cold["stopped_by"] == "patience" and [r["epoch"] for r in rows] == [1, 2, 3]
    assert [r["base_lr"] for r in rows] == [0.01, 0.01, 0.005]
    warm = train(cfg_for(speech_corpus, warmup_steps=rows[1]["step"], **kw), tmp_path / "warm",
                 quiet=True)
    rows = [r for r in metrics(tmp_path / "warm") if "train_loss" in r]
    assert warm["stopped_by"] == "patience" and [r["epoch"] for r in rows] == [1, 2, 3, 4]
    assert [r["base_lr"] for r in rows] == [0.01, 0.01, 0.01, 0.005]
    assert rows[1]["lr"] == pytest.approx(0.01, rel=0.3)          # epoch 2 ended at the peak


def test_min_improvement_stops_on_gains_too_small_to_count(speech_corpus, tmp_path):
    """With --min-improvement 0.9 an epoch must cut perplexity to a tenth of the last counted
    best to count: epoch 2 does not, so patience 1 stops the run there, though best.pt keeps
    epoch 2's weights if they were better. Without it the same run trains all 4 epochs."""
    kw = dict(max_epochs=4, patience=1, seed=2, lr=0.01)
    strict = train(cfg_for(speech_corpus, min_improvement=0.9, **kw), tmp_path / "strict", quiet=True)
    rows = [r for r in metrics(tmp_path / "strict") if "train_loss" in r]
    assert strict["stopped_by"] == "patience" and [r["epoch"] for r in rows] == [1, 2]
    assert rows[1]["valid_ppl"] < rows[0]["valid_ppl"]            # a gain, too small to count
    assert strict["best_valid_ppl"] == pytest.approx(rows[1]["valid_ppl"])
    loose = train(cfg_for(speech_corpus, **kw), tmp_path / "loose", quiet=True)
    assert loose["epochs"] == 4
    r = lmlow("train", speech_corpus, "--preset", "tiny", "--min-improvement", "1",
              "--out", tmp_path / "bad")
    assert r.returncode != 0 and "--min-improvement 1: must be in [0, 1)" in r.stderr


def test_the_start_line_says_the_model_size_and_when_the_vectors_set_it(speech_corpus, vectors,
                                                                         tmp_path, capsys):
    """Pretrained input vectors fix the embedding size: `--emb-size 50` with 24-d vectors
    built a 24-d model without a word. The start line now gives the sizes, and says when the
    vectors' size replaced the settings'."""
    from conftest import cli
    code, out, err = cli("train", speech_corpus, "--out", tmp_path / "v", "--preset", "tiny",
                         "--init", "glove", "--embeddings", vectors, "--emb-size", "50",
                         "--max-steps", "1", capsys=capsys)
    assert code == 0, err
    assert ("; 24-d embeddings (the vectors' size, not the 50 of the settings), LSTM 48+24; "
            in out.splitlines()[0])
    code, out, err = cli("train", speech_corpus, "--out", tmp_path / "r", "--preset", "tiny",
                         "--max-steps", "1", capsys=capsys)
    assert code == 0 and "; 32-d embeddings, LSTM 48+32; vocabulary" in out.splitlines()[0], err


def test_the_python_api_trains_what_the_command_trains(speech_corpus, vectors, tmp_path, capsys):
    """``lmlow.fit`` and ``lmlow.resume`` are ``lmlow train`` and ``--resume`` from Python: the
    same run folder to the bit, and a bad setting is one LmlowError naming it, before anything
    is written."""
    import lmlow
    from conftest import cli

    api, cmd = tmp_path / "api", tmp_path / "cmd"
    s = lmlow.fit(speech_corpus, api, preset="tiny", quiet=True, tie=False, freeze_input=True,
                  init="glove,unigram", embeddings=vectors, seed=5, max_epochs=1)
    code, _, err = cli("train", speech_corpus, "--out", cmd, "--preset", "tiny", "--tie", "no",
                       "--freeze-input", "--init", "glove,unigram", "--embeddings", vectors,
                       "--seed", "5", "--max-epochs", "1", "--quiet", capsys=capsys)
    assert code == 0, err
    assert s["best_valid_ppl"] == metrics(api)[0]["valid_ppl"]
    lmlow.resume(api, max_epochs=2, quiet=True)
    code, _, err = cli("train", "--resume", cmd, "--max-epochs", "2", "--quiet", capsys=capsys)
    assert code == 0, err
    assert json.loads((api / "config.json").read_text()) == json.loads((cmd / "config.json").read_text())
    a, b = metrics(api), metrics(cmd)
    assert len(a) == 2 and [r["valid_ppl"] for r in a] == [r["valid_ppl"] for r in b]
    sa, sb = (load_checkpoint(p / "best.pt")["model"] for p in (api, cmd))
    assert all(torch.equal(sa[k], sb[k]) for k in sa)

    with pytest.raises(LmlowError, match=r"^lmlow.fit: tie = 'no': expected true or false, unquoted$"):
        lmlow.fit(speech_corpus, tmp_path / "bad", preset="tiny", tie="no")
    with pytest.raises(LmlowError, match=r"^lmlow.fit: unknown setting 'freeze_inputs'$"):
        lmlow.fit(speech_corpus, tmp_path / "bad", preset="tiny", freeze_inputs=True)
    # a range names the keyword, as a type does (it named the command's flag: --lr -1)
    with pytest.raises(LmlowError, match=r"^lmlow.fit: lr = -1.0: must be > 0$"):
        lmlow.fit(speech_corpus, tmp_path / "bad", preset="tiny", lr=-1.0)
    with pytest.raises(LmlowError, match=r"^lmlow.fit: freeze_input_rows = 'some': choose one "):
        lmlow.fit(speech_corpus, tmp_path / "bad", preset="tiny", freeze_input_rows="some")
    assert not (tmp_path / "bad").exists()
    with pytest.raises(LmlowError, match=r"^lmlow.resume: max_epochs = '3': expected an integer$"):
        lmlow.resume(api, max_epochs="3")
    with pytest.raises(LmlowError, match=r"^lmlow.resume: max_epochs = -1: must be >= 0$"):
        lmlow.resume(api, max_epochs=-1)
    assert len(metrics(api)) == 2


def test_a_closed_stdout_does_not_stop_the_training(speech_corpus, tmp_path):
    """`lmlow train ... | head -1`: the reader leaves after the start line; the training went
    on printing, died on the closed pipe between an epoch's logged validation and its best.pt,
    and `lmlow eval` then scored the untrained last.pt. It finishes now, quietly."""
    import subprocess
    import sys

    run = tmp_path / "r"
    cmd = (f"{sys.executable} -m lmlow.cli train {speech_corpus} --out {run} --preset tiny "
           f"--max-epochs 2 --threads 1 | head -1")
    p = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True,
                       env={**__import__("os").environ, "LMLOW_CACHE_DIR": str(tmp_path / "cache")})
    assert p.stdout.count("\n") == 1 and "vocabulary" in p.stdout, p.stdout + p.stderr
    summary = json.loads((run / "summary.json").read_text())
    assert summary["epochs"] == 2 and (run / "best.pt").exists()
    assert load(run).evaluate("valid").perplexity == pytest.approx(summary["best_valid_ppl"], rel=1e-5)


def test_a_diverged_model_has_an_infinite_perplexity_not_a_traceback(tmp_path):
    """Output rows of 800s: a validation cross-entropy of about 1,000 nats per token, whose
    exponential no float holds. `train` (its epoch-0 validation) and `eval` stopped on
    OverflowError; the perplexity is infinite (null in JSON) and the loss is kept."""
    import random

    rng = random.Random(1)
    words = "the a cat dog sat on mat ran to house big small red blue".split()
    lines = [" ".join(rng.choice(words) for _ in range(8)) for _ in range(300)]
    corpus = write_corpus(tmp_path / "c", "\n".join(lines[:240]) + "\n",
                          "\n".join(lines[240:270]) + "\n", "\n".join(lines[270:]) + "\n")
    vec = tmp_path / "v.txt"
    vec.write_text("".join(f"{w} " + " ".join(str(rng.choice([-800.0, 800.0])) for _ in range(16))
                           + "\n" for w in words))
    run = tmp_path / "r"
    r = lmlow("train", corpus, "--out", run, "--preset", "tiny", "--embeddings", vec, "--init",
              "glove,glove-output", "--tie", "no", "--max-epochs", "0", "--threads", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[-1])
    assert row["valid_loss"] > 710 and row["valid_ppl"] is None
    r = lmlow("eval", run, "--json")
    assert r.returncode == 0, r.stderr
    ev = json.loads(r.stdout)
    assert ev["perplexity"] is None and ev["cross_entropy"] > 710


def test_a_setting_the_run_never_reads_is_noted(speech_corpus, tmp_path):
    """--gamma 0.1 under --schedule none, --no-asgd under Adam, --smoothing-prior without
    label smoothing, a config file's min_improvement without patience: each trained as if
    absent, without a word. One note each now (not an error: one script may pass one set of
    flags to runs of several optimisers); a value the run reads, or the preset's own, is not
    noted."""
    (tmp_path / "c.toml").write_text("min_improvement = 0.01\nstep_size = 1\n")
    r = lmlow("train", speech_corpus, "--out", tmp_path / "a", "--preset", "tiny",
              "--max-steps", "1", "--threads", "1", "--quiet", "--gamma", "0.1", "--no-asgd",
              "--smoothing-prior", "unigram", "--config", tmp_path / "c.toml")
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("lmlow: note:")]
    assert notes == [
        "lmlow: note: --min-improvement 0.01 does nothing here: it applies under --patience "
        "above 0 or --schedule plateau",
        "lmlow: note: --gamma 0.1 does nothing here: it applies under --schedule step or plateau",
        "lmlow: note: --no-asgd does nothing here: it applies under --optimizer sgd",
        "lmlow: note: --smoothing-prior unigram does nothing here: it applies under "
        "--label-smoothing above 0"], r.stderr
    r = lmlow("train", speech_corpus, "--out", tmp_path / "b", "--preset", "tiny",
              "--max-steps", "1", "--threads", "1", "--quiet", "--schedule", "step",
              "--gamma", "0.1", "--optimizer", "sgd", "--asgd", "--nonmono", "3")
    assert r.returncode == 0 and "note" not in r.stderr, r.stderr
