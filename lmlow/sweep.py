"""``lmlow sweep``: many ordinary ``lmlow train`` runs over a grid of configurations.

A sweep is a folder of run folders, one per (configuration, seed), named after the
configuration in the paper's terms. Every run is started as a ``lmlow train`` command, so
``--dry-run`` prints exactly what a cluster scheduler would run. Finished runs (with
``summary.json``) are skipped, interrupted ones (with ``last.pt``) resumed.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import signal
import statistics
import subprocess
import sys
import time
import typing
from dataclasses import dataclass, field, fields
from pathlib import Path

from lmlow.config import (ARCH_ONLY, PRESETS, RESUME_CHANGES, SEED_RANGE, Config, EmbeddingRoles,
                          OutOfRange, arch_of, build_config, check_init, check_settings,
                          check_values, defaults, ignored_by, in_range, load_table, names,
                          same_run_differs, setting, table1_configurations)
from lmlow.cpus import available_cpus
from lmlow.data.corpus import check_corpus_folder, check_fraction
from lmlow.data.vocab import read_word_list
from lmlow.errors import Interrupted, LmlowError, caught_signals
from lmlow.files import atomic_write_json, make_folder, read_json
from lmlow.flags import int_list, str_list
from lmlow.rundir import RunDir, RunLocked
from lmlow.sweepdir import SweepDir

EPOCHS_TIMED = 5                    # sweep --status: minutes an epoch, median of the last 5
ELSEWHERE = RunLocked.exit_code     # a task's exit status when another process holds the run

# Kummerfeld et al. section 3: the six best configurations of Table 1 (outputs never frozen).
SIX = [
    ("standard", dict(tie=True, init=("random",))),
    ("ours-random-output-unfrozen", dict(tie=False, init=("glove",))),
    ("standard+pretraining", dict(tie=True, init=("glove",))),
    ("ours-unfrozen", dict(tie=False, init=("glove", "glove-output"))),
    ("ours", dict(tie=False, freeze_input=True, init=("glove", "glove-output"))),
    ("ours-random-output", dict(tie=False, freeze_input=True, init=("glove",))),
]
GRIDS = ("table1", "six", "unk", "pretrain", "datasize")


def _names(text: str) -> tuple:
    return tuple(str_list(text))


def _ints(text: str) -> tuple:
    return tuple(int_list(text))


@dataclass
class SweepOptions:
    """What `lmlow sweep` trains and how (its flags are generated from these fields; every
    train setting after them applies to every run)."""
    grid: str | None = setting(None, "table1, six, unk, pretrain, datasize or FILE.toml")
    preset: str = setting("small", "defaults of every run")
    embeddings: tuple = setting((), "vectors for pretrained configurations (several only for "
                                "--grid pretrain)", parse=_names, metavar="FILE[,FILE...]")
    seeds: tuple = setting((1,), f"comma-separated seeds, each in {SEED_RANGE}",
                           parse=_ints, metavar="LIST")
    values: tuple | None = setting(None, "the unk grid's K values or the datasize grid's "
                                   "fractions, comma-separated (the other grids refuse it)",
                                   parse=_names, metavar="LIST")
    unigram: bool = setting(False, "add the log-unigram output bias init to every "
                            "configuration (the paper's grids do not use it)", switch=True)
    jobs: int = setting(1, "runs at a time here (--executor local; SLURM's: "
                        "--array-parallelism); CPU threads are split between them", metavar="N")
    executor: str = setting("local", "local: run here, --jobs at a time; slurm: submit one "
                            "SLURM job array (one task per run not finished or queued) and "
                            "return")
    RANGES: typing.ClassVar[dict] = {"jobs": "[1, inf)"}
    CHOICES: typing.ClassVar[dict] = {"preset": tuple(PRESETS), "executor": ("local", "slurm")}

    def validate(self) -> "SweepOptions":
        check_values(self)
        return self

    def plan(self, corpus: Path, out: Path, extra: dict) -> list[Run]:
        if not self.grid:
            raise LmlowError("give --grid GRID and --out SWEEP_DIR (or --status / --cancel)")
        return plan(corpus, out, self.grid, list(self.seeds), self.preset,
                    list(self.embeddings), self.values and list(self.values), extra, self.unigram)


@dataclass
class Run:
    name: str
    settings: dict                      # Config fields that differ from the preset
    seed: int
    labels: dict = field(default_factory=dict)   # the grid's columns, for the report

    @property
    def folder(self) -> str:
        return f"{self.name}.seed{self.seed}"


def config_name(s: dict) -> str:
    """A configuration in the paper's terms, e.g. ``untied.in-pre-frozen.out-rand``."""
    return EmbeddingRoles.of(s).slug()


def _values(values: list[str] | None, default: list[str], kind, what: str) -> list:
    try:
        return [kind(v) for v in (values or default)]
    except ValueError:
        raise LmlowError(f"--values {','.join(values)}: expected {what}") from None


def grid(name: str, embeddings: list[str], values: list[str] | None = None) -> list[tuple[str, dict, dict]]:
    """(name, settings, labels) of a named grid, or of a TOML/JSON grid file."""
    check_grid_inputs(name, embeddings, values)
    if name == "table1":
        return [(config_name(s), s, {}) for s in table1_configurations()]
    if name == "six":
        return [(n, s, {}) for n, s in SIX]
    if name == "unk":
        ks = _values(values, ["0", "1", "2", "5"], int, "UNK thresholds (integers)")
        # --extend-vocab only makes sense at K=0 (the vectors' words have training count 0,
        # so any K >= 1 turns them back into <unk>): the paper's K=0 is rare words kept plus
        # the pretraining words; K >= 1 is its two-step construction from training counts.
        return [(f"{n}.K{k}", {**s, "unk_threshold": k, **({"extend_vocab": False} if k else {})},
                 {"K": k}) for k in ks for n, s in SIX]
    if name == "pretrain":
        if not embeddings:
            raise LmlowError("--grid pretrain needs --embeddings FILE[,FILE...]")
        return [(f"{n}.{Path(e).stem}", {**s, "embeddings": e}, {"embeddings": Path(e).stem})
                for e in embeddings for n, s in SIX]
    if name == "datasize":
        fracs = _values(values, ["0.25", "0.5", "1"], float, "training fractions (numbers)")
        return [(f"{n}.data{f:g}", {**s, "train_fraction": f}, {"train_fraction": f})
                for f in fracs for n, s in SIX]
    path = Path(name)
    if path.suffix in (".toml", ".json"):    # a missing or unreadable file: load_table's line
        return _grid_file(path)
    raise LmlowError(f"--grid: unknown grid {name!r}; choose {', '.join(GRIDS)} or a .toml file")


def check_grid_inputs(name: str, embeddings: list[str], values: list[str] | None) -> None:
    """``--values`` and several ``--embeddings`` files only where the grid reads them (unk's
    K, datasize's fractions; pretrain's files): elsewhere they were dropped, and the table
    said nothing of the K, fraction or vectors the user asked for."""
    if values and name not in VALUES_GRIDS:
        raise LmlowError(f"--values {','.join(map(str, values))}: only --grid "
                         f"{' and '.join(VALUES_GRIDS)} take values (K, training fractions); "
                         f"grid {name} has none")
    if len(embeddings) > 1 and name != "pretrain":
        raise LmlowError(f"--embeddings {','.join(map(str, embeddings))}: several vectors files "
                         f"are for --grid pretrain (the six for each); grid {name} reads one")


# The named grids that take --values (VALUES_SET: the setting each sets with them)
VALUES_GRIDS = ("unk", "datasize")


def _grid_file(path: Path) -> list[tuple[str, dict, dict]]:
    """A TOML grid: ``[runs.NAME]`` tables of ``lmlow train`` settings (Config field names),
    and nothing else: a top-level ``preset = ...`` or a misspelled ``[run.b]`` was dropped, so
    the sweep planned fewer runs or other settings than the file says."""
    table = load_table(path)
    other = sorted(set(table) - {"runs"})
    if other:
        raise LmlowError(f"{path}: {other[0]!r} is not a grid file's key: it holds only "
                         "[runs.NAME] tables (a setting for every run is a flag of the sweep)")
    runs = table.get("runs")
    if not isinstance(runs, dict) or not runs or not all(isinstance(s, dict) for s in runs.values()):
        raise LmlowError(f"{path}: a grid file needs [runs.NAME] tables of settings")
    return [(n, _run_table(s, f"{path} [runs.{n}]"), {}) for n, s in runs.items()]


def _run_table(table: dict, where: str) -> dict:
    """One grid-file run's settings, checked as a config file's, and refused where they set
    what is the sweep's own or name a preset that does not exist."""
    for key, owner in GRID_REFUSED.items():
        if key in table:
            raise LmlowError(f"{where}: {key} is the sweep's ({owner}), the same for every run; "
                             "leave it out of the run's table")
    settings = check_settings(dict(table), where)
    if "preset" in settings and settings["preset"] not in PRESETS:
        raise LmlowError(f"{where}: preset = {settings['preset']!r}: choose one of "
                         f"{', '.join(PRESETS)}")
    return settings


# Settings a grid file's run cannot have: every run of one table reads the sweep's corpus (its
# rows are compared on the same tokens) and trains once per --seeds seed
GRID_REFUSED = {"corpus": "its CORPUS argument", "seed": "--seeds"}


def check_run_settings(name: str, settings: dict, grid_name: str, own: set) -> None:
    """A planned run's settings make a valid configuration, checked before the sweep writes
    anything (else the sweep folder, its plan and logs were made and each run failed in turn).
    A value out of range names where it came from: the grid file's run table, the --values of
    a named grid, or (re-raised as it is) the sweep's own flag."""
    try:
        build_config(settings.get("preset"), **{k: v for k, v in settings.items() if k != "preset"})
    except OutOfRange as e:
        if e.key in own and grid_name not in GRIDS:
            raise e.named(f"{grid_name} [runs.{name}]") from None
        if e.key in own and e.key in VALUES_SET:
            raise LmlowError(f"--values {e.value:g}: {e.rule} (as --{e.key.replace('_', '-')})") from None
        raise
    except LmlowError as e:              # a combination: which run of the grid makes it
        where = f"{grid_name} [runs.{name}]" if grid_name not in GRIDS else f"configuration {name}"
        raise LmlowError(f"{where}: {e}") from None


# What --values sets in the named grids that take it (unk: K; datasize: the fraction)
VALUES_SET = ("unk_threshold", "train_fraction")


def check_sweep_flags(extra: dict, preset: str, grid_name: str, owns: list[dict]) -> None:
    """The train flags given to the sweep, before any run is planned: each valid on its own,
    as `lmlow train` would refuse it (a grid file's run that sets the key wins over the flag,
    which was then dropped unchecked: ``--init glvoe``), and none that a named grid sets for
    its runs itself: ``--tie no`` with the six was dropped, ``--freeze-input`` made
    ``ours-unfrozen`` the same run as ``ours``; the names would no longer say what trained."""
    decided = (set(ROLE_KEYS).union(*owns)) - GRID_TAKES if grid_name in GRIDS else set()
    for key in (k for k in extra if k in decided):
        hint = "; --unigram adds the unigram bias to every run" if key == "init" else ""
        raise LmlowError(f"--{key.replace('_', '-')}: grid {grid_name} sets {key} for its runs; "
                         f"use a grid file to change it{hint}")
    check_values(Config(**{**defaults(preset), **extra}))
    if "init" in extra:
        check_init(names(extra["init"]))


# What a named grid's configuration names say (tying, each side's init and freezing), set or
# left to the default by each of its runs; and the flag a named grid sets only for some runs
# as documented (unk: --extend-vocab reaches its K=0 runs, K >= 1 builds from training counts)
ROLE_KEYS = ("tie", "init", "freeze_input", "freeze_output")
GRID_TAKES = {"extend_vocab"}


SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+=-]*")


def check_run_name(name: str, out: Path) -> None:
    """A grid's run name becomes a folder inside the sweep folder: letters, digits and
    ``. _ + = -``, not starting with ``.`` or ``-``, no ``..`` (so no ``/``, no way out of the
    folder, nothing a shell or SLURM would read as more than a name)."""
    if not SAFE_NAME.fullmatch(name) or ".." in name:
        raise LmlowError(f"run name {name!r}: use letters, digits and . _ + = - (not first: . "
                         "or -; no '..'), so that it is one folder inside the sweep folder")
    folder = (Path(out) / name).resolve()
    if folder.parent != Path(out).resolve():
        raise LmlowError(f"run name {name!r}: its folder would not be inside {out}")


def plan(corpus: Path, out: Path, grid_name: str, seeds: list[int], preset: str,
         embeddings: list[str], values: list[str] | None, extra: dict,
         unigram: bool = False) -> list[Run]:
    runs = []
    if len(set(seeds)) != len(seeds):
        raise LmlowError(f"--seeds {','.join(map(str, seeds))}: a seed is listed twice")
    bad = [s for s in seeds if not in_range(s, SEED_RANGE)]
    if bad:
        raise LmlowError(f"--seeds: {bad[0]} is outside {SEED_RANGE}")
    # a grid file's run may name its own preset (an LSTM beside a Transformer): it wins over
    # the sweep's --preset, as the run's other keys win over the sweep's flags
    configurations = [(name, settings, labels,
                       arch_of({**extra, **settings}, settings.get("preset", preset)))
                      for name, settings, labels in grid(grid_name, embeddings, values)]
    check_sweep_flags(extra, preset, grid_name, [own for _, own, *_ in configurations])
    for key, value in extra.items():
        if configurations and all(ignored_by(arch, key, value) for *_, arch in configurations):
            raise LmlowError(f"--{key} {value}: only --arch {ARCH_ONLY[key]} has it, and "
                             f"no run of this grid is one; leave it out")
    named: dict[str, dict] = {}
    for name, own, *_ in configurations:  # --values 1,01; two vectors files of one name
        if name in named:
            raise LmlowError(f"{grid_name}: two runs would share the folder {name}.seedN "
                             f"({named[name]} and {own}); give each a different value or "
                             "file name")
        named[name] = own
    for name, own, labels, arch in configurations:
        check_run_name(name, out)
        # a flag only one backbone reads goes to that backbone's runs (build_config refuses it
        # for the other), so one command can sweep a grid that mixes them
        shared = {k: v for k, v in extra.items() if ARCH_ONLY.get(k, arch) == arch}
        settings = {"corpus": str(corpus), **shared, **own}
        if unigram and "unigram" not in settings.get("init", ()):
            settings["init"] = (*settings.get("init", ("random",)), "unigram")
        # --extend-vocab takes its words from the vectors, so a random configuration gets
        # them too: every configuration of one table is then scored on the same tokens.
        needs_vectors = ({"glove", "glove-output"} & set(settings.get("init", ()))
                         or settings.get("extend_vocab"))
        if needs_vectors and not settings.get("embeddings"):
            if not embeddings:
                raise LmlowError(f"configuration {name} needs --embeddings FILE")
            settings["embeddings"] = embeddings[0]
        elif not needs_vectors and grid_name == "pretrain":
            # the grid's random configuration per file reads no vectors without
            # --extend-vocab (a new run refuses unread vectors): the same run for each file
            settings.pop("embeddings")
        # seed then preset last, the order sweep.json has always had: a rewritten plan of the
        # same runs is then the same file
        chosen = settings.pop("preset", preset)
        check_run_settings(name, {**settings, "seed": seeds[0], "preset": chosen}, grid_name,
                           set(own))
        for seed in seeds:
            runs.append(Run(name, {**settings, "seed": seed, "preset": chosen}, seed, labels))
    return runs


_PARSED = {f.name for f in fields(Config) if "parse" in f.metadata}   # e.g. --tie yes|no


def _flag(key: str, value) -> list[str]:
    """A setting as `lmlow train` flags (the inverse of lmlow.flags.add_settings)."""
    opt = "--" + key.replace("_", "-")
    if key in _PARSED and isinstance(value, bool):
        return [opt, "yes" if value else "no"]
    if isinstance(value, bool):
        return [opt] if value else [f"--no-{key.replace('_', '-')}"]
    if isinstance(value, (tuple, list)):
        return [opt, ",".join(map(str, value))]
    return [opt, str(value)]


def command(run: Run, out: Path, lmlow: list[str]) -> list[str] | None:
    """The ``lmlow train`` command for a run: new, resumed, or None when finished."""
    folder = RunDir(out / run.folder)
    if folder.path.is_symlink():      # trained through it, with --force, into where it points
        raise LmlowError(f"{folder.path}: a symbolic link where the sweep keeps a run folder; "
                         "lmlow does not write through links: remove it")
    if folder.finished or folder.locked_by():     # done, or being trained by another process
        return None
    if folder.last.exists():
        return [*lmlow, "train", "--resume", str(folder), "--quiet", *resume_changes(run, folder)]
    s = dict(run.settings)
    cmd = [*lmlow, "train", s.pop("corpus"), "--out", str(folder), "--preset", s.pop("preset"), "--quiet"]
    if folder.path.exists():
        refuse_lost_checkpoint(folder)  # a SLURM task plans long after the sweep checked
        cmd.append("--force")          # started but nothing saved yet: the sweep's own folder
    for k, v in s.items():
        if v is not None:
            cmd += _flag(k, v)
    return cmd


def as_started(run: Run, out: Path) -> Run:
    """A planned run as its folder already holds it, if it started (``last.pt``) or finished.
    Such a run is resumed or skipped, never retrained, so the plan must describe it, not the
    new command: where they differ in anything but what --resume may change, the folder holds
    another experiment, and a table that mixed the two would be silently wrong: refused
    (before anything is written), naming the run and the setting. Where they differ only in
    what --resume may change (precision, device, threads, the budget), a finished run's plan
    takes the run's values (it trained with them and will not train again); a started one
    takes those the new command gives, with which it resumes (:func:`command`: a table started
    in fp32 on a CPU without bf16 units goes on in bf16 on one that has them), and keeps its
    own where the command leaves a setting to the preset."""
    folder = RunDir(out / run.folder)
    if not (folder.finished or folder.last.exists()):
        refuse_lost_checkpoint(folder)
        return run
    if not folder.config.exists():
        return run
    planned_config = _planned_config(run)
    planned = planned_config.to_dict()
    have = Config.load(folder.config).to_dict()
    sized = vector_sized(planned_config)
    differ = [k for k in same_run_differs(have, planned) if k not in sized]
    if differ:
        k = differ[0]
        raise LmlowError(f"{folder.path}: this run was trained with {k} = {have[k]!r}, the sweep "
                         f"plans {k} = {planned.get(k)!r}; give it another output folder "
                         "(--out), or move that run folder away to train it again")
    refuse_other_places(folder, have, planned)
    kept = {k: have[k] for k in RESUME_CHANGES if have.get(k) != planned.get(k)
            and (folder.finished or run.settings.get(k) is None)}
    return Run(run.name, {**run.settings, **kept}, run.seed, run.labels)


def refuse_other_places(folder: RunDir, have: dict, planned: dict) -> None:
    """A corpus or vectors file at another path is the same run only if it holds the same
    files (a moved corpus): a sweep that plans other text or other vectors for a started or
    finished run would mix two experiments in one table with nothing said. Checked against
    the fingerprints the run recorded (data.json), only where the path differs."""
    from lmlow.data.corpus import fingerprint
    from lmlow.files import file_fingerprint

    def moved(key: str, recorded: str | None) -> bool:
        return bool(planned.get(key) and recorded
                    and Path(planned[key]).resolve() != Path(recorded).resolve())

    hint = "give it another output folder (--out), or move that run folder away to train it again"
    if folder.data_file.exists() and moved("corpus", have.get("corpus")):
        want, got = folder.recorded_fingerprint(), fingerprint(Path(planned["corpus"]))
        bad = [s for s in want if want[s] != got.get(s)]
        if bad:
            raise LmlowError(f"{folder.path}: this run was trained on another corpus than "
                             f"{planned['corpus']} (its {bad[0]}.txt differs); {hint}")
    read = folder.recorded_vectors()
    if read and moved("embeddings", read["path"]):
        if file_fingerprint(Path(planned["embeddings"]))["sha256"] != read["sha256"]:
            raise LmlowError(f"{folder.path}: this run read other vectors than "
                             f"{planned['embeddings']} (sha256 in its data.json); {hint}")


def refuse_lost_checkpoint(folder: RunDir) -> None:
    """A run that lost its last.pt (:meth:`RunDir.lost_checkpoint`) would be started over
    with --force, deleting the record of every epoch it trained: refused, before anything is
    written, so that the user moves it away and decides."""
    if held := folder.lost_checkpoint():
        raise LmlowError(f"{folder.path}: has no last.pt to resume from, but holds {held} "
                         "that starting over would delete; move the folder away (the record "
                         "of what trained) to train this run again")


def _planned_config(run: Run) -> Config:
    """The run's configuration as the plan builds it."""
    settings = dict(run.settings)
    return build_config(settings.pop("preset"), **settings)


def _planned(run: Run) -> dict:
    """The run's ``Config.to_dict()`` as the plan builds it."""
    return _planned_config(run).to_dict()


def vector_sized(cfg: Config) -> set[str]:
    """The sizes the vectors fix for a run of ``cfg`` (``train.built_config``): its config.json
    records the vectors' size there, not the plan's (the preset's 200 beside 50-d vectors), so
    they are no difference between a started run and its plan (the vectors' file is checked
    apart, :func:`refuse_other_places`)."""
    return ({"emb_size"} if cfg.pretrained_input else set()) | (
        {"out_size"} if cfg.pretrained_output else set())


def resume_changes(run: Run, folder: RunDir) -> list[str]:
    """The ``lmlow train --resume`` flags that continue a started run with what the plan says
    of precision, device, threads and the budget, where it differs from the run's own
    ``config.json`` (none where they agree, or the plan leaves a setting to the default)."""
    if not folder.config.exists():
        return []
    planned, have = _planned(run), Config.load(folder.config).to_dict()
    flags = []
    for k in RESUME_CHANGES:
        if run.settings.get(k) is not None and planned.get(k) != have.get(k):
            flags += _flag(k, planned[k])
    return flags


def record_plan(runs: list[Run], out: Path) -> None:
    """``SWEEP/sweep.json``: every planned run (its settings and seed), what `--status`, the
    report's count of missing runs and a SLURM task read. A folder's plan is every run ever
    planned into it: a later command (more seeds, or a few configurations first) adds its runs
    and replaces those of the same name in their place (so that the file, often committed,
    changes only where the plan does), so a report never calls a partial table complete."""
    runs = checked(runs, out)
    SweepDir(out).check_own_folders()           # before sweep.json: nothing written on a refusal
    make_folder(out)
    new = {r.folder: r for r in runs}
    merged = [new.pop(r.folder, r) for r in load_plan(out) or []] + list(new.values())
    atomic_write_json(SweepDir(out).plan_file, [r.__dict__ for r in merged])


def checked(runs: list[Run], out: Path) -> list[Run]:
    """The planned runs as the sweep will train them (:func:`as_started`), after every check
    a sweep and its --dry-run make before anything is written: the runs a folder already has,
    the other seeds of each configuration in its plan, and what the runs read."""
    runs = [as_started(r, out) for r in runs]
    check_same_configuration(runs, load_plan(out) or [], out)
    check_inputs(runs, out)
    return runs


def check_same_configuration(runs: list[Run], planned: list[Run], out: Path) -> None:
    """A configuration's runs in a folder's plan differ only in their seed (and in what
    --resume may change, or where a file lies): new seeds planned with another --lr into the
    same folder made one row of the table the mean of two experiments, with nothing said.
    Refused in one line naming the run and the setting; a run planned again replaces its row,
    so it is compared with the runs it does not replace."""
    new = {r.folder for r in runs}
    kept: dict[str, Run] = {}
    for r in planned:
        if r.folder not in new:
            kept.setdefault(r.name, r)
    for run in (r for r in runs if r.name in kept):
        other = kept[run.name]
        mine, theirs = _planned(run), _planned(other)
        differ = [k for k in same_run_differs(mine, theirs) if k != "seed"]
        if differ:
            k = differ[0]
            raise LmlowError(f"{Path(out) / run.folder}: the sweep plans {k} = {mine[k]!r}, but "
                             f"{other.folder} "
                             f"of configuration {run.name} in this folder's plan has {k} = "
                             f"{theirs[k]!r}: one row would mix two experiments; give these "
                             "settings another output folder (--out) or run name")


def check_inputs(runs: list[Run], out: Path) -> None:
    """The corpus, vectors and word list of every run still to train, checked before the
    sweep writes anything: a missing one failed each run in turn, after the plan, the logs and
    the runs that do not read it (``standard`` needs no vectors) had been made."""
    todo = [r.settings for r in runs if not RunDir(out / r.folder).finished]
    for corpus in sorted({s["corpus"] for s in todo if s.get("corpus")}):
        check_corpus_folder(Path(corpus))
    for corpus, fraction in sorted({(s["corpus"], s["train_fraction"]) for s in todo
                                    if s.get("corpus") and s.get("train_fraction", 1) < 1}):
        check_fraction(Path(corpus), fraction)
    for vectors in sorted({s["embeddings"] for s in todo if s.get("embeddings")}):
        if not Path(vectors).is_file():
            raise LmlowError(f"--embeddings {vectors}: no such file")
    for words in sorted({s["vocab"] for s in todo if s.get("vocab")}):
        read_word_list(Path(words))


def load_plan(out: Path) -> list[Run] | None:
    """The runs :func:`record_plan` wrote, or None for a folder that has no plan."""
    plan = SweepDir(out).plan_file
    return [_plan_row(r, plan) for r in read_json(plan, rows=True)] if plan.exists() else None


def _plan_row(row: dict, plan: Path) -> Run:
    """One row of the plan as the Run record_plan wrote; one line naming the plan if it is
    not (edited by hand), since every command of the sweep starts from it. Run's own fields
    and types are the check (as a config file's against Config's); a missing field is Run's
    TypeError."""
    try:
        run = Run(**check_settings(row, plan, Run))
        check_run_name(run.folder, plan.parent)     # a folder inside the sweep, and no other
    except (LmlowError, TypeError):
        raise LmlowError(f"{plan}: {json.dumps(row)[:80]} is not a run as lmlow plans one "
                         "(name, settings, seed, labels); edited or damaged?") from None
    return run


def read_outcome(path: Path) -> dict | None:
    """A run's recorded ending (a SLURM task's, or the local executor's), None if there is
    none; one line naming the file if it is not what lmlow writes (a TypeError or KeyError in
    --status)."""
    if not path.exists():
        return None
    data = read_json(path)
    if not (isinstance(data, dict) and isinstance(data.get("exit"), int)
            and not isinstance(data["exit"], bool) and isinstance(data.get("job"), str)
            and isinstance(data.get("node"), str)):
        raise LmlowError(f"{path}: not a task outcome as lmlow writes one (job, node, exit); "
                         "damaged or edited? delete it")
    return data


def execute(runs: list[Run], out: Path, jobs: int, threads: int | None = None,
            log=print) -> list[tuple[Run, int]]:
    """Run the unfinished runs, ``jobs`` at a time with the CPU cores split between them;
    each run's exit status (0, ELSEWHERE or a failure)."""
    import lmlow.runs  # noqa: F401  (scoring's modules now: a sweep runs for days, and lmlow
    #                    upgraded on disk meanwhile must not mix two versions in this process)
    record_plan(runs, out)
    sweep = SweepDir(out)
    split = sweep.split(runs)
    log(f"{split.line()}, {jobs} at a time")
    results = [(r, ELSEWHERE) for r in split.busy]
    per_job = threads or max(1, available_cpus() // jobs)   # not the machine's: a job's quota
    env = dict(os.environ, OMP_NUM_THREADS=str(per_job))
    todo, active = list(split.todo), []

    told: set[int] = set()

    def pass_on():   # each training still running saves last.pt and stops, resumable
        for proc in (a[1] for a in active if a[1].poll() is None and a[1].pid not in told):
            told.add(proc.pid)
            proc.send_signal(signal.SIGTERM)

    # SIGTERM or SIGINT to the sweep: no new run starts, and it ends (143 or 130) once its
    # trainings have stopped (before, a `kill` ended the sweep alone and left them running)
    with caught_signals(pass_on) as stop:
        try:
            while (todo and not stop) or active:
                while todo and not stop and len(active) < jobs:
                    started = _start(todo.pop(0), sweep, per_job, env, log)
                    (results if len(started) == 2 else active).append(started)
                time.sleep(0.5)
                if stop:       # also a training started while the signal was being handled
                    pass_on()
                for item in [a for a in active if a[1].poll() is not None]:
                    active.remove(item)
                    results.append((item[0], _ended(*item, sweep, per_job, log)))
        except BaseException:
            # an error starting or scoring one run (a log it cannot open, a full disk): the
            # trainings still running save and stop before the sweep ends with it (they
            # went on alone, orphaned, and finished unscored)
            pass_on()
            for _, proc, logf in active:
                proc.wait()
                logf.close()
            raise
    if stop:
        name = signal.Signals(stop[0]).name
        raise Interrupted(f"{name}: the running trainings saved their state and stopped, no "
                          f"other run was started; the same `lmlow sweep` command resumes "
                          f"({out})", 128 + stop[0])
    return results


def _start(run: Run, sweep: SweepDir, per_job: int, env: dict, log):
    """Start a run's `lmlow train`: (the run, its process, its log); or, when another sweep
    got there first, (the run, its status)."""
    cmd = command(run, sweep.path, [sys.executable, "-m", "lmlow.cli"])
    if cmd is None:
        done = sweep.run(run.folder).finished
        log(f"{'done (elsewhere)' if done else 'running elsewhere'} {run.folder}")
        return run, 0 if done else ELSEWHERE
    if "--resume" not in cmd and not run.settings.get("threads"):
        cmd += ["--threads", str(per_job)]    # the sweep's share, unless it gave one
    logf = sweep.open_log(run.folder)
    log(f"start {run.folder}")
    return run, subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env), logf


def _ended(run: Run, proc, logf, sweep: SweepDir, per_job: int, log) -> int:
    """A run's exit status once its process ended (finished or held by another sweep count
    as such), scored as soon as it finished."""
    logf.close()
    code, folder = proc.returncode, sweep.run(run.folder)
    if code != 0 and folder.finished:
        code = 0                      # finished meanwhile by another sweep
    elif code != 0 and folder.locked_by():
        code = ELSEWHERE
    if code == 0:
        code = _score_now(folder, per_job, log)
    if code != ELSEWHERE:             # another process's training: not this run's ending
        sweep.record_outcome(sweep.local_outcome(run.folder), "", code, folder.finished)
    state = {0: "done", ELSEWHERE: "running elsewhere", 130: "stopped (resumable)",
             143: "stopped (resumable)"}.get(code, "FAILED")
    tail = sweep.log_tail(run.folder, 1)
    log(f"{state} {run.folder}" + ("" if code in (0, ELSEWHERE) else f": {''.join(tail)}"))
    return code


def _score_now(run: RunDir, threads: int, log) -> int:
    """Score a run's best checkpoint on valid and test as soon as it finishes, into the
    ``eval_best_*.json`` caches beside it, so its numbers outlive its model files: ``*.pt`` stay
    out of git, and a report of a committed sweep is read from these caches alone. A failure
    here is the run's failure (1): a finished run that cannot be scored is not a result.
    It scores with the threads the run trained with when its settings name them (a
    background table at one thread a run stays at one), else with the sweep's share."""
    import torch

    from lmlow.runs import evaluation

    try:
        torch.set_num_threads(Config.load(run.config).threads or threads)
        for split in ("valid", "test"):
            evaluation(run, split)
    except LmlowError as e:
        log(f"cannot score {run.path}: {e}")
        return 1
    return 0


def dry_run(runs: list[Run], out: Path) -> list[str]:
    """The `lmlow train` commands the sweep would run, after the checks it would make (a
    changed setting, a missing corpus or vectors file: commands that would fail printed
    fine), writing nothing."""
    runs = checked(runs, out)                     # what the sweep itself would refuse
    lmlow = ["lmlow"]
    return [shlex.join(c) for r in runs if (c := command(r, out, lmlow))]


# --------------------------------------------------------------------------- executors, status

class Local:
    """``--executor local``: the runs here, ``jobs`` at a time; status from the run folders."""

    def __init__(self, jobs: int = 1, threads: int | None = None):
        self.jobs, self.threads = jobs, threads

    @staticmethod
    def dry_run(runs: list[Run], out: Path) -> list[str]:
        return dry_run(runs, out)

    def run(self, runs: list[Run], out: Path, log=print) -> str:
        results = execute(runs, out, self.jobs, self.threads, log)
        failed = [r.folder for r, code in results if code not in (0, ELSEWHERE)]
        if failed:
            raise LmlowError(f"{len(failed)} runs failed ({', '.join(failed[:3])}...); see "
                             f"{SweepDir(out).logs}/; the same command retries them")
        elsewhere = sum(code == ELSEWHERE for _, code in results)
        return (f"done{f'; {elsewhere} runs are being trained by another process' if elsewhere else ''}"
                f"; `lmlow report {out}` writes the table")

    @staticmethod
    def status(out: Path) -> list[dict]:
        return status(out, {}, unstarted="not started")

    @staticmethod
    def cancel(out: Path, log=print) -> int:
        raise LmlowError(f"{out}: a local sweep; stop it with Ctrl-C where it runs (its runs "
                         "keep their last.pt)")


def require_plan(out: Path) -> list:
    """The plan of sweep folder ``out``, or one line saying why it is none (missing, or a
    folder without the sweep's plan): what --status and --cancel check before anything."""
    plan = load_plan(out)
    if plan is None:
        if not Path(out).is_dir():
            raise LmlowError(f"{out}: no such folder; expected a sweep folder")
        raise LmlowError(f"{out}: not a sweep folder (no {SweepDir.PLAN})")
    return plan


def status(out: Path, in_queue: dict, unstarted: str = "not submitted") -> list[dict]:
    """Every run of the sweep: finished, running (job, node), pending, failed (exit status,
    the log's last lines), stopped (resumable) or ``unstarted`` (not submitted to SLURM, not
    started here); from the run folders, how their last training ended (a SLURM task's or the
    local executor's) and ``in_queue`` (the scheduler's view: folder -> job, state, node,
    reason)."""
    plan = require_plan(out)
    return [_status_row(SweepDir(out), run.folder, in_queue, unstarted) for run in plan]


def last_outcome(sweep: SweepDir, folder: str) -> dict | None:
    """How a run's last training ended: the record written last of its SLURM task's and the
    local executor's (a sweep may have run both ways), None if neither exists."""
    written = [p for p in (sweep.outcome(folder), sweep.local_outcome(folder)) if p.exists()]
    return read_outcome(max(written, key=lambda p: p.stat().st_mtime_ns)) if written else None


def _status_row(sweep: SweepDir, folder: str, in_queue: dict, unstarted: str) -> dict:
    run = sweep.run(folder)
    row = {"run": folder, "state": unstarted, "job": "", "node": "", "progress": "",
           "detail": ""}
    metrics = run.metrics() if run.last.exists() or run.finished else []
    if metrics:
        row["progress"] = progress(metrics)
    ended = last_outcome(sweep, folder)
    if run.finished:
        ppl = run.summary().get("best_valid_ppl")
        row.update(state="finished", detail=f"best valid ppl {ppl:.2f}" if ppl else "")
    elif folder in in_queue:
        q = in_queue[folder]
        row.update(state=q["state"], job=q["job"], node=q["node"],
                   detail=q["reason"] if q["state"] == "pending" else "")
    elif (holder := run.locked_by()):
        row.update(state="running", detail=f"outside this sweep's jobs: {holder}")
    elif ended and ended["exit"] not in (0, 130, 143):   # 130, 143: stopped by lmlow, saved
        code = ended["exit"]          # below 0: killed by a signal it could not handle
        said = (f"killed by {signal.Signals(-code).name}" if code < 0 and -code in
                signal.valid_signals() else f"exit {code}")
        row.update(state="failed", job=ended["job"], node=ended["node"],
                   detail=f"{said}: " + " | ".join(sweep.log_tail(folder)))
    elif run.last.exists():
        row.update(state="stopped", detail="resumable: run the sweep command again")
    elif held := run.lost_checkpoint():
        row.update(state="checkpoint lost", detail=f"{held}, no last.pt: move the folder away "
                   "to train it again")
    return row


def progress(metrics: list[dict]) -> str:
    """Where a run stands, from its metrics rows: epoch and step, the last and the best
    validation perplexity, and the minutes an epoch takes (the median of its last epochs), so
    that a user of an hours-long run can see it improving and estimate what is left."""
    def number(row, key):
        value = row.get(key)
        return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None

    last = metrics[-1]
    text = f"epoch {number(last, 'epoch') or 0:g}, step {number(last, 'step') or 0}"
    valid = [m for m in metrics if number(m, "valid_ppl") is not None]
    if valid:
        best = min(valid, key=lambda m: m["valid_ppl"])
        text += (f"; valid ppl {valid[-1]['valid_ppl']:.1f}, best {best['valid_ppl']:.1f} "
                 f"(epoch {number(best, 'epoch') or 0:g})")
    timed = [m for m in metrics
             if number(m, "epoch") is not None and number(m, "elapsed") is not None]
    # the median of the last EPOCHS_TIMED epochs: one epoch that held a pause (a machine
    # asleep, a process stopped) made a 6-minute epoch read 36
    last = timed[-EPOCHS_TIMED - 1:]
    spans = [(b["elapsed"] - a["elapsed"]) / (b["epoch"] - a["epoch"]) / 60
             for a, b in zip(last, last[1:]) if b["epoch"] > a["epoch"] and b["elapsed"] > a["elapsed"]]
    if spans:
        text += f"; {statistics.median(spans):.1f} min/epoch"
    return text


def status_text(rows: list[dict]) -> str:
    """`lmlow sweep --status`: the table and a count per state."""
    from lmlow.tables import markdown

    cols = ["run", "state", "job", "node", "progress", "detail"]
    counts: dict[str, int] = {}
    for r in rows:
        counts[r["state"]] = counts.get(r["state"], 0) + 1
    return (markdown(cols, [[r[c] for c in cols] for r in rows]) + "\n"
            + ", ".join(f"{n} {state}" for state, n in counts.items()))

