"""One run per output_dir: an advisory lock on `output_dir/.grposcope.lock`, held from before the run writes
anything until it ends.

Two runs writing into one folder interleave their metrics.jsonl lines, and a `--resume` started beside a live
run would remove the checkpoint that run is still saving (its hidden `.tmp-checkpoint-N` folder). The lock is
the operating system's (`flock`), so it goes away with the process that holds it: a killed run never leaves a
stale lock for the next one to trip over. The holder writes its PID into the file for the refusal to name.

Only training takes it. `grposcope eval` of a checkpoint reads a finished folder and may run while the run
goes on. The file is never deleted: removing it while another process waits to open it would let two runs
lock two different files of the same name.

The lock file is only ever a plain file of grposcope's: a symbolic link, a hard link, a folder or a FIFO planted
at its name is refused with the fix, never opened for writing, so the PID cannot land in a file outside the run
(O_NOFOLLOW, then fstat of what was opened, since the name may change between a check and the open).
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

from ..errors import RunError

LOCK_FILE = ".grposcope.lock"

try:
    import fcntl
except ImportError:  # Windows: no flock; the folder is not guarded there (documented in docs/reliability.md)
    fcntl = None  # type: ignore[assignment]  # the module is None where the platform has no flock


class FolderInUseError(RunError):
    """Another live process is training into the same output_dir."""


class FolderLock:
    """`with FolderLock(output_dir):` the body runs as the folder's only writer, or FolderInUseError is raised
    before anything in the folder is touched."""

    def __init__(self, output_dir: str | os.PathLike[str]) -> None:
        self.output_dir = Path(output_dir)
        self._fd: int | None = None

    def acquire(self) -> None:
        if fcntl is None or self._fd is not None:
            return
        self.output_dir.mkdir(parents=True, exist_ok=True)
        path = self.output_dir / LOCK_FILE
        fd = _open_plain_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            who = f"process {holder}" if holder else "another process"
            raise FolderInUseError(
                f"{self.output_dir} is in use: {who} is training into it (it holds {path}); wait for it to end "
                "or stop it, then --resume continues from its last checkpoint; or choose another output_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, f"{os.getpid()}\n".encode())
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __enter__(self) -> FolderLock:
        self.acquire()
        return self

    def __exit__(self, *exc) -> None:
        self.release()


# O_NONBLOCK: opening a FIFO never waits for a writer; O_NOFOLLOW: a link at the name fails with ELOOP.
_OPEN_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)


def _open_plain_file(path: Path) -> int:
    """A descriptor of `path`, created if absent, that is a plain file with no other name; RunError naming
    what is there instead."""
    try:
        fd = os.open(path, _OPEN_FLAGS, 0o644)
    except OSError as err:
        if err.errno not in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EMLINK):
            raise
        raise _not_a_lock_file(path, os.lstat(path)) from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
        os.close(fd)
        raise _not_a_lock_file(path, info)
    return fd


def _not_a_lock_file(path: Path, info: os.stat_result) -> RunError:
    if stat.S_ISLNK(info.st_mode):
        what = f"a symbolic link (to {os.readlink(path)})"
    elif stat.S_ISDIR(info.st_mode):
        what = "a folder"
    elif stat.S_ISREG(info.st_mode):
        what = f"a hard link (one of {info.st_nlink} names of one file)"
    else:
        what = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a socket or a device file"
    link = stat.S_ISLNK(info.st_mode) or stat.S_ISREG(info.st_mode)
    never = "; grposcope never writes through a link, since that writes into the file it points at" if link else ""
    remove = (f"rm -r {path}, after moving away anything in it you keep" if stat.S_ISDIR(info.st_mode)
              else f"rm {path}")
    return RunError(
        f"{path} is {what}, not grposcope's lock file (a plain file holding the PID of the run training into "
        f"{path.parent}){never}; remove it ({remove}) and run again"
    )


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
