"""The log formats a run can be read from: one module a format, each registering one `LogFormat` here.

A format is three things behind one interface:
- `claims(path)`: a content check ("is this mine?"), cheap (the first lines, a folder's listing), never by the
  file's name alone: a trainer state saved as `training_logs.json` is TRL's, a CSV whose step column is
  `update` is a table;
- `read(path, name, options)`: the run, its steps streamed where the format allows;
- `keys`: what it knows, said in the docs and in the error that lists the formats.

The registry is a dict and a decorator, as every plug-in family's (core/registry.py): `FORMATS[name]`, and
`claiming(path)` asks each format in registration order, the most specific first (a folder of grposcope's or
TRL's before a file of any step metrics, a console log last: any text holds a line that looks like one).
A new format is one module in `MODULES` plus a test.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

if TYPE_CHECKING:
    from ..load import ReadOptions
    from ..record import Run

# the modules that register a format, in the order their formats are asked
MODULES = ("grposcope_log", "trl", "verl", "wandb", "tensorboard", "table", "console", "folder")


@dataclass(frozen=True)
class LogFormat:
    """One log format: its name (`Run.source`, `run_kind`), what it is in a few words, its content check, its
    reader, and the keys it knows."""

    name: str
    what: str
    claims: Callable[[Path], bool]
    read: Callable[[Path, str, "ReadOptions"], "Run"]
    keys: str = ""


FORMATS: dict[str, LogFormat] = {}
_loaded = False


def register(name: str, what: str, claims: Callable[[Path], bool], keys: str = "") -> Callable:
    """Decorates a format's reader, with its content check."""

    def wrap(read: Callable) -> Callable:
        if name in FORMATS:
            raise ValueError(f"log format {name!r} is registered twice")
        FORMATS[name] = LogFormat(name, what, claims, read, keys)
        return read

    return wrap


def formats() -> list[LogFormat]:
    """Every format, in the order they are asked: MODULES' order, whichever module was imported first (importing
    them the first time)."""
    global _loaded
    if not _loaded:
        for module in MODULES:
            importlib.import_module(f"{__name__}.{module}")
        _loaded = True
    order = {module: i for i, module in enumerate(MODULES)}
    return sorted(FORMATS.values(), key=lambda f: order.get(f.read.__module__.rpartition(".")[2], len(order)))


def get(name: str) -> LogFormat:
    known = {f.name: f for f in formats()}
    if name not in known:
        raise ValueError(f"unknown log format {name!r}; known: {', '.join(known)}")
    return known[name]


def claiming(path: Path) -> LogFormat | None:
    """The first format whose content check claims `path`, or None."""
    return next((f for f in formats() if f.claims(path)), None)


def described() -> str:
    """The formats in one line each, for the error on a path none claims."""
    return "; ".join(f"{f.what}" for f in formats())
