"""The Typer app every command registers on, and what the commands share: the errors they report as one line,
and the logging set-up."""

from __future__ import annotations

import logging
import sys
import warnings
from pathlib import Path
from typing import Any

import typer

from ..errors import UserError
from ..terminal import terminal_safe

app = typer.Typer(add_completion=False, no_args_is_help=False, help="Measure and fix advantage collapse in GRPO.")

# Reported as `error: <message>` and exit 1: the project's own errors, bad values and files. Anything else is a
# bug in grposcope (or in a reward function, reported as a UserError) and keeps its traceback.
USER_ERRORS = (UserError, ValueError, OSError)


@app.callback(invoke_without_command=True)
def main(ctx: typer.Context, version: bool = typer.Option(False, "--version", help="Print the version.")) -> None:
    if version:
        from .. import __version__  # the package metadata's (pyproject.toml's) version

        typer.echo(f"grposcope {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


def fail(err: BaseException) -> typer.Exit:
    """Prints `error: <message>` to stderr; raise the returned Exit (exit code 1)."""
    typer.secho(f"error: {terminal_safe(err)}", fg="red", err=True)  # a message can quote a sample or a file
    return typer.Exit(1)


def wide_console(width: int = 120) -> Any:
    """A rich console for tables: the terminal's width in a terminal; `width` columns in a pipe, a log file or
    a test, where rich's default of 80 columns would cut the numbers."""
    from rich.console import Console

    console = Console()
    return console if console.is_terminal else Console(width=width)


def _console_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    if warnings.formatwarning is not _format_warning:
        _python_format[:] = [warnings.formatwarning]
        warnings.formatwarning = _format_warning


_PACKAGE = str(Path(__file__).resolve().parents[1])
_python_format: list[Any] = []


def _format_warning(message, category, filename, lineno, line=None) -> str:
    """grposcope's own warnings (notes on what a run set aside or skipped) as one `warning: ...` line; the
    source line Python adds means nothing to a user. Other libraries' warnings keep Python's format."""
    if str(Path(filename).resolve()).startswith(_PACKAGE):
        return f"warning: {terminal_safe(message)}\n"
    return _python_format[0](message, category, filename, lineno, line)

