#!/usr/bin/env bash
# Does the paper's answer carry over to a Transformer? (issue 28; README.md here.) The six on
# the technical domain's protocol (data/pydocs-mini-q, 60k words; K=0 with the vocabulary
# extended by the old vectors' words: the LSTM tables' 8,282 rows and tokens, so the 5-gram of
# ../six and the LSTM of ../freezing/technical/sweep-sgd are scored on the same tokens), with
# lmlow's Transformer at the LSTM's size (3 x 116, 2 heads, context 128: 512,372 parameters
# without the embeddings against the LSTM's 509,792), AdamW with warm-up, the protocol's
# convergence rule, fp32, 3 seeds, paired:
#   search         standard, seeds 1 and 2, seven settings of rate and dropout (search.toml);
#                  the lowest mean validation perplexity is written to chosen.flags, once
#   sweep          the six with those settings
#   sweep-unigram  the six with the log-unigram output bias (Meister et al.'s question)
# Seed by seed; the same command resumes. Run from the repo root; JOBS=1 to leave a core free.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/transformer
quarter
vectors
TX=(--preset transformer-small --emb-size 100 --hidden-size 116 --layers 3 --heads 2
    --context 128 --batch-size 20 --bptt 64 --precision fp32 "${CONVERGE[@]}")
table() {   # OUT GRID [FLAGS...]: one sweep over the protocol's tokens, then its report
  local out=$1 grid=$2; shift 2
  $LM sweep $Q --grid $grid --extend-vocab --embeddings "$VEC" --jobs "$JOBS" --out $E/$out \
      "${TX[@]}" "$@"
  $LM report $E/$out --baseline experiments/six/kenlm5 --wait
}
table search $E/search.toml --seeds 1,2
# the other queue instance may still be training a search run (its report then lacks it):
# wait for it, reporting again each minute, until one of the two has chosen (at most 3 hours)
for _ in $(seq 180); do
  [ -f $E/chosen.flags ] && break
  if ${PY:-.venv/bin/python} $E/choose.py $E/search.toml $E/search/results.json \
      > $E/chosen.flags.$$ 2> $E/chosen.flags.err.$$; then
    mv $E/chosen.flags.$$ $E/chosen.flags
  else
    sleep 60
    $LM report $E/search --baseline experiments/six/kenlm5 --wait > /dev/null
  fi
done
rm -f $E/chosen.flags.$$
[ -f $E/chosen.flags ] || { cat $E/chosen.flags.err.$$ >&2; exit 1; }
rm -f $E/chosen.flags.err.$$
mapfile -t CHOSEN < <(grep -v '^#' $E/chosen.flags)
for seed in ${SEEDS:-1 2 3}; do
  table sweep six --seeds $seed "${CHOSEN[@]}"
  table sweep-unigram six --unigram --seeds $seed "${CHOSEN[@]}"
done
