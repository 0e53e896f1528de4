#!/usr/bin/env bash
# The CPU benchmarks of BENCHMARKS.md, one after another, each with its output kept in
# benchmarks/results/NAME-cpu.log (the command, the machine, and what it printed, every line
# stamped with the seconds since the command started). Run on a quiet machine: nothing else
# training, since two jobs on 2 cores slow each other far more than 2x. Needs `make data-ptb
# data-sotu data-pydocs`. Usage, from the repo root:
#
#   benchmarks/cpu_suite.sh [NAME ...]     # NAMEs: glove lstm_speed ngram train_step precision
#                                          #        transformer contention demo
#
# About 40 minutes on 2 cores, 15 of them `demo`. GloVe writes vectors/ptb.200d.txt, which
# train_step then reads.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
PY=${PY:-$ROOT/.venv/bin/python}
LM=${LM:-$ROOT/.venv/bin/lmlow}
R=benchmarks/results
mkdir -p "$R" vectors

stamp() {   # prefix each line with the seconds since the command started
  "$PY" -u -c 'import sys, time
t = time.time()
for line in sys.stdin:
    print(f"[{time.time() - t:7.1f}s] {line}", end="", flush=True)'
}

header() {
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC'); $(lscpu | sed -n 's/^Model name: *//p' | head -1)," \
       "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg)," \
       "torch $("$PY" -c 'import torch; print(torch.__version__)')"
}

run() {   # run NAME COMMAND...: the command's output, stamped, to the screen and NAME-cpu.log
  local name=$1; shift         # (an absolute log path: `demo` runs it from inside a clone)
  { header; echo "\$ $*"; "$@" 2>&1 | stamp; } | tee -a "$ROOT/$R/$name-cpu.log"
}

glove() {
  : > "$R/glove-cpu.log"
  # /usr/bin/time -v: wall time and peak RSS of lmlow and the GloVe programs it waits for
  run glove /usr/bin/time -v "$LM" embed data/ptb/train.txt --out vectors/ptb.200d.txt \
      --dim 200 --threads 1 --force
  run glove /usr/bin/time -v "$LM" embed corpora/pydocs-mini/pretrain.txt.gz \
      --out /tmp/lmlow-bench-pydocs-mini.200d.txt --dim 200 --epochs 25 --threads 2 --force
  run glove /usr/bin/time -v "$LM" embed data/pylibs.txt --out /tmp/lmlow-bench-pylibs.400d.txt \
      --dim 400 --epochs 3 --threads 1 --force
  # what the vectors cover (README, `lmlow embed`): coverage depends on the words, not the epochs
  run glove "$LM" stats data/ptb --embeddings vectors/ptb.200d.txt
  run glove "$LM" stats data/pydocs --embeddings /tmp/lmlow-bench-pylibs.400d.txt
}

lstm_speed() {
  : > "$R/lstm_speed-cpu.log"
  run lstm_speed "$PY" benchmarks/lstm_speed.py --steps 3
}

ngram() {
  : > "$R/ngram-cpu.log"
  run ngram "$PY" benchmarks/ngram_memory.py data/ptb data/sotu:0 data/pylibs.txt,data/pydocs:2 \
      data/pylibs.txt,data/pydocs:0
}

train_step() {
  : > "$R/train_step-cpu.log"
  run train_step "$PY" benchmarks/train_step.py data/ptb --set tie=False --set freeze_input=True \
      --set init=glove,glove-output,unigram --set embeddings=vectors/ptb.200d.txt
}

precision() {   # fp32 against bf16 autocast (issue 25): the whole update's speed in each, on
  # this CPU (its bf16 units: AMX tiles, AVX-512 BF16, or none), for every LSTM preset and the
  # Transformer's, and the converged protocol's 2 x 256 model on its 60k-word LM text at one
  # thread, as the experiments run it; interleaved, so that a change in load hits both. The log
  # is per CPU vendor (precision-intel-cpu.log, precision-amd-cpu.log; precision-cpu.log is
  # the Intel Xeon's of 2026-11-25): `--precision auto` follows each vendor's measurement
  # (lmlow/checkpoint.py, pick_precision)
  local log=precision-$(lscpu | grep -qi 'AuthenticAMD' && echo amd || echo intel)
  : > "$R/$log-cpu.log"
  echo "# bf16 units: $(grep -o -w 'amx_tile\|avx512_bf16' /proc/cpuinfo | sort -u | tr '\n' ' ')" \
      | tee -a "$R/$log-cpu.log"
  local s=(--steps 10 --repeats 3)
  for p in fp32 bf16 fp32 bf16; do
    run $log "$PY" benchmarks/train_step.py data/ptb --preset tiny --set precision=$p "${s[@]}"
    run $log "$PY" benchmarks/train_step.py data/ptb --set precision=$p "${s[@]}"
    run $log "$PY" benchmarks/train_step.py data/ptb --preset paper --set precision=$p \
        --steps 3 --repeats 2       # seconds an update: fewer of them
    run $log "$PY" benchmarks/train_step.py data/ptb --preset transformer-small \
        --set precision=$p "${s[@]}"
    run $log "$PY" benchmarks/train_step.py data/pydocs-mini-q --set precision=$p \
        --set emb_size=100 --set hidden_size=256 --set threads=1 "${s[@]}"
  done
}

transformer() {   # lmlow's Transformer against nn.TransformerEncoder and the LSTM (issue 28)
  : > "$R/transformer-cpu.log"
  run transformer "$PY" benchmarks/transformer_speed.py --vocab 10000 --precision fp32 bf16 \
      --steps 5 --repeats 5 --json "$R/transformer-cpu.json"
}

contention() {
  : > "$R/contention-cpu.log"
  run contention "$PY" benchmarks/contention.py data/ptb --steps 80
}

demo() {   # README's "make demo took N minutes from a fresh clone": a clone of HEAD, an empty cache
  : > "$R/demo-cpu.log"
  local d=/tmp/lmlow-bench-demo
  rm -rf "$d" && git clone -q . "$d/clone"
  for attempt in "fresh clone" "second run"; do
    echo "# $attempt" | tee -a "$R/demo-cpu.log"
    (cd "$d/clone" && LMLOW_CACHE_DIR="$d/cache" \
       run demo /usr/bin/time -f "wall %e s, peak RSS %M kB" make demo)
  done
  rm -rf "$d"
}

ALL=(glove lstm_speed ngram train_step precision transformer contention demo)
names=("$@"); [ ${#names[@]} -gt 0 ] || names=("${ALL[@]}")
for n in "${names[@]}"; do
  [[ " ${ALL[*]} " == *" $n "* ]] || { echo "cpu_suite: no benchmark $n (${ALL[*]})" >&2; exit 2; }
done
for n in "${names[@]}"; do "$n"; done
