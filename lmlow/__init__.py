"""lmlow: low-compute word-level LSTM language models (AWD-LSTM, in-domain GloVe, KenLM)."""
from lmlow.errors import LmlowError

__version__ = "0.1.0"
__all__ = ["LmlowError", "__version__", "load", "interpolate", "Config"]


def __getattr__(name):  # torch is imported only when a model is needed
    if name == "load":
        from lmlow.runs import load
        return load
    if name == "interpolate":   # interpolate(load(A), load(B), weight=None): a mixed scorer
        from lmlow.runs import InterpolatedRun
        return InterpolatedRun
    if name == "Config":
        from lmlow.config import Config
        return Config
    raise AttributeError(name)
