"""experiments/claims.py: the verdicts follow the stated rule, and the README's generated
section is what the committed results say (so claims and results cannot drift apart)."""
import importlib.util
import json
import math
import shutil
import subprocess
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("claims", ROOT / "experiments" / "claims.py")
claims = importlib.util.module_from_spec(spec)
sys.modules["claims"] = claims          # dataclasses look their module up
spec.loader.exec_module(claims)


def row(name, ppls, converged=True, seeds=(1, 2, 3), **extra):
    return {"configuration": name, "valid ppl": statistics.mean(ppls), "valid ppls": list(ppls),
            "seed list": list(seeds), "converged": f"{len(ppls) if converged else 0}/{len(ppls)}",
            "tie": "untied", **extra}


@pytest.mark.parametrize("better, worse, verdict", [
    ([100, 101, 102], [110, 111, 112], "holds"),             # every seed 10 apart
    ([110, 111, 112], [100, 101, 102], "does not hold"),
    # diffs 4, 3, 2: the seeds spread both configurations alike (sd 5 and 4), the paired
    # differences hardly (95% half-width 4.30 x 0.577 = 2.48 < 3): the paired rule sees it
    ([100, 105, 110], [104, 108, 112], "holds"),
    ([100, 101, 102], [110, 111, 101], "no clear difference"),  # one seed goes the other way
    ([100, 100, 100], [101, 110, 130], "no clear difference"),  # mean 13.7 < 36.8
    ([400, 400, 400], [401, 401.2, 401.1], "no clear difference"),  # consistent but < 0.5%
    # the Transformer's freezing pair: +9.7, +50.7, +19.4, mean 26.6 beyond twice the standard
    # error (24.8, the rule before: an 82% interval) but within the 95% one (53.3)
    ([505.8 - 9.7, 505.8 - 50.7, 505.8 - 19.4], [505.8] * 3, "no clear difference"),
    # two seeds: 12.7 standard errors (twice it was a 70% interval)
    ([100, 100], [110, 112], "no clear difference"),   # mean 11 < 12.7 x 1 (2 x 1 before)
    ([100, 100], [110, 111], "holds"),                 # mean 10.5 > 12.7 x 0.5
])
def test_paired_verdicts(better, worse, verdict):
    c = claims.Comparison(row("a", better, seeds=range(1, len(better) + 1)),
                          row("b", worse, seeds=range(1, len(worse) + 1)))
    d = [w - b for b, w in zip(better, worse)]
    assert c.diffs() == pytest.approx(d)
    t95 = {1: 12.7062, 2: 4.30265}[len(d) - 1]        # Student's t at 0.975, from a table
    se = statistics.stdev(d) / len(d) ** 0.5
    floor = 0.005 * min(statistics.mean(better), statistics.mean(worse))
    assert c.margin() == pytest.approx(max(t95 * se, floor), rel=1e-5)
    assert c.verdict() == verdict


def test_seeds_are_paired_by_number_not_position():
    c = claims.Comparison(row("a", [100, 200], seeds=(1, 2)), row("b", [210, 110], seeds=(2, 1)))
    assert c.diffs() == [10, 10]


def test_a_seed_without_a_finite_perplexity_is_left_out_not_a_traceback():
    """A diverged run's perplexity (NaN in a report, null in results.json) on one side: that
    seed is not paired (statistics.stdev raised AttributeError on NaN, TypeError on None)."""
    from lmlow.paired import Paired

    for bad in (math.nan, None, math.inf):
        p = Paired({1: 100.0, 2: 101.0, 3: 99.0}, {1: bad, 2: 130.0, 3: 131.0})
        assert p.seeds == [2, 3] and p.diffs() == [29.0, 32.0]
        assert p.summary()["verdict"] == "worse"


def test_a_row_shows_means_over_the_seeds_both_sides_have():
    """A partner table further on (seeds 1, 2) against one seed of the other: the row shows
    both sides on seed 1, so the two perplexities differ by the mean paired difference, and
    the one-seed margin is 2% of those, not of seed 2's."""
    c = claims.Comparison(row("a", [300, 280], seeds=(1, 2)), row("b", [310], seeds=(1,)))
    assert c.paired_ppls() == (300, 310)
    assert "| a 300.0 | b 310.0 | +10.0 | +10.0 | 6.0 |" in c.row("x")


def test_one_seed_uses_two_percent_and_unconverged_runs_are_labelled():
    c = claims.Comparison(row("a", [100], seeds=(1,)), row("b", [101.5], seeds=(1,), converged=False))
    assert c.margin() == pytest.approx(2.0) and c.verdict() == "no clear difference"
    assert "not all runs converged" in c.row("x")


def test_gain_by_k(tmp_path):
    """Table 3's claim: the gain of ours over standard shrinks as K grows."""
    six = {"standard": row("standard", [500, 510, 520]), "ours": row("ours", [400, 405, 410])}
    unk = {"standard.K5": row("standard.K5", [200, 202, 204]), "ours.K5": row("ours.K5", [195, 196, 197])}
    out = []
    verdict, lines = claims.unk_claim(six, unk, out)
    assert verdict == "holds" and "| 0 |" in lines[2] and "| 5 |" in lines[3]
    unk["standard.K1"], unk["ours.K1"] = row("standard.K1", [300, 300, 300]), row("ours.K1", [150, 151, 152])
    assert claims.unk_claim(six, unk, [])[0] == "holds in part"      # the gain peaks at K=1
    unk = {"standard.K5": row("standard.K5", [300, 310, 320]), "ours.K5": row("ours.K5", [150, 155, 160])}
    assert claims.unk_claim(six, unk, [])[0] == "does not hold"


def test_alc_over_the_updates_both_runs_trained(tmp_path):
    for name, losses in (("zero", [6.0, 5.0, 4.0, 3.9]), ("uni", [5.0, 4.5, 4.0])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("".join(
            json.dumps({"step": 100 * (i + 1), "valid_loss": v}) + "\n" for i, v in enumerate(losses)))
    zero, uni = claims.alc_pair("zero", "uni", tmp_path)
    assert zero == pytest.approx((5.5 + 4.5) / 2) and uni == pytest.approx((4.75 + 4.25) / 2)


@pytest.mark.parametrize("readme", list(claims.GENERATED))
def test_generated_sections_match_the_committed_results(readme):
    text = (ROOT / readme).read_text()
    section = text.split(claims.START, 1)[1].split(claims.END, 1)[0]
    assert section.strip() == claims.GENERATED[readme]().strip(), (
        f"{readme} is out of date: run python experiments/claims.py --update")


@pytest.mark.parametrize("name", list(claims.SECTIONS) + list(claims.WHOLE))
def test_the_recommendation_is_what_the_tables_say(name):
    """README's recommendation and lmlow/recommendation.py (what the demo, `train --help` and
    `stats` read) are claims.py's output for the committed tables."""
    text = (ROOT / name).read_text()
    if name in claims.SECTIONS:
        start, end, make = claims.SECTIONS[name]
        assert claims.section(text, start, end).strip() == make().strip()
    else:
        assert text == claims.WHOLE[name]()


def test_train_help_ends_with_the_recommendation_as_generated(capsys):
    """`lmlow train --help` gives the recommended command and lmlow.recommendation's summary
    word for word: argparse only re-wraps them, never at a hyphen (a flag printed as
    "--map-\nunseen-inputs" cannot be copied) and never doubling a "%"."""
    from lmlow import recommendation
    from lmlow.parsers import build_parser

    with pytest.raises(SystemExit):
        build_parser().parse_args(["train", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert recommendation.command("data/ptb", "vectors.txt", "runs/ours") in out
    assert " ".join(recommendation.summary().split()) in out


def test_the_recommendation_follows_the_first_tier_and_the_paired_rule(tmp_path):
    """A made-up paper-regime table where ours is clearly best, standard+pretraining level
    with it: the recommendation is ours, from that tier, level with standard+pretraining."""
    def put(table, rows, missing=()):
        path = tmp_path / claims.SOURCES[table]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(list(rows.values())))
        plan = [{"name": n, "seed": s} for n in [*rows, *missing] for s in (1, 2)]
        (path.parent / "sweep.json").write_text(json.dumps(plan))
        for r in rows.values():
            run = tmp_path / r["runs"][0]
            run.mkdir(parents=True, exist_ok=True)
            for seed in (1, 2):
                done = path.parent / f"{r['configuration']}.seed{seed}"
                done.mkdir(exist_ok=True)
                (done / "summary.json").write_text("{}")
            cfg = {"ours": dict(tie=False, freeze_input=True, init=["glove", "glove-output"],
                                extend_vocab=True),
                   "standard+pretraining": dict(tie=True, freeze_input=False, init=["glove"]),
                   "standard": dict(tie=True, freeze_input=False, init=["random"])}
            (run / "config.json").write_text(json.dumps(cfg[r["configuration"]]))
    rows = {n: row(n, p, runs=[f"r/{n}"]) for n, p in (
        ("standard", [300, 301, 302]), ("standard+pretraining", [251, 250, 253]),
        ("ours", [250, 251, 252]))}
    put("paper-regime", rows)
    rec = claims.recommendation(tmp_path)
    assert rec["name"] == "ours" and rec["level_with"] == ["standard+pretraining"]
    assert rec["tier"].startswith("the paper's regime") and not rec["pending"]
    # the runs measured kept the vectors' words (--extend-vocab): so does the command
    assert claims.recommended_flags(rec["settings"]) == ("--tie no --freeze-input --init "
                                                         "glove,glove-output --extend-vocab")
    rows["standard+pretraining"] = row("standard+pretraining", [240, 241, 242], runs=["r/standard+pretraining"])
    put("paper-regime", rows)
    assert claims.recommendation(tmp_path)["name"] == "standard+pretraining"
    put("paper-regime", rows, missing=["ours-vecrows"])       # still training: not followed
    assert claims.recommendation(tmp_path) == {}


def test_tables_that_disagree_still_give_a_recommendation_and_say_so(tmp_path):
    """Technical: A clearly best; State of the Union: B clearly best. No configuration is
    level with the best of both (min() of nothing raised ValueError): the closest to each
    table's best on average, and the evidence says the tables disagree."""
    for table, ppls in (("six-sgd", {"standard": [300] * 3, "A": [100, 101, 102], "B": [110, 111, 112]}),
                        ("sotu-sgd", {"standard": [300] * 3, "A": [108, 109, 110], "B": [100, 101, 102]})):
        path = tmp_path / claims.SOURCES[table]
        path.parent.mkdir(parents=True)
        runs = {n: [str((path.parent / f"{n}.seed{s}").relative_to(tmp_path)) for s in (1, 2, 3)]
                for n in ppls}
        for n, rs in runs.items():
            for r in rs:
                (tmp_path / r).mkdir()
                (tmp_path / r / "summary.json").write_text("{}")
                (tmp_path / r / "config.json").write_text(json.dumps({"tie": n == "standard", "init": [n]}))
        path.write_text(json.dumps([row(n, p, runs=runs[n]) for n, p in ppls.items()]))
        (path.parent / "sweep.json").write_text(json.dumps([{"name": n, "seed": s} for n in ppls for s in (1, 2, 3)]))
    rec = claims.recommendation(tmp_path)
    assert rec["name"] == "A" and rec["level_with"] == []       # 1.040 of the best against 1.050
    assert "the tables disagree" in rec["evidence"]


def test_a_table_whose_report_lacks_a_trained_seed_is_not_complete(tmp_path):
    """Every planned run has its summary.json, but results.json (the report) was written
    before seed 2 finished: the table is still partial (it was complete, and moved the
    recommendation on one seed)."""
    path = tmp_path / claims.SOURCES["paper-regime-cpu"]
    path.parent.mkdir(parents=True)
    for n in ("standard", "ours-unfrozen"):
        for s in (1, 2):
            (path.parent / f"{n}.seed{s}").mkdir()
            (path.parent / f"{n}.seed{s}" / "summary.json").write_text("{}")
    (path.parent / "sweep.json").write_text(json.dumps(
        [{"name": n, "seed": s} for n in ("standard", "ours-unfrozen") for s in (1, 2)]))
    path.write_text(json.dumps([row("standard", [200.0], seeds=(1,)), row("ours-unfrozen", [150.0], seeds=(1,))]))
    assert not claims.complete("paper-regime-cpu", tmp_path)
    path.write_text(json.dumps([row("standard", [200.0, 201.0], seeds=(1, 2)),
                                row("ours-unfrozen", [150.0, 151.0], seeds=(1, 2))]))
    assert claims.complete("paper-regime-cpu", tmp_path)


def test_ours_is_the_best_only_when_it_clearly_beats_every_other():
    """The rival with the lowest mean (ours-unfrozen, clearly worse on every seed) is not the
    only one tested: standard+pretraining beats ours on seed 1 and loses on the others, so the
    claim is "no clear difference" (it was "holds", tested against the lowest mean alone)."""
    six = {"standard": row("standard", [200, 200, 200], tie="tied"),
           "ours": row("ours", [100, 100, 100]),
           "ours-unfrozen": row("ours-unfrozen", [105, 105, 105]),
           "standard+pretraining": row("standard+pretraining", [80, 130, 110], tie="tied")}
    out = []
    assert claims.six_claims(six, "t", out)["ours is the best"] == "no clear difference"
    shown = [l for l in out if l.startswith("| ours is the best")]
    assert shown == [l for l in shown if "standard+pretraining 106.7" in l] and len(shown) == 1
    six["standard+pretraining"] = row("standard+pretraining", [110, 111, 112], tie="tied")
    assert claims.six_claims(six, "t", [])["ours is the best"] == "holds"


def test_a_comparison_without_a_shared_finite_seed_is_a_row_not_a_traceback():
    """A one-seed partial table whose `ours` diverged (null in results.json): the row says
    "not tested" (statistics.mean of nothing raised StatisticsError)."""
    c = claims.Comparison(row("ours-unfrozen", [150.0], seeds=(1,)),
                          {**row("ours", [1.0], seeds=(1,)), "valid ppls": [None]})
    assert c.verdict() == "not tested"
    assert c.row("freezing").endswith("| **not tested** (no seed with both perplexities) |")


def test_the_cpu_pair_of_the_paper_regime_is_evidence_before_it_is_the_table(tmp_path):
    """The paper regime trained on a CPU (sweep-cpu.100d) grows a run at a time: its first
    converged pair is one more paired freezing cost and a one-seed verdict labelled partial,
    with no claim it cannot test ("ours is the best" wants the baselines); it moves the
    recommendation only once every planned run has its 2 seeds and the table has its baseline."""
    path = tmp_path / claims.SOURCES["paper-regime-cpu"]
    path.parent.mkdir(parents=True)
    cfg = {"ours": dict(tie=False, freeze_input=True, init=["glove", "glove-output"]),
           "ours-unfrozen": dict(tie=False, freeze_input=False, init=["glove", "glove-output"])}

    sweep = path.parent.relative_to(tmp_path)          # results.json names runs from the root

    def put(ppls, seeds):
        rows = {n: row(n, p, seeds=seeds[:len(p)],
                       runs=[str(sweep / f"{n}.seed{s}") for s in seeds[:len(p)]])
                for n, p in ppls.items()}
        for r in rows.values():
            for run in r["runs"]:
                (tmp_path / run).mkdir(exist_ok=True)
                (tmp_path / run / "summary.json").write_text(json.dumps(
                    {"input_rows": {"frozen_random_tokens_pct": 3.1}}))
                (tmp_path / run / "config.json").write_text(json.dumps(cfg[r["configuration"]]))
        path.write_text(json.dumps(list(rows.values())))
        (path.parent / "sweep.json").write_text(json.dumps(
            [{"name": n, "seed": s} for n in cfg for s in (1, 2)]))

    put({"ours": [180.0], "ours-unfrozen": [150.0]}, (1,))
    out = []
    verdicts = claims.paper_regime_claims(tmp_path, out)
    label = "1M-word technical, paper recipe, CPU bf16/fp32, partial: 1 seed(s) so far"
    assert verdicts[f"freezing the pretrained input helps ({label})"] == "does not hold"
    assert f"ours is the best ({label})" not in verdicts       # not testable yet: not listed
    assert f"pretrained input beats random input ({label})" not in verdicts
    assert any(l.startswith(f"| freezing the pretrained input helps ({label}) | ours 180.0 | "
                            "ours-unfrozen 150.0 | -30.0 |") for l in out)
    evidence = claims.freezing_evidence(tmp_path)
    assert evidence["runs"] == 1 and evidence["costs"] == [30.0, 30.0]
    assert [p["frozen_random_pct"] for p in claims.freezing_points(tmp_path)] == [3.1]
    assert not claims.complete("paper-regime-cpu", tmp_path) and claims.recommendation(tmp_path) == {}
    cfg["standard+pretraining"] = dict(tie=True, freeze_input=False, init=["glove"])
    put({"ours": [180.0, 178.0], "ours-unfrozen": [150.0, 149.0],
         "standard+pretraining": [160.0]}, (1, 2))
    label = "1M-word technical, paper recipe, CPU bf16/fp32, partial: 1-2 seeds a configuration so far"
    assert claims.paper_regime_claims(tmp_path, [])[
        f"freezing the pretrained input helps ({label})"] == "does not hold"
    del cfg["standard+pretraining"]
    put({"ours": [180.0, 178.0], "ours-unfrozen": [150.0, 149.0]}, (1, 2))
    assert claims.complete("paper-regime-cpu", tmp_path)
    assert claims.recommendation(tmp_path) == {}         # the pair alone: no baseline to beat
    cfg["standard"] = dict(tie=True, freeze_input=False, init=["random"])
    put({"ours": [180.0, 178.0], "ours-unfrozen": [150.0, 149.0], "standard": [200.0, 201.0]},
        (1, 2))
    rec = claims.recommendation(tmp_path)
    assert rec["name"] == "ours-unfrozen" and rec["tier"].startswith("the paper's regime trained on a CPU")
    assert rec["pending"] == [claims.TIERS[0][0]]        # the GPU table, ahead of it, is not there


def test_the_partial_freeze_sentence_counts_its_pairs_both_ways(tmp_path, monkeypatch):
    """The recommendation's line on --freeze-input-rows pretrained: pairs worse, better and
    within the paired rule's 0.5% floor, from the partial-freeze points only (the whole
    freeze's pairs are counted apart)."""
    points = [{"frozen": "ours-vecrows", "seed": 1, "cost": 7.5, "cost_pct": 3.0},
              {"frozen": "ours-random-output-vecrows", "seed": 1, "cost": -2.0, "cost_pct": -0.8},
              {"frozen": "ours-vecrows", "seed": 2, "cost": 18.1, "cost_pct": 7.2},
              {"frozen": "ours-random-output-vecrows", "seed": 2, "cost": 0.02, "cost_pct": 0.01},
              {"frozen": "ours", "seed": 1, "cost": -30.0, "cost_pct": -12.0}]
    monkeypatch.setattr(claims, "freezing_points", lambda root: points)
    partial = claims.freezing_evidence(tmp_path)["partial"]
    assert partial == {"costs": [-2.0, 18.1], "runs": 4, "worse": 2, "better": 1, "seeds": [1, 2]}
    assert claims.partial_freeze_sentence(partial) == (
        "Freezing only the rows that have a vector (`--freeze-input-rows pretrained`): worse "
        "than training them in 2 of its 4 pairs so far (seeds 1, 2), by up to 18.1 perplexity; "
        "better in 1, by at most 2.0; within 0.5% of it in 1.")
    monkeypatch.setattr(claims, "freezing_points", lambda root: points[:1])
    assert claims.partial_freeze_sentence(claims.freezing_evidence(tmp_path)["partial"]).endswith(
        "in 1 of its 1 pairs so far (seed 1), by up to 7.5 perplexity.")


def table1_rows(ppl):
    """The 20 configurations of `lmlow sweep --grid table1`, one seed, perplexity ppl(name)."""
    from lmlow.config import EmbeddingRoles, table1_configurations
    rows = {}
    for s in table1_configurations():
        roles = EmbeddingRoles.of(s)
        name = roles.slug()
        rows[name] = {**row(name, [ppl(name)], seeds=(1,)), **roles.columns()}
    return rows


def test_table1_groups_follow_the_papers_text():
    rows = table1_rows(lambda n: 100)
    groups = {n: claims.table1_group(r) for n, r in rows.items()}
    assert sum(g.startswith("(a)") for g in groups.values()) == 5      # 4 untied + tied.rand-frozen
    assert sum(g.startswith("(b)") for g in groups.values()) == 5      # 4 untied + tied.pre-frozen
    assert sorted(n for n, g in groups.items() if g.startswith("(c)")) == [
        "untied.in-rand-frozen.out-pre", "untied.in-rand-frozen.out-rand"]
    assert groups["tied.pre-frozen"].startswith("(b)") and groups[claims.OURS_T1].startswith("(d)")


def test_table1_claims_on_a_ranking_that_follows_the_paper():
    def ppl(name):   # pretrained input 20% better, frozen pretrained 5% better, ours best
        p = 1000.0 if "out-rand-frozen" in name or name == "tied.rand-frozen" else 300.0
        p *= 0.8 if ("in-pre" in name or name.startswith("tied.pre")) else 1.0
        p *= 0.95 if "in-pre-frozen" in name else 1.0
        p *= 0.9 if name.startswith("untied") and "out-pre" in name and "frozen" not in name.split(".")[-1] else 1.0
        return p * (0.9 if name == claims.OURS_T1 else 1.0)
    v = claims.table1_claims(table1_rows(ppl), out := [])
    assert v == {"Table 1: pretrained input beats random input": "holds",
                 "Table 1: freezing the pretrained input helps": "holds",
                 "Table 1: the top five use pretrained input, the top three are untied": "holds",
                 "Table 1: ours is the best of the 20": "holds",
                 "Table 1: frozen random output embeddings are the worst group": "holds"}
    assert len([l for l in out if "random input" in l]) == 10    # 8 untied pairs (2 inputs x 4 outputs) + 2 tied
    flipped = claims.table1_claims(table1_rows(lambda n: 2000 - ppl(n)), [])
    assert flipped["Table 1: pretrained input beats random input"] == "does not hold"
    assert flipped["Table 1: frozen random output embeddings are the worst group"] == "does not hold"
    assert set(claims.table1_claims({}, []).values()) == {"not tested"}


def test_the_six_claims_at_each_k_need_a_complete_column():
    ppl = {"standard": 300, "ours-random-output-unfrozen": 290, "standard+pretraining": 250,
           "ours-unfrozen": 240, "ours": 200, "ours-random-output": 210}
    unk = {f"{n}.K{k}": row(f"{n}.K{k}", [p * f, p * f + 1, p * f + 2])
           for k, f in ((1, 1.0), (5, 0.5)) for n, p in ppl.items()}
    v = claims.unk_pattern_claims(unk, [])
    assert v["freezing the pretrained input helps (Table 3, K=1,5)"] == "holds"
    assert v["ours is the best (Table 3, K=1,5)"] == "holds"
    unk["standard.K5"] = row("standard.K5", [100, 101, 102])        # random input best at K=5 only
    v = claims.unk_pattern_claims(unk, [])
    assert v["pretrained input beats random input (Table 3, K=1,5)"] == "mixed"
    del unk["ours.K5"]                                                # K=5 incomplete: not counted
    assert "freezing the pretrained input helps (Table 3, K=1)" in claims.unk_pattern_claims(unk, [])


def test_more_pretraining_text_pairs_with_the_six_by_seed():
    six = {n: row(n, [p, p + 1, p + 2]) for n, p in (
        ("standard", 470), ("ours-random-output-unfrozen", 445), ("standard+pretraining", 408),
        ("ours-unfrozen", 407), ("ours", 457), ("ours-random-output", 483))}
    big = {n: row(n, [p, p + 1, p + 2]) for n, p in (
        ("ours-random-output-unfrozen", 430), ("standard+pretraining", 390), ("ours-unfrozen", 400),
        ("ours", 380), ("ours-random-output", 385))}
    v = claims.pretrain_size_claims(six, big, out := [])
    assert v["more pretraining text gives better models (Table 5)"] == "holds"
    assert v[f"freezing the pretrained input helps ({claims.BIG_VECTORS})"] == "holds"
    assert any("ours, 8.6M-word vectors 381.0" in l for l in out)
    assert set(claims.pretrain_size_claims(six, {}, []).values()) == {"not tested"}


@pytest.mark.parametrize("verdicts, combined", [
    (["holds", "holds", "not tested"], "holds"),
    (["holds", "no clear difference"], "holds in part"),
    (["does not hold", "no clear difference"], "does not hold in part"),
    (["holds", "does not hold"], "mixed"),
    (["no clear difference"], "no clear difference"),
    (["does not hold in part"], "does not hold in part"),         # combining is idempotent
    (["does not hold in part", "does not hold"], "does not hold in part"),
    (["holds in part", "holds"], "holds in part"),
    (["mixed", "holds"], "mixed"),
])
def test_combined_verdicts(verdicts, combined):
    assert claims.combine(verdicts) == combined


# ------------------------------------------------ experiments/converged/reuse.py

def _reuse(*args):
    import subprocess
    return subprocess.run([sys.executable, str(ROOT / "experiments/converged/reuse.py"), *args],
                          capture_output=True, text=True, cwd=ROOT)


def test_reuse_copies_the_six_under_table1_names_and_checks_their_settings(tmp_path):
    """The six's committed runs land in a Table 1 sweep under Table 1's names with their
    record (so the report reads them), and --check refuses a copy whose settings differ from
    the sweep's own runs in anything but the embedding roles and the seed."""
    six = ROOT / "experiments/six/sweep"
    dst = tmp_path / "sweep"
    assert _reuse(str(six), str(dst)).returncode == 0
    ours = dst / "untied.in-pre-frozen.out-pre.seed2"
    assert (ours / "reused_from").read_text().strip().endswith("ours.seed2")
    assert json.loads((ours / "eval_best_valid.json").read_text()) == \
        json.loads((six / "ours.seed2" / "eval_best_valid.json").read_text())
    assert len([p for p in dst.iterdir() if p.name.endswith(".seed1")]) == 6
    # a run of the sweep's own: another configuration, same settings otherwise
    own = dst / "tied.rand-frozen.seed1"
    own.mkdir()
    cfg = json.loads((six / "standard.seed1" / "config.json").read_text())
    (own / "config.json").write_text(json.dumps(cfg | {"freeze_input": True}))
    (own / "summary.json").write_text("{}")
    assert _reuse("--check", str(six), str(dst)).returncode == 0
    # a setting lmlow gained after a run was trained (the six predate `arch`) reads as its
    # default: a newer run that names the default is the same experiment, another value is not
    (own / "config.json").write_text(json.dumps(cfg | {"freeze_input": True, "arch": "lstm"}))
    assert _reuse("--check", str(six), str(dst)).returncode == 0
    (own / "config.json").write_text(json.dumps(cfg | {"freeze_input": True, "heads": 8}))
    bad = _reuse("--check", str(six), str(dst))
    assert bad.returncode == 1 and "heads" in bad.stdout
    (own / "config.json").write_text(json.dumps(cfg | {"freeze_input": True, "hidden_size": 512}))
    bad = _reuse("--check", str(six), str(dst))
    assert bad.returncode == 1 and "hidden_size" in bad.stdout
    # a second copy changes nothing that is already there
    assert "nothing to copy" in _reuse(str(six), str(dst)).stdout


@pytest.mark.parametrize("second, verdict", [
    ({"a": "holds", "b": "does not hold"}, "holds"),
    ({"a": "holds", "b": "holds"}, "holds in part"),
    ({"a": "does not hold", "b": "holds"}, "does not hold"),
    ({"a": "not tested", "b": "not tested"}, "not tested"),
])
def test_domain_agreement_compares_verdicts_claim_by_claim(second, verdict):
    assert claims.domain_agreement({"a": "holds", "b": "does not hold"}, second) == verdict


def datasize_rows(margin_1x, margin_4x):
    """The six at 1x and 4x (fractions 0.25 and 1) with ours best by the given margins over
    standard, and a 5-gram per size; 3 seeds each, sd 1."""
    rows = {}
    for f, base, margin in ((0.25, 400, margin_1x), (1, 200, margin_4x)):
        ppl = {"standard": base, "ours-random-output-unfrozen": base - 1, "standard+pretraining": base - 2,
               "ours-unfrozen": base - 3, "ours": base - margin, "ours-random-output": base - margin + 1}
        for n, p in ppl.items():
            rows[f"{n}.data{f:g}"] = row(f"{n}.data{f:g}", [p - 1, p, p + 1])
        kenlm = "KenLM 5-gram" + ("" if f == 1 else f".data{f:g}")
        rows[kenlm] = row(kenlm, [base * 2], seeds=(1,), tie="")
    return rows


def test_table6_margin_shrinks_and_ours_stays_best():
    v = claims.datasize_claims(claims.datasize_columns(datasize_rows(40, 10)), out := [])
    assert v["Table 6: ours and ours-random-output stay the best as LM text grows (data=0.25,1)"] == "holds"
    assert v["Table 6: their margin over standard shrinks as LM text grows (data=0.25,1)"] == "holds"
    assert v["Table 6: the LSTM beats the 5-gram at every size (data=0.25,1)"] == "holds"
    assert v["freezing the pretrained input helps (Table 6, data=0.25,1)"] == "holds"
    assert any("(data=1)" in line and "KenLM 5-gram 400.0" in line for line in out)
    grows = claims.datasize_claims(claims.datasize_columns(datasize_rows(10, 40)), [])
    assert grows["Table 6: their margin over standard shrinks as LM text grows (data=0.25,1)"] == "does not hold"
    rows = datasize_rows(40, 10)
    del rows["ours.data1"]                                   # an incomplete size is not a column
    assert set(claims.datasize_claims(claims.datasize_columns(rows), []).values()) == {"not tested"}


def test_table1_worst_row_on_a_fixed_budget():
    t1 = table1_rows(lambda n: 900.0 if n == claims.NO_EARLY_STOP else
                     800.0 if "out-rand-frozen" in n or n == "tied.rand-frozen" else 400.0)
    for seeds_ppl, found, worst in (([600, 601, 602], "does not hold", "holds"),
                                    # the same as the rule found: no clear difference, said so
                                    ([899, 900, 901], "no clear difference", "does not hold")):
        nes = {claims.NO_EARLY_STOP: row(claims.NO_EARLY_STOP, seeds_ppl, converged=False)}
        t1[claims.NO_EARLY_STOP] = {**t1[claims.NO_EARLY_STOP],
                                    **row(claims.NO_EARLY_STOP, [899, 900, 901])}
        v = claims.table1_no_early_stop(t1, nes, out := [])
        assert list(v.values()) == [found, worst], (seeds_ppl, v)
        assert "30 epochs: a cap, by design" in out[0]
    assert set(claims.table1_no_early_stop(t1, {}, []).values()) == {"not tested"}


def test_table6_readme_table_counts_the_training_words(tmp_path):
    results = tmp_path / claims.SOURCES["datasize"]
    results.parent.mkdir(parents=True)
    results.write_text(json.dumps([{**r, "valid sd": None if r["tie"] == "" else 1.0}
                                   for r in datasize_rows(40, 10).values()]))
    corpus = tmp_path / claims.DATASIZE_CORPUS
    corpus.mkdir(parents=True)
    (corpus / "train.txt").write_text("a b c\n" * 6 + "d e\n" * 4)     # 24 + 12 tokens
    assert claims.training_words(0.25, tmp_path) == 6                # the first 9 tokens: 2 lines
    table = claims.datasize_table(tmp_path)
    assert "0.25 (6 words)" in table and "1 (26 words)" in table
    assert "| ours | 360.0 (1.0) [90.8] | 3/3 | 190.0 (1.0) [66.8] | 3/3 |" in table   # 1x and 4x
    assert "[paper 4x]" in table and "| KenLM 5-gram, same tokens | 800.0 | | 400.0 | |" in table


def test_stopping_rule_agreement_compares_seed_1_both_ways():
    ppl = {"standard": 300, "ours-random-output-unfrozen": 290, "standard+pretraining": 250,
           "ours-unfrozen": 240, "ours": 200, "ours-random-output": 210}
    six = {n: row(n, [p, p + 50, p + 90]) for n, p in ppl.items()}     # seeds 2, 3 never read
    fixed = {n: row(n, [p * 0.9], seeds=(1,), converged=False) for n, p in ppl.items()}
    assert claims.rule_agreement(six, fixed, []) == "holds"
    fixed["ours"] = row("ours", [260], seeds=(1,), converged=False)    # freezing now costs
    assert claims.rule_agreement(six, fixed, []) == "holds in part"
    del fixed["ours"]
    assert claims.rule_agreement(six, fixed, []) == "not tested"
    assert claims.seed_only(six, 3)["ours"]["valid ppls"] == [290]


def test_table6_scale_says_how_many_seeds_each_size_has():
    six = lambda *counts: {n: row(n, [300.0] * k, seeds=range(1, k + 1))
                           for n, k in zip(claims.SIX_ORDER, counts)}
    partial = {0.25: six(3, 3, 3, 3, 3, 3), 0.5: six(3, 3, 3, 3, 3, 3), 1.0: six(2, 2, 1, 1, 2, 1)}
    assert claims._seeds_by_size(partial) == "seeds: 3 at 1x, 3 at 2x, 1-2 at 4x so far"
    done = {0.25: six(3, 3, 3, 3, 3, 3), 1.0: six(3, 3, 3, 3, 3, 3)}
    assert claims._seeds_by_size(done) == "seeds: 3 at 1x, 3 at 4x"


def test_results_files_say_what_their_runs_measured():
    """Every committed results.json the claims read agrees with its run folders: each row's
    per-seed valid and test perplexities are the runs' own cached evaluations
    (eval_best_{valid,test}.json, written when each run was scored), its mean is their mean,
    and each run's seed is the one listed. A results file edited by hand, or a run scored
    again without its table being reported again, fails here."""
    checked = 0
    for table, rel in claims.SOURCES.items():
        path = ROOT / rel
        if not path.exists():
            continue
        for r in json.loads(path.read_text()):
            if "valid ppls" not in r:          # the 5-gram: one model, no seeds
                for split in ("valid", "test"):
                    (cache,) = (ROOT / r["runs"][0]).glob(f"eval*_{split}.json")
                    assert r[f"{split} ppl"] == pytest.approx(
                        json.loads(cache.read_text())["perplexity"], rel=1e-9), (rel, r["configuration"])
                continue
            for split in ("valid", "test"):
                measured = [json.loads((ROOT / run / f"eval_best_{split}.json").read_text())["perplexity"]
                            for run in r["runs"]]
                assert r[f"{split} ppls"] == pytest.approx(measured, rel=1e-9), (rel, r["configuration"])
                assert r[f"{split} ppl"] == pytest.approx(statistics.mean(measured), rel=1e-9)
            seeds = [json.loads((ROOT / run / "config.json").read_text())["seed"] for run in r["runs"]]
            assert seeds == r["seed list"], (rel, r["configuration"])
            checked += len(r["runs"])
    assert checked > 200


def test_the_transformer_answers_the_open_question_against_the_lstm(tmp_path):
    """Made-up tables: a Transformer with the LSTM's pattern (pretraining helps, freezing
    costs, untied beats tied) at 10% higher perplexity: its verdicts agree with the LSTM's,
    it does not beat the LSTM, and the unigram claims wait for their table."""
    def put(table, rows):
        path = tmp_path / claims.SOURCES[table]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(list(rows.values())))
    lstm = {"standard": 320, "standard+pretraining": 300, "ours-unfrozen": 290, "ours": 305,
            "ours-random-output-unfrozen": 308, "ours-random-output": 318}
    jitter = (0, 1.5, -1)
    put("six-sgd", {n: row(n, [p + j for j in jitter]) for n, p in lstm.items()})
    out = []
    assert claims.transformer_claims(tmp_path, out)[
        "a Transformer of the LSTM's size beats it, configuration by configuration (technical)"] == "not tested"
    put("transformer", {n: row(n, [1.1 * p + j for j in (1, -1, 0.5)]) for n, p in lstm.items()})
    out = []
    v = claims.transformer_claims(tmp_path, out)
    label = "technical, Transformer (AdamW), partial: 3 seed(s) so far"   # no sweep.json: a plan unknown
    assert v[f"pretrained input beats random input ({label})"] == "holds"
    assert v[f"freezing the pretrained input helps ({label})"] == "does not hold"
    # ours-unfrozen beats standard+pretraining, ours (frozen) does not: as the LSTM
    assert v[f"with pretrained input, untied beats tied ({label})"] == "mixed"
    assert v["the Transformer gives the LSTM's verdicts, claim by claim (technical; the LSTM "
             "under the paper recipe)"] == "holds"
    assert v["a Transformer of the LSTM's size beats it, configuration by configuration "
             "(technical)"] == "does not hold"
    assert v["Meister, Transformer: unigram bias init learns faster (lower ALC)"] == "not tested"
    rows = [l for l in out if "the Transformer beats the LSTM of its size (standard)" in l]
    assert len(rows) == 1 and "Transformer standard 352.2" in rows[0] and "LSTM standard 320.2" in rows[0]


def test_the_transformer_search_picks_the_lowest_converged_validation_perplexity(tmp_path):
    spec = importlib.util.spec_from_file_location("choose", ROOT / "experiments" / "transformer" / "choose.py")
    choose = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(choose)
    grid = tmp_path / "search.toml"
    grid.write_text('[runs.a]\ntie = true\ninit = ["random"]\nlr = 1e-3\ndropout = 0.1\n\n'
                    '[runs.b]\ntie = true\ninit = ["random"]\nlr = 3e-4\ndropout = 0.3\n')
    results = tmp_path / "results.json"
    results.write_text(json.dumps([row("a", [310], seeds=(1,)), row("b", [300], seeds=(1,))]))
    assert choose.choose(grid, results) == ("b", ["--lr", "0.0003", "--dropout", "0.3"])
    results.write_text(json.dumps([row("a", [310], seeds=(1,)), row("b", [300], seeds=(1,), converged=False)]))
    with pytest.raises(SystemExit, match="b did not converge"):
        choose.choose(grid, results)
    results.write_text(json.dumps([row("a", [310], seeds=(1,))]))
    with pytest.raises(SystemExit, match="no row for b"):
        choose.choose(grid, results)
    # with two seeds planned, the winner is the lowest mean, and only once both have finished
    (tmp_path / "sweep.json").write_text(json.dumps(
        [{"name": n, "seed": s} for n in "ab" for s in (1, 2)]))
    results.write_text(json.dumps([row("a", [310, 290], seeds=(1, 2)), row("b", [300], seeds=(1,))]))
    with pytest.raises(SystemExit, match="b.seed2 not finished"):
        choose.choose(grid, results)
    results.write_text(json.dumps([row("a", [310, 290], seeds=(1, 2)),
                                   row("b", [300, 305], seeds=(1, 2))]))
    assert choose.choose(grid, results)[0] == "a"


def test_reuse_same_words_copies_only_random_runs_whose_vocabulary_matches(tmp_path):
    """--same-words: a run that reads no vector is the same experiment under other vectors
    that add the same words, and only then; --check ignores the vectors' path of such copies."""
    from lmlow.data.corpus import Corpus
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    for split in ("train", "valid", "test"):
        (corpus / f"{split}.txt").write_text("the cat sat\non the mat\n")

    def vectors(name, words, value):
        path = tmp_path / name
        path.write_text("".join(f"{w} {value} {value + 1}\n" for w in words))
        return path
    old = vectors("old.txt", ["the", "dog", "ran"], 0.1)
    same = vectors("same.txt", ["ran", "dog", "cat"], 0.7)        # other values, same new words
    more = vectors("more.txt", ["dog", "ran", "fox"], 0.1)
    src, dst = tmp_path / "src", tmp_path / "dst"
    base = {"corpus": str(corpus), "unk_threshold": 0, "extend_vocab": True, "tie": True,
            "embeddings": str(old), "hidden_size": 256, "seed": 1}
    for name, init in (("standard.seed1", ["random"]), ("standard+pretraining.seed1", ["glove"])):
        run = src / name
        run.mkdir(parents=True)
        for f in ("data.json", "metrics.jsonl", "summary.json", "eval_best_valid.json",
                  "eval_best_test.json"):
            (run / f).write_text("{}\n")
        (run / "config.json").write_text(json.dumps(base | {"init": init}))
        Corpus(corpus, 0, ["the", "dog", "ran"], show_progress=False).vocab.save(run / "vocab.txt")
    refused = _reuse("--same-words", str(more), str(src), str(dst))
    assert refused.returncode == 0 and "not copied" in refused.stdout and not (dst / "standard.seed1").exists()
    assert _reuse("--same-words", str(same), str(src), str(dst)).returncode == 0
    assert (dst / "standard.seed1" / "reused_from").exists()
    assert not (dst / "standard+pretraining.seed1").exists()       # it read the old vectors' values
    own = dst / "ours.seed1"                                         # the sweep's own run
    own.mkdir()
    (own / "config.json").write_text(json.dumps(base | {"embeddings": str(same), "tie": False,
                                                        "init": ["glove", "glove-output"]}))
    (own / "summary.json").write_text("{}")
    assert _reuse("--check", str(src), str(dst)).returncode == 0
    (own / "config.json").write_text(json.dumps(base | {"embeddings": str(same), "hidden_size": 512}))
    bad = _reuse("--check", str(src), str(dst))
    assert bad.returncode == 1 and "hidden_size" in bad.stdout and "embeddings" not in bad.stdout


def _swap(exp):
    return subprocess.run([sys.executable, str(ROOT / "experiments" / "datasize" / "swap_rerun.py"),
                           str(exp)], capture_output=True, text=True)


def test_swap_rerun_replaces_two_thread_runs_only_with_converged_one_thread_twins(tmp_path):
    """Issue 24's audit: the data-size table's two-thread runs are replaced by their one-thread
    reruns only when every twin has finished, converged, with the same settings; until then
    nothing moves, and afterwards the old runs are kept aside, not deleted."""
    exp = tmp_path / "datasize"
    # a committed run's settings; the reruns also name the settings lmlow gained since the
    # old runs were trained (arch, heads, context), at their defaults: the same experiment
    base = json.loads((ROOT / "experiments/datasize/sweep/standard.data1.seed1/config.json").read_text())
    assert "arch" not in base
    since = {"arch": "lstm", "heads": 4, "context": 128}

    def run(folder, name, threads, stopped="patience", lr=0.003):
        d = exp / folder / name
        d.mkdir(parents=True)
        cfg = base | {"seed": 2, "lr": lr, "threads": threads}
        (d / "config.json").write_text(json.dumps(cfg | (since if folder != "sweep" else {})))
        (d / "summary.json").write_text(json.dumps({"stopped_by": stopped, "threads": threads,
                                                    "run_dir": str(d), "checkpoint": str(d / "best.pt")}))
        (exp / folder / "logs").mkdir(exist_ok=True)
        (exp / folder / "logs" / f"{name}.log").write_text(f"{folder} {threads}\n")
    run("sweep", "a.seed2", 2)
    run("sweep", "b.seed2", 2)
    run("sweep", "c.seed2", 1)                                  # already one thread: stays
    run("rerun-1thread", "a.seed2", 1)
    before = sorted(p.relative_to(exp) for p in exp.rglob("*"))
    r = _swap(exp)
    assert r.returncode == 3 and "b.seed2 has not finished" in r.stdout
    run("rerun-1thread", "b.seed2", 1, stopped="max_epochs")
    r = _swap(exp)
    assert r.returncode == 1 and "did not converge" in r.stderr
    shutil.rmtree(exp / "rerun-1thread" / "b.seed2")
    run("rerun-1thread", "b.seed2", 1, lr=0.01)
    r = _swap(exp)
    assert r.returncode == 1 and "differs in: lr" in r.stderr
    assert sorted(p.relative_to(exp) for p in exp.rglob("*") if "b.seed2" not in str(p)) == \
        [p for p in before if "b.seed2" not in str(p)]                       # nothing moved
    shutil.rmtree(exp / "rerun-1thread" / "b.seed2")
    run("rerun-1thread", "b.seed2", 1)
    r = _swap(exp)
    assert r.returncode == 0, r.stderr
    for name in ("a.seed2", "b.seed2"):
        assert json.loads((exp / "sweep" / name / "config.json").read_text())["threads"] == 1
        assert json.loads((exp / "superseded-threads2" / name / "config.json").read_text())["threads"] == 2
        summary = json.loads((exp / "sweep" / name / "summary.json").read_text())
        assert summary["run_dir"] == str(exp / "sweep" / name)
        assert summary["checkpoint"] == str(exp / "sweep" / name / "best.pt")
        assert (exp / "sweep" / "logs" / f"{name}.log").read_text() == "rerun-1thread 1\n"
        assert (exp / "superseded-threads2" / "logs" / f"{name}.log").read_text() == "sweep 2\n"
    assert (exp / "sweep" / "c.seed2").exists() and not (exp / "rerun-1thread" / "a.seed2").exists()
    assert "a.seed2\nb.seed2\n" in (exp / "superseded-threads2" / "swapped.txt").read_text()
    assert _swap(exp).returncode == 1                            # nothing left to swap


def _freezing_figure():
    spec = importlib.util.spec_from_file_location("freezing_figure",
                                                  ROOT / "experiments/freezing/figure.py")
    figure = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(figure)
    return figure


def test_freezing_cost_by_frequency_adds_up_to_each_pairs_cost():
    """freezing-costs.md's frequency split: for every pair and seed at K=0, the bins (with
    <unk> taken out of "unseen") hold every validation token once, and what they add sums to
    the pair's cost as the committed results give it, 1000 ln(frozen ppl / trained ppl); one
    cell is worked out again from the two evaluation files."""
    figure = _freezing_figure()
    checked = 0
    for p in claims.freezing_points(ROOT):
        cfg = json.loads((ROOT / p["frozen_run"] / "config.json").read_text())
        if cfg["unk_threshold"] or cfg.get("train_fraction", 1) != 1:
            continue
        costs = figure.bin_costs(p, ROOT)
        assert sum(c["share_pct"] for c in costs.values()) == pytest.approx(100.0, abs=1e-9)
        assert sum(c["adds"] for c in costs.values()) == pytest.approx(
            1000 * math.log(1 + p["cost_pct"] / 100), abs=1e-6), p
        checked += 1
    assert checked >= 40
    p = next(p for p in claims.freezing_points(ROOT) if p["table"] == "six-allvec"
             and p["frozen"] == "ours" and p["seed"] == 1)
    f, t = (json.loads((ROOT / r / "eval_best_valid.json").read_text())
            for r in (p["frozen_run"], p["trained_run"]))
    fb, tb = ({b["bin"]: b for b in e["bins"]} for e in (f, t))
    cell = figure.bin_costs(p, ROOT)["2-5"]
    assert cell["worse_pct"] == pytest.approx(100 * (fb["2-5"]["perplexity"] / tb["2-5"]["perplexity"] - 1))
    assert cell["adds"] == pytest.approx(1000 * fb["2-5"]["tokens"] / f["tokens"] * math.log(
        fb["2-5"]["perplexity"] / tb["2-5"]["perplexity"]))
    assert f"{cell['worse_pct']:+.0f}%" in (ROOT / "experiments/freezing/freezing-costs.md").read_text()


def test_freezing_records_are_what_the_committed_tables_give():
    """experiments/freezing's points and its pair-by-pair cost table are regenerated from the
    committed results (figure.py): a run changed or added without rerunning it fails here."""
    figure = _freezing_figure()
    points = claims.freezing_points(ROOT)
    here = ROOT / "experiments/freezing"
    assert json.loads((here / "freezing-points.json").read_text()) == points
    table = (here / "freezing-costs.md").read_text()
    assert table == figure.costs_markdown(points) + "\n" + figure.frequency_markdown(points)
    # the table is the points: every point's cost appears in its row, by seed
    for p in points:
        assert f"{p['cost']:+.1f} ({p['cost_pct']:+.1f}%)" in table


def test_freezing_cost_by_the_word_read_before_adds_up_to_each_pairs_cost():
    """freezing-costs.md's split by the word read before the target: for every pair and seed
    whose runs record it, the bins hold every validation token once and what they add sums to
    the pair's cost; one cell is worked out again from the two evaluation files."""
    figure = _freezing_figure()
    checked = []
    for p in claims.freezing_points(ROOT):
        costs = figure.bin_costs(p, ROOT, "context_bins")
        if costs is None:
            continue
        assert sum(c["share_pct"] for c in costs.values()) == pytest.approx(100.0, abs=1e-9)
        assert sum(c["adds"] for c in costs.values()) == pytest.approx(
            1000 * math.log(1 + p["cost_pct"] / 100), abs=1e-6), p
        checked.append(p)
    assert len(checked) >= 20
    p = checked[0]
    f, t = ({b["bin"]: b for b in json.loads((ROOT / r / "eval_best_valid.json").read_text())
             ["context_bins"]} for r in (p["frozen_run"], p["trained_run"]))
    cell = figure.bin_costs(p, ROOT, "context_bins")["1"]
    assert cell["worse_pct"] == pytest.approx(100 * (f["1"]["perplexity"] / t["1"]["perplexity"] - 1))


def _metrics(folder: Path, rows: list[tuple[int, float, float, float]]) -> None:
    folder.mkdir(parents=True)      # an epoch's update count: 10 a epoch
    (folder / "metrics.jsonl").write_text("".join(
        json.dumps({"epoch": e, "step": 10 * e, "valid_loss": math.log(ppl), "valid_ppl": ppl,
                    "valid_bins": {"unseen": unseen, ">100": freq}})
        + "\n" for e, ppl, unseen, freq in rows))


def test_same_epoch_compares_both_runs_at_the_earlier_best_epoch(tmp_path):
    """A frozen run whose best is epoch 3 against a twin whose best is epoch 2: both taken at
    epoch 2, and at their bests; a resumed run's repeated epoch counts once (its last row); a
    run without per-epoch bins gives no comparison."""
    figure = _freezing_figure()
    _metrics(tmp_path / "f", [(1, 300, 1000, 50), (2, 220, 1100, 40), (2, 210, 1100, 40),
                              (3, 200, 1400, 38)])
    _metrics(tmp_path / "t", [(1, 280, 900, 45), (2, 190, 1200, 36), (3, 195, 1300, 35)])
    got = figure.same_epoch({"frozen_run": "f", "trained_run": "t"}, tmp_path)
    assert got["epochs"] == (3, 2) and got["at"] == 2
    assert got["same"] == pytest.approx({"all": 100 * (210 / 190 - 1), "unseen": 100 * (1100 / 1200 - 1),
                                         ">100": 100 * (40 / 36 - 1)})
    assert got["best"] == pytest.approx({"all": 100 * (200 / 190 - 1), "unseen": 100 * (1400 / 1200 - 1),
                                         ">100": 100 * (38 / 36 - 1)})
    (tmp_path / "o").mkdir()
    (tmp_path / "o" / "metrics.jsonl").write_text(json.dumps(
        {"epoch": 1, "step": 10, "valid_loss": math.log(9.0), "valid_ppl": 9.0}) + "\n")
    assert figure.same_epoch({"frozen_run": "f", "trained_run": "o"}, tmp_path) is None


def test_rescore_adds_context_bins_only_where_every_committed_number_comes_out_again(
        speech_corpus, tmp_path):
    """rescore.py on a run scored before evaluations recorded the word read before: it adds
    the bins when the new evaluation reproduces the file's numbers exactly, and leaves a file
    it cannot reproduce (here one number changed) as it was, exit 1."""
    import os
    from lmlow.files import to_json
    from lmlow.rundir import RunDir
    from lmlow.runs import evaluation

    run = tmp_path / "run"
    r = subprocess.run([sys.executable, "-m", "lmlow.cli", "train", str(speech_corpus), "--out",
                        str(run), "--preset", "tiny", "--max-epochs", "1", "--quiet"],
                       capture_output=True, text=True, env=os.environ)
    assert r.returncode == 0, r.stderr
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)        # as rescore.py scores a run that names no threads
    try:
        scored = {s: evaluation(RunDir(run), s) for s in ("valid", "test")}
    finally:
        torch.set_num_threads(threads)
    for s, e in scored.items():     # as committed before: no context_bins
        (run / f"eval_best_{s}.json").write_text(json.dumps({k: v for k, v in e.items()
                                                             if k != "context_bins"}))
    rescore = ROOT / "experiments/freezing/rescore.py"
    r = subprocess.run([sys.executable, str(rescore), str(run)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for s, e in scored.items():
        assert json.loads((run / f"eval_best_{s}.json").read_text()) == json.loads(to_json(e))
    changed = {k: v for k, v in scored["valid"].items() if k != "context_bins"} | {"perplexity": 300.0}
    (run / "eval_best_valid.json").write_text(json.dumps(changed))
    before = (run / "eval_best_valid.json").read_bytes()
    r = subprocess.run([sys.executable, str(rescore), str(run)], capture_output=True, text=True)
    assert r.returncode == 1 and "perplexity differ" in r.stdout
    assert (run / "eval_best_valid.json").read_bytes() == before


def _scored(root, run, trained, mapped, stopped="patience", adam=False, outputs=None,
            both=None):
    """A committed run scored as trained and with the maps given (valid perplexities; the
    output maps' records with a perplexity without <unk> of 0.9 times theirs, against 0.95
    as trained)."""
    folder = root / "experiments" / run
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(json.dumps({"stopped_by": stopped}))
    (folder / "config.json").write_text(json.dumps(
        {"optimizer": "adam", "asgd": False} if adam else {"optimizer": "sgd", "asgd": True}))
    (folder / "eval_best_valid.json").write_text(json.dumps(
        {"perplexity": trained, "perplexity_excluding_unk": 0.95 * trained}))
    for name, ppl in (("mapped", mapped), ("mapped_outputs", outputs), ("mapped_both", both)):
        if ppl is not None:
            (folder / f"eval_{name}_valid.json").write_text(json.dumps(
                {"perplexity": ppl, "perplexity_excluding_unk": 0.9 * ppl}))


INPUTS, OUTPUTS = "--map-unseen-inputs", "--map-unseen-outputs"
BOTH = f"{INPUTS} {OUTPUTS}"


def test_the_mapping_claim_pairs_each_run_with_itself(tmp_path):
    """Each run scored both ways gives one difference (mapped minus trained); a run not scored
    with the map, or not converged, is left out; the paired rule decides for each optimiser
    apart, and the flag enters the recommendation only for a model the map applies to, for
    the optimisers under which the claim holds, saying what it did under the others."""
    _scored(tmp_path, "t/a.seed1", 300.0, 297.0)
    _scored(tmp_path, "t/a.seed2", 250.0, 247.5)
    _scored(tmp_path, "t/a.seed3", 260.0, 257.0)
    _scored(tmp_path, "t/b.seed1", 200.0, None)                        # not mapped
    _scored(tmp_path, "t/c.seed1", 400.0, 100.0, stopped="max_epochs")  # not converged
    rows = []
    verdicts, mapping = claims.mapping_claim(tmp_path, rows)
    assert verdicts == {claims.MAP_CLAIM: "holds", claims.MAPS[OUTPUTS][0]: "not tested",
                        claims.MAPS[BOTH][0]: "not tested"}
    assert mapping == {"sgd": {"choice": INPUTS, INPUTS: {
        "runs": 3, "verdict": "holds", "change_pct": [-1.2, -1.0],
        "change_pct_excluding_unk": [-6.4, -6.2], "change_pct_rare": []}}}
    assert len(rows) == 1
    assert "(sgd: one difference per run, in this order: t/a.seed1, t/a.seed2, t/a.seed3)" \
        in rows[0] and "| +3.0, +2.5, +3.0 |" in rows[0]
    untied = dict(tie=False, freeze_input=False, init=["glove", "glove-output"])
    assert claims.eval_flags(untied, mapping) == {"sgd": INPUTS}
    for other in (dict(untied, tie=True), dict(untied, freeze_input=True),
                  dict(untied, init=["random", "glove-output"])):
        assert claims.eval_flags(other, mapping) == {}
    sentence = claims.map_sentence({"sgd": INPUTS}, mapping)
    assert sentence.startswith("Where its vocabulary holds the vectors' words its training text "
                               "lacks (`--extend-vocab`")
    assert ("trained with the paper's recipe (SGD + NT-ASGD: lmlow's defaults, `--preset "
            "paper`), `lmlow eval RUN --map-unseen-inputs` (and `lmlow score RUN FILE` with the "
            "same flags), which with no training lowered the validation perplexity of all 3 such "
            "converged runs by 1-1.2% (`experiments/freezing/mapped-rows.md`).") in sentence
    assert "`<unk>`" not in sentence and "Not with" not in sentence
    _scored(tmp_path, "u/a.seed1", 400.0, 401.0, adam=True)            # Adam: no clear change
    _scored(tmp_path, "u/a.seed2", 410.0, 412.5, adam=True)
    rows = []
    verdicts, mapping = claims.mapping_claim(tmp_path, rows)
    assert verdicts[claims.MAP_CLAIM] == "holds in part"
    assert mapping["adam"] == {"choice": "", INPUTS: {
        "runs": 2, "verdict": "no clear difference", "change_pct": [0.2, 0.6],
        "change_pct_excluding_unk": [-5.0, -4.7], "change_pct_rare": []}}
    assert rows[1].startswith(f"| {claims.MAP_CLAIM} (adam: one difference per run, in this "
                              "order: u/a.seed1, u/a.seed2)")
    assert claims.eval_flags(untied, mapping) == {"sgd": INPUTS}
    assert claims.map_sentence(claims.eval_flags(untied, mapping), mapping).endswith(
        "Not with Adam (`--preset small`): on 2 converged runs, `--map-unseen-inputs` changed "
        "it by +0.2 to +0.6% (no clear difference).")
    _scored(tmp_path, "t/a.seed4", 240.0, 241.0)                       # one run the other way
    verdicts, mapping = claims.mapping_claim(tmp_path)
    assert mapping["sgd"]["choice"] == "" and mapping["sgd"][INPUTS]["verdict"] == \
        "no clear difference"
    assert claims.eval_flags(untied, mapping) == {}
    assert claims.map_sentence({}, mapping) is None
    assert claims.mapping_claim(tmp_path / "none") == (
        {claim: "not tested" for claim, _ in claims.MAPS.values()}, None)


def test_the_maps_change_on_rare_words_is_measured_on_their_bins():
    """The rare-word change is the perplexity over the tokens of the bins of words seen 1 and
    2-5 times (token-weighted in log space), and the sentence says which way it went."""
    def record(p1, n1, p25, n25):
        return {"bins": [{"bin": "unseen", "tokens": 50, "perplexity": 9e4},
                         {"bin": "1", "tokens": n1, "perplexity": p1},
                         {"bin": "2-5", "tokens": n25, "perplexity": p25},
                         {"bin": ">100", "tokens": 0, "perplexity": None}]}
    assert claims.rare_perplexity(record(100.0, 1, 10000.0, 1)) == pytest.approx(1000.0)
    assert claims.rare_perplexity(record(100.0, 3, 10000.0, 0)) == pytest.approx(100.0)
    assert claims.rare_perplexity({"perplexity": 5.0}) is None
    group = [{"trained": record(100.0, 1, 100.0, 1), "maps": {"f": record(110.0, 1, 110.0, 1)}},
             {"trained": record(100.0, 1, 100.0, 1), "maps": {"f": record(121.0, 1, 100.0, 1)}}]
    assert claims._pct(group, "f", claims.rare_perplexity) == [10.0, 10.0]
    assert claims.rare_clause([6.4, 12.1]) == (", but raised it on the words seen 1-5 times in "
                                               "training by 6.4-12.1%")
    assert claims.rare_clause([-3.0, -1.0]).startswith(", and lowered it on the words seen")
    assert claims.rare_clause([-1.0, 2.0]).endswith("by -1 to +2%")


def test_a_map_with_more_flags_is_chosen_only_when_clearly_better(tmp_path):
    """Per optimiser, the simplest map that helps, replaced by one with more flags only when
    that one is clearly better on the same runs; a map that applies to the recommended model
    only; the output map's sentence gives its change without the <unk> targets."""
    # sgd: inputs help; both help as much (not clearly more): the inputs map stays
    for seed, (t, i, b) in enumerate([(300.0, 297.0, 296.9), (250.0, 247.5, 247.6),
                                      (260.0, 257.0, 257.0)], 1):
        _scored(tmp_path, f"t/a.seed{seed}", t, i, both=b)
    # adam: the input map does nothing clear; outputs help; both help clearly more
    for seed, (t, i, o, b) in enumerate([(400.0, 401.0, 320.0, 310.0),
                                         (410.0, 412.0, 330.0, 322.0),
                                         (405.0, 405.5, 325.0, 316.0)], 1):
        _scored(tmp_path, f"u/a.seed{seed}", t, i, adam=True, outputs=o, both=b)
    rows = []
    verdicts, mapping = claims.mapping_claim(tmp_path, rows)
    assert verdicts == {claims.MAP_CLAIM: "holds in part", claims.MAPS[OUTPUTS][0]: "holds",
                        claims.MAPS[BOTH][0]: "holds"}
    assert mapping["sgd"]["choice"] == INPUTS and mapping["adam"]["choice"] == BOTH
    choice = [r for r in rows if r.startswith(f"| {claims.MAP_CHOICE}")]
    assert len(choice) == 2          # sgd: both against inputs; adam: both against outputs
    assert "(sgd: `" + BOTH + "` against `" + INPUTS + "`" in choice[0]
    assert "**no clear difference**" in choice[0]
    assert "(adam: `" + BOTH + "` against `" + OUTPUTS + "`" in choice[1]
    assert "| +10.0, +8.0, +9.0 |" in choice[1] and "**holds**" in choice[1]
    untied = dict(tie=False, freeze_input=False, init=["glove", "glove-output"])
    assert claims.eval_flags(untied, mapping) == {"sgd": INPUTS, "adam": BOTH}
    # a model whose output rows were not initialised from vectors: no output map for Adam
    assert claims.eval_flags(dict(untied, init=["glove"]), mapping) == {"sgd": INPUTS}
    sentence = claims.map_sentence({"adam": BOTH}, mapping)
    assert ("trained with Adam (`--preset small`), `lmlow eval RUN --map-unseen-inputs "
            "--map-unseen-outputs` (and `lmlow score RUN FILE` with the same flags), which with "
            "no training lowered the validation perplexity of all 3 such converged runs by "
            "21.5-22.5% (-26.6 to -25.6% without the `<unk>` targets, whose output row no "
            "training text ever pulls towards a prediction) (`experiments/freezing/"
            "mapped-rows.md`).") in sentence
    assert "Not with" not in sentence       # under sgd a map helps, one the model is not given



def test_mapped_rows_table_is_what_the_run_folders_keep():
    """experiments/freezing/mapped-rows.md's "trained, mapped" and "trained" columns are the
    mapped evaluations kept in the run folders (what claims.py decides from) and their own."""
    table = (ROOT / "experiments/freezing/mapped-rows.md").read_text().splitlines()
    checked = 0
    for line in table:
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) < 7 or not cells[1].isdigit():
            continue
        run = ROOT / "experiments/freezing" / cells[0] / f"ours-unfrozen.seed{cells[1]}"
        mapped = json.loads((run / f"eval_mapped_{cells[3]}.json").read_text())
        trained = json.loads((run / f"eval_best_{cells[3]}.json").read_text())
        assert float(cells[6].split()[0]) == pytest.approx(mapped["perplexity"], abs=0.005)
        assert float(cells[5]) == pytest.approx(trained["perplexity"], abs=0.005)
        assert mapped["mapped_inputs"]["rows"] == int(cells[2].split()[0])
        checked += 1
    assert checked >= 12
