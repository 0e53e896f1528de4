"""lmlow: low-compute word-level LSTM language models (AWD-LSTM, in-domain GloVe, KenLM)."""
from lmlow.errors import LmlowError

__version__ = "0.1.0"
__all__ = ["LmlowError", "__version__"]
