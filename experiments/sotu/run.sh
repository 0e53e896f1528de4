#!/usr/bin/env bash
# Kummerfeld et al. Table 2's "other domains show the same pattern": section 3's six
# configurations at convergence, 3 seeds, on the State of the Union (data/sotu-q: 8 speeches of
# LM training text, 83k tokens; 1.9M tokens of other speeches as in-domain pretraining text),
# K=0 with the vocabulary extended by the vectors' words, a KenLM 5-gram on the same tokens.
# Same model and convergence rule as the technical tables (../converged/common.sh). The same
# command resumes. Run from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/sotu
C=data/sotu-q
V=vectors/sotu-q.100d.txt
[ -f $C/pretrain.txt ] || .venv/bin/python data_scripts/build_sotu_domain.py --out $C
V_COMMITTED=experiments/converged/vectors/$(basename $V).gz   # the vectors the runs used
if [ ! -f $V ] && [ -f $V_COMMITTED ]; then
  mkdir -p "$(dirname $V)" && gzip -dc $V_COMMITTED > $V.tmp && mv $V.tmp $V
fi
[ -f $V ] || $LM embed $C/pretrain.txt --out $V --dim 100 --epochs 25 --threads 1
[ -f $E/stats.md ] || { $LM stats $C --embeddings $V --extend-vocab --pretrain $C/pretrain.txt \
    > $E/stats.md.tmp && mv $E/stats.md.tmp $E/stats.md; }
[ -f $E/kenlm5/summary.json ] || \
  $LM ngram $C --order 5 --embeddings "$V" --extend-vocab --out $E/kenlm5 --quiet
# SEEDS=1 runs seed 1 of all six first (a first full table); the same command then adds 2 and 3.
$LM sweep $C --grid six --extend-vocab --embeddings "$V" --seeds "${SEEDS:-1,2,3}" --jobs "$JOBS" \
    --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
$LM report $E/sweep --baseline $E/kenlm5
