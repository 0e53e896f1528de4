#!/usr/bin/env bash
# Kummerfeld et al. Table 6, "the effect persists when language model training data is
# increased": section 3's six at convergence on 1x, 2x and 4x the LM text (the first 25%, 50%
# and 100% of the bundled technical corpus's training tokens, `--grid datasize`), with one
# vocabulary for all sizes (the whole training split's words plus the vectors' words, K=0), so
# every size is scored on the same tokens; a KenLM 5-gram per size on the same lines. Model,
# vectors and convergence rule are the other converged tables' (../converged/common.sh). Seed 1
# for every size first, then seed 2 at every size, then seed 3. The same command resumes. Run
# from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/datasize
SIZES=0.25,0.5,1
vectors
for f in ${SIZES//,/ }; do
  [ -f $E/kenlm5.data$f/summary.json ] || $LM ngram $MINI --order 5 --embeddings "$VEC" \
      --extend-vocab --train-fraction $f --out $E/kenlm5.data$f --quiet
done
for seeds in 1 2 3; do   # a whole seed at every size before the next: paired comparisons first
  $LM sweep $MINI --grid datasize --values $SIZES --extend-vocab --embeddings "$VEC" \
      --seeds $seeds --jobs "$JOBS" --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
  $LM report $E/sweep --wait $(for f in ${SIZES//,/ }; do echo --baseline $E/kenlm5.data$f; done)
done
