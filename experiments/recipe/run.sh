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
$LM report $E/search --baseline experiments/six/kenlm5
