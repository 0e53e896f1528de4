"""The one exception type users see: the CLI prints its message as one line, no traceback;
and how a command hears SIGINT and SIGTERM."""
import os
import re
import signal
import sys
from contextlib import contextmanager


class LmlowError(Exception):
    """A problem with the user's input or environment, explained in one line; the command
    exits with ``exit_code`` (1 unless a subclass or the raiser says otherwise)."""
    exit_code = 1

    def __init__(self, *args, exit_code: int | None = None):
        super().__init__(*args)
        if exit_code is not None:
            self.exit_code = exit_code


class Said(LmlowError):
    """An ending whose line another process printed (the training processes under
    ``--nproc``, each its own): the command exits with ``exit_code`` and adds no line."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message, exit_code=exit_code)


class Interrupted(LmlowError):
    """A command stopped by a signal after saving what it had (a training's ``last.pt``, a
    sweep's running trainings); ``exit_code`` is 128 + the signal's number."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so its cleanup runs (temporary files removed,
    child programs killed) as for Ctrl-C; not an Exception, so nothing swallows it."""


# torch's CPU allocator ("you tried to allocate 51200000000 bytes"), its CUDA allocator ("Tried
# to allocate 2.00 GiB") and numpy ("Unable to allocate 37.3 GiB for an array ...")
_ALLOCATION = re.compile(r"(?:tried to|unable to) allocate ([0-9.]+ ?(?:bytes|[KMGTP]i?B))", re.I)


def out_of_memory(e: BaseException) -> str | None:
    """One line for an allocation that failed (a model, a batch or a table too large for the
    machine), or None for any other error: torch raises these as RuntimeError (CPU) or
    OutOfMemoryError (CUDA) with a page of allocator detail, numpy as MemoryError."""
    text = str(e)
    gpu = type(e).__name__ == "OutOfMemoryError" or "CUDA out of memory" in text
    if not (gpu or isinstance(e, MemoryError) or "can't allocate memory" in text):
        return None
    found = _ALLOCATION.search(text)
    size = found.group(1) if found else ""
    if size.endswith("bytes"):
        n = int(float(size.split()[0]))
        size = f"{n / 2**40:.1f} TiB" if n >= 2**40 else f"{n / 2**30:.1f} GiB"
    asked = f": could not allocate {size} more" if size else ""
    return (f"out of {'GPU ' if gpu else ''}memory{asked}; a smaller model (--hidden-size, --emb-size, "
            "vocabulary), --batch-size or --eval-batch-size needs less")


def silence_stdout() -> None:
    """Point stdout at /dev/null once its reader has gone (`lmlow stats ... | head`): the
    next print, and Python's flush at exit, would raise BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


_stop_requested = False
_committing = 0         # CommitGroup renames under way: a stop waits for them


def request_stop() -> None:
    """Remember that the process was asked to stop, then raise :class:`Terminated`. Python can
    run a signal handler where an exception is only printed and dropped (a weak-reference
    callback during an import), so the request is also kept: :func:`check_stop` refuses every
    later commit of a file, and the command still ends as terminated. During a
    :class:`CommitGroup`'s renames the request waits until they are all done."""
    global _stop_requested
    _stop_requested = True
    if not _committing:
        raise Terminated()


def check_stop() -> None:
    """Called before a result is renamed into place: a stopped command commits nothing."""
    if _stop_requested and not _committing:
        raise Terminated()


class CommitGroup:
    """Several files renamed into place together (a corpus's three splits and its record, the
    vectors' text and .npz, a report's files): a stop asked for before :meth:`begin` commits
    none of them, one asked for after it waits until the group leaves, so a SIGTERM between two
    renames cannot leave new files beside old ones. Enter it before the files' own
    ``atomic_path`` contexts (so it leaves after their renames) and call :meth:`begin` when
    they are written::

        with CommitGroup() as commit, atomic_path(a) as ta, atomic_path(b) as tb:
            write(ta); write(tb)
            commit.begin()
    """

    def __enter__(self) -> "CommitGroup":
        self.begun = False
        return self

    def begin(self) -> None:
        global _committing
        check_stop()
        _committing += 1
        self.begun = True

    def __exit__(self, kind, *_) -> None:
        global _committing
        if self.begun:
            _committing -= 1
            self.begun = False
            if kind is None:
                check_stop()          # the stop that waited: the command ends as terminated


@contextmanager
def caught_signals(on_signal=None):
    """While inside, SIGINT and SIGTERM only append their number to the list it yields (and
    call ``on_signal()``), for a loop that stops at a safe point: a training after its update,
    a sweep once its trainings saved. The previous handlers come back afterwards; outside the
    main thread signals cannot be caught, and the defaults stay."""
    caught: list[int] = []

    def handler(signum, _frame):
        caught.append(signum)
        if on_signal:
            on_signal()

    previous = {}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            previous[sig] = signal.signal(sig, handler)
    except ValueError:
        pass
    try:
        yield caught
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
