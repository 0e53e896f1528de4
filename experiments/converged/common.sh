# Settings shared by every converged experiment (sourced by each run.sh): one protocol,
# written down once. See experiments/README.md, "Protocol".
LM=${LM:-.venv/bin/lmlow}
JOBS=${JOBS:-2}                      # runs at a time; each gets one thread (--threads 1)
MINI=corpora/pydocs-mini
# The LM text: the first quarter of the mini corpus's training pages (2,508 lines, 60,440
# words), its valid/test splits unchanged. A quarter, because the whole tables then converge
# in the machine time we had (2 cores); the pretraining text stays 0.78M words, 13x the LM text.
Q=data/pydocs-mini-q
VEC=vectors/pydocs-mini.100d.txt     # GloVe on the mini corpus's pretraining text
# The model: the `small` preset's 2-layer AWD-LSTM and Adam, at 100-d embeddings and 256
# hidden units so that a run converges in minutes on one core, with AWD-LSTM's own
# regularisation (Merity et al.'s dropouts and weight drop, as the paper used them): on 60k
# training words the small preset's lighter dropouts overfit within 4 epochs.
MODEL=(--preset small --emb-size 100 --hidden-size 256
       --dropout 0.4 --dropouth 0.3 --dropouti 0.65 --dropoute 0.1 --wdrop 0.5)
# Convergence: validate every epoch, halve the learning rate after an epoch without a new
# best, stop after 3 such epochs in a row; 80 epochs at most (a run that stops there is not
# converged, and the report says so).
CONVERGE=(--schedule plateau --gamma 0.5 --patience 3 --max-epochs 80 --threads 1)
# The paper's recipe (issue 24, experiments/recipe/): Merity et al.'s SGD at rate 30 with
# NT-ASGD (averaging once 5 epochs bring no improvement on the best of 5 epochs before), AR 2,
# TAR 1, weight decay 1.2e-6, clipping 0.25 (`--preset paper`), at the protocol's model size
# (2 x 256 units, 100-d embeddings, the same dropouts as MODEL).
PAPER=(--preset paper --emb-size 100 --hidden-size 256 --layers 2)
# Batch and BPTT: experiments/recipe's search on `standard` (seed 1) chose batch 20, BPTT 70
# (320.9 valid ppl, against 335.1-336.8 for batch 10 or BPTT 35; rate 30 as the paper).
RECIPE=(--batch-size 20 --bptt 70)
# Convergence under NT-ASGD: no rate schedule (the averaging is the schedule); stop after 10
# epochs that together lower the best validation perplexity by less than 0.3% (the averaged
# weights keep creeping down by ~0.1 perplexity an epoch for a hundred epochs; the search's
# best run ends 0.4% above its 90-epoch best under this rule); 300 epochs at most. The
# precision is pinned (fp32): `auto` would take bf16 on a CPU with AMX or on an AMD CPU with
# AVX-512 BF16 and mix precisions within a table across sessions. (CONVERGE, the Adam tables',
# is not: they are complete, all in fp32, and `lmlow report` warns if a table mixes precisions.)
PAPER_CONVERGE=(--schedule none --nonmono 5 --patience 10 --min-improvement 0.003 --precision fp32
                --max-epochs 300 --threads 1)
# Two run.sh at once (../queue.sh started twice on a bare checkout) both arrive at the shared
# inputs: each is made under a lock, by whichever comes first (without it the second one's mv
# failed and its queue ended, 2026-11-27).
quarter() {
  [ -f $Q/test.txt ] && return
  mkdir -p "$(dirname $Q)"
  ( flock 9; [ -f $Q/test.txt ] && exit 0; rm -rf $Q.tmp
    mkdir -p $Q.tmp && head -n 2508 $MINI/train.txt > $Q.tmp/train.txt
    cp $MINI/valid.txt $MINI/test.txt $Q.tmp/ && mv $Q.tmp $Q ) 9> $Q.lock
}
# The vectors every technical table used are committed (converged/vectors/): GloVe with more
# than one thread is not deterministic, so the command below (how they were made, 2 threads)
# would not give these exact values again. Restored from the committed copy when missing.
VEC_COMMITTED=experiments/converged/vectors/$(basename $VEC).gz
vectors() {
  [ -f "$VEC" ] && return
  mkdir -p "$(dirname "$VEC")"
  ( flock 9; [ -f "$VEC" ] && exit 0
    if [ -f $VEC_COMMITTED ]; then gzip -dc $VEC_COMMITTED > "$VEC.tmp" && mv "$VEC.tmp" "$VEC"
    else $LM embed $MINI/pretrain.txt.gz --out "$VEC" --dim 100 --epochs 25; fi ) 9> "$VEC.lock"
}
