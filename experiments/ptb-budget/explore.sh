#!/usr/bin/env bash
# 5-minute probes on PTB to choose the CPU-budget preset (run from the repo root).
set -euo pipefail
LM=${LM:-.venv/bin/lmlow}
OUT=experiments/ptb-budget/explore
common=(data/ptb --preset small --max-time 5 --force --quiet --batch-size 20 --bptt 35
        --emb-size 200 --alpha 0 --beta 0 --dropoute 0 --wdrop 0 --no-asgd)
# A: pytorch/examples' 2x200 recipe (SGD lr 20, dropout 0.2), untied, random init
$LM train "${common[@]}" --out $OUT/a-2x200-sgd --hidden-size 200 --tie no --init random \
    --optimizer sgd --lr 20 --dropout 0.2 --dropouth 0.2 --dropouti 0.2 --clip 0.25
# B: the same with the log-unigram output bias
$LM train "${common[@]}" --out $OUT/b-2x200-sgd-unigram --hidden-size 200 --tie no \
    --init unigram --optimizer sgd --lr 20 --dropout 0.2 --dropouth 0.2 --dropouti 0.2 --clip 0.25
# C: 2x400 with Adam at batch 20, unigram bias
$LM train "${common[@]}" --out $OUT/c-2x400-adam-unigram --hidden-size 400 --tie no \
    --init unigram --optimizer adam --lr 3e-3 --dropout 0.2 --dropouth 0.2 --dropouti 0.2
for r in $OUT/*/; do
  python3 -c "import json,sys; rows=[json.loads(l) for l in open('$r/metrics.jsonl')]; r=rows[-1]; print('$r', 'epoch', r['epoch'], 'step', r['step'], 'valid ppl', round(r['valid_ppl'],1))"
done
