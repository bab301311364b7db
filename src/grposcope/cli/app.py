"""The Typer app every command registers on, and what the commands share: the errors they report as one line,
and the logging set-up."""

from __future__ import annotations

import logging
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import typer
from typer.core import TyperCommand, TyperGroup

from ..errors import UserError, missing_extra
from ..terminal import terminal_safe

try:  # typer >= 0.20 carries its own copy of click; older releases use click itself
    from typer._click.exceptions import ClickException
except ImportError:  # pragma: no cover - the pinned typer has it
    from click.exceptions import ClickException  # type: ignore[assignment]  # typer's vendored click: same class

ERROR_CHARS = 2_000  # what one error line quotes at most: a message can quote a whole value or sample


class _OneLineUsageErrors(TyperGroup):
    """Typer's group, with its usage errors (a missing option, a value of the wrong type, an unknown option, an
    unreadable path) as one `error:` line naming the option, what it takes and an example, as every other
    error of the CLI is, instead of Typer's boxed panel."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        args = both_spellings(self, sys.argv[1:] if args is None else list(args))
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            code = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except ClickException as err:
            typer.secho(f"error: {usage_error_line(err, sys.argv[1:] if args is None else list(args))}", fg="red",
                        err=True)
            sys.exit(err.exit_code)
        except typer.Abort:
            typer.echo("Aborted!", err=True)
            sys.exit(1)
        except ImportError as err:  # an optional dependency a command met: the extra to install, in one line
            line = missing_extra(err)
            if line is None:
                raise
            typer.secho(f"error: {line}", fg="red", err=True)
            sys.exit(INPUT_ERROR)
        sys.exit(code if isinstance(code, int) else 0)  # a command's typer.Exit(n) comes back as n


def both_spellings(group: Any, args: list[str]) -> list[str]:
    """`args` with each `--an-option` the invoked command declares as `--an_option` (or the other way) spelled
    as declared: every option answers to both, as TRL's and transformers' parsers take them. The help shows
    the declared spelling only. An old spelling (RENAMED) is taken with one `note:` line naming the new one."""
    command = group.commands.get(args[0]) if args else None
    if command is None:
        return args
    known = {name for param in command.params for name in (*getattr(param, "opts", ()),
                                                           *getattr(param, "secondary_opts", ()))}
    # declared only for an old spelling whose values the new one reads otherwise (simulate --sampler_options)
    hidden = {name for param in command.params if getattr(param, "hidden", False) for name in param.opts}
    out = list(args[:1])
    for i, arg in enumerate(args[1:], 1):
        if arg == "--":  # what follows is not options
            return out + list(args[i:])
        name, eq, value = arg.partition("=")
        if name.startswith("--") and name not in known:
            for other in ("--" + name[2:].replace("-", "_"), "--" + name[2:].replace("_", "-")):
                if other in known:
                    name = other
                    break
        if name in RENAMED and RENAMED[name] in known and (name not in known or name in hidden):
            typer.secho(f"note: {name} is now {RENAMED_AS.get(name, RENAMED[name])}; {name} still works, and "
                        "will go in a later version", err=True)
            name = name if name in known else RENAMED[name]
        out.append(name + eq + value)
    return out


# Old option -> its name now, one vocabulary across commands: report, probe and sweep had --out; simulate had
# --estimator, --sampler_options and --estimator_options where train has --advantage_estimator and *_kwargs.
RENAMED = {"--out": "--output", "--estimator": "--advantage_estimator", "--sampler_options": "--sampler_kwargs",
           "--estimator_options": "--advantage_estimator_kwargs"}
# what the note says where the new spelling also reads its values otherwise (key=value pairs -> flags, JSON)
RENAMED_AS = {
    old: f"a flag per option, as in grposcope train (e.g. {example}), and {new} '{{json}}' for a plug-in's other "
         "keyword arguments"
    for old, new, example in (("--sampler_options", "--sampler_kwargs", "--exit_rule pos"),
                              ("--estimator_options", "--advantage_estimator_kwargs", "--virtual_sample_alpha 0.5"))}


def usage_error_line(err: Any, args: Sequence[str] = ()) -> str:
    """`grposcope eval: --model is required: A checkpoint folder ...; e.g. --model output/run/model`: the
    command, the option, what was wrong, what it takes (its help's first sentence) and an example (from the
    command's own examples, else its default)."""
    ctx = getattr(err, "ctx", None)
    # an option missing its value is found before the command's context exists: name it from the line
    path = ctx.command_path if ctx is not None else " ".join(["grposcope", *args[:1]]) if args and \
        not args[0].startswith("-") else "grposcope"
    where = f"{path}: "
    param = getattr(err, "param", None)
    message = err.format_message() if hasattr(err, "format_message") else str(err)
    if param is None:
        help_hint = f"see {path} --help"
        return _bounded(f"{where}{message.rstrip('.')}; {help_hint}")
    name = (param.opts or [param.name])[0] if getattr(param, "param_type_name", "") == "option" else \
        (param.name or "argument").upper()
    takes = _first_sentence(getattr(param, "help", None) or "")
    if type(err).__name__ == "MissingParameter":
        problem = f"{name} is required"
    else:
        problem = re.sub(r"^Invalid value for '([^']+)': ", r"\1: ", message).rstrip(".")
        problem = problem if name in problem or name.lower() in problem.lower() else f"{name}: {problem}"
        given = _given(args, name)
        problem += f" (got {given!r})" if given is not None else ""
    example = _example(ctx, param, name)
    parts = [f"{where}{problem}"] + ([f"it takes {takes}"] if takes else []) + ([f"e.g. {example}"] if example
                                                                                else [])
    return _bounded("; ".join(parts))


def _given(args: Sequence[str], name: str) -> str | None:
    """The value the command line gave `name` (`--steps 1e12` or `--steps=1e12`), to quote it back."""
    for i, arg in enumerate(args):
        if arg == name and i + 1 < len(args):
            return args[i + 1]
        if arg.startswith(f"{name}="):
            return arg[len(name) + 1:]
    return None


def _first_sentence(text: str) -> str:
    text = " ".join(text.split())
    sentence = re.split(r"(?<!e\.g)(?<!i\.e)\.\s+(?=[A-Z])", text, maxsplit=1)[0].rstrip(".")
    return sentence[:1].lower() + sentence[1:]


def _example(ctx: Any, param: Any, name: str) -> str:
    """A line of the command's help that uses the option (its examples), else the option with its default."""
    help_text = getattr(getattr(ctx, "command", None), "help", None) or ""
    for line in help_text.splitlines():
        line = line.strip()
        if line.startswith("grposcope") and f"{name} " in f"{line} ":
            return line
    given = re.search(r"\be\.g\. ([^\s,;)]+)", getattr(param, "help", None) or "")
    if given:  # the help's own example value: "A checkpoint folder (e.g. output/run/checkpoint-20)"
        return f"{name} {given.group(1).rstrip('.')}"
    default = getattr(param, "default", None)
    if getattr(param, "param_type_name", "") == "option" and not (default is None or default is False
                                                                  or default in ("", ())):
        return f"{name} {default}"
    return ""


def _bounded(text: str, limit: int = ERROR_CHARS) -> str:
    """At most `limit` characters, the cut said: an error quoting a huge value stays one readable line."""
    text = str(text)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text):,} characters in all)"


app = typer.Typer(cls=_OneLineUsageErrors, add_completion=False, no_args_is_help=False,
                  help="Measure and fix advantage collapse in GRPO.")

# Reported as `error: <message>` and exit 2: the project's own errors, bad values and files. Anything else is a
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


# Exit codes, the same for every command (docs/usage.md, "Exit codes"): 0 done; 1 a finding at or above
# `diagnose --fail_on` (or a flagged verifier, a failed sweep run); 2 a usage or input error (click's own usage
# errors exit 2 too); 128 + N ended by signal N.
INPUT_ERROR = 2


def fail(err: BaseException) -> typer.Exit:
    """Prints `error: <message>` to stderr (a missing optional dependency: the extra that installs it); raise the
    returned Exit (exit code 2: INPUT_ERROR)."""
    message = missing_extra(err) or err  # a message can quote a sample or a file
    typer.secho(f"error: {_bounded(terminal_safe(message))}", fg="red", err=True)
    return typer.Exit(INPUT_ERROR)


def wide_console(width: int = 120, stderr: bool = False) -> Any:
    """A rich console for tables: the terminal's width in a terminal; `width` columns in a pipe, a log file or
    a test, where rich's default of 80 columns would cut the numbers, each line written without the spaces rich
    pads it with to that width (a CI log or a file diffed line by line should not carry them). `stderr`: print
    there (stdout holds JSON)."""
    from rich.console import Console

    console = Console(stderr=stderr)
    if console.is_terminal:
        return console
    from typing import IO, cast

    return Console(width=width, file=cast(IO[str], _Unpadded(sys.stderr if stderr else sys.stdout)))


class _Unpadded:
    """A text stream that writes each line with its trailing spaces dropped (a line split across writes is held
    until its end comes, or until flush)."""

    def __init__(self, out: Any) -> None:
        self.out, self.held = out, ""

    def write(self, text: str) -> int:
        lines = (self.held + text).split("\n")
        self.held = lines.pop()
        if lines:
            self.out.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        if self.held:
            self.out.write(self.held.rstrip(" "))
            self.held = ""
        self.out.flush()

    def isatty(self) -> bool:
        return False


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


def lazy_epilog(render: Callable[[], str]) -> type[TyperCommand]:
    """A command class whose --help ends with `render()`, called only when help is shown (the component
    options' lists import the registries, and torch)."""

    class Command(TyperCommand):
        @property
        def epilog(self) -> str:
            return render()

        @epilog.setter
        def epilog(self, value: Any) -> None:
            pass

    return Command
