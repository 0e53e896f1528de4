#!/usr/bin/env bash
# Reference runs for "behaviour unchanged" checks across a refactor: the same small trainings,
# evaluations, scores and samples with the lmlow code in CODE_DIR (e.g. a `git worktree` of the
# old commit), written to OUT. Run it for the old and the new code, then compare the two OUTs
# (metrics rows, *.json, *.jsonl and the weights of last.pt; only timings may differ).
# The old code is imported with `python -S` so that the editable install does not shadow it.
# Usage: tools/reference_runs.sh CODE_DIR OUT      (from the repo root, after `make install`)
set -euo pipefail
CODE=$(cd "$1" && pwd); OUT=$2; mkdir -p "$OUT"; OUT=$(cd "$OUT" && pwd)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SITE=$(echo "$ROOT"/.venv/lib/python3*/site-packages)
export PYTHONPATH=$CODE:$SITE OMP_NUM_THREADS=1 LMLOW_CACHE_DIR=$OUT/cache PATH=$ROOT/.venv/bin:$PATH
PY="$ROOT/.venv/bin/python -S"
LM="$PY -m lmlow.cli"
C=$ROOT/corpora/pydocs-mini
V=$OUT/vec50.txt
[ -f "$V" ] || $PY -c "
from lmlow.glove import GloveConfig, train_glove, save_vectors
kv, _ = train_glove(['$C/pretrain.txt.gz'], GloveConfig(dim=50, epochs=5, threads=1), show_progress=False)
save_vectors(kv, '$V')"
$LM train $C --out $OUT/tiny --preset tiny --max-steps 120 --eval-every 40 --threads 1 --quiet
$LM train $C --out $OUT/ours --preset small --tie no --freeze-input --init glove,glove-output,unigram \
   --embeddings $V --max-steps 60 --eval-every 30 --threads 1 --track-frequency --quiet
$LM ngram $C --order 5 --out $OUT/kn5 --quiet
for r in tiny ours kn5; do
  for s in valid test; do $LM eval $OUT/$r --split $s --json > $OUT/$r.eval.$s.json; done
done
$LM eval $OUT/tiny --reset-lines --json > $OUT/tiny.eval.reset.json
$LM eval $OUT/ours --interpolate $OUT/kn5 --json > $OUT/interp.json
head -5 $C/test.txt > $OUT/sents.txt
$LM score $OUT/ours $OUT/sents.txt > $OUT/ours.score.jsonl
$LM score $OUT/kn5 $OUT/sents.txt > $OUT/kn5.score.jsonl
$LM generate $OUT/ours --checkpoint last --words 20 --samples 2 --seed 3 --json > $OUT/gen.jsonl
echo "reference runs written to $OUT"
