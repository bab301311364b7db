"""One run per output_dir: an advisory lock on `output_dir/.grposcope.lock`, held from before the run writes
anything until it ends.

Two runs writing into one folder interleave their metrics.jsonl lines, and a `--resume` started beside a live
run would remove the checkpoint that run is still saving (its hidden `.tmp-checkpoint-N` folder). The lock is
the operating system's (`flock`), so it goes away with the process that holds it: a killed run never leaves a
stale lock for the next one to trip over. The holder writes its PID into the file for the refusal to name.

Only training takes it. `grposcope eval` of a checkpoint reads a finished folder and may run while the run
goes on. The file is never deleted: removing it while another process waits to open it would let two runs
lock two different files of the same name.
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import RunError

LOCK_FILE = ".grposcope.lock"

try:
    import fcntl
except ImportError:  # Windows: no flock; the folder is not guarded there (documented in docs/reliability.md)
    fcntl = None


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
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
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


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None
