"""``make demo`` end to end at a tiny budget: GloVe on all in-domain text, the standard and the
recommended LSTM side by side, KenLM, table, plot and the two computed sentences; a second run
reuses everything it built."""
import subprocess
import sys

import pytest


@pytest.mark.slow
def test_demo_end_to_end_and_reuse(tmp_path):
    from lmlow import recommendation

    out = tmp_path / "demo"
    args = [sys.executable, "-m", "lmlow.demo", "--out", str(out), "--max-epochs", "1",
            "--glove-epochs", "2"]
    first = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr
    assert "1. GloVe" in first.stdout and "KenLM" in first.stdout
    text = (out / "results.md").read_text()
    table = text.split("\n\n")[0].splitlines()
    # header, rule, KenLM, the two LSTMs, and the recommended one scored as recommended when
    # the recommendation scores models of the demo's optimiser (Adam) with a flag
    flags = recommendation.EVAL_FLAGS.get("adam", "")
    assert len(table) == 5 + bool(flags)
    assert table[3].startswith("| standard")
    assert table[4].startswith(f"| recommended: {recommendation.FLAGS}")
    if flags:
        from lmlow.rundir import evaluation_name

        name = evaluation_name("--map-unseen-inputs" in flags, "--map-unseen-outputs" in flags)
        assert table[5].startswith(f"| recommended with {flags}")
        assert len(list((out / "runs").glob(f"*.seed1/eval_{name}_valid.json"))) == 1
    rows = {}
    for line in table[2:]:
        cells = [c.strip() for c in line.split("|")[1:-1]]
        valid, test, rare = (float(x.replace(",", "")) for x in cells[1:4])
        assert 1 < valid < 20000 and 1 < test < 20000
        rows[cells[0].split(":")[0].split(" (")[0]] = (valid, rare)
    # the sentences name the winners the table shows (worked out here from the table, whose
    # 4 significant digits can tie two rows: the mapped model and the model as trained)
    def winners(i):
        low = min(r[i] for r in rows.values())
        return [n for n, r in rows.items() if r[i] <= low * 1.0005]
    # (a clause starts with the best row, whether it wins or others are level with it)
    assert any(f"Overall, {n} " in text or f"Overall, {n}," in text for n in winners(0))
    assert any(f"seen 1-5 times in training, {n}" in text for n in winners(1))
    assert (out / "curves.png").stat().st_size > 1000
    assert "<eos>" in (out / "vectors.100d.txt").read_text()       # GloVe saw the line ends
    second = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert second.returncode == 0, second.stderr
    assert "1. GloVe" not in second.stdout and "side by side" not in second.stdout  # nothing retrained
    assert (out / "results.md").read_text() == text
    # a link planted at the plot's name: refused in one line, never written through, and the
    # table beside it is left as it was (the two are written together or not at all)
    victim = tmp_path / "victim.txt"
    victim.write_text("PRECIOUS\n")
    (out / "curves.png").unlink()
    (out / "curves.png").symlink_to(victim)
    third = subprocess.run(args, capture_output=True, text=True, timeout=900)
    assert third.returncode == 1 and "curves.png: a symbolic link" in third.stderr, third.stderr
    assert victim.read_text() == "PRECIOUS\n" and (out / "results.md").read_text() == text


def test_the_demo_scores_with_the_recommended_flags_only_for_its_optimiser(tmp_path, monkeypatch):
    """The demo's extra row follows lmlow.recommendation: the flags chosen for the optimiser
    the run was trained with (the demo trains with Adam)."""
    import json

    from lmlow import recommendation
    from lmlow.demo import scored_as_recommended
    from lmlow.rundir import RunDir

    (tmp_path / "config.json").write_text(json.dumps({"optimizer": "adam"}))
    run = RunDir(tmp_path)
    both = "--map-unseen-inputs --map-unseen-outputs"
    for flags, expected in (({"sgd": "--map-unseen-inputs"}, ""),
                            ({"sgd": both, "adam": "--map-unseen-outputs"}, "--map-unseen-outputs"),
                            ({}, "")):
        monkeypatch.setattr(recommendation, "EVAL_FLAGS", flags)
        assert scored_as_recommended(run) == expected


def test_the_closing_sentences_call_a_tie_level_and_never_rank_a_diverged_run():
    """One seed each: rows within 2% of the best are level with it (the tables' one-seed
    margin), not beaten by it; a diverged run (NaN) is named apart, not sorted into the
    ranking; without rare test words there is no rare-word winner (it said "KenLM wins with
    perplexity nan" on 0 words)."""
    from lmlow.demo import conclusion

    def row(name, valid, rare, n=1234):
        return {"configuration": name, "valid": valid, "test": valid, "test_rare": rare,
                "rare_tokens": n}

    kenlm, std, rec = "KenLM 5-gram", "standard (tied, random)", "recommended: --tie no"
    text = conclusion([row(kenlm, 700, 900), row(std, 400.0, 800), row(rec, 404.0, 700)])
    assert text.startswith("Overall, standard and recommended are level (validation perplexity "
                           "400.0, 404.0: within 2%")
    assert "ahead of KenLM 5-gram 700.0 (75.0% higher)." in text
    assert "training, recommended wins with perplexity 700, against standard 800 (14.3% " \
           "higher) and KenLM 5-gram 900 (28.6% higher)." in text
    text = conclusion([row(std, float("nan"), float("nan")), row(kenlm, 700, 900), row(rec, 410, 800)])
    assert text.startswith("Overall, recommended wins with validation perplexity 410.0, against "
                           "KenLM 5-gram 700.0 (70.7% higher) (standard: no finite validation "
                           "perplexity).")
    text = conclusion([row(kenlm, 700, float("nan"), 0), row(rec, 410, float("nan"), 0)])
    assert text.endswith("No test word was seen 1-5 times in training, so rare words were not "
                         "compared.")
