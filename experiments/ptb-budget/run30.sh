#!/usr/bin/env bash
# 30-minute PTB runs under the CPU budget (run from the repo root, one at a time, nothing else
# running: with 2 cores, any other process stalls torch's threads).
# usage: experiments/ptb-budget/run30.sh NAME [extra lmlow train flags]
set -euo pipefail
LM=${LM:-.venv/bin/lmlow}
name=$1; shift
$LM train data/ptb --preset small --max-time 30 --quiet --out experiments/ptb-budget/runs/$name "$@"
for split in valid test; do
  $LM eval experiments/ptb-budget/runs/$name --split $split --checkpoint last --json \
      > experiments/ptb-budget/runs/$name/eval_last_$split.json
done
