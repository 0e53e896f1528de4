"""Tokenisers and PTB-style normalisation, shared by ``lmlow prepare`` and ``lmlow embed``.

Normalisation options, each separate (``ptb`` turns on all three, as in Mikolov's PTB):
- lowercase;
- numbers: a token that is a number (``12``, ``1,000``, ``3.5``, ``.5``, ``-2``) becomes ``N``;
- strip punctuation: a token made only of Unicode punctuation (categories P*: ``.``, ``,``,
  ``"``, ``--``, ``(``, and also ``%``, ``&``, ``#``) is dropped; symbols (categories S*:
  ``$``, ``+``, ``>``, ``=``) are kept.

Always, whatever the options: the reserved tokens ``<eos>``, ``<s>`` and ``</s>`` of raw text
become ``<EOS>``, ``<S>`` and ``</S>`` (lmlow's line end; KenLM's sentence bounds).
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator

from lmlow.errors import LmlowError

TOKENIZERS = ("whitespace", "spacy", "stanza", "scispacy")
_NUMBER = re.compile(r"[+-]?(\d[\d,]*(\.\d+)?|\.\d+)")
# a literal <eos> in raw text must not end a line, and <s> </s> are KenLM's sentence bounds,
# which `lmlow ngram` refuses as words: each becomes the word in capitals
_RESERVED = {"<eos>": "<EOS>", "<s>": "<S>", "</s>": "</S>"}


@dataclass(frozen=True)
class Normalisation:
    lowercase: bool = False
    numbers: bool = False
    strip_punct: bool = False

    @classmethod
    def ptb(cls) -> "Normalisation":
        return cls(True, True, True)

    def apply(self, tokens: Iterable[str]) -> list[str]:
        out = []
        for t in tokens:
            if self.strip_punct and is_punctuation(t):
                continue
            if self.numbers and _NUMBER.fullmatch(t):
                t = "N"
            elif self.lowercase:
                t = t.lower()
            out.append(_RESERVED.get(t, t))
        return out


    def change(self, token: str) -> str | None:
        """What :meth:`apply` would do to ``token`` (``has capitals, which it lowercases``),
        or None if it keeps it. Text it made is kept (its `N`, which lowercasing again would
        lower, and its `<EOS>`), so a token it changes shows text it did not make."""
        if self.strip_punct and is_punctuation(token):
            return "is punctuation, which it drops"
        if self.numbers and _NUMBER.fullmatch(token):
            return "is a number, which it writes as N"
        low = token.lower()
        if (self.lowercase and _RESERVED.get(low, low) != token
                and not (self.numbers and token == "N")):
            return "has capitals, which it lowercases"
        if token in _RESERVED:
            return f"is reserved, which it writes as {_RESERVED[token]}"
        return None


def is_punctuation(token: str) -> bool:
    return all(unicodedata.category(c).startswith("P") for c in token)


def make_tokenizer(name: str) -> Callable[[Iterable[str]], Iterator[list[str]]]:
    """A function from an iterable of lines to an iterator of token lists (streams)."""
    if name == "whitespace":
        return lambda lines: (line.split() for line in lines)
    if name == "spacy":
        return _spacy_tokenizer(_blank_spacy())
    if name == "scispacy":
        return _spacy_tokenizer(_scispacy())
    if name == "stanza":
        return _stanza_tokenizer()
    raise LmlowError(f"unknown tokenizer {name!r}; choose one of {', '.join(TOKENIZERS)}")


def _blank_spacy():
    try:
        import spacy
    except ImportError:
        raise LmlowError("the spacy tokenizer needs spaCy: pip install 'lmlow[tokenize]'") from None
    return spacy.blank("en")  # rule-based English tokenizer; needs no model download


def _spacy_tokenizer(nlp):
    def tokenize(lines):
        for doc in nlp.tokenizer.pipe(lines, batch_size=256):
            yield [t.text for t in doc if not t.is_space]
    return tokenize


def _scispacy():
    try:
        from scispacy.custom_tokenizer import combined_rule_tokenizer
    except ImportError:
        raise LmlowError("the scispacy tokenizer needs scispacy: pip install scispacy (it pins "
                         "numpy<2, so it is not part of lmlow[all]); or use --tokenizer spacy") from None
    nlp = _blank_spacy()
    nlp.tokenizer = combined_rule_tokenizer(nlp)
    return nlp


def _stanza_tokenizer():
    try:
        import stanza
    except ImportError:
        raise LmlowError("the stanza tokenizer needs stanza: pip install 'lmlow[tokenize]'") from None
    try:
        nlp = stanza.Pipeline("en", processors="tokenize", tokenize_no_ssplit=True,
                              download_method=None, logging_level="ERROR", use_gpu=False)
    except Exception as e:  # stanza raises several types for a missing model
        raise LmlowError(
            "stanza's English tokenizer model is not installed (it is downloaded from the "
            "internet, not from PyPI); with internet run: python -c \"import stanza; "
            f"stanza.download('en', processors='tokenize')\"  [{type(e).__name__}]") from None

    def tokenize(lines):
        for line in lines:
            if not line.strip():
                yield []
                continue
            doc = nlp(line)    # a token is a span of the text: one holding a space
            #                    ("1 000") is split, as reading a corpus line would split it
            yield [part for s in doc.sentences for t in s.tokens for part in t.text.split()]
    return tokenize


PREPARATION_KEYS = ("tokenizer", "lowercase", "numbers", "strip_punct")


def preparation_record(tokenizer: str, norm: Normalisation) -> dict:
    """How `lmlow prepare` tokenised and normalised a corpus (its prepare.json, which each run
    trained on it copies): what `lmlow score --raw` and `predict --raw` apply to new text, so
    that a sentence is read as the corpus's text was, not as typed."""
    return {"tokenizer": tokenizer, "lowercase": norm.lowercase, "numbers": norm.numbers,
            "strip_punct": norm.strip_punct}


def checked_preparation(record, where) -> dict:
    """``record`` if it is a preparation record lmlow writes; one line naming ``where`` if not
    (a record edited by hand must not tokenise text silently some other way)."""
    if not (isinstance(record, dict) and set(PREPARATION_KEYS) <= set(record)
            and record["tokenizer"] in TOKENIZERS
            and all(isinstance(record[k], bool) for k in PREPARATION_KEYS[1:])):
        raise LmlowError(f"{where}: not the record of a preparation lmlow writes (tokenizer: "
                         f"one of {', '.join(TOKENIZERS)}; lowercase, numbers, strip_punct: "
                         "true or false); restore it or delete it")
    return {k: record[k] for k in PREPARATION_KEYS}


def recorded_tokenisation(record: dict) -> tuple[str, Normalisation]:
    """The tokenizer's name and the normalisation a preparation record says."""
    return record["tokenizer"], Normalisation(record["lowercase"], record["numbers"],
                                              record["strip_punct"])


def text_tokenizer(record: dict) -> Callable[[Iterable[str]], Iterator[list[str]]]:
    """Lines of raw text to token lists, one list per line (a line may tokenise to none), as
    `lmlow prepare` made the corpus ``record`` describes."""
    name, norm = recorded_tokenisation(record)
    tokenize = make_tokenizer(name)
    return lambda lines: (norm.apply(tokens) for tokens in tokenize(lines))
