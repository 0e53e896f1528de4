#!/usr/bin/env bash
# The LSTM + 5-gram interpolation and the LSTM scored with every line from a fresh state, at
# convergence: ../six's `standard` and `ours`, seed 1, trained again with ../six's command (so
# the same runs: measure.py checks their validation curves against ../six's committed ones; the
# checkpoints ../six trained were not kept), ../six's 5-gram estimated again (deterministic), and
# each LSTM scored alone and mixed word by word with the 5-gram, lines carried and lines reset.
# The same command resumes. Run from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/interpolation
quarter
vectors
$LM sweep $Q --grid $E/two.toml --extend-vocab --embeddings "$VEC" --seeds 1 --jobs "$JOBS" \
    --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
[ -f $E/kenlm5/model.bin ] || $LM ngram $Q --order 5 --embeddings "$VEC" --extend-vocab \
    --out $E/kenlm5 --quiet --force
.venv/bin/python $E/measure.py $E
