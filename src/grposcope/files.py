"""The files a user hands in or names: text read with an encoding error that says where (YAML configs, JSONL
data), and outputs checked before the work that would write them."""

from __future__ import annotations

import contextlib
import errno
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path


def read_utf8(path: str | os.PathLike[str]) -> str:
    """The file's text; a file that is not UTF-8 raises ValueError naming where the first bad byte is."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        column = err.start - (data.rfind(b"\n", 0, err.start) + 1) + 1
        raise ValueError(
            f"{os.fspath(path)}: line {line}, column {column}: not UTF-8 text (byte 0x{data[err.start]:02x}); "
            "save the file as UTF-8"
        ) from None


def check_output_file(path: str | os.PathLike[str], what: str, overwrite: bool, name: str,
                      inputs: Iterable[str | os.PathLike[str] | None] = ()) -> None:
    """Raises before any work when the output file `path` (named by the option `what`) could not be written
    later, or would replace a file without `overwrite`. A folder is said to be one, with a file in it to name
    (`name`, e.g. the option's default): --overwrite could not replace a folder with a file. Nor is it one of
    the command's `inputs`, or a file already inside an input folder, --overwrite or not: replacing it would
    destroy what the command reads (`grposcope forecast run/probe.jsonl --json run/probe.jsonl`)."""
    check_not_an_input(path, what, inputs)
    check_writable(path, what, name=name)
    if os.path.exists(path) and not overwrite:
        raise FileExistsError(f"{what} {os.fspath(path)} already exists; pass --overwrite to replace it, or choose "
                              f"another {what}")


def check_not_an_input(path: str | os.PathLike[str], what: str, inputs: Iterable[str | os.PathLike[str] | None],
                       inside: bool = False) -> None:
    """Raises when the output `path` is one of `inputs`, or an existing file inside an input folder (with
    `inside`: any path inside one). Paths are compared after links are followed (os.path.realpath, which,
    unlike Path.resolve, does not raise on a link loop)."""
    real = os.path.realpath(path)
    for given in inputs:
        if given is None:
            continue
        given_real = os.path.realpath(given)
        within = os.path.isdir(given_real) and real.startswith(given_real.rstrip(os.sep) + os.sep)
        if real == given_real or (within and (inside or os.path.exists(real))):
            which = "one of the inputs" if real == given_real else f"inside the input {os.fspath(given)}"
            raise ValueError(f"{what} {os.fspath(path)} is {which}, and writing it would destroy what this command "
                             "reads; choose another file")


def check_writable(path: str | os.PathLike[str], what: str, folder: bool = False, name: str | None = None) -> None:
    """Raises before any work when `path` (a file, or with `folder` a folder) could not be written later:
    its nearest existing ancestor must be a folder where a file can be created (tried, then removed), and an
    existing `path` must be of the right kind. A folder given for a file is said to be one; `name`: the file
    in it to suggest."""
    target = os.path.abspath(os.fspath(path))
    if os.path.exists(target):
        kind_ok = os.path.isdir(target) if folder else os.path.isfile(target)
        if not kind_ok and not folder and os.path.isdir(target):
            example = f", e.g. {what} {os.path.join(os.fspath(path), name)}" if name else ""
            raise IsADirectoryError(f"{what} {os.fspath(path)} is a folder; name a file in it{example}")
        if not kind_ok:
            wanted = "a folder" if folder else "a file"
            raise ValueError(f"{what} {os.fspath(path)} exists and is not {wanted}; choose another {what}")
        where = target if folder else os.path.dirname(target)
    else:
        where = os.path.dirname(target)
        while not os.path.exists(where):
            where = os.path.dirname(where)
        if not os.path.isdir(where):
            raise ValueError(f"{what} {os.fspath(path)} cannot be created: {where} is a file, not a folder; "
                             f"choose another {what}")
    try:  # a real file, not os.access: root passes os.access everywhere, and a read-only mount fails only here
        with tempfile.NamedTemporaryFile(dir=where, prefix=".grposcope-probe-"):
            pass
    except OSError as err:
        raise PermissionError(f"{what} {os.fspath(path)} cannot be written: creating a file in {where} fails "
                              f"({err.strerror}); choose another {what}") from None


NO_ROOM = (errno.ENOSPC, errno.EDQUOT)  # a full disk, or a full quota


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], what: str = "") -> Iterator[Path]:
    """Yields a temporary path beside `path` (same suffix, so matplotlib and pandas infer the format) that is
    renamed over `path` when the block ends: a full disk or a kill mid-write leaves the old file or none,
    never a 0-byte one a rerun would refuse as existing. A full disk or a refused write raises one line
    naming `path` (and `what`, the option that named it) and the fix."""
    with _temporary_beside(Path(path), what) as tmp:
        yield tmp
        os.replace(tmp, path)


def write_text_atomic(path: str | os.PathLike[str], text: str, what: str = "") -> None:
    """`text` as UTF-8 into `path` through `atomic_output`."""
    with atomic_output(path, what) as tmp:
        _write_synced(tmp, text)


def write_text_new(path: str | os.PathLike[str], text: str, what: str = "") -> Path:
    """Writes `text` to `path` if no file is there when the write ends, else to the first free
    `<stem>-2<suffix>`, `-3`, ... beside it, and returns the path written. The output was checked before the
    work; this is for a file that appeared during it (two evals given one --output): results that took minutes
    are never thrown away, nor written over another run's. The temporary file is hard-linked to the name, which
    fails when the name is taken, so a check and a write cannot race."""
    target = Path(path)
    with _temporary_beside(target, what) as tmp:
        _write_synced(tmp, text)
        for n in range(1, 1000):
            candidate = target if n == 1 else target.with_name(f"{target.stem}-{n}{target.suffix}")
            try:
                os.link(tmp, candidate)
            except FileExistsError:
                continue
            except OSError as err:
                if err.errno in NO_ROOM:
                    raise
                try:  # a file system without hard links: an exclusive create, then the rename over it
                    os.close(os.open(candidate, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    continue
                os.replace(tmp, candidate)
                return candidate
            tmp.unlink()
            return candidate
    raise FileExistsError(f"{target} and 998 numbered names beside it exist; choose another {what or 'path'}")


def _write_synced(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


@contextlib.contextmanager
def _temporary_beside(target: Path, what: str) -> Iterator[Path]:
    """A temporary file beside `target`, removed unless the block moved it; OSErrors as one line naming
    `target` and the fix."""
    label = f"{what} {target}" if what else str(target)
    target.parent.mkdir(parents=True, exist_ok=True)  # check_writable passed a folder still to be made
    fd, name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=f".tmp{target.suffix}")
    os.close(fd)
    tmp = Path(name)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes it private (0600); an output gets the mode open() gives
    try:
        yield tmp
    except OSError as err:
        if err.errno in NO_ROOM:
            from .errors import DiskFullError

            raise DiskFullError(f"no space left on the disk of {label} ({err.strerror}) while writing it; "
                                f"nothing was written there. Free space on that disk, or choose another "
                                f"{what or 'path'}") from None
        if isinstance(err, PermissionError):
            raise PermissionError(f"{label} cannot be written ({err.strerror}); choose another "
                                  f"{what or 'path'}") from None
        raise
    finally:
        tmp.unlink(missing_ok=True)
