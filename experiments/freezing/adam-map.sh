#!/usr/bin/env bash
# Does `--map-unseen-inputs` help models trained with the Adam protocol too, not only with the
# paper's recipe (mapped-rows.md)? The Adam tables (../six, ../sotu) kept no model files, so
# their ours-unfrozen runs are trained again here, with their settings (../converged/common.sh:
# MODEL, CONVERGE; their vectors and vocabulary), 3 seeds per domain, precision pinned to fp32
# (theirs was `auto`, unrecorded), into technical/adam-unfrozen and sotu/adam-unfrozen; then
# mapped_rows.py scores each as trained and mapped and keeps eval_mapped_*.json in its folder,
# where ../claims.py finds it. About 5-8 minutes a run on one core. The same command resumes.
# Run from the repo root; JOBS=1 beside another training.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/freezing
SOTU=data/sotu-q
SOTU_VEC=vectors/sotu-q.100d.txt
for f in $Q/train.txt "$VEC" $SOTU/train.txt $SOTU_VEC; do   # made by run.sh, from committed files
  [ -f $f ] || { echo "$f: missing; run experiments/freezing/run.sh first" >&2; exit 1; }
done
$LM sweep $Q --grid $E/unfrozen.toml --extend-vocab --embeddings "$VEC" --seeds 1,2,3 \
    --jobs "${JOBS:-1}" --out $E/technical/adam-unfrozen "${MODEL[@]}" "${CONVERGE[@]}" --precision fp32
$LM sweep $SOTU --grid $E/unfrozen.toml --extend-vocab --embeddings "$SOTU_VEC" --seeds 1,2,3 \
    --jobs "${JOBS:-1}" --out $E/sotu/adam-unfrozen "${MODEL[@]}" "${CONVERGE[@]}" --precision fp32
$LM report $E/technical/adam-unfrozen
$LM report $E/sotu/adam-unfrozen
${PY:-.venv/bin/python} $E/mapped_rows.py
