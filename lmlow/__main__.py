"""``python -m lmlow``: the command line, as torchrun starts it (``torchrun ... -m lmlow train``)."""
import sys

from lmlow.cli import main

sys.exit(main())
