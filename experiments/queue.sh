#!/usr/bin/env bash
# The converged tables still under way, in the order of their issues: the freezing question
# (issue 24: freezing/, then datasize/'s last runs and its reruns at the protocol's one thread),
# then the Transformer's tables (issue 28), then the paper's regime on the CPU (issue 24,
# paper-regime/README.md): its decisive pair, ours and ours-unfrozen, and the table's three
# other configurations (five.toml), both seeds of the pair first, about 11-17 hours of one core
# a run (4-6 minutes an epoch in bf16, by CPU; ours-unfrozen seed 1 converged at epoch 163), in
# bf16 where the CPU has AVX-512 BF16 or AMX, as its seed-1 runs trained, and in fp32 where it
# has neither (about a third as fast there: paper-regime/fp32-no-avx512.txt), each session in
# the best its CPU has: a run resumed on another CPU changes precision with it (lmlow sweep
# resumes a started run in the precision it is given; the run's summary.json lists its
# precisions, metrics.jsonl each epoch's). PRECISION=fp32 or bf16 forces one. All go into one
# sweep folder, whose plan grows as they start, so a report calls the table partial until the
# last of them ends.
# Each run.sh resumes where it stopped, so this one command continues them all after any
# interruption. On 2 cores start it twice, about 20 s apart, one run at a time each:
#   JOBS=1 nohup experiments/queue.sh > queue1.log 2>&1 &
#   JOBS=1 nohup experiments/queue.sh > queue2.log 2>&1 &
# The two share the runs through each run folder's lock: one trains what the other is not
# training, and moves on to the next table when nothing is left to start in this one. When both
# report the same table at once, the second report waits for the first (`lmlow report --wait`):
# without it the second was refused and its queue ended (2026-11-27).
# Run from the repo root. On a bare checkout it first installs lmlow and builds the corpora the
# tables read (`make install data-pydocs`: the package registries and Debian's archive), one of
# the two at a time; the run.sh scripts make or unpack their vectors and other shared inputs
# themselves, also one instance at a time (a lock each: converged/common.sh).
set -euo pipefail
export JOBS=${JOBS:-1}
(
  flock 9
  [ -f .venv/.lmlow-installed ] || make install
  [ -f data/pydocs/train.txt ] && [ -f data/pylibs.txt ] || make data-pydocs
) 9> "${TMPDIR:-/tmp}/lmlow-queue.lock"
for step in freezing/run.sh datasize/run.sh datasize/rerun.sh transformer/run.sh; do
  echo "queue: $step ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  experiments/$step
done
echo "queue: paper-regime/run.sh, the pair's two seeds, then the table, on the CPU ($(date -u '+%Y-%m-%d %H:%M UTC'))"
precision=${PRECISION:-}
if [ -z "$precision" ]; then
  grep -qwE 'avx512_bf16|amx_tile' /proc/cpuinfo && precision=bf16 || {
    precision=fp32
    echo "queue: this CPU has neither AVX-512 BF16 nor AMX: the paper regime trains in fp32" \
         "this session, about a third as fast as in bf16 (paper-regime/fp32-no-avx512.txt);" \
         "a later session on a CPU with bf16 resumes its runs in bf16"
  }
fi
# the decisive pair (pair.toml: ours and ours-unfrozen) on both seeds before the rest of the
# table (five.toml: a finished run is not retrained): the verdict the recommendation follows
# gets its second seed first (2026-11-29: a workspace restored without its checkpoints lost
# seed 1's standard at epoch 204 and ours-vecrows at 51, paper-regime/lost-checkpoints/)
for step in "pair 1" "pair 2" "five 1" "five 2"; do
  set -- $step
  GRID=experiments/paper-regime/$1.toml SEEDS=$2 SWEEP=sweep-cpu.100d \
    PRECISION=$precision experiments/paper-regime/run.sh
done
echo "queue: done; commit the finished runs, then python experiments/claims.py --update"
