"""The ``lmlow`` command: dispatch. :mod:`lmlow.parsers` parses; each ``cmd_*`` here calls the
one function of the module that owns the work and prints what it returns (text, or JSON).
Errors are one line; ``--debug`` shows the traceback."""
from __future__ import annotations

import itertools
import json
import os
import sys

from lmlow.errors import (LmlowError, Said, Terminated, check_stop, out_of_memory, request_stop,
                          silence_stdout)


def settings_from(args, cls, skip=()) -> dict:
    """:func:`lmlow.flags.settings_from`, imported when a command runs: importing this module
    (the `lmlow` script does, before :func:`main`) stays too short for a Ctrl-C to land in."""
    from lmlow.flags import settings_from as given

    return given(args, cls, skip)


def _reading(args) -> dict:
    """How a data command reads its corpus: the UNK rule and the vectors' words."""
    if args.allow_pickle and not args.embeddings:         # (accepted, and it did nothing)
        raise LmlowError("--allow-pickle lets --embeddings FILE be a gensim pickle: give the "
                         "file, or leave --allow-pickle out")
    return dict(unk_threshold=args.unk_threshold, embeddings=args.embeddings,
                extend_vocab=args.extend_vocab, allow_pickle=args.allow_pickle, vocab=args.vocab)


def _read_files(args) -> list:
    """The files a data command reads: its corpus's splits, the vectors, the word list (an
    output that is one of them is refused: `vocab CORPUS --out CORPUS/train.txt --force`
    replaced the training split with the word list)."""
    from lmlow.data.corpus import SPLITS, split_path

    return [*(split_path(args.corpus, s) for s in SPLITS),
            *(p for p in (args.embeddings, args.vocab) if p)]


def _refuse_unused_vectors(args, command: str) -> None:
    """`vocab` and `unk` read the vectors' words only to add them (--extend-vocab): given
    alone, --embeddings did nothing, silently (as `ngram` refuses it)."""
    if args.embeddings and not args.extend_vocab:
        raise LmlowError(f"--embeddings {args.embeddings}: `lmlow {command}` reads the vectors' "
                         "words only to add them, with --extend-vocab; give both, or neither "
                         "(`lmlow stats --embeddings` gives their coverage)")


def _print(text: str, as_json: bool = False, obj=None, indent: int | None = 2) -> None:
    """The command's text, or with --json its result as JSON."""
    from lmlow.files import to_json
    print(to_json(obj, indent=indent) if as_json else text)


def cmd_prepare(args) -> None:
    from dataclasses import asdict

    from lmlow.data.prepare import PrepareOptions, prepare

    opts = settings_from(args, PrepareOptions)
    report = prepare(args.inputs, args.out, force=args.force, **opts)
    _print(report.text(args.out, bool(opts.get("dedup") or opts.get("exclude"))), args.json,
           asdict(report))


def cmd_vocab(args) -> None:
    from lmlow.data.corpus import read_corpus
    from lmlow.data.stats import format_vocab, vocab_summary
    from lmlow.files import refuse_compressed, refuse_input_as_output, refuse_overwrite

    _refuse_unused_vectors(args, "vocab")
    unused = [flag for flag, given in (("--counts", args.counts), ("--force", args.force)) if given]
    if unused and not args.out:           # (accepted, and nothing was written)
        raise LmlowError(f"{unused[0]}: a setting of the word list --out FILE writes; give "
                         "--out FILE, or leave it out")
    if args.out:
        refuse_compressed(args.out)
        refuse_input_as_output(_read_files(args), [args.out])
        refuse_overwrite([args.out], args.force)
    corpus, _ = read_corpus(args.corpus, **_reading(args))
    if args.out:
        corpus.vocab.save(args.out, with_counts=args.counts)
    summary = vocab_summary(corpus)
    wrote = f"\nwrote {args.out}" if args.out else ""
    _print(format_vocab(summary) + wrote, args.json, summary)


def cmd_unk(args) -> None:
    from dataclasses import asdict

    from lmlow.data.corpus import vocabulary_rule, write_unk_corpus
    from lmlow.data.stats import format_unk
    from lmlow.sweepdir import refuse_foreign_output

    _refuse_unused_vectors(args, "unk")
    refuse_foreign_output(args.out, "unk", corpus_ok=True)
    stats = write_unk_corpus(args.corpus, args.out, args.force, **_reading(args))
    _print(format_unk(stats, args.out, vocabulary_rule(args.unk_threshold, args.vocab)), args.json,
           {s: asdict(st) for s, st in stats.items()})


def cmd_stats(args) -> None:
    from lmlow.data.corpus import count_words, read_corpus
    from lmlow.data.stats import corpus_stats, format_stats

    corpus, words = read_corpus(args.corpus, **_reading(args))
    pretrain = count_words(args.pretrain) if args.pretrain else None
    stats = corpus_stats(corpus, pretrain, words, args.thresholds)
    _print(format_stats(stats) if not args.json else "", args.json, stats)


def cmd_embed(args) -> None:
    from lmlow.glove import GloveConfig, embed

    cfg = GloveConfig(**settings_from(args, GloveConfig))
    report, paths = embed(args.texts, args.out, cfg, args.tmp_dir, args.force)
    print(report.text() + "\nwrote " + ", ".join(map(str, paths)))


def cmd_neighbours(args) -> None:
    from lmlow.embeddings import format_neighbours, load_vectors, neighbours

    kv = load_vectors(args.vectors, args.allow_pickle)
    result = {w: neighbours(kv, w, args.top) for w in args.words}
    _print(format_neighbours(result) if not args.json else "", args.json, result)


def cmd_train(args) -> None:
    from lmlow.config import Config
    from lmlow.train import done_line, run_command

    summary = run_command(args.corpus, args.out, args.resume, args.config, args.preset,
                          settings_from(args, Config, skip=("corpus", "preset")), args.force,
                          args.quiet, args.nproc, args.argv)
    if summary and not args.quiet:
        print(done_line(summary))


def cmd_ngram(args) -> None:
    from lmlow.ngram import NgramOptions, train_ngram

    cfg = train_ngram(args.corpus, args.out, **settings_from(args, NgramOptions),
                      force=args.force, quiet=args.quiet)
    if not args.quiet:
        print(cfg.done_line(args.out))


def cmd_sweep(args) -> None:
    from lmlow.config import Config
    from lmlow.slurm import executor_of
    from lmlow.sweep import SweepOptions, status_text

    if args.status and args.cancel:                  # (it cancelled, and said nothing of it)
        raise LmlowError("--status and --cancel: give one (--cancel prints the status after)")
    if args.status or args.cancel:
        folder = args.out or args.corpus
        if args.cancel:
            executor_of(folder).cancel(folder)
        return print(status_text(executor_of(folder).status(folder)))
    opts = SweepOptions(**settings_from(args, SweepOptions)).validate()
    if not args.out:
        raise LmlowError("give --grid GRID and --out SWEEP_DIR (or --status / --cancel)")
    extra = settings_from(args, Config, skip=("corpus", "preset", "embeddings", "seed"))
    executor = _sweep_executor(args, opts, extra.get("threads"))
    runs = opts.plan(args.corpus, args.out, extra)
    print("\n".join(executor.dry_run(runs, args.out)) if args.dry_run
          else executor.run(runs, args.out))


def _sweep_executor(args, opts, threads: int | None):
    """The sweep's executor from its flags; a flag of the other executor, which it would
    ignore (`--partition` on a sweep that then trains here, `--jobs` on a SLURM one), is
    refused in one line naming it."""
    from lmlow.flags import flag_of
    from lmlow.slurm import Slurm, SlurmOptions
    from lmlow.sweep import Local

    queue = settings_from(args, SlurmOptions)
    if opts.executor != "slurm":
        if queue:
            flags = ", ".join(flag_of(SlurmOptions, k) for k in queue)
            raise LmlowError(f"{flags}: SLURM settings need --executor slurm")
        return Local(opts.jobs, threads)
    if args.jobs is not None:
        raise LmlowError("--jobs: runs at a time here, for --executor local; a SLURM array's "
                         "tasks at once are --array-parallelism N")
    return Slurm(SlurmOptions(**queue).validate())


def cmd_sweep_task(args) -> None:
    from lmlow.slurm import task

    task(args.sweep_dir, args.runs_file, args.index, args.gpus, args.threads)


def cmd_report(args) -> None:
    from lmlow.report import report

    text, warnings = report(args.sweep_dir, args.baseline, args.paired,
                            (args.map_unseen_inputs, args.map_unseen_outputs), args.wait)
    print(text)
    for warning in warnings:
        print(f"lmlow: warning: {warning}", file=sys.stderr)


def cmd_eval(args) -> None:
    from lmlow.runs import EvalOptions, evaluation_record, open_scorer

    opts = EvalOptions(**settings_from(args, EvalOptions))
    run, name = open_scorer(args.run_dir, args.checkpoint, args.device, opts, args.corpus)
    ev = run.evaluate(opts.split, args.corpus, reset_lines=opts.reset_lines)
    extra = {"interpolate": str(opts.interpolate), "weight": run.weight} if opts.interpolate else {}
    head = "".join(f"{args.run_dir}: {m.text()}\n"
                   for m in (run.mapped_inputs, run.mapped_outputs) if m)
    text = "" if args.json else head + ev.text(name, run.lines_independent(opts.reset_lines))
    _print(text, args.json, evaluation_record(ev, run.mapped_inputs, run.mapped_outputs) | extra,
           indent=None)


def cmd_score(args) -> None:
    from lmlow.data.textio import is_stream
    from lmlow.evaluate import ScoreTotals, total_line
    from lmlow.runs import ScoreOptions, open_scorer

    opts = ScoreOptions(**settings_from(args, ScoreOptions))
    run, name = open_scorer(args.run_dir, args.checkpoint, args.device, opts)
    _model_notes(args.run_dir, run, name if opts.interpolate else None)
    totals, stream = ScoreTotals(), is_stream(args.file)   # a pipe's writer awaits each answer
    for record in map(totals.add, run.score_file(args.file, raw=opts.raw, ids=opts.ids)):
        print(total_line(record) if args.totals else json.dumps(record), flush=stream)
    print(f"lmlow: {args.file}: {totals.text()}", file=sys.stderr)


def _model_notes(run_dir, run, mixture: str | None) -> None:
    """What `score` and `predict` say on stderr about the model they ask: the maps' work, and
    the mixture's weights."""
    for mapped in (run.mapped_inputs, run.mapped_outputs):
        if mapped:
            print(f"lmlow: {run_dir}: {mapped.text()}", file=sys.stderr)
    if mixture:
        print(f"lmlow: {mixture}", file=sys.stderr)


def cmd_predict(args) -> None:
    from lmlow.predict import PredictOptions, contexts, prediction_text, predictions
    from lmlow.runs import open_scorer

    opts = PredictOptions(**settings_from(args, PredictOptions))
    items = contexts(args.context, args.file, opts.raw, opts.ids)
    first = next(items)                      # a bad --file fails before the model is loaded
    run, name = open_scorer(args.run_dir, args.checkpoint, args.device, opts)
    _model_notes(args.run_dir, run, name if opts.interpolate else None)
    for record in predictions(run, itertools.chain([first], items), opts.top, opts.include_unk,
                              opts.raw, opts.partial):
        print(json.dumps(record) if args.json else prediction_text(record), flush=True)


def cmd_analyze(args) -> None:
    from lmlow.analysis import AnalyzeOptions, analysis_summary, analysis_text, analyze
    from lmlow.rundir import RunDir

    r = analyze(args.run_dir, args.out, args.corpus, args.checkpoint, args.device,
                args.force, **settings_from(args, AnalyzeOptions))
    out = args.out or RunDir(args.run_dir).analysis_dir
    _print(analysis_text(r, out) if not args.json else "", args.json, analysis_summary(r), None)


def cmd_compare(args) -> None:
    from lmlow.analysis import CompareOptions, compare, compare_markdown, compare_table, write_compare
    from lmlow.analysis.commands import check_compare_out
    from lmlow.tables import to_csv

    if args.out:
        check_compare_out(args.out, args.force)     # before the notes on the runs
    rows = compare(args.runs, **settings_from(args, CompareOptions))
    if args.out:
        write_compare(rows, args.out, args.force)
    text = to_csv(*compare_table(rows)).rstrip("\n") if args.csv else compare_markdown(rows)
    _print(text, args.json, rows, None)


def cmd_export(args) -> None:
    from lmlow.export import check_target, export
    from lmlow.runs import load

    check_target(args.out, args.force)          # before the model is read
    run = load(args.run_dir, args.checkpoint, "cpu", map_unseen_inputs=args.map_unseen_inputs,
               map_unseen_outputs=args.map_unseen_outputs)
    _model_notes(args.run_dir, run, None)
    done = export(run, args.out, args.force)
    layers = "LSTM layers" if done["arch"] == "lstm" else "Transformer blocks"
    print(f"wrote {done['out']}: {done['words']:,} words, {done['layers']} {layers}, "
          f"{done['parameters']:,} numbers, {done['bytes'] / 2**20:.1f} MiB (one step of the "
          "model for torch.export.load; docs/training.md shows the loop)")


def cmd_generate(args) -> None:
    from lmlow.generate import GenerateOptions, Sampling, sample_texts

    note, texts = sample_texts(args.run_dir, args.checkpoint, args.device, args.json,
                               **settings_from(args, GenerateOptions),
                               **settings_from(args, Sampling))
    if note and not args.json:
        print(note, file=sys.stderr)
    for text in texts:                        # each sample as soon as it is drawn
        print(text, flush=True)


def cmd_bias_sweep(args) -> None:
    from lmlow.generate import BiasSweepOptions, Sampling, bias_sweep
    from lmlow.rundir import RunDir

    r = bias_sweep(args.run_dir, args.out, args.force, args.corpus, args.checkpoint,
                   args.device, **settings_from(args, BiasSweepOptions),
                   **settings_from(args, Sampling, skip=("bias_scale",)))
    out = args.out or RunDir(args.run_dir).bias_sweep_dir
    _print(f"{r['markdown']}\nwrote {out}/bias_sweep.md, .csv, .json, samples.jsonl", args.json, r, None)


COMMANDS = {"prepare": cmd_prepare, "vocab": cmd_vocab, "unk": cmd_unk, "stats": cmd_stats,
            "embed": cmd_embed, "neighbours": cmd_neighbours, "train": cmd_train,
            "ngram": cmd_ngram, "eval": cmd_eval, "score": cmd_score, "predict": cmd_predict,
            "sweep": cmd_sweep, "export": cmd_export,
            "sweep-task": cmd_sweep_task, "report": cmd_report, "analyze": cmd_analyze,
            "compare": cmd_compare, "generate": cmd_generate, "bias-sweep": cmd_bias_sweep}
STOPS_ITSELF = ("sweep", "sweep-task")     # they handle SIGTERM in their own way
# (train too, but only inside its loop: a SIGTERM while it sets up, with an earlier run set
# aside by --force, raises Terminated here, so that run is put back)


def parse_argv(argv: list[str] | None):
    """The command line as argparse reads it, with predict's context words wherever they
    stand; argparse's own one-line error (SystemExit 2) for what it does not know."""
    from lmlow.parsers import build_parser   # imports each command's options: torch too

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    # predict's context words after an option: argparse gave the context out (none) before
    # the option and leaves them over; words that look like options (-x, --help are words of
    # a technical text) come after `--`, which argparse leaves over with them
    before, after = ((extra[:extra.index("--")], extra[extra.index("--") + 1:])
                     if "--" in extra else (extra, []))
    if (extra and getattr(args, "run", None) == "predict"
            and not any(a.startswith("-") for a in before)):
        args.context += before + after
    elif extra:
        parser.parse_args(argv)   # argparse's own one-line error for what it did not know
    return args


def main(argv: list[str] | None = None) -> int:
    for stream in (sys.stdout, sys.stderr):   # a word the terminal's encoding (say
        if hasattr(stream, "reconfigure"):     # PYTHONIOENCODING=ascii) cannot show is
            stream.reconfigure(errors="backslashreplace")   # escaped, not a traceback
    try:            # a Ctrl-C while the command line is read (torch is imported later) is
        if "WORLD_SIZE" in os.environ:    # a training process: it stops with its launcher
            from lmlow.distributed import follow_launcher
            follow_launcher()
        args = parse_argv(argv)    # the same one line and status as one later, not a traceback
    except KeyboardInterrupt as e:
        return _stopped(e, debug=False)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    code = _run(args)
    if "WORLD_SIZE" in os.environ:    # a training process under torchrun
        from lmlow.distributed import end_process
        end_process(code)
    return code


def _terminate(signum, _frame):
    request_stop()


def _run(args) -> int:
    """The command's exit code: its one-line error, if any, printed."""
    import signal

    if args.run not in STOPS_ITSELF:
        try:
            signal.signal(signal.SIGTERM, _terminate)
        except ValueError:                   # not the main thread (a library caller)
            pass
    try:
        return _command(args)
    except (KeyboardInterrupt, Terminated) as e:
        # a stop that came while an error below was being handled (a SIGTERM while `--nproc`
        # sets up breaks the collective process 0 waits in, and the signal's Terminated is
        # raised inside the RuntimeError's handler): a stop like any other, not a traceback
        return _stopped(e, args.debug)


def _command(args) -> int:
    """:func:`_run`'s command, its errors said in one line each."""
    try:
        if hasattr(args, "model_threads"):   # the commands that run a model (train: its own)
            from lmlow.cpus import use_threads
            use_threads(args.model_threads)
        COMMANDS[args.run](args)
        check_stop()                          # a SIGTERM whose exception Python dropped
    except LmlowError as e:
        if args.debug:
            raise
        if not isinstance(e, Said):
            _error(str(e))
        return getattr(e, "exit_code", 1)
    except (OSError, KeyboardInterrupt, Terminated) as e:
        return _stopped(e, args.debug)
    except (RuntimeError, MemoryError) as e:         # an allocation too large for the machine
        line = out_of_memory(e) or _peer_failed(e)
        if line is None or args.debug:
            raise
        _error(line)
        return 1
    return 0


def _peer_failed(e: BaseException) -> str | None:
    """One line for a training process whose peer stopped (under torchrun), else None."""
    from lmlow.distributed import peer_failed

    if not peer_failed(e):
        return None
    return "stopped: another training process failed (its own line says why)"


def _error(line: str) -> None:
    """Print ``lmlow: error: LINE``. A training process that ``lmlow train --nproc`` started
    also hands the line to the launcher (torchrun's error file for it), and, unless it is
    process 0, leaves the printing to the launcher: a bad input found after the launch is
    found by every process, and was said once by each (the launcher says each distinct line
    once, :func:`lmlow.distributed.launch`)."""
    from lmlow.distributed import LAUNCHER

    error_file = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if os.environ.get(LAUNCHER) and error_file:
        try:
            with open(error_file, "w") as f:
                json.dump({"message": line, "timestamp": 0}, f)
            if os.environ.get("RANK", "0") != "0":
                return
        except OSError:          # not written: this process says it itself
            pass
    print(f"lmlow: error: {_rank()}{line}", file=sys.stderr)


def _rank() -> str:
    """Which process of a torchrun launch speaks, when it is not the first."""
    return f"process {os.environ['RANK']}: " if os.environ.get("RANK", "0") != "0" else ""


def _stopped(e: BaseException, debug: bool) -> int:
    """The exit code and one line for a command stopped by a signal, a closed pipe, a full
    disk or a file the system refused (its own clean-up has run by now: temporaries removed,
    old files kept). An OSError that names no file is a fault of lmlow's: its traceback."""
    if isinstance(e, BrokenPipeError):       # e.g. `lmlow stats ... | head`
        silence_stdout()
        return 141
    if isinstance(e, KeyboardInterrupt):
        print("lmlow: interrupted", file=sys.stderr)
        return 130
    if isinstance(e, Terminated):
        print("lmlow: terminated (SIGTERM); nothing partial was kept", file=sys.stderr)
        return 143
    from lmlow.files import WRITE_ERRORS

    if debug or (e.errno not in WRITE_ERRORS and e.filename is None):
        raise e
    where = f"{e.filename}: " if e.filename else ""
    if e.errno in WRITE_ERRORS:
        print(f"lmlow: error: {where}cannot write ({e.strerror}); nothing partial was kept",
              file=sys.stderr)
    else:      # a file the system refused otherwise (a name too long, a vanished input)
        print(f"lmlow: error: {where}{e.strerror or e}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
