#!/usr/bin/env bash
# Kummerfeld et al. section 3's six configurations at convergence, 3 seeds, on the bundled
# technical corpus in the paper's rare-word setting (K=0: the vocabulary is every training word
# plus every word of the pretraining vectors, the same for all six), each also with the
# log-unigram output bias (sweep-unigram/), and a KenLM 5-gram on the same tokens.
# The same command resumes an interrupted sweep. Run from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/six
quarter
vectors
[ -f $E/kenlm5/summary.json ] || \
  $LM ngram $Q --order 5 --embeddings "$VEC" --extend-vocab --out $E/kenlm5 --quiet
$LM sweep $Q --grid six --extend-vocab --embeddings "$VEC" --seeds 1,2,3 --jobs "$JOBS" \
    --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
$LM sweep $Q --grid six --unigram --extend-vocab --embeddings "$VEC" --seeds 1,2,3 --jobs "$JOBS" \
    --out $E/sweep-unigram "${MODEL[@]}" "${CONVERGE[@]}"
$LM report $E/sweep --baseline $E/kenlm5
$LM report $E/sweep-unigram --baseline $E/kenlm5
# The convergence rule's sensitivity check: the six, seed 1, on a fixed budget instead (30
# epochs, the small preset's cosine schedule down to rate 0, no early stopping), as Table 1's
# worst row was (../table1-converged/no-early-stop): do the verdicts depend on the rule?
$LM sweep $Q --grid six --extend-vocab --embeddings "$VEC" --seeds 1 --jobs "$JOBS" \
    --out $E/fixed-budget "${MODEL[@]}" --max-epochs 30 --threads 1
$LM report $E/fixed-budget --baseline $E/kenlm5
