"""lmlow: low-compute word-level LSTM language models (AWD-LSTM, in-domain GloVe, KenLM)."""
import os

from lmlow.errors import LmlowError

# OpenMP threads that wait for work by spinning make two trainings on one machine slow each
# other 4x (benchmarks/contention.py: 0.24x of the solo speed each); sleeping waiters keep
# 0.67x, at a cost alone (22% of the solo speed in that run, BENCHMARKS.md). Only a default,
# and only if torch is not loaded yet: set OMP_WAIT_POLICY=ACTIVE for a machine of your own.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
__all__ = ["LmlowError", "__version__", "fit", "resume", "load", "interpolate", "Config",
           "embed", "fit_ngram", "fit_sweep", "sweep_status", "cancel_sweep", "results"]


def __getattr__(name):  # torch is imported only when a model is needed
    if name in ("fit", "resume"):   # fit(corpus, out, preset=None, **settings): lmlow train
        from lmlow.train import fit, resume
        return fit if name == "fit" else resume
    if name == "load":
        from lmlow.runs import load
        return load
    if name == "interpolate":   # interpolate(load(A), load(B), weight=None, reset_lines=False,
        #                            corpus=None): a mixed scorer (InterpolatedRun says how w is tuned)
        from lmlow.runs import InterpolatedRun
        return InterpolatedRun
    if name in ("embed", "fit_ngram", "fit_sweep", "sweep_status", "cancel_sweep",
                "results"):   # the other commands: api.py
        from lmlow import api
        return getattr(api, name)
    if name == "Config":
        from lmlow.config import Config
        return Config
    raise AttributeError(name)
