#!/usr/bin/env bash
# KenLM 5-gram baselines (modified Kneser-Ney, lmplz) on the built corpora, K=0, scored by
# `lmlow eval` on the LSTMs' tokens; the eval JSON files are the record behind the numbers in
# experiments/README.md (Table 7). Needs `make data-ptb data-sotu data-pydocs`. Run from the repo root.
set -euo pipefail
LM=${LM:-.venv/bin/lmlow}
E=experiments/kenlm
for c in ptb sotu pydocs; do
  [ -f $E/$c/summary.json ] || $LM ngram data/$c --order 5 --out $E/$c --quiet
  for split in valid test; do
    $LM eval $E/$c --split $split --json > $E/$c/eval_$split.json
  done
done
