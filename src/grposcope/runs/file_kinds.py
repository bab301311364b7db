"""What stands where a run's log file belongs, checked before it is opened: opening a FIFO waits for a writer for
ever, a folder or a symbolic link loop fails with an errno that names neither. Each is named in one line with its
kind; and a log that is not UTF-8 is named by its file, line and column (files.read_utf8's error). A file or folder
this user may not read is named with the fix (`unreadable`), whichever reader met it."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import Callable, TypeVar

from ..files import read_utf8

T = TypeVar("T")
KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
         (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))
FIX = "a run's logs are regular files; put the file the run wrote there, or move this out of the folder"
GIVEN_FIX = "point it at the run's log file or output folder, or give that itself (ls -l shows where a link points)"


def not_a_file(path: Path, fix: str = FIX) -> str | None:
    """Why `path` cannot be read as a log file, in one line; None for a regular file (or a link to one) and for
    nothing at all (the callers say what is missing). Nothing is opened: the kind comes from stat. `fix`: what to
    do, GIVEN_FIX for a path the user gave (not a file found in a run's folder)."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return f"{path} is a symbolic link to nothing, not a file: {fix}" if os.path.islink(path) else None
    except PermissionError as err:  # a folder on the way that this user may not enter: that folder is the fix
        return str(unreadable(PermissionError(err.errno, err.strerror, os.fspath(path.parent))))
    except OSError as err:
        if err.errno == errno.ELOOP:
            return f"{path} is a symbolic link loop, not a file: {fix}"
        return f"{path} cannot be looked at ({err.strerror}): {fix}"
    if stat.S_ISREG(mode):
        return None
    kind = next((name for test, name in KINDS if test(mode)), "not a regular file")
    return f"{path} is {kind}, not a file: {FIX}"


def check_file(path: Path) -> None:
    """Raises ValueError naming what `path` is when it is there but is no regular file (see `not_a_file`)."""
    problem = not_a_file(path)
    if problem is not None:
        raise ValueError(problem)


def check_folder(path: Path) -> None:
    """Raises `unreadable`'s line for a folder this user may not list (no r) or enter (no x): every reader would
    meet it as a bare `[Errno 13]` on some file inside, or take the folder for one that holds no run."""
    try:
        os.listdir(path)
        os.stat(os.path.join(path, os.curdir))
    except PermissionError as err:
        raise unreadable(PermissionError(err.errno, err.strerror, os.fspath(path))) from None


def read_utf8_log(read: Callable[[Path], T], path: Path) -> T:
    """`read(path)`; a file that is not UTF-8 named by its line and column, with the fix, instead of the codec's
    byte offset."""
    try:
        return read(path)
    except UnicodeDecodeError:
        read_utf8(path)  # raises the ValueError that names the file, the line and the fix
        raise


def unreadable(err: BaseException) -> BaseException:
    """A refused read (`[Errno 13] Permission denied: 'run/metrics.jsonl'`, which names no fix) as one line
    naming the file, why and the fix; any other error as it is. The outputs of report and forecast are checked
    before the work and written through files.atomic_output, which names a refused write itself: a refusal that
    still names a file is a read."""
    if isinstance(err, PermissionError) and err.filename is not None:
        name = os.fspath(err.filename)
        return PermissionError(f"{name} cannot be read ({err.strerror or 'Permission denied'}); let this user read "
                               f"it (e.g. chmod a+rX {name}), or run grposcope as the user who wrote it")
    return err
