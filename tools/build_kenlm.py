#!/usr/bin/env python3
"""Build KenLM's estimator ``lmplz``, ``build_binary`` and ``query`` into the venv's bin/.

No wheel and no Debian package ships these programs (the ``kenlm`` wheel only queries), but the
PyPI source archive kenlm==0.3.0 holds the whole C++ tree, so it is compiled here with cmake
(about 80 s on 2 cores). Idempotent: a marker file in the venv records a finished build. When a
build tool or header is missing, one line names the Debian packages to install and the exit
status is 1 (``tools/apt_deps.sh`` installs them when run as root).

Usage: python tools/build_kenlm.py [--force]   (run with the venv's python; `make install` does)
"""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _sdist import fetch_sdist  # noqa: E402

PACKAGE, VERSION = "kenlm", "0.3.0"
SHA256 = "c4628bb9fb63c8a6f9240035b8b037385cfc404cb72e933cf48878291edac1e8"
PROGRAMS = ("lmplz", "build_binary", "query")
BIN = Path(sys.prefix) / "bin"
MARKER = Path(sys.prefix) / f".kenlm-bin-{VERSION}"
DEBIAN_PACKAGES = ("build-essential cmake libboost-program-options-dev libboost-system-dev "
                   "libboost-thread-dev libboost-test-dev zlib1g-dev libbz2-dev liblzma-dev")
# Headers KenLM's cmake build needs; compiled as a one-line check before the 80-second build.
HEADERS = ("boost/program_options.hpp", "boost/thread.hpp", "boost/system/error_code.hpp",
           "boost/test/unit_test.hpp", "zlib.h", "bzlib.h", "lzma.h")


def missing_prerequisites() -> list[str]:
    """Build tools not on PATH and headers the C++ compiler cannot find."""
    missing = [t for t in ("cmake", "make", "c++") if shutil.which(t) is None]
    if "c++" in missing:
        return missing
    for header in HEADERS:
        probe = subprocess.run(["c++", "-fsyntax-only", "-x", "c++", "-"],
                               input=f"#include <{header}>\n", capture_output=True, text=True)
        if probe.returncode != 0:
            missing.append(header)
    return missing


def run(*cmd: str) -> None:
    """Run quietly; on failure, show the tail of the output (the compiler's error)."""
    done = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if done.returncode != 0:
        print("\n".join(done.stdout.splitlines()[-30:]), file=sys.stderr)
        raise RuntimeError(f"{cmd[0]} {cmd[1]} exited with status {done.returncode}")


def build(jobs: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        src = fetch_sdist(PACKAGE, VERSION, SHA256, Path(tmp))
        out = Path(tmp) / "build"
        run("cmake", "-S", str(src), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release",
            "-DKENLM_MAX_ORDER=6", "-DCMAKE_CXX_FLAGS=-Wno-deprecated-declarations")
        run("cmake", "--build", str(out), "--target", *PROGRAMS, f"-j{jobs}")
        BIN.mkdir(parents=True, exist_ok=True)
        for name in PROGRAMS:
            shutil.copy2(out / "bin" / name, BIN / name)


def main(argv: list[str]) -> int:
    if MARKER.exists() and "--force" not in argv and all((BIN / p).exists() for p in PROGRAMS):
        return 0
    missing = missing_prerequisites()
    if missing:
        print(f"build_kenlm: cannot build KenLM, missing {', '.join(missing)}; install the Debian "
              f"packages: apt-get install {DEBIAN_PACKAGES}", file=sys.stderr)
        return 1
    start = time.time()
    try:
        build(jobs=min(2, os.cpu_count() or 1))
    except (OSError, RuntimeError) as e:
        print(f"build_kenlm: building KenLM {VERSION} failed ({e})", file=sys.stderr)
        return 1
    MARKER.write_text(f"{VERSION}\n")
    print(f"build_kenlm: KenLM {VERSION} {', '.join(PROGRAMS)} -> {BIN} "
          f"({time.time() - start:.0f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
