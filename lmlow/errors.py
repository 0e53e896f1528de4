"""The one exception type users see: the CLI prints its message as one line, no traceback;
and how a command hears SIGINT and SIGTERM."""
import signal
from contextlib import contextmanager


class LmlowError(Exception):
    """A problem with the user's input or environment, explained in one line."""


class Interrupted(LmlowError):
    """A command stopped by a signal after saving what it had (a training's ``last.pt``, a
    sweep's running trainings); ``exit_code`` is 128 + the signal's number."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


class Terminated(BaseException):
    """SIGTERM, raised where the command is, so its cleanup runs (temporary files removed,
    child programs killed) as for Ctrl-C; not an Exception, so nothing swallows it."""


_stop_requested = False


def request_stop() -> None:
    """Remember that the process was asked to stop, then raise :class:`Terminated`. Python can
    run a signal handler where an exception is only printed and dropped (a weak-reference
    callback during an import), so the request is also kept: :func:`check_stop` refuses every
    later commit of a file, and the command still ends as terminated."""
    global _stop_requested
    _stop_requested = True
    raise Terminated()


def check_stop() -> None:
    """Called before a result is renamed into place: a stopped command commits nothing."""
    if _stop_requested:
        raise Terminated()


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
