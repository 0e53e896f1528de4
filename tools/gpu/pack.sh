#!/usr/bin/env bash
# Build the folder .gpu/ that a GPU machine without a package registry needs (the device
# tool's machines: torch, numpy and pytest are there; gensim, spaCy and GloVe are not): gensim
# and smart_open for Python 3.12 with gensim's 31 MB of test data left out, the test suite's
# spaCy corpus and GloVe vectors (tools/prebuilt_fixtures.py), PTB, and, for the paper regime,
# data/pydocs and its vectors, compressed. About 20 MB, under the device's 64 MiB with the repo.
# Run from the repo root after `make install data-ptb data-pydocs` and the paper regime's
# vectors (experiments/paper-regime/run.sh makes them); .gpu/ is git-ignored by this script.
# Then run tools/gpu/batch.sh there (its header says how).
set -euo pipefail
PY=.venv/bin/python
G=.gpu
X="$(git rev-parse --git-common-dir)/info/exclude"
grep -qx '/.gpu/' "$X" 2>/dev/null || echo '/.gpu/' >> "$X"
# the CPU queue's paper-regime checkpoints and inputs are untracked, not ignored (.gitignore: so
# that a new checkout brings them back), and would take the working tree over the device's
# 64 MiB; the inputs travel in .gpu/, compressed
for p in '/experiments/paper-regime/sweep-cpu.100d/*/*.pt' /data/pydocs/ /data/pylibs.txt \
         /vectors/pylibs+pydocs.100d.txt; do
  set -- ${p#/}   # the glob, expanded: left as it is when nothing matches
  [ -e "$1" ] || continue
  grep -qxF "$p" "$X" 2>/dev/null || echo "$p" >> "$X"
  echo "pack: $p excluded in $X for the device calls; delete that line when the loan ends," \
       "or a new checkout comes without it" >&2
done
rm -rf $G && mkdir -p $G
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$PY -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 -d "$tmp/whl" \
    "$(grep -i '^gensim==' requirements.lock)" "$(grep -i '^smart.open==' requirements.lock)"
mkdir "$tmp/site"
for w in "$tmp"/whl/*.whl; do unzip -q -o "$w" -d "$tmp/site"; done
rm -rf "$tmp/site/gensim/test"
find "$tmp/site" \( -name '*.c' -o -name '*.cpp' -o -name '*.pyx' -o -name '*.pxd' \) -delete
tar cJf $G/site.tar.xz -C "$tmp/site" .
$PY tools/prebuilt_fixtures.py $G/fixtures > /dev/null
tar czf $G/ptb.tgz data/ptb
V=vectors/pylibs+pydocs.100d.txt
if [ -f $V ]; then
  # with the grown LM text of the paper regime's other columns where made (TIMES=N run.sh)
  tar czf $G/pydocs.tgz data/pydocs $(ls -d data/pydocs-x[2-8] 2>/dev/null)
  xz -T2 -6 -c $V > $G/vectors.txt.xz
else
  echo "pack: no $V (experiments/paper-regime/run.sh makes it): the paper regime is not packed" >&2
fi
du -sh $G
