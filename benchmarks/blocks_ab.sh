#!/usr/bin/env bash
# The loss's blocks of words on a new kind of CPU (BENCHMARKS.md, "On an AMD EPYC with AVX-512
# BF16"): the code before (BEFORE, a checked-out tree of an earlier commit) against this tree,
# one thread, on a quiet machine: the paper regime's whole fp32 update (train_step.py from each
# tree, interleaved, two rounds), the fused fp32 loss alone at 61k and 10k words (loss_ab.py:
# bits and time), this tree's parts of a chunk in fp32, the bf16 logits' blocks taken whether
# lmlow takes them here or not (loss_parts.py --blocks: the fused loss both ways), and the
# scores' matmul in blocks against one call from one row to an update's (logits_rows.py, d 100
# and 400). Trainings of lmlow running beside it are paused (SIGSTOP) for the measurement and
# continued after it, whatever happens.
# Usage: BEFORE=/tmp/before CORPUS=data/pydocs VECTORS=vectors/pylibs+pydocs.100d.txt \
#          bash benchmarks/blocks_ab.sh > benchmarks/results/blocks-ab-CPU.log
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python}
paused="$(pgrep -f 'lmlow.cli train' | tr '\n' ' ')"
[ -n "$paused" ] && { trap 'kill -CONT $paused' EXIT; kill -STOP $paused; echo "paused: $paused"; }
lscpu | grep "Model name"; grep -m1 vendor_id /proc/cpuinfo
grep -owE 'avx512f|avx512_bf16|amx_tile' /proc/cpuinfo | sort -u | tr '\n' ' '; echo
for tree in "$BEFORE" "$here"; do
  (cd "$tree" && "$py" -c 'import sys; sys.path.insert(0, "."); import torch; from lmlow import loss
print(sys.argv[1], "torch", torch.__version__, torch.backends.cpu.get_cpu_capability(), "FP32_BLOCKS", loss.FP32_BLOCKS, "BF16_BLOCKS", loss.BF16_BLOCKS)' "$tree")
done
echo "before: $BEFORE ($(git -C "$BEFORE" log --oneline -1 | cut -c1-7)); after: $here ($(git -C "$here" log --oneline -1 | cut -c1-7))"
date -u
update="$CORPUS --preset paper --set emb_size=100 --set hidden_size=256 --set layers=2 --set tie=False --set init=glove,glove-output --set embeddings=$VECTORS --set extend_vocab=True --set threads=1 --set precision=fp32 --steps 4 --repeats 2"
for round in 1 2; do
  for tree in "$BEFORE" "$here"; do
    echo "update, round $round, $tree: train_step.py $update"
    "$py" "$tree/benchmarks/train_step.py" $update 2>&1 | grep tokens/s
  done
done
for vocab in 61115 10000; do
  echo "loss_ab.py $BEFORE $here --vocab $vocab --precision fp32"
  "$py" "$here/benchmarks/loss_ab.py" "$BEFORE" "$here" --vocab $vocab --precision fp32
done
echo "loss_parts.py --precision fp32 (OMP_NUM_THREADS=1)"
OMP_NUM_THREADS=1 "$py" "$here/benchmarks/loss_parts.py" --precision fp32
echo "loss_parts.py --precision bf16 --blocks (OMP_NUM_THREADS=1)"
OMP_NUM_THREADS=1 "$py" "$here/benchmarks/loss_parts.py" --precision bf16 --blocks --square 0
for dim in 100 400; do
  echo "logits_rows.py --vocab 12000 61115 --dim $dim --rows 1 2 4 8 16 32 64 128 256 700 1098 (OMP_NUM_THREADS=1)"
  OMP_NUM_THREADS=1 "$py" "$here/benchmarks/logits_rows.py" --vocab 12000 61115 --dim $dim \
    --rows 1 2 4 8 16 32 64 128 256 700 1098
done
date -u
