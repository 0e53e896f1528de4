#!/usr/bin/env bash
# What a GPU session runs, on the GPU machine, from the repo root, with .gpu/ from
# tools/gpu/pack.sh carried (device tool: carry [".gpu"]). Steps, each its own call:
#
#   bash tools/gpu/batch.sh session       # a whole short loan in one call: the paper regime's
#                                         # table started in the background (seed 1's five
#                                         # runs at once, then seed 2's), the Transformer's
#                                         # table beside it (TX_JOBS runs at once, default 3;
#                                         # TX_JOBS=0: the paper regime alone),
#                                         # the precision checks that count or compare (not
#                                         # time) beside them, then watch; follow with `watch`
#                                         # calls while time is left
#   bash tools/gpu/batch.sh loan          # a whole 15-minute loan in one call (the next one's
#                                         # plan): the Transformer's timings (windowed vs
#                                         # masked attention, plain nn.TransformerEncoder,
#                                         # profiles) on the quiet GPU after the paper regime's
#                                         # update in fp32 and bf16, one run alone and three at
#                                         # once (regime-speed), then pytest -m gpu if it fits
#   bash tools/gpu/batch.sh regime-speed  # tokens/s of the paper regime's update on the GPU:
#                                         # can a loan converge its runs? (165 epochs of 1.06M
#                                         # tokens in 10 minutes: about 290k tokens/s a run)
#   bash tools/gpu/batch.sh checks        # the counting checks, then the timed ones, alone
#   bash tools/gpu/batch.sh correct       # pytest -m gpu, waits per update, a bf16 GPU run
#                                         # resumed on the CPU (they count: load does not matter)
#   bash tools/gpu/batch.sh speed         # gpu_speed, transformer_speed, the paper preset on
#                                         # PTB for one epoch in each precision (timings: a
#                                         # quiet GPU)
#   bash tools/gpu/batch.sh paper-regime  # starts the paper regime's table (SEEDS, default 1;
#                                         # JOBS runs at once, default 5) in the background,
#                                         # then watches it until UNTIL seconds (default 540);
#                                         # GRID=experiments/paper-regime/pair.toml JOBS=2:
#                                         # only ours and ours-unfrozen (a 15-minute loan);
#                                         # TIMES=4: the 4x column (data/pydocs-x4, packed);
#                                         # PRECISION=bf16: its runs in bf16 (default fp32)
#   bash tools/gpu/batch.sh transformer   # the same for experiments/transformer (its search,
#                                         # then the six and the six with the unigram bias;
#                                         # SEEDS default "1 2 3", JOBS default 6)
#   bash tools/gpu/batch.sh watch         # watches on until the tables end or UNTIL seconds
#
# Outputs go to $OUT (the device tool brings them back): checks.tgz (the checks' logs and
# JSON; unpack into benchmarks/results/gpu-NAME/), and per table sweep-TABLE.log and
# table-TABLE.tgz with the experiment folder's small files (no checkpoints): every run folder,
# the reports and what run.sh wrote (the transformer's chosen.flags); unpack it in the repo
# root. Each table runs outside the synced tree, in its own copy of what it reads
# (/tmp/w/TABLE), so that neither a new call's copy of the tree nor the other table can touch
# it, and it lives only as long as the machine: call `watch` again within the machine's idle
# time (30 s) after each call returns, or it is lost (checkpoints do not come back: a table
# must end within one loan). A table whose runs did not all end is not a result; its metrics
# only say how far it got.
set -u
export PYTHONUNBUFFERED=1
mkdir -p /tmp/site && tar xJf .gpu/site.tar.xz -C /tmp/site || { echo "batch: no .gpu/site.tar.xz"; exit 1; }
export PYTHONPATH=$PWD:/tmp/site
OUT=${OUT:?the device tool sets OUT}
W=/tmp/w      # each table in its own copy of what it reads, /tmp/w/TABLE: none touches another's
R=/tmp/checks; mkdir -p $R   # the checks' logs and JSON, back as $OUT/checks.tgz (at most 8 files come back)
checks_back() { tar czf $OUT/checks.tgz -C /tmp checks; }
trap checks_back EXIT
[ -d data/ptb ] || tar xzf .gpu/ptb.tgz

tables() { ls $W 2>/dev/null; }

collect() {   # each started table's experiment folder, its small files, to $OUT/table-TABLE.tgz
  local t E
  for t in $(tables); do
    E=experiments/$t
    (cd $W/$t && tar czf $OUT/table-$t.tgz --exclude='*.pt' --exclude=vocab.txt --exclude=.lock \
        --exclude='*.gz' $E)
    cp /tmp/sweep-$t.log $OUT/ 2>/dev/null
    echo "== $t"
    for m in $W/$t/$E/*/*/metrics.jsonl; do
      [ -f "$m" ] && echo "${m#$W/$t/$E/}: $(wc -l < "$m") epochs, $(tail -1 "$m" | cut -c1-120)"
    done
    ls $W/$t/$E/*/*/summary.json 2>/dev/null | wc -l | sed 's/$/ runs finished/'
  done
}

running() {   # is any started table's run.sh still going?
  local t
  for t in $(tables); do pgrep -f "experiments/$t/run.sh" > /dev/null && return 0; done
  return 1
}

watch() {
  [ -n "$(tables)" ] || { echo "batch: no table started on this machine"; return 1; }
  while [ $SECONDS -lt ${UNTIL:-540} ] && running; do sleep 10; done
  command -v nvidia-smi > /dev/null && nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader
  collect
}

launch() {   # TABLE JOBS SEEDS: experiments/TABLE/run.sh in $W/TABLE, in its own session, none
  # of this call's output streams (the call returns, the table goes on)
  (cd $W/$1 && PYTHONPATH=$W/$1:/tmp/site LM="python3 -m lmlow.cli" PY=python3 JOBS=$2 SEEDS="$3" \
      TOGETHER=${TOGETHER:-} GRID=${GRID:-} TIMES=${TIMES:-} PRECISION=${PRECISION:-} \
      exec setsid nohup bash experiments/$1/run.sh) > /tmp/sweep-$1.log 2>&1 < /dev/null &
  sleep 5
}

paper_regime() {   # the table's corpus, vectors and scripts in $W/paper-regime, then launch it
  [ -f .gpu/vectors.txt.xz ] || { echo "batch: .gpu has no paper-regime data (pack.sh)"; return 1; }
  local T=$W/paper-regime
  [ -d $T ] && { echo "batch: the paper regime already started on this machine"; return 1; }
  mkdir -p $T/vectors $T/experiments/converged && cp -r lmlow $T/ && tar xzf .gpu/pydocs.tgz -C $T
  cp experiments/converged/common.sh $T/experiments/converged/ && cp -r experiments/paper-regime $T/experiments/
  xz -dc .gpu/vectors.txt.xz > $T/vectors/pylibs+pydocs.100d.txt
  [ "${TIMES:-1}" = 1 ] || [ -f $T/data/pydocs-x$TIMES/BUILD.json ] || {
    echo "batch: .gpu has no data/pydocs-x$TIMES (TIMES=$TIMES run.sh here, then pack.sh)"; return 1; }
  launch paper-regime "$1" "$2"
}

transformer_table() {   # what it reads is in the tree: the bundled corpus, the committed
  # vectors (converged/), the 5-gram baseline (six/kenlm5)
  local T=$W/transformer
  [ -d $T ] && { echo "batch: the Transformer table already started on this machine"; return 1; }
  mkdir -p $T/experiments/six && cp -r lmlow corpora $T/
  cp -r experiments/converged experiments/transformer $T/experiments/
  cp -r experiments/six/kenlm5 $T/experiments/six/
  launch transformer "$1" "$2"
}

regime_speed() {   # the paper regime's whole update (train_step.py, the GPU waited for at
  # each end of a timing) in fp32 and bf16, one run alone, then three at once as a table would
  # train them: whether a 15-minute loan can converge any of its runs (the CPU's pair took
  # 163-165 epochs of 1.06M tokens; five fp32 runs at once ran at 86-103k tokens/s each)
  [ -f .gpu/vectors.txt.xz ] || { echo "batch: .gpu has no paper-regime data (pack.sh)"; return 1; }
  [ -d data/pydocs ] || tar xzf .gpu/pydocs.tgz
  local V=/tmp/regime-vectors.100d.txt p n i
  [ -f $V ] || xz -dc .gpu/vectors.txt.xz > $V
  for p in fp32 bf16; do
    for n in 1 3; do
      for i in $(seq $n); do
        timeout 150 python3 benchmarks/train_step.py data/pydocs --preset paper --set device=cuda \
            --set precision=$p --set emb_size=100 --set hidden_size=256 --set layers=2 \
            --set tie=False --set init=glove,glove-output --set embeddings=$V \
            --set extend_vocab=True --steps 40 --repeats 3 > $R/regime-$p-x$n-$i.log 2>&1 &
      done
      wait
      echo "paper regime, $p, $n at once:"; tail -qn 1 $R/regime-$p-x$n-*.log
    done
  done
}

device_info() {   # the GPU, its driver, torch and cuDNN, to $R/device.txt
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv | tee $R/device.txt
  python3 -c "import torch; print('torch', torch.__version__, 'cudnn', torch.backends.cudnn.version())" | tee -a $R/device.txt
}

gpu_tests() {   # pytest -m gpu on the prebuilt fixtures: counts, so it may run beside a table
  LMLOW_TEST_FIXTURES=$PWD/.gpu/fixtures timeout 300 python3 -m pytest -m gpu tests/test_gpu.py -q \
      -p no:cacheprovider -rs > $R/pytest_gpu.log 2>&1; tail -3 $R/pytest_gpu.log
}

correct() {   # what counts or compares, not what is timed: runs beside a table
  device_info
  gpu_tests
  timeout 150 python3 benchmarks/gpu_waits.py data/ptb --updates 100 --json $R/gpu_waits.json \
      > $R/gpu_waits.md 2>&1; cat $R/gpu_waits.md
  { python3 -m lmlow.cli train data/ptb --out /tmp/x --preset tiny --device cuda --precision bf16 \
      --max-steps 30 --quiet && python3 -m lmlow.cli train --resume /tmp/x --device cpu \
      --precision fp32 --max-steps 40 --quiet; echo "resume exit $?"; cat /tmp/x/summary.json; } \
      > $R/resume.txt 2>&1; grep -E 'resume exit|precision|device' $R/resume.txt
}

speed() {   # timings: alone on the GPU
  timeout 150 python3 benchmarks/gpu_speed.py --precision fp32 bf16 fp16 --json $R/gpu_speed.json \
      > $R/gpu_speed.md 2>&1; cat $R/gpu_speed.md
  transformer_speed
  ptb_epochs
}

transformer_speed() {   # lmlow's Transformer (windowed and masked attention) against the plain one
  timeout 120 python3 benchmarks/transformer_speed.py --device cuda --precision fp32 bf16 --batch 64 \
      --bptt 128 --steps 10 --repeats 5 --json $R/transformer_speed.json > $R/transformer_speed.md 2>&1
  cat $R/transformer_speed.md
  timeout 60 python3 benchmarks/transformer_speed.py --device cuda --precision fp32 bf16 --batch 64 \
      --bptt 128 --steps 3 --repeats 1 --profile $R/transformer-profiles > /dev/null 2>&1
  ls $R/transformer-profiles
}

ptb_epochs() {   # the paper preset on PTB, one epoch in each precision: seconds and valid ppl
  local p
  for p in fp32 bf16 fp16; do
    timeout 120 python3 -m lmlow.cli train data/ptb --out /tmp/ptb-$p --preset paper \
        --device cuda --precision $p --max-epochs 1 --eval-batch-size 80 --quiet \
        > $R/ptb-paper-$p.log 2>&1 && cp /tmp/ptb-$p/summary.json $R/ptb-paper-$p.json
    python3 -c "import json,sys; s=json.load(open(sys.argv[1])); print('ptb paper 1 epoch', \
        s['precision'], s['train_seconds'], 's', s['tokens_per_s'], 'tokens/s, valid', \
        round(s['best_valid_ppl'], 1))" $R/ptb-paper-$p.json 2>/dev/null || echo "ptb $p failed"
  done
}

case "${1:-}" in
session)
  # the decisive table first (it needs the most minutes), seed 1's five runs at once, then
  # seed 2's: one finished seed is a result, two half-trained ones are not (TOGETHER=1
  # JOBS=10 trains both at once, if a loan is known to be long enough); the Transformer's
  # small runs beside it (TX_JOBS at once, default 3), then the counting checks
  paper_regime "${JOBS:-5}" "${SEEDS:-1 2}"
  [ "${TX_JOBS:-3}" = 0 ] || transformer_table "${TX_JOBS:-3}" "${TX_SEEDS:-1 2 3}"
  correct
  watch
  ;;
loan)
  # the measurement that decides the paper regime's plan first; checks.tgz is written after
  # each step (a call killed at its limit runs no EXIT trap), and the GPU suite only where
  # its 5 minutes still fit the call's 10
  device_info
  regime_speed; checks_back
  transformer_speed; checks_back
  [ $SECONDS -lt 270 ] && gpu_tests || echo "batch: $SECONDS s gone: pytest -m gpu left for another call"
  ;;
regime-speed) regime_speed ;;
checks) correct; speed ;;
correct) correct ;;
speed) speed ;;
ptb) ptb_epochs ;;
paper-regime)
  paper_regime "${JOBS:-5}" "${SEEDS:-1}" || exit 1
  watch
  ;;
transformer)
  transformer_table "${JOBS:-6}" "${SEEDS:-1 2 3}" || exit 1
  watch
  ;;
watch) watch ;;
*) sed -n '2,49p' "$0"; exit 2 ;;
esac
