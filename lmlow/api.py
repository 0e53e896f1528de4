"""The rest of the workflow from Python, beside ``lmlow.fit`` / ``lmlow.resume`` (train.py) and
``lmlow.load`` (runs.py): ``lmlow.embed``, ``lmlow.fit_ngram``, ``lmlow.fit_sweep`` (with
``lmlow.sweep_status`` and ``lmlow.cancel_sweep``) and ``lmlow.results`` are ``lmlow embed``,
``lmlow ngram``, ``lmlow sweep`` (``--status``, ``--cancel``) and ``lmlow report``.

Each takes a config file's keys for its command's flags (a flag's name with ``_`` for ``-``;
``eos=False``, not ``"no"``), checks every key and its type before anything is written (one
``LmlowError`` naming the function and the key, as ``lmlow.fit`` does), then runs the
command's own function, so the files are the command's to the bit; it returns what the
command wrote, as Python values. Paths may be ``str`` or ``pathlib.Path``. (Named ``fit_*``
where the command's name is already a module of this package: ``lmlow.sweep``, ``lmlow.ngram``,
``lmlow.report``.)"""
from __future__ import annotations

import os
import warnings
from dataclasses import asdict
from pathlib import Path

from lmlow.config import Config, bool_value, check_settings, file_values, keyword_errors
from lmlow.config import path_value as _path
from lmlow.config import text_value as _text
from lmlow.errors import LmlowError


def _paths(value, where: str, what: str) -> list[Path]:
    """One path or a list of them, each ``str`` or ``Path``."""
    items = [value] if isinstance(value, (str, os.PathLike)) else value
    if not isinstance(items, (list, tuple)) or not items or \
            not all(isinstance(v, (str, os.PathLike)) for v in items):
        raise LmlowError(f"{where}: {what} = {value!r}: expected a path or a list of paths")
    return [Path(v) for v in items]


def _silent(*_args, **_kwargs) -> None:
    return None


def embed(texts, out, force: bool = False, quiet: bool = False, tmp_dir=None,
          **settings) -> dict:
    """``lmlow embed TEXT... --out OUT``: GloVe vectors on ``texts`` (one path or several),
    written to ``out`` (GloVe text) and the ``.npz`` beside it. ``settings``: ``dim``,
    ``window``, ``min_count``, ``epochs``, ``x_max``, ``alpha``, ``learning_rate``, ``threads``,
    ``seed``, ``memory``, ``eos`` (``lmlow embed --help``). Returns what the command prints:
    the vocabulary and token counts, each stage's seconds, the cost per epoch, peak memory,
    and ``files``, the two files written."""
    from lmlow.glove import GloveConfig, embed as train_vectors

    where = "lmlow.embed"
    texts, out = _paths(texts, where, "texts"), _path(out, where, "out")
    given = check_settings(file_values(settings), where, GloveConfig)
    work = None if tmp_dir is None else _path(tmp_dir, where, "tmp_dir")
    with keyword_errors(where, given):
        report, files = train_vectors(texts, out, GloveConfig(**given), work, force,
                                      show_progress=not quiet)
    return {**asdict(report), "files": [str(f) for f in files]}


def fit_ngram(corpus, out, force: bool = False, quiet: bool = False, **settings) -> dict:
    """``lmlow ngram CORPUS --out OUT``: a KenLM modified Kneser-Ney model of the corpus's
    training split, on the tokens the LSTMs read. ``settings``: ``order``, ``unk_threshold``,
    ``memory``, ``prune``, ``embeddings``, ``extend_vocab``, ``vocab``, ``train_fraction`` (``lmlow ngram
    --help``). Returns the run's ``config.json`` (the order, lmplz's and build_binary's
    command lines, seconds, lmplz's peak memory); ``lmlow.load(out)`` scores with it."""
    from lmlow.ngram import NgramOptions, train_ngram

    where = "lmlow.fit_ngram"
    corpus, out = _path(corpus, where, "corpus"), _path(out, where, "out")
    options = check_settings(file_values(settings), where, NgramOptions)
    with keyword_errors(where, options):
        return asdict(train_ngram(corpus, out, force=force, quiet=quiet, **options))


# Config's keys a sweep sets itself: the corpus and the seeds are fit_sweep's own arguments,
# the preset and the vectors too (one file, or several for the pretrain grid)
SWEEP_OWN = ("corpus", "seed", "preset", "embeddings")


def fit_sweep(corpus, out, grid, seeds=1, preset: str = "small", embeddings=(), values=None,
              unigram: bool = False, jobs: int = 1, quiet: bool = False,
              executor: str = "local", slurm: dict | None = None, **settings) -> list[dict]:
    """``lmlow sweep CORPUS --grid GRID --out OUT``: ``grid`` is table1, six, unk, pretrain,
    datasize or a TOML file; ``seeds`` one seed or a list; ``embeddings`` one vectors file or a
    list (the pretrain grid's); ``values`` the unk grid's K values or the datasize grid's
    fractions; ``settings`` a config file's keys, applied to every run (``max_epochs=40``).
    ``executor="local"`` trains here, ``jobs`` runs at a time, and returns when they end;
    ``executor="slurm"`` submits them as one SLURM job array and returns at once (``slurm``:
    the keys of the command's SLURM group, ``time="4:00:00"``, ``cpus_per_run=1``,
    ``partition``, ``mem``, ``setup=["module load cuda"]``...); ``lmlow.sweep_status(out)``
    follows it, ``lmlow.cancel_sweep(out)`` stops it. Finished runs are skipped and stopped
    ones resumed, as the command does. Returns each planned run's state (what ``lmlow sweep
    --status`` lists); ``lmlow.results(out)`` makes the table."""
    from lmlow.slurm import Slurm, SlurmOptions
    from lmlow.sweep import Local, SweepOptions

    where = "lmlow.fit_sweep"
    mine = sorted(set(settings) & set(SWEEP_OWN))
    if mine:
        raise LmlowError(f"{where}: {mine[0]} is set by the sweep (its own argument or one per "
                         "run), not a setting for every run")
    corpus, out = _path(corpus, where, "corpus"), _path(out, where, "out")
    extra = check_settings(file_values(settings), where, Config)
    vectors = () if embeddings in (None, (), []) else _paths(embeddings, where, "embeddings")
    # the options of one type each are checked as a config file's; the lists take one or many
    own = check_settings(file_values(dict(grid=grid, preset=preset, unigram=unigram, jobs=jobs,
                                          executor=executor)), where, SweepOptions)
    queue = _slurm_settings(slurm, executor, where)
    if executor == "slurm" and jobs != 1:      # ignored there: the sweep would say nothing
        raise LmlowError(f"{where}: jobs = {jobs!r}: runs at a time here (executor='local'); a "
                         "SLURM array's tasks at once are slurm={'array_parallelism': N}")
    opts = SweepOptions(**own, embeddings=tuple(str(p) for p in vectors),
                        seeds=_ints(seeds, where), values=_values(values, where))
    with keyword_errors(where, {**own, **extra}):
        opts.validate()
        with keyword_errors(f"{where}: slurm", queue):
            runner = (Slurm(SlurmOptions(**queue).validate()) if executor == "slurm"
                      else Local(opts.jobs, extra.get("threads")))
        runs = opts.plan(corpus, out, extra)
        with keyword_errors(f"{where}: slurm", queue):
            runner.run(runs, out, log=_silent if quiet else print)
    return runner.status(out)


def _slurm_settings(slurm, executor, where: str) -> dict:
    """``fit_sweep``'s ``slurm``: a dict of SlurmOptions keys, given with ``executor="slurm"``."""
    from lmlow.slurm import SlurmOptions

    if slurm is None:
        return {}
    if executor != "slurm":
        raise LmlowError(f"{where}: slurm = {slurm!r}: settings for executor='slurm' "
                         f"(executor is {executor!r})")
    if not isinstance(slurm, dict):
        raise LmlowError(f"{where}: slurm = {slurm!r}: expected a dict of the SLURM settings "
                         "(time, partition, cpus_per_run, ...)")
    given = check_settings(file_values(slurm), f"{where}: slurm", SlurmOptions)
    return {k: list(v) if isinstance(v, tuple) else v for k, v in given.items()}


def sweep_status(out) -> list[dict]:
    """``lmlow sweep OUT --status``: each planned run's state (finished, running, pending,
    failed, stopped, not started (local) or not submitted (SLURM)), with its SLURM job and
    node where it was submitted."""
    from lmlow.slurm import executor_of

    out = _path(out, "lmlow.sweep_status", "out")
    return executor_of(out).status(out)


def cancel_sweep(out, quiet: bool = False) -> list[dict]:
    """``lmlow sweep OUT --cancel``: cancels the sweep's SLURM tasks (their runs keep their
    ``last.pt``: the same ``fit_sweep`` call resumes them) and returns the runs' states. A
    local sweep is stopped where it runs (Ctrl-C), so it is refused here."""
    from lmlow.slurm import executor_of

    out = _path(out, "lmlow.cancel_sweep", "out")
    executor = executor_of(out)
    executor.cancel(out, log=_silent if bool_value(quiet, "lmlow.cancel_sweep", "quiet") else print)
    return executor.status(out)


def results(sweep_dir, baselines=None, paired: str | None = None,
            map_unseen_inputs: bool = False, map_unseen_outputs: bool = False,
            wait: bool = False) -> list[dict]:
    """``lmlow report SWEEP``: writes ``results.md``, ``.csv``, ``.json`` and ``curves.png`` into
    the sweep folder and returns the table's rows (``results.json``), one per configuration,
    then one per n-gram baseline (``baselines``: one run folder or a list). ``paired``: the
    configuration the others are compared with, seed by seed. A table that mixes precisions,
    or a baseline over other tokens than the runs', warns (``warnings.warn``), as the command
    does on stderr."""
    from lmlow.files import read_json
    from lmlow.report import write_report

    where = "lmlow.results"
    sweep_dir = _path(sweep_dir, where, "sweep_dir")
    bases = None if baselines in (None, (), []) else _paths(baselines, where, "baselines")
    maps = (bool_value(map_unseen_inputs, where, "map_unseen_inputs"),
            bool_value(map_unseen_outputs, where, "map_unseen_outputs"))
    if paired is not None:
        paired = _text(paired, where, "paired")
    paths, said = write_report(sweep_dir, bases, paired, maps, bool_value(wait, where, "wait"))
    for warning in said:
        warnings.warn(warning, stacklevel=2)
    return read_json(paths[2], rows=True)


def _ints(value, where: str) -> tuple:
    items = [value] if isinstance(value, int) and not isinstance(value, bool) else value
    if not isinstance(items, (list, tuple, range)) or not items or \
            any(isinstance(v, bool) or not isinstance(v, int) for v in items):
        raise LmlowError(f"{where}: seeds = {value!r}: expected an integer or a list of them")
    return tuple(items)


def _values(value, where: str) -> tuple | None:
    """The unk grid's K values or the datasize grid's fractions, as the flag's text gives them."""
    if value is None:
        return None
    one = isinstance(value, (int, float, str)) and not isinstance(value, bool)
    items = [value] if one else value
    if not isinstance(items, (list, tuple)) or not items or \
            any(isinstance(v, bool) or not isinstance(v, (int, float, str)) for v in items):
        raise LmlowError(f"{where}: values = {value!r}: expected a number or a list of them")
    return tuple(str(v) for v in items)
