"""Command-line flags built the same way for every command: generated from the settings
dataclasses (``Config``, ``GloveConfig``, ``NgramOptions``), shared groups for "a run" and "an
output", and argparse types for comma lists, so a bad value is one line naming the flag."""
from __future__ import annotations

import argparse
import re
import typing
from dataclasses import MISSING, fields
from pathlib import Path

from lmlow.config import THREADS_RANGE, Config, describe_range, in_range, range_rule


# --------------------------------------------------------------------------- value types

def comma_list(kind, what: str):
    """An argparse type for ``a,b,c`` lists of ``kind`` (int, float, str)."""
    def parse(text: str) -> list:
        items = [x.strip() for x in str(text).split(",")]
        if any(not x for x in items) and any(items):    # `0,,1`: the empty item was dropped,
            raise argparse.ArgumentTypeError(         # and --prune 0,,1 pruned other orders
                f"expected comma-separated {what}, got an empty item in {text!r}")
        items = [x for x in items if x]
        try:
            values = [kind(x) for x in items]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got {text!r}") from None
        if not values:
            raise argparse.ArgumentTypeError(f"expected comma-separated {what}, got nothing")
        return values
    parse.__name__ = f"list of {what}"
    return parse


int_list = comma_list(int, "integers")
float_list = comma_list(float, "numbers")
str_list = comma_list(str, "names")


def unk_thresholds(text: str) -> list[int]:
    """``lmlow stats --thresholds``: K values of the UNK rule, each in --unk-threshold's range
    (``Config.RANGES``; a negative K made a table row of its own that meant K=0)."""
    values, allowed = int_list(text), Config.RANGES["unk_threshold"]
    for k in values:
        if not in_range(k, allowed):
            raise argparse.ArgumentTypeError(f"each K {range_rule(k, allowed)} (as "
                                             f"--unk-threshold), got {k}")
    return values


def at_least(low: int):
    """An argparse type for integers >= ``low``."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < low:
            raise argparse.ArgumentTypeError(f"must be at least {low}, got {value}")
        return value
    parse.__name__ = f"integer >= {low}"
    return parse


# --------------------------------------------------------------------------- settings dataclasses

def _value_type(cls, f):
    """The type a field's flag parses: from the default, or the annotation of an Optional."""
    if f.default is not None and f.default is not MISSING:
        return type(f.default)
    hint = typing.get_type_hints(cls)[f.name]
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    return args[0] if args else str


def _shown(value) -> str:
    if value is None or value == "":
        return "none"
    if isinstance(value, (tuple, list)):
        return ",".join(map(str, value)) or "none"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def add_settings(parser, cls, skip=(), defaults: dict | None = None) -> None:
    """One flag per field of the dataclass ``cls`` (its metadata ``help``, ``metavar``,
    ``parse``; ``flag`` for another name, ``append`` for a repeatable flag, ``switch`` for an
    on-only flag): the
    dataclass is the single source of truth. Every flag defaults to None, so
    :func:`settings_from` returns only what the user gave; ``defaults`` (e.g. a preset's)
    are shown in the help instead of the field's."""
    defaults = defaults or {}
    for f in fields(cls):
        if f.name not in skip:
            parser.add_argument(*_flag(f), **_argument(cls, f, defaults.get(f.name, f.default)))


def _flag(f) -> list[str]:
    return [f.metadata.get("flag") or "--" + f.name.replace("_", "-")]


def flag_of(cls, name: str) -> str:
    """The flag of field ``name`` of ``cls`` (``--sbatch-arg`` for ``sbatch_args``): what an
    error about a given setting names."""
    return _flag(next(f for f in fields(cls) if f.name == name))[0]


def _argument(cls, f, default) -> dict:
    """argparse's keywords for the flag of field ``f``: type, action, help with range."""
    meta = dict(f.metadata)
    limit = getattr(cls, "RANGES", {}).get(f.name)
    choices = getattr(cls, "CHOICES", {}).get(f.name)
    text = meta.get("help", "")
    said = "(default:" in text              # a default that needs words says so itself
    notes = [None if said else f"default: {_shown(default)}",
             limit and describe_range(limit), choices and f"one of {', '.join(choices)}"]
    notes = "; ".join(n for n in notes if n)
    kw = {"default": None, "dest": f.name, "help": f"{text} ({notes})" if notes else text}
    if meta.get("metavar"):
        kw["metavar"] = meta["metavar"]
    if meta.get("parse") is Path:             # never empty (--exclude '' named the folder '.')
        meta["parse"] = path_arg
    if meta.get("parse"):
        meta["parse"] = _one_line(meta["parse"])
    if meta.get("append"):                   # repeatable: each use adds one value
        return {**kw, "action": "append", **({"type": meta["parse"]} if "parse" in meta else {})}
    if meta.get("switch"):                   # --flag turns it on (no --no-flag)
        return {**kw, "action": "store_const", "const": True}
    if meta.get("parse"):
        return {**kw, "type": meta["parse"]}
    if isinstance(f.default, bool):
        return {**kw, "action": argparse.BooleanOptionalAction}
    if isinstance(f.default, tuple):
        return {"metavar": "LIST", **kw, "type": str_list}
    kind = _value_type(cls, f)
    ranged = getattr(cls, "RANGES", {}).get(f.name)
    if kind is str:                          # a path or a name: "" is no value (path_arg)
        return {**kw, "type": _nonempty}
    if kind is Path:
        return {**kw, "type": path_arg}
    return {**kw, "type": _in_range(kind, ranged) if ranged and kind in (int, float) else kind}


def _nonempty(text: str) -> str:
    """A text setting's type (a path, a name, a SLURM value): never empty."""
    if not text.strip():
        raise argparse.ArgumentTypeError("an empty value; give one, or leave the flag out")
    return text


_nonempty.__name__ = "text"


def _in_range(kind, text: str):
    """An argparse type for numbers of ``kind`` inside the interval ``text``: a value out of
    range is refused while the command line is read, naming the flag and the range."""

    def parse(value: str):
        try:
            x = kind(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {'an integer' if kind is int else 'a number'}"
                                             f", got {value!r}") from None
        if not in_range(x, text):
            raise argparse.ArgumentTypeError(f"{value} {range_rule(x, text)}")
        return x
    parse.__name__ = f"{kind.__name__} {describe_range(text)}"
    return parse


def _one_line(parse):
    """A field's parser as an argparse type: its LmlowError becomes argparse's one-line error
    naming the flag."""
    from lmlow.errors import LmlowError

    def wrapped(text):
        try:
            return parse(text)
        except LmlowError as e:                   # argparse names the flag itself
            raise argparse.ArgumentTypeError(re.sub(r"^--[a-z-]+: ", "", str(e))) from None
    wrapped.__name__ = getattr(parse, "__name__", "value")
    return wrapped


def settings_from(args: argparse.Namespace, cls, skip=()) -> dict:
    """The fields of ``cls`` the user gave as flags."""
    return {f.name: getattr(args, f.name) for f in fields(cls)
            if f.name not in skip and getattr(args, f.name, None) is not None}


# --------------------------------------------------------------------------- shared groups

def add_run(p, what: str = "run folder", checkpoint: bool = True, device: bool = True) -> None:
    """RUN_DIR and where its model runs: ``--checkpoint`` (LSTM runs) and ``--device``."""
    p.add_argument("run_dir", type=path_arg, metavar="RUN_DIR", help=what)
    if checkpoint:
        p.add_argument("--checkpoint", choices=["best", "last"], default=None,
                       help="which checkpoint of an LSTM run: best by validation perplexity, "
                       "or last (default: best, or last for a run stopped before its first "
                       "validation)")
    if not device:
        return
    p.add_argument("--device", default=Config.device, choices=Config.CHOICES["device"],
                   help=f"where to run the model (default: {Config.device}; auto is a GPU if "
                   "torch sees one)")
    add_threads(p)


def add_threads(p, what: str = "the model") -> None:
    """``--threads`` of a command that runs models (train's and embed's are their settings')."""
    p.add_argument("--threads", type=thread_count, default=0, dest="model_threads",
                   metavar="N", help=f"CPU threads for {what} (0: OMP_NUM_THREADS if set, "
                   "else the cores this process may use, its CPU affinity and CPU quota; 1 "
                   "beside a training that has the other cores) (default: 0; in "
                   + THREADS_RANGE + ")")


def thread_count(text: str) -> int:
    """``--threads``'s type for the commands that run a model: an integer in THREADS_RANGE."""
    value = at_least(0)(text)
    if not in_range(value, THREADS_RANGE):
        raise argparse.ArgumentTypeError(f"must be {describe_range(THREADS_RANGE)}, got {value}")
    return value


def path_arg(text: str) -> Path:
    """A path argument's type: never empty. ``Path("")`` is the current folder, so an empty
    ``--out ""`` (an unset shell variable, say) wrote a run's files into it, and an empty
    ``--vocab ""`` was taken for no word list."""
    if not text.strip():                     # (" " made a folder named by a blank)
        raise argparse.ArgumentTypeError("an empty path; name a file or folder")
    return Path(text)


def output_path(text: str) -> Path:
    """``--out``'s type: a path to write, never ``-`` nor empty. lmlow writes files and
    folders, not standard output, and a file named ``-`` is what `--out -` made before, where
    the Unix habit expects the terminal."""
    if text == "-":
        raise argparse.ArgumentTypeError("'-' is standard output, which lmlow writes no "
                                         "outputs to; name a path (./- for one called '-')")
    return path_arg(text)


def input_path(text: str) -> Path:
    """A streamed input's type (`score FILE`, `predict --file`, `prepare INPUT`): ``-`` is
    standard input, as the Unix habit has it (``... | lmlow score RUN -``), read as
    ``/dev/stdin``; ./- names a file called '-'."""
    return Path("/dev/stdin") if text == "-" else path_arg(text)


def add_output(p, what: str, required: bool = True, json: str | None = None,
               force: str = "overwrite existing output files") -> None:
    """``--out`` (with ``what`` it is), ``--force`` and, if ``json`` says what, ``--json``."""
    p.add_argument("--out", type=output_path, required=required, metavar="PATH", help=what)
    p.add_argument("--force", action="store_true", help=force)
    if json:
        p.add_argument("--json", action="store_true", help=json)


def add_allow_pickle(p) -> None:
    p.add_argument("--allow-pickle", action="store_true",
                   help="allow gensim .kv/.model vector files: they are pickles, which can run "
                   "code when loaded (only for files you trust)")


def add_corpus(p, embeddings_what: str, unk_flags=("--unk-threshold",)) -> None:
    """A corpus read under the UNK rule, optionally with the words of a vector file."""
    p.add_argument("corpus", type=path_arg, help="corpus folder with train/valid/test.txt")
    from lmlow.config import VOCAB_HELP, Config

    unk = next(f for f in fields(Config) if f.name == "unk_threshold")   # one definition
    p.add_argument(*unk_flags, **{**_argument(Config, unk, unk.default), "metavar": "K"})
    p.set_defaults(unk_threshold=unk.default)
    p.add_argument("--embeddings", type=path_arg, metavar="FILE",
                   help=f"pretrained vectors (GloVe text, word2vec text/.bin, lmlow .npz) "
                   f"{embeddings_what}")
    add_allow_pickle(p)
    p.add_argument("--extend-vocab", action="store_true",
                   help="add the words of --embeddings to the vocabulary (they have training "
                   "count 0, so they stay words only when K=0): rare words the vectors cover "
                   "are then predicted as words instead of <unk>")
    p.add_argument("--vocab", type=path_arg, metavar="FILE", help=VOCAB_HELP)


__all__ = ["add_corpus", "add_output", "add_run", "add_settings", "at_least", "comma_list",
           "float_list", "input_path", "int_list", "output_path", "settings_from", "str_list",
           "unk_thresholds"]
