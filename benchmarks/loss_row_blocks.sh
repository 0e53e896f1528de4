#!/usr/bin/env bash
# The loss row block by row block (BENCHMARKS.md): the code before (BEFORE, a checked-out tree
# of the commit before) against this tree, on a quiet machine: the paper regime's whole bf16
# update (train_step.py from each tree, interleaved, two rounds), the fused loss alone at 61k
# and 10k words in bf16 and fp32 (loss_ab.py: bits and time), and this tree's parts of a chunk
# (loss_parts.py), all at one thread. Trainings of lmlow running beside it are paused
# (SIGSTOP) for the measurement and continued after it, whatever happens.
# On a CPU without bf16 units (no AVX-512 BF16, no AMX: lmlow refuses bf16 there) the update
# and the loss are measured in fp32 only.
# Usage: BEFORE=/tmp/before CORPUS=data/pydocs VECTORS=vectors/pylibs+pydocs.100d.txt \
#          bash benchmarks/loss_row_blocks.sh > benchmarks/results/loss-row-blocks-CPU.log
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python}
paused="$(pgrep -f 'lmlow.cli train' | tr '\n' ' ')"
[ -n "$paused" ] && { trap 'kill -CONT $paused' EXIT; kill -STOP $paused; echo "paused: $paused"; }
lscpu | grep "Model name"; grep -owE 'avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
echo "before: $BEFORE ($(git -C "$BEFORE" log --oneline -1 | cut -c1-7)); after: $here ($(git -C "$here" log --oneline -1 | cut -c1-7))"
date -u
precisions="bf16 fp32"; update_precision=bf16
grep -qwE 'avx512_bf16|amx_tile' /proc/cpuinfo || { precisions=fp32; update_precision=fp32; echo "no bf16 units: fp32 only"; }
update="$CORPUS --preset paper --set emb_size=100 --set hidden_size=256 --set layers=2 --set tie=False --set init=glove,glove-output --set embeddings=$VECTORS --set extend_vocab=True --set threads=1 --set precision=$update_precision --steps 4 --repeats 2"
for round in 1 2; do
  for tree in "$BEFORE" "$here"; do
    echo "update, round $round, $tree: train_step.py $update"
    $py "$tree/benchmarks/train_step.py" $update 2>&1 | grep tokens/s
  done
done
for precision in $precisions; do
  for vocab in 61115 10000; do
    echo "loss_ab.py $BEFORE $here --vocab $vocab --precision $precision"
    $py "$here/benchmarks/loss_ab.py" "$BEFORE" "$here" --vocab $vocab --precision $precision
  done
done
for precision in $precisions; do
  echo "loss_parts.py --precision $precision (OMP_NUM_THREADS=1)"
  OMP_NUM_THREADS=1 $py "$here/benchmarks/loss_parts.py" --precision $precision
done
date -u
