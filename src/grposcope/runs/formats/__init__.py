"""The log formats a run can be read from: one module a format, each registering one `LogFormat` here.

A format is three things behind one interface:
- `claims(path)`: a content check ("is this mine?"), cheap (the first lines, a folder's listing), never by the
  file's name alone: a trainer state saved as `training_logs.json` is TRL's, a CSV whose step column is
  `update` is a table;
- `read(path, name, options)`: the run, its steps streamed where the format allows;
- `keys`: what it knows, said in the docs and in the error that lists the formats.

The registry is a dict and a decorator, as every plug-in family's (core/registry.py): `FORMATS[name]`, and
`claiming(path)` asks each format in the order of its priority, the most specific first (a folder of grposcope's
or TRL's before a file of any step metrics, a console log last: any text holds a line that looks like one).
The registry finds the formats itself, as the plug-in families' registries do: its first lookup imports every
module of this package (core.registry's `entry_modules`), and each registers its formats. A new format is one
module here, whose `@register` gives its `priority`, plus a test; nothing lists the module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable

from ...core.registry import entry_modules

if TYPE_CHECKING:
    from ..read_options import ReadOptions
    from ..record import Run

# Where each format is asked, a lower priority first (each format's `register(..., priority=N)`): the most specific
# first, the catch-alls last (any JSONL or CSV with a step column is a table, any text a console log, and a folder
# is joined from the formats above).


@dataclass(frozen=True)
class LogFormat:
    """One log format: its name (`Run.source`, `run_kind`), what it is in a few words, its content check, its
    reader, and the keys it knows."""

    name: str
    what: str
    claims: Callable[[Path], bool]
    read: Callable[[Path, str, "ReadOptions"], "Run"]
    keys: str = ""
    priority: float = 0.0  # where `claiming` asks it: a lower one first


FORMATS: dict[str, LogFormat] = {}
_loaded = False


def register(name: str, what: str, claims: Callable[[Path], bool], keys: str = "", *, priority: float) -> Callable:
    """Decorates a format's reader, with its content check and its place among the formats asked (`priority`,
    a lower one first: the most specific formats first, grposcope's own at 10, a folder of logs last at 90)."""
    place = priority

    def wrap(read: Callable) -> Callable:
        if name in FORMATS:
            raise ValueError(f"log format {name!r} is registered twice")
        FORMATS[name] = LogFormat(name, what, claims, read, keys, place)
        return read

    return wrap


def formats() -> list[LogFormat]:
    """Every format, in the order they are asked: by priority, whichever module was imported first (importing
    every module of this package the first time: each registers its formats)."""
    global _loaded
    if not _loaded:
        for module in entry_modules(__name__):
            importlib.import_module(module)
        _loaded = True
    return sorted(FORMATS.values(), key=lambda f: (f.priority, f.name))


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
