#!/usr/bin/env bash
# Kummerfeld et al.'s six configurations (section 3) x 3 seeds on the bundled technical corpus
# (corpora/pydocs-mini, K=0: rare words kept), with in-domain GloVe vectors trained on its
# pretraining text, and a KenLM 5-gram on the same tokens. A budget of updates, not minutes,
# so that runs compare fairly on a busy machine. Run from the repo root.
set -euo pipefail
LM=${LM:-.venv/bin/lmlow}
E=experiments/six-pydocs-mini
C=corpora/pydocs-mini
STEPS=${STEPS:-400}
JOBS=${JOBS:-2}
[ -f vectors/pydocs-mini.200d.txt ] || \
  $LM embed $C/pretrain.txt.gz --out vectors/pydocs-mini.200d.txt --dim 200 --epochs 25
[ -f $E/kenlm5/model.bin ] || $LM ngram $C --order 5 --out $E/kenlm5 --quiet
$LM sweep $C --grid six --out $E/sweep --embeddings vectors/pydocs-mini.200d.txt \
    --seeds 1,2,3 --max-steps "$STEPS" --eval-every 100 --jobs "$JOBS"
$LM report $E/sweep --baseline $E/kenlm5
