#!/usr/bin/env bash
# Does freezing the pretrained input help once the vectors come from more text? (Kummerfeld et
# al.'s Table 5 question, "how much pretraining data", asked of our freezing result.) The six's
# five configurations that read vectors, at convergence, 3 seeds, with GloVe vectors trained on
# 11x more in-domain pretraining text (data/pylibs.txt, 8.6M words of Python library docs, from
# `make data-pydocs`) than ../six's (0.78M), kept to exactly ../six's vector words so that the
# vocabulary, and so the scored tokens, are ../six's: the runs pair seed by seed with ../six/sweep
# and differ from them in the vectors' values only. The same command resumes. Run from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/pretrain-size
BIG=vectors/pylibs.100d.txt                  # every pylibs word seen 5+ times
SAME=vectors/pylibs-as-mini.100d.txt         # those of ../six's vector words
COMMITTED=experiments/converged/vectors/$(basename $SAME).gz   # the exact vectors the runs used

big_vectors() {   # how $SAME was made (one GloVe thread: deterministic on one machine)
  [ -f data/pylibs.txt ] || { echo "data/pylibs.txt: missing; run make data-pydocs" >&2; exit 1; }
  [ -f data/pylibs-mini-x.txt ] || { $LM prepare data/pylibs.txt --no-split --dedup --documents line \
      --exclude $MINI/valid.txt --exclude $MINI/test.txt --out data/pylibs-mini-x.txt --json --force \
      > $E/pretrain.json.tmp && mv $E/pretrain.json.tmp $E/pretrain.json; }
  [ -f $BIG ] || $LM embed data/pylibs-mini-x.txt --out $BIG --dim 100 --epochs 25 --threads 1
  awk 'NR == FNR { keep[$1]; next } $1 in keep' "$VEC" $BIG > $SAME.tmp
  have=$(wc -l < $SAME.tmp) want=$(wc -l < "$VEC")
  [ "$have" = "$want" ] || { echo "$SAME: $have of $VEC's $want words have a vector" >&2; rm $SAME.tmp; exit 1; }
  mv $SAME.tmp $SAME
}

quarter
vectors
if [ ! -f $SAME ]; then
  if [ -f $COMMITTED ]; then gzip -dc $COMMITTED > $SAME.tmp && mv $SAME.tmp $SAME; else big_vectors; fi
fi
$LM sweep $Q --grid $E/five.toml --extend-vocab --embeddings $SAME --seeds 1,2,3 --jobs "$JOBS" \
    --out $E/sweep "${MODEL[@]}" "${CONVERGE[@]}"
$LM report $E/sweep
