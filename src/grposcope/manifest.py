"""Manifests: the size and sha256 of every file grposcope wrote into a folder, so that a damaged file is found
before it is used, and so that grposcope deletes only what it wrote.

Checkpoints, the final model (`output_dir/model`) and the embedded model's converted cache carry one
(`manifest.json`; the cache keeps it in its marker file). A folder is checked against it before it is loaded
(`problem`), and removed file by file from it (`remove_written`): anything else in the folder stays.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"


def describe(folder: Path, skip: tuple[str, ...] = (MANIFEST,)) -> dict[str, dict[str, Any]]:
    """{file name: {"size", "sha256"}} of every file directly in `folder` except `skip`."""
    return {p.name: {"size": p.stat().st_size, "sha256": sha256(p)}
            for p in sorted(folder.iterdir()) if p.is_file() and p.name not in skip}


def write(folder: Path, **fields: Any) -> None:
    """Writes `folder/manifest.json` describing every other file there, plus `fields` (e.g. format, kind)."""
    (folder / MANIFEST).write_text(json.dumps({**fields, "files": describe(folder)}, indent=2) + "\n")


def read(folder: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(the manifest, None), or (None, why it cannot be read)."""
    try:
        data = json.loads((folder / MANIFEST).read_text())
    except FileNotFoundError:
        return None, f"no {MANIFEST}"
    except (OSError, ValueError) as err:
        return None, f"unreadable {MANIFEST} ({err})"
    if not isinstance(data, dict) or not isinstance(data.get("files"), dict):
        return None, f"{MANIFEST} lists no files"
    return data, None


def problem(folder: Path, files: dict[str, dict[str, Any]]) -> str | None:
    """None when every file of `files` (a manifest's "files") is in `folder` with its size and checksum;
    otherwise what is wrong with the first one that is not."""
    for name, expected in files.items():
        try:
            found = _file_problem(folder / name, name, expected)
        except FileNotFoundError:  # removed after the check found it (another process cleaning the folder)
            found = f"{name} is missing"
        except OSError as err:
            found = f"{name} cannot be read ({err.strerror or err})"
        if found is not None:
            return found
    return None


def _file_problem(path: Path, name: str, expected: dict[str, Any]) -> str | None:
    if not path.is_file():
        return f"{name} is missing"
    size = path.stat().st_size
    if size != expected["size"]:
        return f"{name} has {size} bytes, {expected['size']} were written (truncated?)"
    if sha256(path) != expected["sha256"]:
        return f"{name} does not match its checksum (corrupted)"
    return None


def remove_written(folder: Path) -> list[str]:
    """Deletes the files `folder`'s manifest lists, then the manifest, then the folder if nothing else is in
    it; returns the names of what stays (everything, when there is no readable manifest: then nothing in it
    is known to be grposcope's)."""
    data, _ = read(folder)
    if data is None:
        return sorted(p.name for p in folder.iterdir())
    for name in [*data["files"], MANIFEST]:
        path = folder / name
        if path.is_file() and path.parent == folder:  # a listed name cannot reach outside the folder
            path.unlink()
    rest = sorted(p.name for p in folder.iterdir())
    if not rest:
        folder.rmdir()
    return rest


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fsync(path: str | os.PathLike[str]) -> None:
    """Flushes a file (or a folder's entries) to disk, so that a rename never exposes unwritten data."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
