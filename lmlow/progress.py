"""Progress bars that count tokens and show tokens/s; silent when stderr is not a terminal."""
from __future__ import annotations

import sys
from contextlib import contextmanager


class _TokenBar:
    """Batches updates so that a per-line call costs next to nothing."""

    def __init__(self, bar):
        self.bar, self.pending = bar, 0

    def tokens(self, n: int) -> None:
        if self.bar is None:
            return
        self.pending += n
        if self.pending >= 50_000:
            self.bar.update(self.pending)
            self.pending = 0

    def flush(self) -> None:
        if self.bar is not None and self.pending:
            self.bar.update(self.pending)
            self.pending = 0


def shown(enabled: bool = True) -> bool:
    """Bars go to a terminal only: logs and CI output stay readable."""
    return enabled and sys.stderr.isatty()


def epochs_bar(iterable, desc: str, enabled: bool = True):
    from tqdm import tqdm          # imported when a bar is made: opening a corpus stays quick

    return tqdm(iterable, desc=desc, disable=not shown(enabled), leave=False, dynamic_ncols=True)


@contextmanager
def progress(desc: str, enabled: bool = True, total: int | None = None, unit: str = "tok"):
    """A token-counting progress bar for streaming work (``unit``: what it counts)."""
    from tqdm import tqdm

    show = shown(enabled)
    bar = tqdm(desc=desc, total=total, unit=unit, unit_scale=True, leave=False,
               dynamic_ncols=True) if show else None
    tb = _TokenBar(bar)
    try:
        yield tb
    finally:
        tb.flush()
        if bar is not None:
            bar.close()
