"""The two runs the scoring benchmarks measure (predict_speed.py, rerank_speed.py): a run of the
``preset``'s size on the bundled corpus (``lmlow train --max-epochs 0``: the untrained model,
whose cost is the trained one's) and a KenLM 5-gram of it, in ``work`` (a temporary folder,
removed afterwards, unless given)."""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORPUS = ROOT / "corpora" / "pydocs-mini"
sys.path.insert(0, str(ROOT))


@contextmanager
def bundled_runs(preset: str, work: Path | None = None):
    """Yields the LSTM and the 5-gram as scorers (``lmlow.load``)."""
    import lmlow

    folder = work or Path(tempfile.mkdtemp(prefix="lmlow-bench-"))
    try:
        lmlow.fit(CORPUS, folder / "lstm", preset=preset, max_epochs=0, quiet=True)
        lmlow.fit_ngram(CORPUS, folder / "kn5", order=5, quiet=True)
        yield lmlow.load(folder / "lstm"), lmlow.load(folder / "kn5")
    finally:
        if work is None:
            shutil.rmtree(folder, ignore_errors=True)


def arguments(doc: str, lines: int) -> argparse.ArgumentParser:
    """The options both benchmarks take: --preset, --lines (``lines`` by default), --threads,
    --work."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--preset", default="small")
    ap.add_argument("--lines", type=int, default=lines)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--work", type=Path, help="folder for the two runs (default: a temporary one)")
    return ap
