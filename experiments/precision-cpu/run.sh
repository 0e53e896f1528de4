#!/usr/bin/env bash
# Is bf16 as good as fp32 on a CPU that has AVX-512 BF16 but no AMX (issue 25)? The converged
# Adam protocol (../converged/common.sh: MODEL, CONVERGE; the technical LM text, its vectors),
# standard and ours-unfrozen, seed 1, in fp32 and in bf16, one run at a time on one thread; the speed of
# the update in each precision is benchmarks/train_step.py's (BENCHMARKS.md). The CPU is in
# each run's summary.json (`device`). Run from the repo root; the same command resumes.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/precision-cpu
quarter
vectors
grep -q avx512_bf16 /proc/cpuinfo || { echo "this CPU has no AVX-512 BF16" >&2; exit 1; }
$LM sweep $Q --grid $E/grid.toml --extend-vocab --embeddings "$VEC" --seeds 1 --jobs 1 \
    --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
$LM report $E/sweep --baseline experiments/six/kenlm5
