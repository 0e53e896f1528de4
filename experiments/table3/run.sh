#!/usr/bin/env bash
# Kummerfeld et al. Table 3 (top half): the six configurations of section 3 with the UNK
# threshold K = 1, 2, 5 on the bundled technical corpus (K=0 is ../six-pydocs-mini, 3 seeds),
# same vectors, preset and budget of updates as there, and a KenLM 5-gram per K on the same
# tokens. Table 3's bottom half (what each K replaces) is `lmlow stats`, in ../README.md.
# Run from the repo root.
set -euo pipefail
LM=${LM:-.venv/bin/lmlow}
E=experiments/table3
C=corpora/pydocs-mini
STEPS=${STEPS:-400}
JOBS=${JOBS:-2}
[ -f vectors/pydocs-mini.200d.txt ] || \
  $LM embed $C/pretrain.txt.gz --out vectors/pydocs-mini.200d.txt --dim 200 --epochs 25
for k in 1 2 5; do
  [ -f $E/kenlm5.K$k/model.bin ] || $LM ngram $C --order 5 --unk-threshold $k --out $E/kenlm5.K$k --quiet
done
$LM sweep $C --grid unk --values 1,2,5 --out $E/sweep --embeddings vectors/pydocs-mini.200d.txt \
    --seeds 1 --max-steps "$STEPS" --eval-every 100 --jobs "$JOBS"
$LM report $E/sweep
