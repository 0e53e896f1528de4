"""Rare-word statistics: Kummerfeld et al. (2020) Table 4 and Table 3's bottom half, OOV rates,
and coverage of a vocabulary by an embedding file.

Word statistics count words only: ``<eos>`` is not a word, and a literal ``<unk>`` is left out
of the rare-word and coverage figures (it stands for many words, none of them known).
"""
from __future__ import annotations

from collections import Counter
from typing import Iterable

from lmlow.data.corpus import Corpus, WordCounts
from lmlow.data.textio import EOS, UNK

RARE_MAX = 5  # "occur five times or fewer"
THRESHOLDS = (0, 1, 2, 5)      # Table 3's K values: the default of `lmlow stats --thresholds`


def _pct(part: float, whole: float) -> float:
    return 100.0 * part / whole if whole else 0.0


def _words(counts: Counter) -> Counter:
    return Counter({w: c for w, c in counts.items() if w != UNK})


def rare_share(counts: Counter, reference: Counter | None = None, max_count: int = RARE_MAX) -> dict:
    """Percent of types and tokens of ``counts`` whose count in ``reference`` is <= max_count.

    With no reference, a word's own count decides (Table 4's "Train" and "Pretrain" columns);
    with the pretraining counts as reference, it gives the "Train in Pre" columns.
    """
    words = _words(counts)
    ref = words if reference is None else reference
    rare = [w for w in words if ref.get(w, 0) <= max_count]
    return {"types_pct": _pct(len(rare), len(words)),
            "tokens_pct": _pct(sum(words[w] for w in rare), sum(words.values()))}


def table4(train: WordCounts, pretrain: WordCounts | None = None) -> dict:
    """The rare-word statistics of one corpus, in Table 4's layout."""
    row = {"train": rare_share(train.counts)}
    if pretrain is not None:
        row["pretrain"] = rare_share(pretrain.counts)
        row["train_in_pretrain"] = rare_share(train.counts, _words(pretrain.counts))
    return row


def unk_rule_shares(split_counts: Counter, train_counts: Counter, k: int) -> dict:
    """Share of a split's word types/tokens that the UNK rule with threshold K replaces."""
    words = _words(split_counts)
    hit = [w for w in words if train_counts.get(w, 0) < k]
    return {"types_pct": _pct(len(hit), len(words)),
            "tokens_pct": _pct(sum(words[w] for w in hit), sum(words.values()))}


def vocabulary_size(train_counts: Counter, k: int, extra: int = 0) -> int:
    """The size of the vocabulary the UNK rule with threshold K keeps (the training words seen
    at least K times, ``<eos>`` and ``<unk>``; at K = 0 also the ``extra`` words
    ``--extend-vocab`` adds, which the training text lacks): what a K costs in embedding and
    softmax rows, as :func:`lmlow.data.vocab.build_vocabulary` makes them."""
    kept = sum(1 for w, c in _words(train_counts).items() if c >= k and w not in (EOS, UNK))
    return kept + 2 + (extra if k == 0 else 0)


def oov_shares(split_counts: Counter, vocab_words) -> dict:
    """Share of a split's word types/tokens that are in no vocabulary (read as ``<unk>``)."""
    return coverage(split_counts, vocab_words, invert=True)


def coverage(counts: Counter, known, invert: bool = False) -> dict:
    """Percent of the word types/tokens of ``counts`` that are in ``known`` (or not, inverted)."""
    words = _words(counts)
    hit = [w for w in words if (w in known) != invert]
    return {"types_pct": _pct(len(hit), len(words)),
            "tokens_pct": _pct(sum(words[w] for w in hit), sum(words.values())),
            "types": len(hit), "tokens": sum(words[w] for w in hit)}


def row_coverage(corpus: Corpus, known, splits: dict) -> dict:
    """Coverage as the LM sees it: the share of its vocabulary rows that have a vector, and of
    each split's tokens (``<eos>`` counted, each word read as its row: ``<unk>`` when the UNK
    rule or the vocabulary replaces it) whose row has one. A row without a vector starts
    random, and ``--freeze-input`` freezes it random: this is the share that decides it."""
    vocab = corpus.vocab
    rows = [w in known for w in vocab.words]
    out = {"rows": {"types": sum(rows), "types_pct": _pct(sum(rows), len(rows)),
                    "eos": EOS in known, "unk": UNK in known}}
    for name in ("train", "valid"):
        wc = splits[name]
        hit = total = 0
        for w, c in wc.counts.items():
            row = w if w in vocab.index else UNK
            total += c
            hit += c * (row in known)
        total += wc.lines
        hit += wc.lines * (EOS in known)
        out[f"{name}_tokens"] = {"tokens": hit, "tokens_pct": _pct(hit, total)}
    return out


def beyond_training(words: Iterable[str], train: Counter) -> int:
    """How many of ``words`` (a vector file's) the training text lacks, ``<eos>`` and
    ``<unk>`` apart (the LM's special rows): the rows ``--extend-vocab`` adds at K = 0."""
    return len({w for w in words if w not in train and w not in (EOS, UNK)})


def corpus_stats(corpus: Corpus, pretrain: WordCounts | None = None,
                 embedding_words: Iterable[str] | None = None,
                 thresholds: Iterable[int] = THRESHOLDS) -> dict:
    """Everything ``lmlow stats`` reports for a corpus, as plain data (for JSON and tables)."""
    splits = {s: corpus.counts(s) for s in ("train", "valid", "test")}
    train = splits["train"].counts
    vocab = corpus.vocab
    # the words --extend-vocab adds at K = 0: the vectors' words the training text lacks
    extension = beyond_training(corpus.extra_words, train)
    out = {
        "corpus": str(corpus.root),
        "unk_threshold": corpus.unk_threshold,
        "vocabulary": corpus.rule(),
        "sizes": {s: {"lines": wc.lines, "words": wc.tokens, "types": len(wc.counts),
                      "literal_unk": wc.counts.get(UNK, 0)}
                  for s, wc in splits.items()},
        "vocabulary_size": len(vocab),
        "table4": table4(splits["train"], pretrain),
        "unk_rule": {str(k): {s: unk_rule_shares(wc.counts, train, k) for s, wc in splits.items()}
                     for k in thresholds},
        "unk_rule_vocabulary": {str(k): vocabulary_size(train, k, extension) for k in thresholds},
        # a word list leaves training words out too; the UNK rule's are Table 3's
        "oov": {s: oov_shares(splits[s].counts, vocab.index)
                for s in (("train",) if corpus.vocab_file else ()) + ("valid", "test")},
    }
    if embedding_words is not None:
        known = embedding_words if isinstance(embedding_words, (set, dict)) else set(embedding_words)
        out["embedding_coverage"] = {s: coverage(wc.counts, known) for s, wc in splits.items()}
        out["embedding_coverage"]["vocabulary"] = coverage(Counter({w: 1 for w in vocab.words if w != EOS}), known)
        # GloVe writes its own <unk> vector, and all-text vectors an <eos>: the LM's special
        # rows, not words (as `lmlow vocab` counts them)
        out["embedding_only_words"] = beyond_training(known, train)
        out["row_coverage"] = row_coverage(corpus, known, splits)
        from lmlow.recommendation import freeze_advice   # the tables' rule, if coverage decides
        out["freeze_advice"] = freeze_advice(out["row_coverage"]["train_tokens"]["tokens_pct"])
    return out


def format_stats(s: dict) -> str:
    """The report of ``lmlow stats`` as Markdown tables."""
    from lmlow.tables import markdown

    out = [f"# {s['corpus']} ({s['vocabulary']}, {s['vocabulary_size']} words)", ""]
    out.append(markdown(["split", "lines", "words", "types", "literal <unk>"],
                        [[k, v["lines"], v["words"], v["types"], v["literal_unk"]]
                         for k, v in s["sizes"].items()]))
    t4 = s["table4"]
    # Table 4's three column pairs: rare in the training text, rare in the pretraining text,
    # and the training words rare (or absent) in the pretraining text, weighted as in training
    labels = {"train": "train", "pretrain": "pretrain", "train_in_pretrain": "train, rare in pretrain,"}
    cols = [c for c in labels if c in t4]
    out += ["", "Rare words (% occurring five times or fewer; Table 4):", ""]
    out.append(markdown(["", *[f"{labels[c]} {u}" for c in cols for u in ("types", "tokens")]],
                        [["%", *[t4[c][k] for c in cols for k in ("types_pct", "tokens_pct")]]]))
    out += ["", "Share replaced by the UNK rule, % (Table 3):", ""]
    rows = [[f"K={k}", s["unk_rule_vocabulary"][k],
             *[v[sp][m] for sp in ("train", "valid", "test") for m in ("types_pct", "tokens_pct")]]
            for k, v in s["unk_rule"].items()]
    out.append(markdown(["", "vocabulary", "train types", "train tokens", "valid types",
                         "valid tokens", "test types", "test tokens"], rows))
    out += ["", "Out of vocabulary (read as <unk>), %:", ""]
    out.append(markdown(["split", "types", "tokens"],
                        [[sp, v["types_pct"], v["tokens_pct"]] for sp, v in s["oov"].items()]))
    if "embedding_coverage" in s:
        out += ["", "Coverage by the embeddings, %:", ""]
        out.append(markdown(["", "types", "tokens"], [[k, v["types_pct"], v["tokens_pct"]]
                                                     for k, v in s["embedding_coverage"].items()]))
        out.append(f"\n{s['embedding_only_words']} embedding words do not occur in train")
        r = s["row_coverage"]
        out += ["", "Coverage of the LM's rows and tokens (<eos> and <unk> counted; a row "
                "without a vector starts random), %:", ""]
        out.append(markdown(["vocabulary rows", "train tokens", "valid tokens", "<eos> has a vector"],
                            [[r["rows"]["types_pct"], r["train_tokens"]["tokens_pct"],
                              r["valid_tokens"]["tokens_pct"], "yes" if r["rows"]["eos"] else "no"]]))
        if s.get("freeze_advice"):
            out.append(f"\nAdvice from lmlow's converged tables: {s['freeze_advice']}")
    return "\n".join(out)


def vocab_summary(corpus: Corpus) -> dict:
    """``lmlow vocab``'s report: size, <unk> count, words the training split lacks (the
    embeddings' with --extend-vocab, the list's with --vocab)."""
    vocab, train = corpus.vocab, corpus.counts("train")
    return {"vocabulary_size": len(vocab), "unk_threshold": corpus.unk_threshold,
            "vocabulary": corpus.rule(), "vocab_file": corpus.vocab_file and str(corpus.vocab_file),
            "train_types": len(train.counts), "unk_count": vocab.counts[vocab.unk_id],
            "embedding_only_words": sum(1 for w in vocab.words if w not in train.counts
                                        and w not in (EOS, UNK)),
            "top": vocab.words[:10]}


def format_vocab(s: dict) -> str:
    listed = s["vocab_file"] is not None
    return (f"vocabulary: {s['vocabulary_size']} words ({s['vocabulary']}; "
            f"{s['train_types']} word types in train; <unk> count {s['unk_count']}; "
            f"{s['embedding_only_words']} {'listed words absent from train' if listed else 'from embeddings only'})\n"
            f"most frequent: {' '.join(s['top'])}")


def format_unk(stats: dict, out, rule: str) -> str:
    """``lmlow unk``'s report: per split, the tokens and how many became <unk>."""
    from lmlow.tables import markdown

    rows = [[s, st.tokens, st.replaced_tokens + st.oov_tokens, st.literal_unk,
             100 * st.unk_tokens / st.words if st.words else 0.0] for s, st in stats.items()]
    return (markdown(["split", "tokens (with <eos>)", "replaced", "literal <unk>",
                      "<unk> % of words"], rows)
            + f"\nwrote {out}/train.txt, valid.txt, test.txt ({rule})")
