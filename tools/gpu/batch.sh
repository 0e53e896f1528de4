#!/usr/bin/env bash
# What a GPU session runs, on the GPU machine, from the repo root, with .gpu/ from
# tools/gpu/pack.sh carried (device tool: carry [".gpu"]). Steps, each its own call:
#
#   bash tools/gpu/batch.sh checks        # pytest -m gpu, waits per update, gpu_speed,
#                                         # transformer_speed, a bf16 GPU run resumed on the CPU
#   bash tools/gpu/batch.sh paper-regime  # starts the paper regime's table (SEEDS, default 1;
#                                         # JOBS runs at once, default 5) in the background,
#                                         # then watches it until UNTIL seconds (default 540)
#   bash tools/gpu/batch.sh watch         # watches on until the table ends or UNTIL seconds
#
# Outputs go to $OUT (the device tool brings them back): logs, JSON, and sweep.tgz with every
# run folder's small files (no checkpoints) and the report run.sh wrote; unpack it in the
# repo root.
# The table runs outside the synced tree (/tmp/w) so that a new call's copy of the tree cannot
# touch it, and it lives only as long as the machine: call `watch` again within the machine's
# idle time (30 s) after each call returns, or it is lost. A table whose runs did not all end
# is not a result; its metrics only say how far it got.
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/site && tar xJf .gpu/site.tar.xz -C /tmp/site || { echo "batch: no .gpu/site.tar.xz"; exit 1; }
export PYTHONPATH=$PWD:/tmp/site
OUT=${OUT:?the device tool sets OUT}
E=experiments/paper-regime
W=/tmp/w
[ -d data/ptb ] || tar xzf .gpu/ptb.tgz

collect() {
  [ -d $W/$E/sweep.100d ] || return 0
  (cd $W && tar czf $OUT/sweep.tgz --exclude='*.pt' --exclude=vocab.txt --exclude=.lock $E/sweep.100d)
  cp /tmp/sweep.log $OUT/sweep.log 2>/dev/null
  for m in $W/$E/sweep.100d/*/metrics.jsonl; do
    [ -f "$m" ] && echo "$(basename "$(dirname "$m")"): $(wc -l < "$m") epochs, $(tail -1 "$m" | cut -c1-120)"
  done
  ls $W/$E/sweep.100d/*/summary.json 2>/dev/null | wc -l | sed 's/$/ runs finished/'
}

watch() {
  while [ $SECONDS -lt ${UNTIL:-540} ] && pgrep -f "paper-regime/run.sh" > /dev/null; do sleep 10; done
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
  collect
}

case "${1:-}" in
checks)
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee $OUT/device.txt
  python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" | tee -a $OUT/device.txt
  LMLOW_TEST_FIXTURES=$PWD/.gpu/fixtures timeout 300 python3 -m pytest -m gpu tests/test_gpu.py -q \
      -p no:cacheprovider -rs > $OUT/pytest_gpu.log 2>&1; tail -3 $OUT/pytest_gpu.log
  timeout 120 python3 benchmarks/gpu_waits.py data/ptb --updates 100 --json $OUT/gpu_waits.json \
      > $OUT/gpu_waits.md 2>&1; cat $OUT/gpu_waits.md
  timeout 150 python3 benchmarks/gpu_speed.py --precision fp32 bf16 fp16 --json $OUT/gpu_speed.json \
      > $OUT/gpu_speed.md 2>&1; cat $OUT/gpu_speed.md
  timeout 90 python3 benchmarks/transformer_speed.py --device cuda --precision fp32 bf16 --batch 64 \
      --bptt 128 --steps 10 --repeats 5 --json $OUT/transformer_speed.json > $OUT/transformer_speed.md 2>&1
  cat $OUT/transformer_speed.md
  { python3 -m lmlow.cli train data/ptb --out /tmp/x --preset tiny --device cuda --precision bf16 \
      --max-steps 30 --quiet && python3 -m lmlow.cli train --resume /tmp/x --device cpu \
      --precision fp32 --max-steps 40 --quiet; echo "resume exit $?"; cat /tmp/x/summary.json; } \
      > $OUT/resume.txt 2>&1; grep -E 'resume exit|precision|device' $OUT/resume.txt
  ;;
paper-regime)
  [ -f .gpu/vectors.txt.xz ] || { echo "batch: .gpu has no paper-regime data (pack.sh)"; exit 1; }
  mkdir -p $W/vectors $W/experiments/converged && cp -r lmlow $W/ && tar xzf .gpu/pydocs.tgz -C $W
  cp experiments/converged/common.sh $W/experiments/converged/ && cp -r $E $W/experiments/
  xz -dc .gpu/vectors.txt.xz > $W/vectors/pylibs+pydocs.100d.txt
  # experiments/paper-regime/run.sh itself (its seeds one after another, each reported)
  # (its own session, and none of this call's output streams: the call returns, the table goes on)
  (cd $W && PYTHONPATH=$W:/tmp/site LM="python3 -m lmlow.cli" JOBS=${JOBS:-5} SEEDS="${SEEDS:-1}" \
      exec setsid nohup bash $E/run.sh) > /tmp/sweep.log 2>&1 < /dev/null &
  sleep 5
  watch
  ;;
watch) watch ;;
*) sed -n '2,20p' "$0"; exit 2 ;;
esac
