"""The one exception type users see: the CLI prints its message as one line, no traceback."""


from pathlib import Path


class LmlowError(Exception):
    """A problem with the user's input or environment, explained in one line."""


def refuse_overwrite(paths, force: bool) -> None:
    """Nothing the user made is overwritten unless they said --force."""
    if force:
        return
    for p in map(Path, paths):
        if p.exists():
            raise LmlowError(f"{p} exists; pass --force to overwrite it")
