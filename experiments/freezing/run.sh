#!/usr/bin/env bash
# When does freezing the pretrained input help? (issue 24; README.md here.) Under the paper's
# recipe (../converged/common.sh: PAPER, RECIPE, PAPER_CONVERGE), on the technical domain
# (data/pydocs-mini-q) and on the State of the Union (data/sotu-q), 3 seeds, paired:
#   sweep-sgd      the six with the Adam tables' vectors (pretraining text only, no <eos>)
#   rows-old       ours and ours-random-output freezing only the rows with a vector, same vectors
#   sweep-allvec   the six with vectors from all in-domain text: pretraining text + the LM's
#                  training split, each line ending in <eos> (lmlow embed's default now)
#   rows-allvec    the partial freeze with those vectors
# Seed by seed (seed 1 of every table first); the same command resumes.
# Run from the repo root; JOBS=1 to leave a core free.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/freezing
# the inputs both tables share, made by one of ../queue.sh's two instances while the other waits
exec 8> "${TMPDIR:-/tmp}/lmlow-prepare.lock"; flock 8
SOTU=data/sotu-q
SOTU_VEC=vectors/sotu-q.100d.txt
quarter
vectors
[ -f $SOTU/pretrain.txt ] || .venv/bin/python data_scripts/build_sotu_domain.py --out $SOTU
restore() {   # a committed vector file, unpacked where the runs read it
  [ -f "$1" ] && return
  [ -f "$2" ] || return 1
  mkdir -p "$(dirname "$1")" && gzip -dc "$2" > "$1.tmp" && mv "$1.tmp" "$1"
}
restore $SOTU_VEC experiments/converged/vectors/sotu-q.100d.txt.gz
# vectors from all in-domain text, one GloVe thread (deterministic on one machine), committed
ALL_TECH=vectors/pydocs-mini-q.all.100d.txt
ALL_SOTU=vectors/sotu-q.all.100d.txt
restore $ALL_TECH $E/vectors/$(basename $ALL_TECH).gz || \
  $LM embed $MINI/pretrain.txt.gz $Q/train.txt --out $ALL_TECH --dim 100 --epochs 25 --threads 1
restore $ALL_SOTU $E/vectors/$(basename $ALL_SOTU).gz || \
  $LM embed $SOTU/pretrain.txt $SOTU/train.txt --out $ALL_SOTU --dim 100 --epochs 25 --threads 1
mkdir -p $E/vectors
for v in $ALL_TECH $ALL_SOTU; do
  [ -f $E/vectors/$(basename $v).gz ] || gzip -nc $v > $E/vectors/$(basename $v).gz
done
stats() {   # coverage of each corpus's rows and tokens by each set of vectors
  local out=$E/stats.$1.$2.md
  [ -f $out ] || { $LM stats $3 --embeddings $4 --extend-vocab > $out.tmp && mv $out.tmp $out; }
}
stats technical old $Q "$VEC"; stats technical allvec $Q $ALL_TECH
stats sotu old $SOTU $SOTU_VEC; stats sotu allvec $SOTU $ALL_SOTU
# the 5-grams on the same tokens: the old vectors' vocabularies are the Adam tables' (their
# 5-grams are reused); the new vectors extend the vocabulary by other words
for d in technical sotu; do
  corpus=$Q vec=$ALL_TECH; [ $d = sotu ] && corpus=$SOTU vec=$ALL_SOTU
  [ -f $E/$d/kenlm5-allvec/summary.json ] || \
    $LM ngram $corpus --order 5 --embeddings $vec --extend-vocab --out $E/$d/kenlm5-allvec --quiet
done
flock -u 8
sweep() {   # DOMAIN TABLE GRID VECTORS SEEDS
  local corpus=$Q base=experiments/six/kenlm5
  [ $1 = sotu ] && corpus=$SOTU base=experiments/sotu/kenlm5
  case $2 in *allvec) base=$E/$1/kenlm5-allvec ;; esac
  $LM sweep $corpus --grid $3 --extend-vocab --embeddings "$4" --seeds "$5" \
      --jobs "$JOBS" --out $E/$1/$2 "${PAPER[@]}" "${RECIPE[@]}" "${PAPER_CONVERGE[@]}"
  $LM report $E/$1/$2 --baseline $base --wait
}
# One seed of every table before the next seed (a first complete picture, then the pairs'
# spread); within a seed the technical domain first.
for seed in ${SEEDS:-1 2 3}; do
  for d in technical sotu; do
    old="$VEC" all=$ALL_TECH; [ $d = sotu ] && old=$SOTU_VEC all=$ALL_SOTU
    sweep $d sweep-sgd six "$old" $seed
    sweep $d rows-old $E/rows.toml "$old" $seed
    # `standard` reads no vector: both sets of vectors add the same words to the vocabulary
    # (checked word for word), so its sweep-sgd run is sweep-allvec's too, copied, not trained
    # again (on the technical domain's seed 1 it was trained twice: the same numbers bitwise)
    .venv/bin/python experiments/converged/reuse.py --same-words $all $E/$d/sweep-sgd $E/$d/sweep-allvec
    sweep $d sweep-allvec six $all $seed
    .venv/bin/python experiments/converged/reuse.py --check $E/$d/sweep-sgd $E/$d/sweep-allvec
    sweep $d rows-allvec $E/rows.toml $all $seed
  done
done
