"""The one exception type users see: the CLI prints its message as one line, no traceback."""


class LmlowError(Exception):
    """A problem with the user's input or environment, explained in one line."""
