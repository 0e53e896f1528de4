#!/bin/sh
# Issue 7 on PTB: unigram vs zero output-bias init, same seed, untied `small` preset, tracked.
# Pair 1: 8 minutes each (--max-time 8); pair 2: 1,500 updates each (--max-steps 1500, so the
# cosine schedule and the number of updates do not depend on the machine's load). One training
# at a time: this 2-core machine is shared with timed benchmarks.
set -e
cd "$(dirname "$0")/../.."
L="nice -n 19 .venv/bin/lmlow"
E=experiments/frequency
train() {  # NAME INIT BUDGET...
    name=$1 init=$2; shift 2
    $L train data/ptb --out $E/runs/$name --preset small --tie no --init $init --seed 1 \
        --track-frequency --quiet "$@"
}
train unigram unigram --eval-every 200 --max-time 8
train zero random --eval-every 200 --max-time 8
train unigram-1500 unigram --eval-every 100 --max-steps 1500
train zero-1500 random --eval-every 100 --max-steps 1500
for run in unigram zero unigram-1500 zero-1500; do
    $L analyze $E/runs/$run --split valid --out $E/analysis/$run --force
    $L bias-sweep $E/runs/$run --lambdas 0,0.25,0.5,0.75,1 --samples 100 --words 100 \
        --top-p 0.9 --seed 1 --out $E/bias-sweep/$run --force
done
for run in unigram zero; do    # pure sampling (no top-p) on pair 1
    $L bias-sweep $E/runs/$run --lambdas 0,0.25,0.5,0.75,1 --samples 100 --words 100 \
        --seed 1 --out $E/bias-sweep/$run-pure --force
done
$L compare $E/runs/unigram $E/runs/zero --steps 200 --out $E/compare --force
$L compare $E/runs/unigram-1500 $E/runs/zero-1500 --steps 500 --out $E/compare-1500 --force
nice -n 19 .venv/bin/python $E/plots.py
nice -n 19 .venv/bin/python $E/plots.py -1500
