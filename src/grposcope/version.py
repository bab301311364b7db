"""grposcope's version, read from the package metadata (or the source tree's pyproject.toml): a leaf module, so
that what records the version (the evaluation's results file) need not import the package root, which sits on
top of every layer (it re-exports the trainer)."""

from __future__ import annotations


def package_version() -> str:
    """pyproject.toml's version, its one source: as installed (the package metadata pip recorded from it), or,
    from a source tree that was never installed (PYTHONPATH=src), read from the pyproject.toml beside src/;
    "0+unknown" when neither exists."""
    import re
    from importlib.metadata import PackageNotFoundError, version
    from pathlib import Path

    try:
        return version("grposcope")
    except PackageNotFoundError:
        pass
    pyproject = Path(__file__).resolve().parents[2] / "pyproject.toml"
    if pyproject.is_file():
        table = re.search(r"^\[project\]$(.*?)(?:^\[|\Z)", pyproject.read_text(), re.M | re.S)  # to the next table
        if table and re.search(r'^name = "grposcope"$', table[1], re.M):
            line = re.search(r'^version = "([^"]+)"$', table[1], re.M)
            if line:
                return line[1]
    return "0+unknown"
