"""`grposcope train`: the quickstart preset, a YAML config, and any GRPOConfig option as --name value."""

from __future__ import annotations

import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Optional

import typer
import typer.core

from .app import USER_ERRORS, _console_logging, app, fail, lazy_epilog
from .options import coerce_all, parse_overrides, read_yaml


def _train_help() -> str:
    """What --help lists after the options: every component's flags."""
    from ..trainer.options import options_help

    return options_help()


@app.command(cls=lazy_epilog(_train_help), context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def train(
    ctx: typer.Context,
    config: Optional[Path] = typer.Option(None, "--config", help="A YAML file of GRPOConfig options."),
    preset_name: Optional[str] = typer.Option(None, "--preset", help="A named preset (default with no arguments: "
                                              "quickstart)."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the newest complete checkpoint in output_dir."),
) -> None:
    """Train with GRPO. Any GRPOConfig option can be given as --name value (see docs/usage.md)."""
    from ..presets import preset
    from ..trainer import GRPOConfig, GRPOTrainer

    _console_logging()
    args = None
    with _stop_on_signals():
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
        except USER_ERRORS as err:
            exit_ = fail(err)
            if not _says_its_own_way_on(err):
                _say_how_to_resume(args)
            raise exit_ from None
        except KeyboardInterrupt:
            raise _stopped("interrupted (Ctrl-C)", args, signal.SIGINT) from None
        except _Stopped as stop:
            raise _stopped(f"stopped by {stop.signal.name}", args, stop.signal) from None


class _Stopped(BaseException):
    """SIGTERM (a job scheduler, `kill`, a sweep ending a run) or SIGHUP (the terminal closed) during a run: it
    ends as Ctrl-C does. A BaseException, so that no `except Exception` on the way takes it for an error."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signal = signal.Signals(signum)


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise _Stopped in the run (the main thread) instead of ending the process without a
    word. The first stop signal makes the next ones (Ctrl-C too) do nothing, so that the run's files are
    closed and the way to resume is printed; the handlers from before come back at the end."""
    kinds = [getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]

    def stop(signum: int, frame: Any) -> None:
        for kind in [*kinds, signal.SIGINT]:
            signal.signal(kind, lambda *_: None)  # not SIG_IGN: a process started later would inherit it
        raise _Stopped(signum)

    if threading.current_thread() is not threading.main_thread():  # signal.signal works in the main thread only
        yield
        return
    previous = {kind: signal.getsignal(kind) for kind in [*kinds, signal.SIGINT]}  # Ctrl-C: as it was
    for kind in kinds:
        signal.signal(kind, stop)
    try:
        yield
    finally:
        for kind, handler in previous.items():
            signal.signal(kind, handler)


def _stopped(line: str, args: Any, signum: int) -> typer.Exit:
    """What Ctrl-C, SIGTERM and SIGHUP all print: why the run stopped, its last checkpoint, how to resume."""
    typer.secho(line, fg="red", err=True)
    _say_how_to_resume(args, interrupted=True)
    return typer.Exit(128 + signum)  # as a shell reports a process ended by the signal: 130 for Ctrl-C


def _says_its_own_way_on(err: BaseException) -> bool:
    """A folder in use (its checkpoints are another live run's, not this one's), or a checkpoint that cannot
    be resumed from (--resume is what failed): the error says what to do, and a --resume line would not."""
    from ..trainer.checkpoint import CheckpointError
    from ..trainer.folder_lock import FolderInUseError

    return isinstance(err, (FolderInUseError, CheckpointError))


def _say_how_to_resume(args: Any, interrupted: bool = False) -> None:
    """After a failed or interrupted run: where its last checkpoint is and the command that continues it, so
    that no step done so far is lost."""
    if args is None:
        return
    from ..trainer.run_folder import latest_checkpoint

    last = latest_checkpoint(args.output_dir)
    if last is not None:
        how = "continue it with" if interrupted else "once fixed, continue it with"
        typer.echo(f"the run's last checkpoint is {last}; {how}: {_resume_command()}", err=True)
    elif interrupted:
        from pathlib import Path

        metrics = Path(args.output_dir) / "metrics.jsonl"
        steps = sum(1 for _ in metrics.open()) if metrics.is_file() else 0
        done = f"the {steps} step(s) done are logged in {metrics}" if steps else "no step had finished"
        typer.echo(f"no checkpoint was written yet (one every save_steps={args.save_steps} steps); {done}",
                   err=True)


def _resume_command() -> str:
    """This command line with --resume added: what continues the run."""
    import shlex
    import sys

    argv = sys.argv[1:]
    return shlex.join(["grposcope", *argv, *([] if "--resume" in argv else ["--resume"])])
