"""Writing and reading lmlow's own files safely: the one place that knows how.

Every file lmlow writes goes through a temporary file in the same folder that is renamed over
the target only once it is complete, so a crash, a kill or a full disk never leaves half a
file where a whole one was (the old version survives). Temporary names end in
``.tmp<pid>``, so a stale one is recognisable. JSON is written strictly: NaN and infinities
become ``null``.
"""
from __future__ import annotations

import errno
import json
import math
import os
import shutil
import stat
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from lmlow.errors import CommitGroup, LmlowError, check_stop


# a full disk or quota, a file-size limit, no permission, a read-only file system
WRITE_ERRORS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EACCES, errno.EPERM, errno.EROFS)


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` still runs (this one counts): the owner of a ``.tmpPID`` name or
    a work folder named after its pid, which may be cleared once it is gone."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def temporary_path(path: Path) -> Path:
    """The scratch name beside ``path`` that :func:`atomic_path` writes first."""
    return Path(f"{path}.tmp{os.getpid()}")


def temporaries_of(path: Path) -> list[Path]:
    """Every process's :func:`temporary_path` of ``path`` (``NAME.tmpPID``); the name is
    matched as it is, not as a pattern (``a[1].txt``)."""
    import glob
    path = Path(path)
    return list(path.parent.glob(glob.escape(path.name) + ".tmp[0-9]*"))


def refuse_link_folder(path: Path) -> None:
    """A folder lmlow keeps its files in (a sweep's ``logs``) must not be a symbolic link:
    its files would land where it points."""
    if os.path.islink(path):
        raise LmlowError(f"{path}: a symbolic link where lmlow keeps its own folder; lmlow "
                         "does not write through links: remove it")


def refuse_link(path: Path) -> None:
    """A name lmlow writes in a folder it may not have made must not be a symbolic link (a
    write would go where it points: `.lock -> /etc/passwd`) or anything but a regular file."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):  # its folder is a file: refused as such
        return
    if stat.S_ISLNK(st.st_mode):
        raise LmlowError(f"{path}: a symbolic link where lmlow keeps its own file; lmlow does "
                         "not write through links: remove it")
    if not stat.S_ISREG(st.st_mode):
        raise LmlowError(f"{path}: not a regular file ({kind_of(st)}) where lmlow keeps its own "
                         "file: remove it")


def kind_of(st: os.stat_result) -> str:
    """What a path that is not a regular file is, for a refusal to name (a run folder given
    where a file was expected is a folder, not 'a FIFO, device or folder')."""
    mode = st.st_mode
    return ("a folder" if stat.S_ISDIR(mode) else "a named pipe" if stat.S_ISFIFO(mode)
            else "a socket" if stat.S_ISSOCK(mode) else "a device"
            if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a plain file")


def require_regular(path: Path) -> Path:
    """A file lmlow is about to read must be a regular file (a FIFO would hang the reader)."""
    path = Path(path)
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return path                     # the reader says "no such file" in its own words
    if not stat.S_ISREG(st.st_mode):
        raise LmlowError(f"{path}: not a regular file ({kind_of(st)}); refusing to read it")
    return path


def _fsync(path: Path) -> None:
    """Flush a file's (or a folder's entries') data to the disk."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC | (os.O_DIRECTORY if path.is_dir() else 0))
    try:
        os.fsync(fd)
    except OSError as e:
        if e.errno not in (errno.EINVAL, errno.EROFS):      # a folder some systems cannot sync
            raise
    finally:
        os.close(fd)


def open_own(path: Path, mode: str = "a"):
    """Open a file lmlow owns in a run folder for appending ("a") or locking ("a+") without
    following a symbolic link, and only if it is a regular file: one line otherwise."""
    flags = os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW | os.O_CLOEXEC
    flags |= os.O_RDWR if "+" in mode else os.O_WRONLY
    try:
        fd = os.open(path, flags, 0o644)
    except OSError as e:
        if e.errno == errno.ELOOP:
            refuse_link(path)
        if e.errno in WRITE_ERRORS:
            raise LmlowError(f"{path}: cannot write ({e.strerror})") from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        refuse_link(path)
    return os.fdopen(fd, mode, encoding="utf-8")


@contextmanager
def atomic_path(path: Path, exclusive: bool = False, durable: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path`` in one rename, on
    failure it is removed and ``path`` is untouched. The temporary name is created afresh
    (a link planted under it is removed first, not written through); the rename replaces a
    link at ``path`` itself, never what it points to. Missing folders above ``path`` are
    created, and removed again if the write fails.

    ``exclusive``, for a command that holds its output for hours (``lmlow embed``): the
    temporary is locked (``flock``) while it is held, and a second command whose output is
    the same file is refused in one line, before its own hours of work, not at the end; so is
    a folder that takes no files or a name too long, because the temporary is made first.

    ``durable``, for checkpoints: the temporary's data reach the disk before the rename, and
    the rename before the call returns (``fsync``), so a power loss or a crashed host leaves
    the old file or the new one, never an empty one under the name (a rename's order with the
    data is not kept by every file system: XFS, network and parallel ones)."""
    path = Path(path)
    refuse_special(path)
    tmp = temporary_path(path)
    created = make_folder(path.parent)
    fd = None
    try:
        fd = _create_empty(tmp, path)
        if exclusive:
            _claim(fd, tmp, path)
        else:
            os.close(fd)
            fd = None
        yield tmp
        check_stop()
        if durable:
            _fsync(tmp)
        os.replace(tmp, path)
        if durable:
            _fsync(path.parent)
    except OSError as e:
        if e.errno not in WRITE_ERRORS:
            raise
        raise LmlowError(f"{path}: cannot write ({e.strerror or e})") from None
    finally:
        if fd is not None:
            os.close(fd)                  # releases the flock
        try:
            tmp.unlink(missing_ok=True)
        except OSError:        # a name it could not take (too long) was never created
            pass
        if not os.path.lexists(path):
            remove_if_empty(created)


def _create_empty(tmp: Path, path: Path) -> int:
    """Create ``tmp`` anew, empty (a link planted under its name is removed first), and
    return its descriptor. Any refusal is the output's: a name the file system will not take
    (too long, or in a folder such as /proc that makes no files) says so in one line naming
    ``path``."""
    try:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        return os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                       0o644)
    except OSError as e:
        if e.errno == errno.ENAMETOOLONG and len(os.fsencode(path.name)) <= NAME_MAX:
            extra = len(os.fsencode(tmp.name)) - NAME_MAX
            raise LmlowError(f"{path}: name {extra} bytes too long for the temporary file "
                             f"lmlow writes first (the name + {tmp.name[len(path.name):]}; "
                             f"a name takes at most {NAME_MAX} bytes); shorten it") from None
        raise LmlowError(f"{path}: cannot write ({e.strerror or e})") from None


NAME_MAX = 255          # bytes in one file name on Linux's file systems


def open_fresh(path: Path, mode: str = "wb"):
    """Open ``path`` for writing as a new, empty regular file: for a scratch file lmlow names
    itself in a folder it may not have made, where a link planted under that name would
    otherwise be written through (it is removed first)."""
    return os.fdopen(_create_empty(path, path), mode)


def make_fresh(path: Path) -> Path:
    """``path`` made anew as an empty regular file for an external program to write into
    (lmplz's ARPA, build_binary's model): the program opens what lmlow made, not a link
    planted under the name (removed first)."""
    os.close(_create_empty(path, path))
    return path


def _claim(fd: int, tmp: Path, path: Path) -> None:
    """Lock our temporary ``tmp`` (open as ``fd``), then refuse if another live command holds
    the temporary of the same ``path``. Locking first and looking second means two commands
    that start at the same instant cannot both go on (at worst both stop); a temporary left by
    a killed command holds no lock and does not count."""
    import fcntl
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    for other in temporaries_of(path):
        if other.name == tmp.name:
            continue
        try:
            ofd = os.open(other, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        except OSError:
            continue                      # gone meanwhile, or a link: not a command's temporary
        try:
            fcntl.flock(ofd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            raise LmlowError(f"{path}: another lmlow command is writing it now (its temporary "
                             f"{other.name}); wait for it to end or choose another name") from None
        finally:
            os.close(ofd)
        remove_if_owner_gone([other])     # what a killed command left


def atomic_write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def atomic_write_json(path: Path, obj, indent: int | None = 1) -> None:
    atomic_write_text(path, to_json(obj, indent=indent) + "\n")


def to_json(obj, **kw) -> str:
    """JSON with NaN and infinities written as null (strict JSON readers refuse NaN)."""
    return json.dumps(_clean(obj), **kw)


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    if hasattr(x, "item") and hasattr(x, "dtype") and getattr(x, "shape", None) == ():
        return _clean(x.item())          # numpy scalars
    return x


def read_json(path: Path, rows: bool = False) -> dict | list[dict]:
    """A JSON file lmlow wrote: an object, or with ``rows`` a list of objects (a sweep's plan,
    its jobs, a report's table). A missing, damaged or hand-edited file of another shape is a
    one-line error naming it, not a traceback where a reader first indexes it."""
    path = require_regular(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise LmlowError(f"{path}: no such file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise LmlowError(f"{path}: not valid JSON ({e})") from None
    shaped = (isinstance(data, list) and all(isinstance(r, dict) for r in data) if rows
              else isinstance(data, dict))
    if not shaped:
        want = "a list of JSON objects" if rows else "a JSON object"
        raise LmlowError(f"{path}: not what lmlow writes there ({want}); edited or damaged?")
    return data


def read_jsonl(path: Path, check=None) -> list[dict]:
    """The rows of a JSON-lines file (none if it does not exist); each must be an object, and
    ``check(row)`` returns what is wrong with one (None: nothing), said with its line."""
    path = require_regular(path)
    if not path.exists():
        return []
    rows = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError:
                raise LmlowError(f"{path}:{i}: not a JSON line") from None
            if not isinstance(rows[-1], dict):
                raise LmlowError(f"{path}:{i}: not a JSON object, as every line lmlow writes there is")
            wrong = check(rows[-1]) if check else None
            if wrong:
                raise LmlowError(f"{path}:{i}: {wrong}; damaged or edited?")
    return rows


def append_jsonl(path: Path, row: dict) -> None:
    """Append one row whole or not at all: a write that fails part-way (a full disk) is cut
    back to where it began, so no torn line is left for every later read, and every resume,
    to refuse; the error names the file."""
    data = memoryview((to_json(row) + "\n").encode("utf-8"))
    with open_own(path, "a") as f:              # O_APPEND; written unbuffered below
        fd = f.fileno()
        size = os.fstat(fd).st_size
        try:
            while data:
                data = data[os.write(fd, data):]
        except OSError as e:
            os.ftruncate(fd, size)
            raise LmlowError(f"{path}: cannot write ({e.strerror})") from None


def missing_parents(folder: Path) -> list[Path]:
    """The folders ``mkdir(parents=True)`` would create, deepest first (a failed command
    removes them again if they are still empty)."""
    out = []
    folder = Path(folder)
    while not os.path.lexists(folder):
        out.append(folder)
        folder = folder.parent
    return out


def make_folder(folder: Path) -> list[Path]:
    """Create ``folder`` (and its parents) with a one-line error where that is not possible
    (read-only, full, a file or a dangling link in the way); returns the folders it created."""
    created = check_folder_possible(folder)
    if not created:
        return []
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
    except FileExistsError:                   # something took one of the names meanwhile
        raise not_a_folder(Path(folder)) from None
    except OSError as e:        # any refusal: read-only, full, a name too long, /proc's ENOENT
        remove_if_empty(created)
        raise LmlowError(f"{folder}: cannot create the folder ({e.strerror or e})") from None
    return created


def not_a_folder(path: Path) -> LmlowError:
    """The one line for a name where a folder must be: a symbolic link to nothing (mkdir
    would say "File exists") or something that is not a folder."""
    if os.path.islink(path) and not os.path.exists(path):
        return LmlowError(f"{path}: a symbolic link to {os.readlink(path)}, which does not "
                          "exist; create that folder or choose another output")
    return LmlowError(f"{path}: exists and is not a folder")


def remove_if_empty(folders: list[Path]) -> None:
    """Remove the folders a failed command created, deepest first, if nothing is in them."""
    for d in folders:
        try:
            d.rmdir()
        except OSError:
            pass


def lock_folder(folder: Path, what: Path | None = None, wait: bool = False) -> int:
    """Hold ``flock`` on ``folder`` itself (no lock file is left in it) and return its
    descriptor (closing it releases the lock): two commands writing into one folder cannot
    both write; the second is refused in one line, or with ``wait`` says so and waits for the
    first to end (SIGTERM and Ctrl-C still stop it). The kernel drops the lock of a killed
    process."""
    import fcntl
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        busy = f"{what or folder}: another lmlow command is writing there now"
        if not wait:
            os.close(fd)
            raise LmlowError(f"{busy}; wait for it to end") from None
        print(f"lmlow: {busy}; waiting for it to end", file=sys.stderr, flush=True)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(fd)
            raise
    return fd


STAGE_PREFIX = ".lmlow-stage.tmp"


@contextmanager
def staged_outputs(out: Path, names: list[str], force: bool = False,
                   trusted: bool = True, wait: bool = False,
                   optional: list[str] = ()) -> Iterator[Path]:
    """Write a command's several output files into ``out`` without a partial result: the
    command writes them into a hidden staging folder inside ``out`` (yielded), and only when
    it has finished are they renamed over their final names, one ``rename`` each. A failure,
    Ctrl-C or SIGTERM removes the stage (and any folder it created) and leaves the old files
    as they were; a kill -9 leaves only the stage, reclaimed by the next command once its
    process is gone. The folder is locked (``flock``) meanwhile, and checked again under the
    lock; ``wait``: if another command holds it, wait for it, not refuse. ``trusted=False``
    for a default folder inside a run folder lmlow may not have made: it must not be a
    symbolic link (the outputs would land where it points). ``optional``: files of the same set
    that this command does not write (a plot only some inputs have): an old one is removed
    when the new set is in place, so the folder never holds one command's files beside an
    earlier one's."""
    out = Path(out)
    names = list(names) + [n for n in optional if n not in names]
    targets = check_outputs(out, names, force, trusted)
    created = make_folder(out)
    lock = None
    stage = out / f"{STAGE_PREFIX}{os.getpid()}"
    try:
        lock = lock_folder(out, wait=wait)
        refuse_overwrite(targets, force)      # again, under the lock
        remove_stale_stages(out, names)
        os.mkdir(stage)
        yield stage
        with CommitGroup() as commit:      # all renamed, or (stopped before) none
            commit.begin()
            for n in names:
                if (stage / n).exists():
                    os.replace(stage / n, out / n)
                elif n in optional and os.path.lexists(out / n):
                    os.unlink(out / n)
    except OSError as e:
        if e.errno not in WRITE_ERRORS:
            raise
        raise LmlowError(f"{out}: cannot write ({e.strerror or e})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if lock is not None:
            os.close(lock)
        if created and not any(t.exists() for t in targets):
            remove_if_empty(created)


def check_outputs(out: Path, names: list[str], force: bool = False,
                  trusted: bool = True) -> list[Path]:
    """:func:`staged_outputs`' checks of ``out`` and the files ``names`` in it, which a
    command can make before its work (and its notes), so that a refused output is its one
    line: no link, nothing overwritten without ``force``, a folder that can be made."""
    out = Path(out)
    if not trusted:
        refuse_link_folder(out)
    targets = [out / n for n in names]
    for t in targets:
        refuse_link(t)
    refuse_overwrite(targets, force)
    return targets


def remove_stale_stages(folder: Path, names: list[str] = ()) -> list[Path]:
    """What a killed command left in ``folder`` once its process is gone: its stage and the
    ``NAME.tmpPID`` scratch files of the outputs ``names``."""
    folder = Path(folder)
    found = list(folder.glob(STAGE_PREFIX + "*"))
    found += [p for n in names for p in temporaries_of(folder / n)]
    return remove_if_owner_gone(found)


def remove_if_owner_gone(paths) -> list[Path]:
    """Remove each path named after a process (``NAME.tmpPID`` or ``NAME-PID``) whose process
    no longer runs: what a killed command left, reclaimed by the next one. A link is removed,
    never followed."""
    import re
    gone = []
    for p in map(Path, paths):
        m = re.search(r"(?:\.tmp|-)(\d+)$", p.name)
        if m and not pid_alive(int(m.group(1))):
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            gone.append(p)
    return gone


def file_digest(path: Path) -> str:
    """A file's sha256, read in 4 MiB blocks."""
    import hashlib

    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 22):
            h.update(chunk)
    return h.hexdigest()


def file_fingerprint(path: Path) -> dict:
    """A file's name, size and sha256 (a corpus split, a run's vectors)."""
    path = Path(path)
    return {"file": path.name, "bytes": path.stat().st_size, "sha256": file_digest(path)}


def refuse_compressed(path: Path, flag: str = "--out") -> None:
    """A text output named ``*.gz``: lmlow writes plain text, which every reader of ``.gz``
    (lmlow's own among them) then refuses as not gzip; refused before any work."""
    if Path(path).suffix == ".gz":
        raise LmlowError(f"{flag} {path}: lmlow writes plain text; name it without .gz (gzip "
                         "it afterwards if you like: lmlow reads .gz text)")


def same_file(a: Path, b: Path) -> bool:
    """Whether ``a`` and ``b`` name one file: the same path once links, ``.`` and ``..`` are
    resolved, or the same file on disk (a hard link, another mount of the folder)."""
    if Path(a).resolve() == Path(b).resolve():
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:                         # either missing (or unreadable): not one file
        return False


def refuse_input_as_output(inputs, outputs, flag: str = "--out") -> None:
    """Refuse, before any work, an output that is one of the inputs however it is spelled
    (``./in.txt``, a link to it, the target of an input given as a link): written, it is
    renamed over the file it was read from, so `lmlow embed in.txt --out in.txt --force` left
    vectors where its text had been. ``outputs[0]`` is the flag's own path, the others those
    written beside or inside it (the ``.npz``, a corpus folder's splits), named as such."""
    outputs = [Path(p) for p in outputs]
    for out in outputs:
        for inp in inputs:
            if same_file(out, inp):
                what = "is" if out == outputs[0] else f"writes {out}, which is"
                raise LmlowError(f"{flag} {outputs[0]}: {what} the input {inp}; writing it "
                                 "would replace the text it reads: give another path")


def refuse_overwrite(paths, force: bool) -> None:
    """Nothing the user made is overwritten unless they said --force; and, before any work,
    each path's folder can be made (no file or dangling link where a folder must be)."""
    for p in map(Path, paths):
        refuse_special(p)
        if not force and os.path.lexists(p):      # a dangling link too: the user's
            raise LmlowError(f"{p} exists; pass --force to overwrite it")
        check_folder_possible(p.parent)


def refuse_special(path: Path) -> None:
    """An output lmlow writes to a new file and renames over ``path``: where ``path`` is a
    device, pipe or socket (``--out /dev/null``), the rename would replace the node itself
    (as root, /dev/null becomes a regular file for every program on the machine); where it is
    a folder, the rename fails. A link is replaced, never followed."""
    try:
        mode = os.lstat(path).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return
    if stat.S_ISDIR(mode):               # the rename fails on it (a traceback before)
        raise LmlowError(f"{path}: is a folder, where lmlow writes a file; give a file path")
    if not (stat.S_ISREG(mode) or stat.S_ISLNK(mode)):
        raise LmlowError(f"{path}: a device, pipe or socket; lmlow writes a new file and "
                         "renames it into place, which would replace it: give a file path")


def check_folder_possible(folder: Path) -> list[Path]:
    """Refuse, before any work, a ``folder`` that :func:`make_folder` could not make because
    the first name on its path that exists is not a folder (a file, a dangling link); return
    the folders that making it would create, deepest first."""
    missing = missing_parents(folder)
    base = missing[-1].parent if missing else Path(folder)
    if not os.path.isdir(base):
        raise not_a_folder(base)
    return missing
