#!/bin/bash
# `lmlow generate RUN --samples 100000 --words 1 --seed 1` on one thread: the peak memory and
# wall time of this tree's lmlow and, given OLD_COMMIT, of that commit's, and whether both print
# the same samples (a digest of the output). -P: the tree on PYTHONPATH, not the working
# folder, gives lmlow. Measure on a quiet machine and say which CPU.
#
# Usage: benchmarks/generate_memory.sh RUN [OLD_COMMIT] [SAMPLES]
# A run of the size measured in BENCHMARKS.md (11,998 words):
#   lmlow train corpora/pydocs-mini --out /tmp/gen-run --preset tiny --max-steps 2
set -euo pipefail
RUN=$1; OLD=${2:-}; N=${3:-100000}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
PY=${PYTHON:-python}
export OMP_NUM_THREADS=1
lscpu | grep "Model name" || true; date -u
trees=("new:$ROOT")
if [ -n "$OLD" ]; then
  TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
  git -C "$ROOT" archive "$OLD" lmlow | tar -x -C "$TMP"
  trees=("old $OLD:$TMP" "${trees[@]}")
fi
for t in "${trees[@]}"; do
  echo "== ${t%%:*}"
  out=$(mktemp)
  PYTHONPATH=${t#*:} /usr/bin/time -f "peak RSS %M kB, wall %e s" \
    "$PY" -P -m lmlow.cli generate "$RUN" --samples "$N" --words 1 --seed 1 > "$out"
  echo "output digest $(sha256sum "$out" | cut -c1-16)"; rm -f "$out"
done
