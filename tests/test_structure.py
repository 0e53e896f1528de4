"""The shape of the house: no import cycles, evaluation without the training loop, one run
folder, one derivation of embedding roles, generated flags, and the trainer's pure pieces
(learning-rate schedules, budget, --train-fraction) checked by hand."""
import ast
import csv
import re
import json
import math
import subprocess
from dataclasses import fields
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import cli, write_corpus
from lmlow.config import Config, EmbeddingRoles, build_config, preset_help, table1_configurations
from lmlow.rundir import LSTM, NGRAM, RunDir

ROOT = Path(__file__).parents[1]
PACKAGE = ROOT / "lmlow"


# --------------------------------------------------------------------------- imports

def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph() -> dict[str, set[str]]:
    """Every lmlow module -> the lmlow modules it imports anywhere (function-local imports
    included: they hide cycles, they do not remove them)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {}
    for name, path in modules.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                # `from lmlow.x import y`: y may itself be a module (lmlow.x.y)
                targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
            deps |= {t for t in targets if t in modules and t != name}
        graph[name] = deps
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state, stack = {}, []

    def visit(n):
        state[n] = "open"
        stack.append(n)
        for m in sorted(graph[n]):
            if state.get(m) == "open":
                return stack[stack.index(m):] + [m]
            if m not in state and (c := visit(m)):
                return c
        state[n] = "done"
        stack.pop()
        return None

    for n in sorted(graph):
        if n not in state and (c := visit(n)):
            return c
    return None


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_import_cycle_in_lmlow():
    graph = import_graph()
    assert len(graph) > 20 and "lmlow.checkpoint" in graph["lmlow.runs"]
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def architecture_layers() -> dict[str, int]:
    """ARCHITECTURE.md's layer table: module -> layer."""
    text = (ROOT / "ARCHITECTURE.md").read_text().split("## Layers", 1)[1].split("\n## ", 1)[0]
    layers = {}
    for layer, cells in re.findall(r"^\| (\d+) \| (.+) \|$", text, flags=re.M):
        for name in re.findall(r"`([\w.]+)`", cells):
            full = "lmlow" if name == "lmlow" else f"lmlow.{name}"
            assert full not in layers, f"{name} listed twice"
            layers[full] = int(layer)
    return layers


def test_every_import_points_down_the_architecture_layers():
    """Every module is in ARCHITECTURE.md's layer table and imports only from lower layers
    (function-local imports included)."""
    graph, layers = import_graph(), architecture_layers()
    assert set(graph) == set(layers), (set(graph) ^ set(layers))
    bad = [(m, d) for m, deps in graph.items() for d in deps if layers[d] >= layers[m]]
    assert not bad, [f"{m} (layer {layers[m]}) imports {d} (layer {layers[d]})" for m, d in bad]
    assert "lmlow.train" not in graph["lmlow.runs"] and layers["lmlow.cli"] > layers["lmlow.train"]


def test_the_layer_check_catches_an_upward_import(monkeypatch):
    graph, layers = import_graph(), architecture_layers()
    graph["lmlow.files"] = graph["lmlow.files"] | {"lmlow.cli"}        # files importing the CLI
    bad = [(m, d) for m, deps in graph.items() for d in deps if layers[d] >= layers[m]]
    assert bad == [("lmlow.files", "lmlow.cli")]


def test_opening_a_run_loads_no_training_code_and_keeps_the_global_rng(speech_corpus, tmp_path):
    from lmlow.train import train

    train(build_config("tiny", corpus=str(speech_corpus), max_epochs=0, threads=1),
          tmp_path / "r", quiet=True)
    code = ("import sys, torch, lmlow\n"
            "torch.manual_seed(123); before = torch.get_rng_state()\n"
            f"run = lmlow.load({str(tmp_path / 'r')!r})\n"
            "assert torch.equal(before, torch.get_rng_state()), 'load() reseeded torch'\n"
            "assert 'lmlow.train' not in sys.modules, 'load() imported the training loop'\n"
            "print(type(run).__name__)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "LSTMRun", r.stderr


def test_every_model_is_a_scorer():
    from lmlow.evaluate import Scorer
    from lmlow.ngram_run import NgramRun
    from lmlow.runs import InterpolatedRun, LSTMRun

    for cls in (LSTMRun, NgramRun, InterpolatedRun):
        assert issubclass(cls, Scorer)
        assert "evaluate" not in cls.__dict__ and "score" not in cls.__dict__   # written once
    with pytest.raises(TypeError):
        Scorer()                                                                 # abstract


def _folder_names() -> tuple[set[str], set[str]]:
    """The file names (with a dot) and folder names of run and sweep folders, from their
    owners' own constants."""
    from lmlow.sweepdir import SweepDir
    files = {RunDir.CONFIG, RunDir.VOCAB, RunDir.METRICS, RunDir.SUMMARY, RunDir.FREQUENCY,
             RunDir.DATA, RunDir.LOCK, RunDir.ARPA, RunDir.BINARY, RunDir.LMPLZ_TEXT,
             RunDir.LMPLZ_ARPA, "best.pt", "last.pt", SweepDir.PLAN, SweepDir.JOBS,
             SweepDir.HISTORY, SweepDir.RESULTS_MD, SweepDir.RESULTS_CSV, SweepDir.RESULTS_JSON,
             SweepDir.CURVES}
    folders = {RunDir.ANALYSIS, RunDir.BIAS_SWEEP, RunDir.LMPLZ_TMP, SweepDir.LOGS,
               SweepDir.SLURM, SweepDir.OUTCOMES}
    return files, folders


def _code_strings(path: Path):
    """(line, text) of every string literal of a module that is not a docstring (f-string
    pieces included)."""
    tree = ast.parse(path.read_text())
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.FunctionDef, ast.ClassDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docs]


# names that happen to equal a folder name but are not paths: command names and choices
NOT_PATHS = {("cli.py", "bias-sweep"), ("parsers.py", "bias-sweep"), ("generate.py", "bias-sweep"),
             ("cli.py", "slurm"),
             ("api.py", "slurm"),
             ("sweep.py", "slurm"),
             ("commands.py", "curves.png")}   # `lmlow compare --out DIR`'s own folder


def _offenders(files, folders, skip=("rundir.py", "sweepdir.py")):
    out = []
    for p in PACKAGE.rglob("*.py"):
        if p.name in skip:
            continue
        for line, text in _code_strings(p):
            if " " in text and not text.startswith("/"):
                continue                     # prose (help, messages) may name a file
            hits = [n for n in files if text == n or text.endswith("/" + n)
                    or text.startswith(n + "/") or text.startswith(f"/{n}")]
            hits += [n for n in folders if text == n or text.startswith(n + "/")
                     or f"/{n}/" in text or text.endswith("/" + n)]
            out += [(p.name, line, text) for n in hits if (p.name, text) not in NOT_PATHS]
    return out


def test_no_run_or_sweep_file_name_outside_their_owners():
    """Only RunDir knows a run folder's names and only SweepDir a sweep folder's: a literal
    `"results.json"` or `/ "logs"` anywhere else in lmlow/ fails."""
    files, folders = _folder_names()
    assert len(files) >= 20 and len(folders) >= 6
    assert not _offenders(files, folders), _offenders(files, folders)


def test_the_name_guard_finds_a_planted_name(tmp_path, monkeypatch):
    """The guard itself: a module that builds `out / "jobs.json"` is caught."""
    files, folders = _folder_names()
    planted = tmp_path / "lmlow"
    planted.mkdir()
    (planted / "x.py").write_text('"""doc: jobs.json"""\nPATH = "slurm/" + "jobs.json"\n')
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", planted)
    assert [o[2] for o in _offenders(files, folders)] == ["slurm/", "jobs.json"] or \
        sorted(o[2] for o in _offenders(files, folders)) == ["jobs.json", "slurm/"]


# --------------------------------------------------------------------------- run folder

def test_run_folder_kinds_and_clear(tmp_path):
    run = RunDir(tmp_path / "r")
    assert run.kind is None and run.is_empty() and not run.finished
    run.create()
    run.last.write_bytes(b"x")
    assert run.kind == LSTM and run.default_checkpoint() == "last"
    run.config.write_text(json.dumps({"kind": "ngram"}))
    assert run.kind == NGRAM
    (run.path / "notes.txt").write_text("mine")        # the user's file
    for f in (run.frequency_file, run.metrics_file, run.summary_file, run.path / "best.pt.tmp42"):
        f.write_text("{}")
    run.analysis_dir.mkdir()
    run.clear()
    assert sorted(p.name for p in run.path.iterdir()) == ["notes.txt"]


def test_force_retrain_leaves_no_stale_frequency_curves(speech_corpus, tmp_path):
    """Issue found by a maintainer: --force kept the old frequency.jsonl, so analyze plotted
    the previous run's curves."""
    from lmlow.train import train

    cfg = build_config("tiny", corpus=str(speech_corpus), max_steps=9, threads=1,
                       track_frequency=True)
    train(cfg, tmp_path / "r", quiet=True)
    steps = [r["step"] for r in RunDir(tmp_path / "r").frequency()]
    assert steps[:5] == [0, 1, 2, 4, 8]
    cfg.track_frequency = False
    train(cfg, tmp_path / "r", force=True, quiet=True)
    assert RunDir(tmp_path / "r").frequency() == []


def test_ngram_force_over_an_lstm_run_leaves_no_checkpoint(speech_corpus, tmp_path):
    """An n-gram written over an LSTM run with --force must not leave the LSTM's best.pt."""
    from lmlow.ngram import train_ngram
    from lmlow.train import train

    train(build_config("tiny", corpus=str(speech_corpus), max_epochs=0, threads=1),
          tmp_path / "r", quiet=True)
    train_ngram(speech_corpus, tmp_path / "r", order=3, force=True, quiet=True)
    run = RunDir(tmp_path / "r")
    assert run.kind == NGRAM and run.finished and not run.best.exists()


# --------------------------------------------------------------------------- roles and flags

def test_roles_reproduce_the_committed_table1_names_and_columns():
    """The folder names and report columns that the earlier code wrote (committed under
    experiments/table1) come out of the one EmbeddingRoles derivation."""
    sweep = ROOT / "experiments" / "table1" / "pydocs-mini"
    names = {p.name.removesuffix(".seed1") for p in sweep.glob("*.seed1")}
    slugs = {EmbeddingRoles.of(s).slug() for s in table1_configurations()}
    assert len(slugs) == 20 and slugs == names
    with open(sweep / "results.csv") as f:
        rows = {r["configuration"]: r for r in csv.DictReader(f)}
    for name in names:
        cfg = json.loads((sweep / f"{name}.seed1" / "config.json").read_text())
        cols = EmbeddingRoles.of(Config(**cfg)).columns()
        assert cols == {k: rows[name][k] for k in cols}, name
        assert EmbeddingRoles.of(cfg) == EmbeddingRoles.of(Config(**cfg))


def test_describe_in_the_papers_terms():
    c = Config(tie=False, freeze_input=True, init=("glove", "unigram"), embeddings="v")
    assert c.describe() == "untied: input pretrained, frozen; output random; unigram bias"
    assert Config(tie=True, freeze_output=True).describe() == "tied (random, frozen)"


def test_preset_help_is_generated_from_the_presets():
    text = preset_help()
    assert "small:" in text and "LSTM 400+200" in text and "2x650" not in text
    assert "paper:" in text and "LSTM 1150+1150+400" in text


SETTINGS = [("train", "lmlow.config", "Config", ("corpus", "preset")),
            ("embed", "lmlow.glove", "GloveConfig", ()),
            ("ngram", "lmlow.ngram", "NgramOptions", ()),
            ("prepare", "lmlow.data.prepare", "PrepareOptions", ()),
            ("generate", "lmlow.generate", "Sampling", ()),
            ("generate", "lmlow.generate", "GenerateOptions", ()),
            ("bias-sweep", "lmlow.generate", "BiasSweepOptions", ()),
            ("analyze", "lmlow.analysis.commands", "AnalyzeOptions", ()),
            ("compare", "lmlow.analysis.commands", "CompareOptions", ()),
            ("eval", "lmlow.runs", "EvalOptions", ()),
            ("score", "lmlow.runs", "ModelOptions", ()),
            ("predict", "lmlow.predict", "PredictOptions", ()),
            ("sweep", "lmlow.sweep", "SweepOptions", ()),
            ("sweep", "lmlow.slurm", "SlurmOptions", ())]


@pytest.mark.parametrize("command, module, name, skip", SETTINGS, ids=[s[2] for s in SETTINGS])
def test_every_settings_field_is_a_flag_showing_its_default(command, module, name, skip):
    """Each field of the command's settings dataclass is one of its flags, and the help states
    the field's own default (and range) once: the default is written once, in the dataclass,
    and one that needs words (`--prune`'s "no pruning") is not followed by "(default: none)".
    (Checked: a parser default set for `split` fails it for three dataclasses.)"""
    import importlib

    from lmlow.flags import _shown
    from lmlow.parsers import build_parser

    cls = getattr(importlib.import_module(module), name)
    sub = build_parser()._subparsers._group_actions[0].choices[command]
    actions = {a.dest: a for a in sub._actions}
    for f in fields(cls):
        if f.name in skip:
            continue
        action = actions[f.name]
        assert action.default is None, f.name            # unset flags leave the field's default
        if "(default:" in f.metadata["help"]:              # said in words (--prune: "no pruning")
            assert action.help.count("(default:") == 1, (f.name, action.help)
        else:
            assert f"(default: {_shown(f.default)}" in action.help, (f.name, action.help)
        limit = getattr(cls, "RANGES", {}).get(f.name)
        if limit:
            from lmlow.config import describe_range
            assert describe_range(limit) in action.help, (f.name, action.help)


def test_a_train_flag_that_is_not_yes_or_no_is_one_line(capsys):
    code, _, err = cli("train", "x", "--out", "y", "--tie", "maybe", capsys=capsys)
    assert code == 2 and "--tie" in err and "yes or no" in err and err.count("\n") == 1


@pytest.mark.parametrize("argv, flag", [
    (["stats", "C", "--thresholds", "1,x"], "--thresholds"),
    (["sweep", "C", "--grid", "six", "--out", "o", "--seeds", "1,a"], "--seeds"),
    (["sweep", "C", "--grid", "unk", "--out", "o", "--values", "a,b"], "--values"),
    (["sweep", "C", "--grid", "datasize", "--out", "o", "--values", "half"], "--values"),
    (["bias-sweep", "R", "--lambdas", "1,1"], "--lambdas"),
    (["embed", "t.txt", "--out", "v.txt", "--dim", "many"], "--dim"),
    (["ngram", "C", "--out", "o", "--order", "five"], "--order"),
    (["eval", "R", "--batch-size", "0"], "--batch-size"),
])
def test_bad_list_and_number_flags_are_one_line(argv, flag, tmp_path, capsys):
    corpus = write_corpus(tmp_path / "c", "a b c\n" * 10, "a b\n", "b c\n")
    argv = [str(corpus) if a == "C" else str(tmp_path / "run") if a == "R" else a for a in argv]
    code, _, err = cli(*argv, capsys=capsys)
    assert code in (1, 2) and flag in err and err.count("\n") == 1, err


# --------------------------------------------------------------------------- trainer pieces

def test_learning_rate_for_every_schedule_by_hand():
    from lmlow.train import learning_rate

    cfg = Config(bptt=70, schedule="none")
    assert learning_rate(cfg, 30.0, step=5, seq=35, used=0.5) == 15.0      # seq / bptt
    cos = Config(bptt=10, schedule="cosine")
    assert learning_rate(cos, 2.0, 0, 10, used=0.0) == 2.0
    assert learning_rate(cos, 2.0, 0, 10, used=0.5) == pytest.approx(1.0)
    assert learning_rate(cos, 2.0, 0, 10, used=0.25) == pytest.approx(1 + math.cos(math.pi / 4))
    assert learning_rate(cos, 2.0, 0, 10, used=1.5) == pytest.approx(0.0)   # capped at the end
    warm = Config(bptt=10, warmup_steps=4)
    assert [learning_rate(warm, 1.0, s, 10, 0.0) for s in range(6)] == [0.25, 0.5, 0.75, 1, 1, 1]


def test_step_and_plateau_decay_by_hand():
    from lmlow.train import decayed_rate

    step = Config(schedule="step", step_size=2, gamma=0.5)
    rates, lr = [], 8.0
    for epoch in range(1, 6):
        lr = decayed_rate(step, lr, epoch, improved=True)
        rates.append(lr)
    assert rates == [8, 4, 4, 2, 2]
    plateau = Config(schedule="plateau", gamma=0.1)
    assert decayed_rate(plateau, 1.0, 3, improved=True) == 1.0
    assert decayed_rate(plateau, 1.0, 3, improved=False) == pytest.approx(0.1)
    assert decayed_rate(Config(schedule="none"), 1.0, 2, improved=False) == 1.0
    assert decayed_rate(Config(schedule="cosine"), 1.0, 2, improved=False) == 1.0


def test_budget_used_and_spent():
    from lmlow.train import budget_spent, budget_used

    c = Config(max_epochs=10, max_steps=100, max_time=2.0)
    assert budget_used(c, epochs=1.0, steps=50, seconds=30) == 0.5       # steps lead
    assert budget_used(c, epochs=8.0, steps=50, seconds=30) == 0.8       # epochs lead
    assert budget_used(c, epochs=1.0, steps=10, seconds=90) == 0.75      # time leads
    assert budget_spent(c, 9, 99, 119) is None
    assert budget_spent(c, 10, 0, 0) == "epochs"
    assert budget_spent(c, 0, 100, 0) == "steps"
    assert budget_spent(c, 0, 0, 121) == "time"
    assert budget_spent(Config(max_epochs=5), 4, 10 ** 9, 10 ** 9) is None   # 0 = no limit


def test_train_fraction_keeps_whole_lines(tmp_path):
    from lmlow.errors import LmlowError
    from lmlow.data.corpus import head_fraction
    from lmlow.train import Trainer

    ids = np.array([5, 6, 0, 7, 0, 8, 9, 9, 0, 4, 0])           # eos = 0
    assert head_fraction(ids, 1.0, 0) is ids
    assert head_fraction(ids, 0.5, 0).tolist() == [5, 6, 0, 7, 0]   # cut at 5 tokens, line end
    assert head_fraction(ids, 0.8, 0).tolist() == [5, 6, 0, 7, 0]   # 8 tokens: a line is cut
    assert head_fraction(ids, 0.9, 0).tolist() == [5, 6, 0, 7, 0, 8, 9, 9, 0]
    with pytest.raises(LmlowError, match="no complete training line"):
        head_fraction(ids, 0.1, 0)
    corpus = write_corpus(tmp_path / "c", "".join(f"w{i} x y\n" for i in range(40)), "x y\n", "y x\n")
    full = Trainer(build_config("tiny", corpus=str(corpus), threads=1), tmp_path / "a", quiet=True)
    part = Trainer(build_config("tiny", corpus=str(corpus), threads=1, train_fraction=0.25),
                   tmp_path / "b", quiet=True)
    assert len(full.train_ids) == 160 and len(part.train_ids) == 40
    assert full.vocab.words == part.vocab.words            # the vocabulary is the whole split's
    # ...but its counts are what the run trains on: the first 10 lines, w0..w9 once, x, y and
    # <eos> 10 times each; w10..w39 never
    expect = {"x": 10, "y": 10, "<eos>": 10, "<unk>": 0, **{f"w{i}": int(i < 10) for i in range(40)}}
    assert dict(zip(part.vocab.words, part.vocab.counts)) == expect
    assert dict(zip(full.vocab.words, full.vocab.counts))["w30"] == 1
    # so the log-unigram output bias of the part gives a word it never read less than one it read
    uni = Trainer(build_config("tiny", corpus=str(corpus), threads=1, train_fraction=0.25,
                               init=["random", "unigram"]), tmp_path / "u", quiet=True)
    bias = uni.model.decoder.bias.detach()
    v = uni.vocab
    assert bias[v.id("w30")] < bias[v.id("w5")] < bias[v.id("x")]
    # log_unigram: 40 tokens read, and half a count shared by the 31 never read (w10..w39, <unk>)
    assert bias[v.id("x")].exp().item() == pytest.approx(10 / (40 + 0.5), rel=1e-5)


def test_config_json_is_what_was_built(speech_corpus, tmp_path):
    """The vectors' size fixes the input size: config.json must say so, and rebuilding the
    model from config.json alone gives the checkpoint's shapes."""
    from lmlow.checkpoint import build_model, load_checkpoint
    from lmlow.data.vocab import Vocabulary
    from lmlow.train import train

    words = (speech_corpus / "train.txt").read_text().split()[:50]
    vec = tmp_path / "v.txt"
    rng = np.random.default_rng(0)
    vec.write_text("".join(f"{w} " + " ".join(f"{x:.4f}" for x in rng.normal(size=12)) + "\n"
                           for w in dict.fromkeys(words)))
    cfg = build_config("tiny", corpus=str(speech_corpus), embeddings=str(vec), tie=False,
                       init="glove", max_epochs=0, threads=1)
    assert cfg.emb_size == 32
    train(cfg, tmp_path / "r", quiet=True)
    saved = Config.load(RunDir(tmp_path / "r").config)
    assert saved.emb_size == 12 and saved.out_size in (None, 12)
    ck = load_checkpoint(RunDir(tmp_path / "r").best)
    rebuilt, _ = build_model(Config(**{**saved.to_dict(), "init": ["random"], "embeddings": None}),
                             Vocabulary.load(RunDir(tmp_path / "r").vocab))
    assert {k: v.shape for k, v in rebuilt.state_dict().items()} == \
        {k: v.shape for k, v in ck["model"].items()}


# --------------------------------------------------------------------------- evaluation

@pytest.mark.parametrize("batch_size, bptt, reset", [(1, 35, False), (4, 7, False), (7, 100, False),
                                                     (1, 70, True), (5, 3, True)])
def test_every_token_is_scored_exactly_once(batch_size, bptt, reset):
    from lmlow.evaluate import lstm_outputs
    from lmlow.model import AWDLSTM

    torch.manual_seed(0)
    m = AWDLSTM(30, 8, 8, 2, 8, tie=True)
    rng = np.random.default_rng(1)
    ids = rng.integers(1, 30, 400)
    ids[rng.random(400) < 0.1] = 0
    ids[-1] = 0
    positions, targets = [], []
    for _, y, pos in lstm_outputs(m, ids, 0, batch_size, bptt, reset):
        positions += pos.tolist()
        targets += y.tolist()
    assert np.bincount(positions, minlength=len(ids)).tolist() == [1] * len(ids)
    assert [t for _, t in sorted(zip(positions, targets))] == ids.tolist()


@pytest.mark.skipif(torch.ops.mkldnn._is_mkldnn_bf16_supported(),
                    reason="this CPU runs bf16; the refusal is for CPUs that cannot")
def test_bf16_on_a_cpu_without_bf16_is_one_line(speech_corpus, tmp_path, capsys):
    code, _, err = cli("train", speech_corpus, "--out", tmp_path / "r", "--preset", "tiny",
                       "--precision", "bf16", "--device", "cpu", capsys=capsys)
    assert code == 1 and "--precision bf16" in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()          # refused before anything was written


def test_warm_up_starts_at_a_line_start():
    from lmlow.evaluate import _warm_up_start

    ids = np.array([4, 5, 0, 6, 7, 8, 0, 9, 0])            # eos = 0; lines start at 0, 3, 7, 9
    starts = np.concatenate([[0], np.flatnonzero(ids == 0) + 1])
    assert _warm_up_start(starts, 0, 2) == 0
    assert _warm_up_start(starts, 6, 2) == 3              # token 4 is in the line from 3
    assert _warm_up_start(starts, 7, 4) == 3
    assert _warm_up_start(starts, 8, 1) == 7
    assert _warm_up_start(starts, 5, 128) == 0


@pytest.mark.slow
def test_per_token_scores_do_not_depend_on_batch_size_or_bptt(tmp_path):
    """README: batch size and BPTT length do not change the numbers. A small model trained
    150 updates on the bundled corpus falls into a state it never leaves when a piece starts
    from a fresh state in mid-line (found here: 16 nats per token off for whole pieces at
    batch 20 and 80); each piece's warm-up therefore starts at a line start."""
    from lmlow.evaluate import lstm_logprobs
    from lmlow.train import Trainer

    cfg = build_config("small", corpus=str(ROOT / "corpora" / "pydocs-mini"), max_steps=150,
                       threads=2, precision="fp32", device="cpu")
    t = Trainer(cfg, tmp_path / "r", quiet=True)
    t.run()
    ids = np.asarray(t.valid_ids)
    ref = lstm_logprobs(t.model, ids, t.vocab.eos_id, batch_size=1, bptt=35)
    for b, bptt in ((1, 200), (10, 35), (20, 70), (80, 70)):
        lp = lstm_logprobs(t.model, ids, t.vocab.eos_id, batch_size=b, bptt=bptt)
        np.testing.assert_allclose(lp, ref, atol=1e-4, rtol=0, err_msg=f"batch {b}, bptt {bptt}")


def test_a_run_follows_its_moved_corpus(speech_corpus, tmp_path, capsys):
    """The corpus moves: eval says how to point at it, --corpus and `train NEW --resume` work,
    and data.json records the new place (its fingerprint checked, not recomputed twice)."""
    import shutil

    old, new = tmp_path / "old", tmp_path / "new"
    shutil.copytree(speech_corpus, old)
    run = tmp_path / "run"
    assert cli("train", old, "--out", run, "--preset", "tiny", "--max-steps", "4", "--threads",
               "1", "--quiet", capsys=capsys)[0] == 0
    old.rename(new)
    code, _, err = cli("eval", run, capsys=capsys)
    assert code == 1 and "--corpus" in err
    assert cli("eval", run, "--corpus", new, capsys=capsys)[0] == 0
    code, _, err = cli("train", new, "--resume", run, "--max-steps", "8", "--quiet", capsys=capsys)
    assert code == 0, err
    data = json.loads(RunDir(run).data_file.read_text())
    assert data["corpus"] == str(new.resolve())
    assert Config.load(RunDir(run).config).corpus == str(new.resolve())
    assert cli("eval", run, capsys=capsys)[0] == 0


# --------------------------------------------------------------------------- scripts

def test_every_committed_shell_script_parses():
    """The experiments' run.sh files and the GPU batch script run where no test follows them
    (hours in the background, or on a lent GPU machine whose minutes are few): a syntax slip
    there costs a session, so at least `bash -n` reads each one here."""
    listed = subprocess.run(["git", "ls-files", "*.sh"], cwd=ROOT, capture_output=True, text=True)
    scripts = [ROOT / name for name in listed.stdout.split()] if listed.returncode == 0 else \
        sorted(p for p in ROOT.rglob("*.sh") if ".venv" not in p.parts)
    assert any(p.name == "batch.sh" for p in scripts)
    for path in scripts:
        checked = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        assert checked.returncode == 0, f"{path.relative_to(ROOT)}: {checked.stderr.strip()}"


def test_every_help_reads_as_written():
    """Every command's --help as a user sees it: no `%%` left from a description (argparse
    formats help strings, not descriptions) and no flag whose default is given twice."""
    import re

    from lmlow.parsers import build_parser

    for name, sub in build_parser()._subparsers._group_actions[0].choices.items():
        text = sub.format_help()
        assert "%%" not in text, name
        assert not re.search(r"\(default: [^()]*\)\s+\(default:", text), name


def test_no_checkpoint_or_large_file_is_committed():
    """The CPU queue's paper-regime checkpoints (50-100 MB each) are untracked but not
    ignored, so that a new checkout brings them back (.gitignore): a `git add` of a converged
    run's folder would commit them, and every clone and CI run would carry them for good.
    So are the queue's corpus and vectors under data/ and vectors/ (a 6.5 MB train.txt
    among them). No tracked file is a checkpoint, under those two folders or over 8 MB (the
    largest, compressed vectors, are ~4 MB)."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True)
    if listed.returncode != 0:
        pytest.skip("not a git checkout")
    names = [n for n in listed.stdout.decode().split("\0") if n]
    assert len(names) > 100
    assert not [n for n in names if n.endswith(".pt")]
    assert not [n for n in names if n.split("/")[0] in ("data", "vectors")]
    large = [n for n in names if (ROOT / n).is_file() and (ROOT / n).stat().st_size > 8 << 20]
    assert not large, large
