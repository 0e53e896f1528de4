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
# what .gitignore keeps untracked rather than ignored (its "!" lines: the CPU queue's
# paper-regime checkpoints and inputs, so that a new checkout brings them back) would take the
# working tree over the device's 64 MiB; the inputs travel in .gpu/, compressed. $X cannot hide
# them (a "!" in .gitignore outranks it); a .gitignore in each one's top folder can (a deeper
# file outranks a higher one), and hides itself, so that a new checkout does not bring it back
MARK="# written by tools/gpu/pack.sh for a device loan: delete this file when the loan ends"
sed -n 's/^!//p' .gitignore | while read -r p; do   # read as written: each a pattern
  p=${p#/}
  set -- $p   # the glob, expanded: left as it is when nothing matches
  [ -e "$1" ] || continue
  f=${p%%/*}/.gitignore
  if [ -L "$f" ] || { [ -e "$f" ] && [ "$(head -n 1 "$f")" != "$MARK" ]; }; then
    echo "pack: $f is not pack.sh's: hide /${p#*/} in it from device calls by hand" >&2
    exit 1
  fi
  [ -e "$f" ] || printf '%s\n/.gitignore\n' "$MARK" > "$f"
  grep -qxF "/${p#*/}" "$f" || echo "/${p#*/}" >> "$f"
  echo "pack: $p hidden from device calls by $f; delete that file when the loan ends, or a" \
       "new checkout comes without it" >&2
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
