"""`lmlow predict`: the most probable next words after a context, from any run (an LSTM, a
KenLM n-gram, or their interpolation): what a keyboard suggests, or a recogniser's next-word
list. The numbers are the ones `lmlow score` gives the same line (tested per word), over
the whole vocabulary (they sum to 1)."""
from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Iterator

from lmlow.config import check_values, setting
from lmlow.data.textio import EOS
from lmlow.errors import LmlowError
from lmlow.input_map import HELP as MAP_HELP, OUT_HELP as MAP_OUT_HELP


@dataclass
class PredictOptions:
    """What `lmlow predict` lists (its flags are generated from these fields)."""
    top: int = setting(10, "how many next words to list, most probable first", metavar="N")
    include_unk: bool = setting(False, "list <unk> too (left out by default: it is no word "
                                "to offer)", switch=True)
    interpolate: Path | None = setting(None, "mix RUN_DIR word by word with another run over "
                                       "the same vocabulary (e.g. a KenLM n-gram): p = w p_1 "
                                       "+ (1 - w) p_2", parse=Path, metavar="RUN_DIR2")
    weight: float | None = setting(None, "with --interpolate: the weight w of RUN_DIR (none: "
                                   "tuned by EM on the validation split, every line from a "
                                   "fresh state as the contexts are read)", metavar="W")
    map_unseen_inputs: bool = setting(False, MAP_HELP, switch=True)
    map_unseen_outputs: bool = setting(False, MAP_OUT_HELP, switch=True)
    RANGES: typing.ClassVar[dict] = {"top": "[1, inf)", "weight": "[0, 1]"}


def open_predictor(run_dir: Path, checkpoint: str | None, device: str, opts: PredictOptions):
    """The scorer `lmlow predict` asks: the run, or its mixture with ``opts.interpolate``
    (each line from a fresh state, as a context is read)."""
    from lmlow.runs import EvalOptions, open_scorer

    check_values(opts)
    return open_scorer(run_dir, checkpoint, device, EvalOptions(
        reset_lines=True, interpolate=opts.interpolate, weight=opts.weight,
        map_unseen_inputs=opts.map_unseen_inputs, map_unseen_outputs=opts.map_unseen_outputs))


def contexts(words: list[str], file: Path | None) -> Iterator[tuple[int | None, list[str]]]:
    """(line number or None, words) of each context: the command line's words (one context;
    none: the start of a line) or every non-blank line of ``file``."""
    if file is not None:
        if words:
            raise LmlowError("give the context as words or as --file FILE, not both")
        from lmlow.data.textio import iter_lines

        yield from iter_lines(file)
        return
    words = " ".join(words).split()
    if EOS in words:
        raise LmlowError(f"the context holds {EOS}: a context is the start of one line (its "
                         "end is what is predicted)")
    yield None, words


def predictions(scorer, items: Iterable[tuple[int | None, list[str]]], top: int = 10,
                include_unk: bool = False) -> Iterator[dict]:
    """One record per context: its words, which of them are out of the vocabulary (read as
    ``<unk>``), and the ``top`` next words with their probability and natural-log
    probability."""
    for line, words in items:
        record = {"line": line} if line is not None else {}
        record |= {"context": words, "oov": [w not in scorer.vocab for w in words],
                   "next": [{"word": w, "prob": round(math.exp(lp), 8), "logprob": round(lp, 6)}
                            for w, lp in scorer.next_words(words, top, include_unk)]}
        yield record


def prediction_text(record: dict) -> str:
    """``the return value of -> the 21.3%, a 8.2%, ...`` (an out-of-vocabulary context word
    shown as ``word(<unk>)``; an empty context as ``<line start>``)."""
    shown = " ".join(f"{w}(<unk>)" if oov else w
                     for w, oov in zip(record["context"], record["oov"])) or "<line start>"
    where = f"{record['line']}: " if "line" in record else ""
    return where + shown + " -> " + ", ".join(f"{n['word']} {_percent(n['prob'])}"
                                              for n in record["next"])


def _percent(p: float) -> str:
    return f"{100 * p:.1f}%" if p >= 0.001 else f"{p:.1e}"


__all__ = ["PredictOptions", "contexts", "open_predictor", "prediction_text", "predictions"]
