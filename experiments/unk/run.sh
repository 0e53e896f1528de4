#!/usr/bin/env bash
# Kummerfeld et al. Table 3 at convergence: the six configurations with the UNK threshold
# K = 1, 2, 5 built as the paper does (training counts listed first; a word of any split whose
# count is below K becomes <unk>, a word absent from training counting 0), 3 seeds. K=0 is the
# paper's rare-word setting of ../six (vocabulary extended by the vectors' words), the same
# runs. A KenLM 5-gram per K on the same tokens. The same command resumes. Run from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/unk
quarter
vectors
for k in 1 2 5; do   # (again, --force, where a checkout has the summary but not the model)
  [ -f $E/kenlm5.K$k/eval_best_valid.json ] || \
    $LM ngram $Q --order 5 --unk-threshold $k --out $E/kenlm5.K$k --quiet --force
done
$LM sweep $Q --grid unk --values 1,2,5 --embeddings "$VEC" --seeds 1,2,3 --jobs "$JOBS" \
    --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
$LM report $E/sweep --baseline $E/kenlm5.K1 --baseline $E/kenlm5.K2 --baseline $E/kenlm5.K5
