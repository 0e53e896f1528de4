#!/usr/bin/env bash
# The optimiser search behind the protocol's paper recipe (README.md here): `standard`, seed 1,
# on the protocol's LM text and vocabulary (data/pydocs-mini-q, K=0 extended by the vectors'
# words: the six's 8,282 rows), under SGD + NT-ASGD with the settings of search.toml. The same
# command resumes. Run from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/recipe
quarter
vectors
$LM sweep $Q --grid $E/search.toml --extend-vocab --embeddings "$VEC" --seeds 1 --jobs "$JOBS" \
    --out $E/search "${PAPER[@]}" "${PAPER_CONVERGE[@]}"
# (b20-t70-lr30, b10-t70-lr30 and b20-t35-lr30 ran before the 0.3% rule existed: the first was
# stopped by hand at epoch 90, the others ended by plain patience; README.md gives where the
# rule would have stopped each, worked out from their metrics: the rule only decides when to
# stop, so a run under it follows the same curve.)
$LM report $E/search --baseline experiments/six/kenlm5
