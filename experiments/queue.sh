#!/usr/bin/env bash
# The converged tables still under way, in the order of their issues: the freezing question
# (issue 24: freezing/, then datasize/'s last runs and its reruns at the protocol's one thread),
# then the Transformer's tables (issue 28).
# Each run.sh resumes where it stopped, so this one command continues them all after any
# interruption. On 2 cores start it twice, about 20 s apart, one run at a time each:
#   JOBS=1 nohup experiments/queue.sh > queue1.log 2>&1 &
#   JOBS=1 nohup experiments/queue.sh > queue2.log 2>&1 &
# The two share the runs through each run folder's lock: one trains what the other is not
# training, and moves on to the next table when nothing is left to start in this one.
# Run from the repo root.
set -euo pipefail
export JOBS=${JOBS:-1}
for step in freezing/run.sh datasize/run.sh datasize/rerun.sh transformer/run.sh; do
  echo "queue: $step ($(date -u '+%Y-%m-%d %H:%M UTC'))"
  experiments/$step
done
echo "queue: done; commit the finished runs, then python experiments/claims.py --update"
