"""The output bias as a unigram expert: frequency analyses of AWD-LSTM runs.

Meister et al. (2023) initialise the bias b of the output layer, softmax(W h + b), with the
log-unigram distribution and measure learning efficiency (area under the learning curve, ALC)
and how frequency is split between b and the contextual logits W h; Kobayashi et al. (2023)
show that b carries word frequency and that scaling it (W h + lambda b) trades frequency for
diversity. Three layers, lowest first:

- :mod:`lmlow.analysis.stats`: pure statistics (KL, correlations, ALC, Distinct-n);
- :mod:`lmlow.analysis.frequency`: model statistics and the training-time tracker;
- :mod:`lmlow.analysis.commands`: ``lmlow analyze`` and ``lmlow compare``.
"""
from lmlow.analysis.commands import (AnalyzeOptions, CompareOptions, analysis_summary, analysis_text, analyze, compare,
                                     compare_markdown, compare_table, write_compare)
from lmlow.analysis.frequency import (FrequencyTracker, ScaleStats, bias_stats, distribution_stats,
                                      frequency_record)
from lmlow.analysis.stats import (alc, binned_means, distinct_n, kl_divergence, ngram_diversity,
                                  pearson, softmax, spearman, unigram_distribution)

__all__ = ["AnalyzeOptions", "CompareOptions", "FrequencyTracker", "ScaleStats", "alc", "analysis_summary", "analysis_text", "analyze", "bias_stats", "binned_means",
           "compare", "compare_markdown", "compare_table", "distinct_n", "distribution_stats",
           "frequency_record", "kl_divergence", "ngram_diversity", "pearson", "softmax",
           "spearman", "unigram_distribution", "write_compare"]
