#!/usr/bin/env bash
# Kummerfeld et al. Table 1: all 20 valid combinations of tying, freezing and pretraining,
# on PTB (Std: Mikolov's 10k-word version) and on the bundled technical corpus with K=0 (rare
# words kept, the paper's "Rare" counterpart). In-domain GloVe vectors: for PTB trained on
# PTB's own training text, for the technical corpus on its pretraining text. One seed, a
# budget of updates (not minutes) so that the two jobs sharing the machine compare fairly.
# Run from the repo root.
set -euo pipefail
LM=${LM:-.venv/bin/lmlow}
E=experiments/table1
STEPS=${STEPS:-200}
JOBS=${JOBS:-2}
[ -f vectors/ptb.200d.txt ] || $LM embed data/ptb/train.txt --out vectors/ptb.200d.txt --dim 200
[ -f vectors/pydocs-mini.200d.txt ] || \
  $LM embed corpora/pydocs-mini/pretrain.txt.gz --out vectors/pydocs-mini.200d.txt --dim 200 --epochs 25
[ -f $E/ptb-kenlm5/model.bin ] || $LM ngram data/ptb --order 5 --out $E/ptb-kenlm5 --quiet
[ -f $E/pydocs-mini-kenlm5/model.bin ] || \
  $LM ngram corpora/pydocs-mini --order 5 --out $E/pydocs-mini-kenlm5 --quiet
for corpus in pydocs-mini ptb; do
  case $corpus in
    ptb) C=data/ptb; V=vectors/ptb.200d.txt ;;
    pydocs-mini) C=corpora/pydocs-mini; V=vectors/pydocs-mini.200d.txt ;;
  esac
  $LM sweep $C --grid table1 --out $E/$corpus --embeddings $V --seeds 1 \
      --max-steps "$STEPS" --eval-every 100 --jobs "$JOBS"
  $LM report $E/$corpus --baseline $E/$corpus-kenlm5
done
