"""Running the external estimators lmlow builds on (Stanford GloVe, KenLM): finding the
program and turning its failure into one line that quotes the program's own message."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

from lmlow.errors import LmlowError


def find_program(name: str, build_hint: str) -> str:
    """A program from the venv's bin/ (where the build scripts put it), else PATH."""
    local = Path(sys.prefix) / "bin" / name
    found = str(local) if os.access(local, os.X_OK) else shutil.which(name)
    if not found:
        raise LmlowError(f"{name} not found in {local.parent} or on PATH; {build_hint}")
    return found


def last_line(stderr: str) -> str:
    """The last non-blank line of a program's log (progress bars' carriage returns and
    cursor codes split lines too)."""
    lines = [ln.strip() for ln in re.split(r"[\r\n]|\x1b\[\d*G", stderr) if ln.strip()]
    return lines[-1] if lines else ""


def ended(returncode: int, rebuild: str = "") -> str:
    """How a program ended, in words: ``exit status N``, or the signal that killed it. SIGILL
    is an instruction this CPU lacks: a program compiled for another CPU (GloVe is built with
    -march=native, so a build shared by a cluster's newer and older nodes, or a checkout moved
    to another machine, dies so); ``rebuild`` says how to build it for this one."""
    import signal
    if returncode >= 0:
        return f"exit status {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    if -returncode == getattr(signal, "SIGILL", 4):
        return ("killed by SIGILL, an instruction this CPU does not have: it was compiled for "
                f"another CPU{'; ' + rebuild if rebuild else ''}")
    return f"killed by {name}"


def die_with_parent() -> None:
    """For ``preexec_fn``: the child gets SIGKILL when lmlow dies, however it dies (kill -9
    included), so no estimator runs on as an orphan writing into a folder lmlow gave up.
    Linux's PR_SET_PDEATHSIG; elsewhere nothing (the child then outlives a killed lmlow)."""
    try:
        import ctypes
        import signal
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)       # PR_SET_PDEATHSIG = 1
    except (OSError, AttributeError):
        pass


def run_program(cmd: list, what: str, message: Callable[[str], str] = last_line,
                check: bool = True, rebuild: str = "") -> subprocess.CompletedProcess:
    """Run ``cmd`` capturing its output. With ``check``, a non-zero exit raises a one-line
    error: ``what`` failed, with ``message(stderr)`` (the program's own explanation), or for a
    program killed by a signal, which one (:func:`ended`; ``rebuild``: how to rebuild it). The child
    dies with lmlow (:func:`die_with_parent`); if lmlow is interrupted (SIGINT, or SIGTERM
    through the CLI's handler) the child is killed before the exception goes on."""
    done = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, errors="replace", preexec_fn=die_with_parent)
    if check and done.returncode != 0:
        said = message(done.stderr)
        if done.returncode < 0:
            said = ended(done.returncode, rebuild) + (f" (its last words: {said})" if said else "")
        raise LmlowError(f"{what} failed: {said or ended(done.returncode)}")
    return done
