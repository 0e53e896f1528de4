#!/usr/bin/env bash
# The paper's regime (issue 24; README.md here): about 1M words of LM text (data/pydocs's
# training split, 1,061,758 words: PTB's size), GloVe vectors from all in-domain text (the
# 8.6M-word data/pylibs.txt + that LM text, <eos> included, minimum count 5 as the paper),
# K=0 with the vocabulary extended by the vectors' words (the paper's rare-word setting), the
# paper's recipe at Merity et al.'s PTB batch (80 x 70: PTB is this size), converged by the
# protocol's NT-ASGD rule; standard, standard+pretraining, ours-unfrozen, ours and ours with
# only its vector rows frozen; seeds 1 then 2; a KenLM 5-gram on the same tokens; and
# ours-unfrozen scored with --map-unseen-inputs, --map-unseen-outputs and both
# (eval_mapped_*.json in its run folder).
# DIM and HIDDEN choose the model (default 100-d vectors, 2 x 256: what one CPU core can train;
# the paper has 400 and 3 x 1150). GRID: the configurations (default five.toml; pair.toml:
# ours and ours-unfrozen only, what a 15-minute GPU loan can converge). PRECISION: the runs'
# precision, also of those it resumes (default fp32; bf16 where a CPU has AVX-512 BF16 or
# AMX: the CPU queue, ../queue.sh). SWEEP: the sweep folder (default sweep.DIMd; the CPU queue trains
# into sweep-cpu.100d, so that a GPU machine, which gets this tree without its checkpoints,
# never meets a CPU run half done). TIMES=N (2-8): the LM text grown N times, as the paper's
# Table 6 grows it (data/pydocs-xN: data_scripts/grow_pydocs.py; the same valid/test and
# vectors, the folders suffixed .xN). The same command resumes. Run from the repo root.
set -euo pipefail
source experiments/converged/common.sh
E=experiments/paper-regime
TIMES=${TIMES:-1}
case $TIMES in 1) X= C=data/pydocs ;; [2-8]) X=.x$TIMES C=data/pydocs-x$TIMES ;;
  *) echo "TIMES=$TIMES: must be 1-8" >&2; exit 2 ;; esac
DIM=${DIM:-100} HIDDEN=${HIDDEN:-256} GRID=${GRID:-$E/five.toml}
PRECISION=${PRECISION:-fp32} SWEEP=$E/${SWEEP:-sweep.${DIM}d$X}
V=vectors/pylibs+pydocs.${DIM}d.txt
[ -f data/pydocs/train.txt ] || { echo "run make data-pydocs first" >&2; exit 1; }
if [ ! -f $V ]; then   # (a GPU machine gets the vectors made here: tools/gpu/pack.sh)
  [ -f data/pylibs.txt ] || { echo "run make data-pydocs first" >&2; exit 1; }
  # one maker at a time: queue.sh's two instances both arrive here. All in-domain text: the
  # pretraining text and the 1x LM text, which hold every grown corpus's text too
  ( flock 9; [ -f $V ] || $LM embed data/pylibs.txt data/pydocs/train.txt --out $V --dim $DIM \
      --threads 1 ) 9> $V.lock
fi
# the inputs the configurations share, made by one of ../queue.sh's two instances at a time
exec 8> "${TMPDIR:-/tmp}/lmlow-prepare.lock"; flock 8
[ $TIMES = 1 ] || [ -f $C/BUILD.json ] || \
  ( flock 9; ${PY:-.venv/bin/python} data_scripts/grow_pydocs.py --times $TIMES ) 9> $C.lock
[ -f $E/stats.${DIM}d$X.md ] || { $LM stats $C --embeddings $V --extend-vocab --pretrain data/pylibs.txt \
    > $E/stats.${DIM}d$X.md.tmp && mv $E/stats.${DIM}d$X.md.tmp $E/stats.${DIM}d$X.md; }
[ -f $E/kenlm5.${DIM}d$X/summary.json ] || \
  $LM ngram $C --order 5 --embeddings $V --extend-vocab --out $E/kenlm5.${DIM}d$X --quiet
# a run folder restored without its checkpoint (a new checkout keeps a run's untracked files,
# not its ignored last.pt: 2026-11-29) cannot resume, and lmlow sweep refuses it rather than
# delete its metrics.jsonl; its record moves to lost-checkpoints/DATE/ (commit it) and the run
# trains again. A run being trained holds last.pt from before its first update: never moved.
${PY:-.venv/bin/python} - "$SWEEP" "$E/lost-checkpoints/$(date -u +%F)" <<'PY'
import shutil, sys
from pathlib import Path
from lmlow.rundir import RunDir
sweep, lost = map(Path, sys.argv[1:])
for folder in sorted(sweep.glob("*.seed*")) if sweep.is_dir() else ():
    run = RunDir(folder)
    if folder.is_dir() and not folder.is_symlink() and not run.locked_by() \
            and (held := run.lost_checkpoint()):
        lost.mkdir(parents=True, exist_ok=True)
        if (lost / folder.name).exists():
            sys.exit(f"{folder}: lost its last.pt, and {lost / folder.name} exists; move one away")
        shutil.move(str(folder), str(lost / folder.name))
        print(f"run.sh: {folder} held {held} but no last.pt: moved to {lost / folder.name}; "
              "it trains again")
PY
flock -u 8
# seed by seed; TOGETHER=1 puts every seed in one sweep (a GPU trains JOBS=10 runs at once)
groups=${SEEDS:-1 2}; [ -n "${TOGETHER:-}" ] && groups=$(echo $groups | tr ' ' ',')
for seeds in $groups; do
  $LM sweep $C --grid "$GRID" --extend-vocab --embeddings $V --seeds $seeds --jobs "$JOBS" \
      --out "$SWEEP" --preset paper --emb-size $DIM --hidden-size $HIDDEN --layers 2 \
      "${PAPER_CONVERGE[@]}" --precision "$PRECISION"
  # (none finished yet when the other instance of ../queue.sh holds every run still to do)
  if compgen -G "$SWEEP/*/summary.json" > /dev/null; then
    $LM report "$SWEEP" --baseline $E/kenlm5.${DIM}d$X --wait
  fi
  # the maps on the trained-input model, while its best.pt is here (model files do not come
  # back from a GPU machine, nor go into git), named as lmlow.rundir.evaluation_name names
  # them: experiments/freezing/mapped-rows.md, ../claims.py. One of ../queue.sh's two
  # instances at a time (lock 8): both wrote one .tmp file, and the second's mv failed and
  # ended its queue (2026-12-03)
  flock 8
  for r in "$SWEEP"/ours-unfrozen.seed*; do
    [ -f $r/summary.json ] || continue
    for m in "mapped:--map-unseen-inputs" "mapped_outputs:--map-unseen-outputs" \
             "mapped_both:--map-unseen-inputs --map-unseen-outputs"; do
      for split in valid test; do
        f=$r/eval_${m%%:*}_$split.json
        [ -f $f ] && continue
        # ${m#*:}: the flags, split into words on purpose
        $LM eval $r --split $split ${m#*:} --json > $f.tmp || { rm -f $f.tmp; exit 1; }
        mv $f.tmp $f
      done
    done
  done
  flock -u 8
done
