"""The one data path: text files -> vocabulary with the UNK rule -> memory-mapped ids."""
from lmlow.data.corpus import SPLITS, Corpus, EncodedSplit, SplitStats, count_words, encode_file
from lmlow.data.textio import EOS, UNK, iter_lines, iter_sentences
from lmlow.data.vocab import Vocabulary, build_vocabulary

__all__ = ["SPLITS", "Corpus", "EncodedSplit", "SplitStats", "count_words", "encode_file", "EOS",
           "UNK", "iter_lines", "iter_sentences", "Vocabulary", "build_vocabulary"]
