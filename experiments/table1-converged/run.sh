#!/usr/bin/env bash
# Kummerfeld et al. Table 1 (all 20 valid tying/freezing/pretraining configurations) at
# convergence in the rare-word setting (K=0, vocabulary extended by the vectors' words), on the
# converged tables' data and model (../converged/common.sh); seed 1 for all 20, then seeds 2 and
# 3 for the top and bottom five of seed 1 (the six of ../six come with their 3 seeds). The same
# command resumes. Run from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/table1-converged
quarter
vectors
# Section 3's six are 6 of the 20, trained with 3 seeds by ../six on this very data, model and
# rule: their runs are copied in, not trained again (and checked to have the same settings).
.venv/bin/python experiments/converged/reuse.py experiments/six/sweep $E/sweep
$LM sweep $Q --grid table1 --extend-vocab --embeddings "$VEC" --seeds 1 --jobs "$JOBS" \
    --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
$LM report $E/sweep
.venv/bin/python experiments/converged/ends.py $E/sweep 5 > $E/ends.toml
$LM sweep $Q --grid $E/ends.toml --extend-vocab --embeddings "$VEC" --seeds 2,3 --jobs "$JOBS" \
    --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
$LM report $E/sweep
.venv/bin/python experiments/converged/reuse.py --check experiments/six/sweep $E/sweep
