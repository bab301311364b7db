"""The `grposcope` command.

    grposcope train                                   # the quickstart preset
    grposcope train --config run.yaml --num_generations 16 --use_avspo true
"""

from __future__ import annotations

import logging
import sys
import typing
from pathlib import Path
from typing import Any, Optional

import typer

from . import __version__

app = typer.Typer(add_completion=False, no_args_is_help=False, help="Measure and fix advantage collapse in GRPO.")

_BOOL = {"true": True, "yes": True, "1": True, "on": True, "false": False, "no": False, "0": False, "off": False}


@app.callback(invoke_without_command=True)
def main(ctx: typer.Context, version: bool = typer.Option(False, "--version", help="Print the version.")) -> None:
    if version:
        typer.echo(f"grposcope {__version__}")
        raise typer.Exit()
    if ctx.invoked_subcommand is None:
        typer.echo(ctx.get_help())


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(None, "--config", help="A YAML file of GRPOConfig options."),
    preset_name: Optional[str] = typer.Option(None, "--preset", help="A named preset (default with no arguments: quickstart)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest complete checkpoint in output_dir."),
) -> None:
    """Train with GRPO. Any GRPOConfig option can be given as --name value (see docs/usage.md)."""
    from .presets import preset
    from .trainer import GRPOConfig, GRPOTrainer

    _console_logging()
    args = None
    try:
        overrides = parse_overrides(ctx.args)
        values: dict[str, Any] = {}
        if preset_name or (config is None and not overrides):
            values.update(preset(preset_name or "quickstart"))
        if config is not None:
            values.update(read_yaml(config))
        values.update(overrides)
        if resume:
            values["resume_from_checkpoint"] = True
        args = GRPOConfig.from_dict(coerce_all(values))
        GRPOTrainer(args=args).train()
    except (ValueError, TypeError, FileNotFoundError, RuntimeError, FloatingPointError) as err:
        typer.secho(f"error: {err}", fg="red", err=True)
        _say_how_to_resume(args)
        raise typer.Exit(1) from None


def _say_how_to_resume(args: Any) -> None:
    """After a failed run: where its last checkpoint is, so that no step done so far is lost."""
    if args is None:
        return
    from .trainer.checkpoint import latest_checkpoint

    last = latest_checkpoint(args.output_dir)
    if last is not None:
        typer.echo(f"the run's last checkpoint is {last}; once fixed, continue it by adding --resume", err=True)


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of GRPOConfig options, got {type(data).__name__}")
    return data


def parse_overrides(argv: list[str]) -> dict[str, str]:
    """`--name value`, `--name=value`, and a bare `--flag` (true), as TRL's scripts take them."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--") or token == "--":
            raise ValueError(f"unexpected argument {token!r}: options are given as --name value")
        name, eq, value = token[2:].partition("=")
        name = name.replace("-", "_")
        if not eq:
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value, i = argv[i + 1], i + 1
            else:
                value = "true"
        out[name] = value
        i += 1
    return out


def coerce_all(values: dict[str, Any]) -> dict[str, Any]:
    from .trainer import GRPOConfig

    hints = typing.get_type_hints(GRPOConfig)
    return {k: coerce(k, v, hints[k]) if k in hints and isinstance(v, str) else v for k, v in values.items()}


def coerce(name: str, raw: str, hint: Any) -> Any:
    """Turns a command-line string into the type the config field declares."""
    options = typing.get_args(hint) or (hint,)
    origins = [typing.get_origin(kind) or kind for kind in options]
    if type(None) in origins and raw.lower() in ("none", "null"):
        return None
    if bool in origins and raw.lower() in _BOOL:
        return _BOOL[raw.lower()]
    if list in origins and ("," in raw or str not in origins):
        return [item.strip() for item in raw.strip("[]").split(",") if item.strip()]
    for kind in (int, float):
        if kind in origins:
            try:
                return kind(raw)
            except ValueError:
                pass
    if str in origins:
        return raw
    raise ValueError(f"--{name}: cannot read {raw!r} as {hint}")


def _console_logging() -> None:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s", stream=sys.stderr)


def run() -> None:  # the console-script entry point
    app()


if __name__ == "__main__":
    run()
