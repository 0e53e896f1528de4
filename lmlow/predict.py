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

from lmlow.config import setting
from lmlow.errors import LmlowError
from lmlow.evaluate import ContextReaders, context_words
from lmlow.runs import ScoreOptions


@dataclass
class PredictOptions(ScoreOptions):
    """What `lmlow predict` lists, from which model (its flags are generated from these
    fields)."""
    top: int = setting(10, "how many next words to list, most probable first", metavar="N")
    include_unk: bool = setting(False, "list <unk> too (left out by default: it is no word "
                                "to offer)", switch=True)
    partial: bool = setting(False, "the context's last word is the start of a word being "
                            "typed: list the words it begins (completions), each with its "
                            "probability after the words before it", switch=True)
    RANGES: typing.ClassVar[dict] = {**ScoreOptions.RANGES, "top": "[1, inf)"}


def contexts(words: list[str], file: Path | None, raw: bool = False,
             ids: bool = False) -> Iterator[tuple[int | None, str | None, list[str] | str]]:
    """(line number or None, identifier or None, context) of each context: the command line's
    words (one context; none: the start of a line) or every non-blank line of ``file`` (with
    ``ids``, after the identifier that starts it); with ``raw`` each context is its text, which
    :func:`predictions` tokenises as the run's corpus was."""
    if file is None:
        if ids:
            raise LmlowError("--ids needs --file FILE (the identifiers start its lines)")
        text = " ".join(words)
        yield None, None, text if raw else context_words(text)   # checked before the model
        return
    if words:
        raise LmlowError("give the context as words or as --file FILE, not both")
    from lmlow.data.textio import iter_keyed_lines

    yield from iter_keyed_lines(file, raw, ids)


def predictions(scorer, items: Iterable[tuple[int | None, str | None, list[str] | str]],
                top: int = 10, include_unk: bool = False, raw: bool = False,
                partial: bool = False) -> Iterator[dict]:
    """One record per context: its words (with ``raw``, as the context's text tokenised
    reads), which of them are out of the vocabulary (read as ``<unk>``), and the ``top`` next
    words with their probability and natural-log probability; with ``partial`` the last word
    is the ``prefix`` being typed, and only the words it begins are listed. A context that
    begins with one asked before is read on from there (:class:`ContextReaders`)."""
    readers = ContextReaders(scorer)
    for line, key, context in items:
        words, prefix = scorer.typed(context, raw) if partial else (scorer.words(context, raw), "")
        if partial and not (words or prefix or raw and context.strip()):
            where = f" on line {line}" if line is not None else ""
            raise LmlowError(f"--partial: the context{where} has no word being typed")
        record = ({"line": line} if line is not None else {}) | \
            ({"id": key} if key is not None else {})
        record |= {"context": words, "oov": [w not in scorer.vocab for w in words],
                   **({"prefix": prefix} if partial else {}),
                   "next": [{"word": w, "prob": round(math.exp(lp), 8), "logprob": round(lp, 6)}
                            for w, lp in readers.at(words).next_words(top, include_unk,
                                                                      prefix=prefix)]}
        yield record


def prediction_text(record: dict) -> str:
    """``the return value of -> the 21.3%, a 8.2%, ...`` (an out-of-vocabulary context word
    shown as ``word(<unk>)``; an empty context as ``<line start>``)."""
    shown = " ".join([f"{w}(<unk>)" if oov else w
                      for w, oov in zip(record["context"], record["oov"])]
                     + ([record["prefix"] + "*"] if "prefix" in record else [])) or "<line start>"
    where = (f"{record['line']}: " if "line" in record else "") + \
        (f"{record['id']}: " if "id" in record else "")
    listed = ", ".join(f"{n['word']} {_percent(n['prob'])}" for n in record["next"])
    return where + shown + " -> " + (listed or "(no word of the vocabulary begins with it)")


def _percent(p: float) -> str:
    """Two significant figures at least (``21.3%``, ``4.1%``, ``0.13%``, ``0.010%``), and below
    one in 10,000 the probability itself (``9.9e-05``): a flat distribution's ranks differ in
    the second figure, which one decimal place of a percent would hide."""
    if p < 1e-4:
        return f"{p:.1e}"
    two = f"{100 * p:#.2g}"                        # 9.99 -> "10.": then one decimal place
    return f"{100 * p:.1f}%" if p >= 0.1 or two.endswith(".") else two + "%"


__all__ = ["PredictOptions", "contexts", "prediction_text", "predictions"]
