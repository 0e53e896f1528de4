"""`lmlow report` and `lmlow compare` on committed run folders (their cached evaluations and
metrics, no checkpoints): rows that would compare other tokens, baselines scored as the table
is, damaged numbers, and output sets replaced whole."""
import json
import shutil
from pathlib import Path

import pytest
from conftest import lmlow

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


def copy(src: Path, dest: Path) -> Path:
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("*.pt"))
    return dest


def rows_of(sweep: Path) -> dict[str, dict]:
    return {r["configuration"]: r for r in json.loads((sweep / "results.json").read_text())}


def one_line_error(r, *words):
    assert r.returncode == 1 and "Traceback" not in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    for w in words:
        assert w in r.stderr, r.stderr


def test_paired_compares_only_rows_over_the_same_tokens(tmp_path):
    """`--paired standard.K2` in Table 3's grid of K gave every K1 and K5 row a verdict against
    standard.K2: a difference of vocabularies (K), not of configurations. Only K2's rows are
    paired; the others are named as not compared."""
    unk = copy(EXPERIMENTS / "unk" / "sweep", tmp_path / "unk")
    r = lmlow("report", unk, "--paired", "standard.K2")
    assert r.returncode == 0, r.stderr
    rows = rows_of(unk)
    paired = {n for n, row in rows.items() if "paired" in row}
    assert paired == {n for n in rows if n.endswith(".K2") and n != "standard.K2"}
    assert len(paired) == 5
    md = (unk / "results.md").read_text()
    assert "Not compared, over other tokens" in md and "standard.K5 (against standard.K2)" in md


def test_a_row_whose_runs_differ_in_more_than_their_seed_is_warned_of(tmp_path):
    """Run folders put together by hand (or planned before the sweep refused it) whose seeds
    trained with another lr: the row averaged two experiments, its parameters the first
    run's, with nothing said. A warning in results.md and on stderr names the row and the
    setting; what a resume may change (the budget) is no difference."""
    six = copy(EXPERIMENTS / "six" / "sweep", tmp_path / "six")
    config = six / "standard.seed2" / "config.json"
    settings = json.loads(config.read_text())
    config.write_text(json.dumps({**settings, "max_epochs": 99}))
    r = lmlow("report", six)
    assert r.returncode == 0 and "differ in" not in r.stderr, r.stderr
    config.write_text(json.dumps({**settings, "lr": 0.5}))
    r = lmlow("report", six)
    said = ("the runs of standard differ in lr (standard.seed1: 0.003, standard.seed2: 0.5): "
            "its row is the mean of two experiments")
    assert r.returncode == 0 and f"lmlow: warning: {said}\n" in r.stderr, r.stderr
    assert f"**Warning: {said}.**" in (six / "results.md").read_text()


def test_report_wait_makes_its_table_after_the_wait(tmp_path, monkeypatch):
    """`report --wait` made its table, then waited for the folder's lock (another report
    writing), then wrote: a run that finished during the wait was left out, and the stale
    table replaced the newer one. Here the run finishes (its folder moved in) just as the
    report asks for the lock; the table written includes it."""
    import lmlow
    import lmlow.files

    six = copy(EXPERIMENTS / "six" / "sweep", tmp_path / "six")
    late = six / "standard.seed3"
    late.rename(tmp_path / "aside")
    real = lmlow.files.lock_folder

    def finished_meanwhile(folder, wait=False):
        if (tmp_path / "aside").exists():
            (tmp_path / "aside").rename(late)
        return real(folder, wait=wait)

    monkeypatch.setattr(lmlow.files, "lock_folder", finished_meanwhile)
    rows = {r["configuration"]: r for r in lmlow.results(six, wait=True)}
    assert rows["standard"]["seeds"] == 3 and str(late) in rows["standard"]["runs"]
    assert rows_of(six)["standard"]["seeds"] == 3


def test_a_table_whose_rows_are_over_different_tokens_is_warned_of(tmp_path):
    """Table 3's grid of K ranked rows over three vocabularies worst first with nothing said
    (a smaller vocabulary's perplexity is lower for that alone); only `--paired` knew. The
    report warns once, naming a row of each set; the six (one vocabulary) are not warned of."""
    unk = copy(EXPERIMENTS / "unk" / "sweep", tmp_path / "unk")
    r = lmlow("report", unk)
    said = "the rows are measured over 3 different sets of tokens (another vocabulary or validation text: "
    assert r.returncode == 0 and r.stderr.count("warning") == 1 and said in r.stderr, r.stderr
    assert "ranks only among rows of its own set" in r.stderr
    assert f"**Warning: {said}" in (unk / "results.md").read_text()
    six = copy(EXPERIMENTS / "six" / "sweep", tmp_path / "six")
    r = lmlow("report", six)
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr


def test_runs_from_before_the_word_lists_hash_split_no_table(tmp_path):
    """The paper regime's table (2026-12-03): its seed-1 runs predate the hash of the word
    list in summary.json, its seed-2 runs have it, so a configuration of both seeds and one
    of seed 1 alone were called two sets of tokens (and `--paired` would have refused to pair
    them), though every run counted the same validation tokens. A run without the hash differs from none by it;
    two runs whose hashes differ are still two sets."""
    six = copy(EXPERIMENTS / "six" / "sweep", tmp_path / "six")

    def hash_words(run: str, digest: str) -> None:
        summary = six / run / "summary.json"
        summary.write_text(json.dumps({**json.loads(summary.read_text()),
                                       "vocabulary_digest": digest}))

    for seed in (1, 2, 3):
        hash_words(f"standard.seed{seed}", "d5c90553c9e6c4e4")
    r = lmlow("report", six, "--paired", "standard")
    assert r.returncode == 0 and "warning" not in r.stderr, r.stderr
    assert "Not compared" not in (six / "results.md").read_text()
    assert len([row for row in rows_of(six).values() if "paired" in row]) == 5
    hash_words("ours.seed1", "0123456789abcdef")
    r = lmlow("report", six, "--paired", "standard")
    said = "the rows are measured over 2 different sets of tokens"
    assert r.returncode == 0 and said in r.stderr, r.stderr
    assert "ours (against standard)" in (six / "results.md").read_text()


def test_the_precision_warning_names_the_runs_resumed_in_another_precision(tmp_path):
    """The paper regime's CPU table: seed 2's pair trained in bf16 but for 6-7 epochs in fp32
    on a CPU without bf16 (summary.json's precisions), seed 1 in bf16 only. The warning said
    only "mixed precisions" and advised pinning, as if runs of two settings were averaged; it
    names the two runs that changed precision on resume."""
    sweep = copy(EXPERIMENTS / "paper-regime" / "sweep-cpu.100d", tmp_path / "cpu")
    r = lmlow("report", sweep)
    said = ("mixed precisions in one table (bf16, fp32): its comparisons mix arithmetic; "
            "2 run(s) changed precision when resumed (")
    assert r.returncode == 0 and said in r.stderr, r.stderr
    line = next(l for l in r.stderr.splitlines() if said in l)
    assert "ours-unfrozen.seed2" in line and "ours.seed2" in line and "seed1" not in line
    assert f"**Warning: {said}" in (sweep / "results.md").read_text()


def test_a_run_given_as_baseline_is_scored_with_the_tables_maps(tmp_path):
    """With --map-unseen-outputs the table's rows are scored with the map; a finished LSTM run
    given as --baseline was scored as trained beside them, with nothing said."""
    root = EXPERIMENTS / "freezing" / "technical"
    sweep = copy(root / "adam-unfrozen", tmp_path / "au")
    base = copy(root / "sweep-sgd" / "ours-unfrozen.seed2", tmp_path / "ours-unfrozen.seed2")
    r = lmlow("report", sweep, "--map-unseen-outputs", "--baseline", base)
    assert r.returncode == 0, r.stderr
    row = rows_of(sweep)["ours-unfrozen.seed2"]
    mapped = json.loads((base / "eval_mapped_outputs_valid.json").read_text())["perplexity"]
    plain = json.loads((base / "eval_best_valid.json").read_text())["perplexity"]
    assert mapped != pytest.approx(plain)
    assert row["valid ppl"] == pytest.approx(mapped)
    assert row["scored with"] == "--map-unseen-outputs"


def test_an_ngram_run_in_the_sweep_folder_is_a_baseline_row(tmp_path):
    """A KenLM run kept inside the sweep folder was read as an LSTM configuration (tied,
    random input, 0/1 converged); it is the baseline row `--baseline` would make."""
    sweep = copy(EXPERIMENTS / "freezing" / "technical" / "sweep-sgd", tmp_path / "s")
    copy(EXPERIMENTS / "freezing" / "technical" / "kenlm5-allvec", sweep / "kenlm5")
    r = lmlow("report", sweep)
    assert r.returncode == 0, r.stderr
    rows = rows_of(sweep)
    assert "kenlm5" not in rows and len(rows) == 7
    want = json.loads((sweep / "kenlm5" / "eval_best_valid.json").read_text())["perplexity"]
    assert rows["KenLM 5-gram"]["valid ppl"] == pytest.approx(want)
    assert rows["KenLM 5-gram"]["tie"] == "" and rows["KenLM 5-gram"]["converged"] == ""


def test_flag_mistakes_are_refused_before_any_run_is_scored(tmp_path):
    """A misspelt --paired name or a missing --baseline was refused only after every run had
    been scored (hours with checkpoints): here a run whose evaluation cannot be read shows
    which check comes first."""
    sweep = copy(EXPERIMENTS / "six" / "sweep", tmp_path / "six")
    (sweep / "ours.seed1" / "eval_best_valid.json").unlink()    # scoring it would fail
    one_line_error(lmlow("report", sweep, "--paired", "standrad"), "--paired standrad")
    one_line_error(lmlow("report", sweep, "--baseline", tmp_path / "kenlm55"),
                   "kenlm55: no such run folder")
    one_line_error(lmlow("report", sweep), "ours.seed1", "eval_best_valid.json")


def test_damaged_numbers_are_named_not_tracebacks_and_a_nan_is_shown(tmp_path):
    """lmlow writes null for a NaN perplexity (a diverged run): the report shows NaN, not a
    TypeError. A run without its metrics has no best epoch (an empty cell), not epoch 0 in the
    mean. A metrics line or a cached evaluation that is not numbers is refused in one line
    naming the file."""
    sweep = copy(EXPERIMENTS / "six" / "sweep", tmp_path / "six")
    before = rows_of(sweep)
    for split in ("valid", "test"):
        f = sweep / "ours.seed1" / f"eval_best_{split}.json"
        f.write_text(json.dumps({**json.loads(f.read_text()), "perplexity": None}))
    (sweep / "standard.seed2" / "metrics.jsonl").unlink()
    r = lmlow("report", sweep)
    assert r.returncode == 0, r.stderr
    rows = json.loads((sweep / "results.json").read_text())
    assert rows[0]["configuration"] == "ours" and rows[0]["valid ppl"] is None   # NaN: first
    assert "| nan" in (sweep / "results.md").read_text()
    standard = next(row for row in rows if row["configuration"] == "standard")
    assert standard["best epoch"] is None and standard["best minutes"] is None
    assert standard["valid ppl"] == pytest.approx(before["standard"]["valid ppl"])

    metrics = sweep / "ours.seed2" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    lines[2] = json.dumps({**json.loads(lines[2]), "valid_ppl": "abc"})
    metrics.write_text("\n".join(lines) + "\n")
    one_line_error(lmlow("report", sweep), f"{metrics}:3: valid_ppl is 'abc', not a number")
    metrics.write_text("\n".join(lines[:2]) + "\n")

    ev = sweep / "ours.seed2" / "eval_best_valid.json"
    data = json.loads(ev.read_text())
    del data["unk_tokens"]
    ev.write_text(json.dumps(data))
    one_line_error(lmlow("report", sweep), str(ev), "not an evaluation")
    data["unk_tokens"] = 0
    data["bins"][0]["perplexity"] = "x"
    ev.write_text(json.dumps(data))
    one_line_error(lmlow("report", sweep, "--paired", "standard"), str(ev), "not an evaluation")


def test_compare_replaces_its_output_set_whole_and_integrates_from_update_0(tmp_path):
    """A comparison of untracked runs written over one of tracked runs kept the old
    frequency_curves.png beside the new files. ALC@N is over updates 0..N: a run without a
    validation at update 0 has none (it was an ALC over another interval, NaN below its first
    validation), and a note says so."""
    tracked = copy(EXPERIMENTS / "frequency" / "runs" / "zero", tmp_path / "tracked")
    untracked = copy(tracked, tmp_path / "untracked")
    (untracked / "frequency.jsonl").unlink()
    lines = (untracked / "metrics.jsonl").read_text().splitlines()
    assert json.loads(lines[0])["step"] == 0
    (untracked / "metrics.jsonl").write_text("\n".join(lines[1:]) + "\n")

    out = tmp_path / "cmp"
    r = lmlow("compare", tracked, untracked, "--steps", "300", "--out", out)
    assert r.returncode == 0, r.stderr
    assert (out / "frequency_curves.png").exists()
    rows = {row["label"]: row for row in json.loads((out / "compare.json").read_text())}
    assert rows["tracked"]["ALC@N"] > 0 and rows["untracked"]["ALC@N"] is None
    assert "no ALC@300 for untracked" in r.stderr and "start at different updates" in r.stderr

    r = lmlow("compare", untracked, "--out", out)
    one_line_error(r, "--force")                        # the old set would be replaced
    r = lmlow("compare", untracked, "--out", out, "--force")
    assert r.returncode == 0, r.stderr
    assert not (out / "frequency_curves.png").exists()
    assert sorted(p.name for p in out.iterdir()) == ["compare.csv", "compare.json", "compare.md",
                                                    "curves.png"]


def test_a_bar_in_a_cell_stays_one_markdown_cell():
    """A baseline row is named by its folder, which may hold a |: escaped, the table keeps
    its columns (CSV quotes it)."""
    from lmlow.tables import markdown, to_csv

    table = markdown(["name", "ppl"], [["kenlm|5", 1.5]])
    assert table.splitlines()[2] == "| kenlm\\|5 | 1.5 |"
    assert all(line.replace("\\|", "").count("|") == 3 for line in table.splitlines())
    assert to_csv(["name", "ppl"], [["kenlm|5", 1.5]]).splitlines()[1] == "kenlm|5,1.5"
    # a header too: bias-sweep's "KL(unigram || mean p)" split its table into 11 columns
    table = markdown(["lambda", "KL(unigram || mean p)"], [[1.0, 0.25]])
    assert all(line.replace("\\|", "").count("|") == 3 for line in table.splitlines())


def test_a_number_just_under_the_next_power_of_ten_is_not_printed_as_an_exponent():
    """999.96 at three significant figures rounds to 1000, which "g" writes as 1e+03 (a bin
    perplexity in `eval`'s table, 9999.96 in a report's four digits)."""
    from lmlow.tables import fmt

    assert (fmt(999.96), fmt(9999.96, 4), fmt(-999.96)) == ("1000", "10000", "-1000")
    assert (fmt(999.4), fmt(123.456), fmt(0.5)) == ("999", "123", "0.5")
