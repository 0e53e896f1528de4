#!/usr/bin/env bash
# Scoring, the code before (BEFORE, a checked-out tree of an earlier commit) against this tree,
# on a quiet machine, one thread: benchmarks/score_speed.py from each tree, interleaved, two
# rounds, at the paper regime's 61,115 words (its mean log-probability should not move); then
# the paper regime's validation as its trainings score it (2 x 256, 100-d, untied, 61,115
# words, eval batch 10 x 70; random weights, 14,000 tokens), timed in each tree, its per-token
# log-probabilities compared bit for bit. Trainings of lmlow running beside it are paused
# (SIGSTOP) for the measurement and continued after it, whatever happens.
# Usage: BEFORE=/tmp/before bash benchmarks/score_ab.sh > benchmarks/results/score-ab-CPU.log
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python}
paused="$(pgrep -f 'lmlow.cli train' | tr '\n' ' ')"
[ -n "$paused" ] && { trap 'kill -CONT $paused' EXIT; kill -STOP $paused; echo "paused: $paused"; }
lscpu | grep "Model name"
"$py" -c 'import torch; print("torch", torch.__version__, "CPU capability", torch.backends.cpu.get_cpu_capability())'
echo "before: $BEFORE ($(git -C "$BEFORE" log --oneline -1 | cut -c1-7)); after: $here ($(git -C "$here" log --oneline -1 | cut -c1-7))"
date -u
for round in 1 2; do
  for tree in "$BEFORE" "$here"; do
    echo "round $round, $tree: score_speed.py --vocab 61115 (OMP_NUM_THREADS=1)"
    OMP_NUM_THREADS=1 "$py" "$tree/benchmarks/score_speed.py" --vocab 61115
  done
done
out=$(mktemp -d)
for tree in "$BEFORE" "$here"; do
  "$py" - "$tree" "$out/$(basename "$tree").npy" <<'PY'
import sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np, torch
from lmlow.evaluate import lstm_logprobs
from lmlow.model import AWDLSTM
torch.manual_seed(0)
torch.set_num_threads(1)
model = AWDLSTM(61115, 100, 256, 2, 100, tie=False).eval()
ids = np.random.RandomState(0).randint(1, 61115, 14000)
lstm_logprobs(model, ids[:1400], 0, batch_size=10, bptt=70)
t0 = time.perf_counter()
lp = lstm_logprobs(model, ids, 0, batch_size=10, bptt=70)
took = time.perf_counter() - t0
print(f"{sys.argv[1]}: the paper regime's validation shape, 14,000 tokens: {took:.2f} s "
      f"({len(ids) / took:,.0f} tokens/s)")
np.save(sys.argv[2], lp)
PY
done
"$py" -c "import numpy as np, sys; a, b = (np.load(f) for f in sys.argv[1:]); print('per-token log-probabilities the same to the bit:', a.dtype == b.dtype and np.array_equal(a, b))" \
  "$out/$(basename "$BEFORE").npy" "$out/$(basename "$here").npy"
rm -r "$out"
date -u
