"""`grposcope sweep`: a grid of short runs, one folder each, resumable (grposcope/sweep.py; docs/report.md)."""

from __future__ import annotations

import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Optional

import typer

from ..files import check_writable
from .app import USER_ERRORS, _console_logging, app, fail
from .options import coerce_all, parse_overrides, read_yaml


def _list(text: str, flag: str, kind: Callable[[str], Any] = str) -> list[Any]:
    items = [part.strip() for part in text.split(",") if part.strip()]
    try:
        return [kind(item) for item in items]
    except ValueError:
        raise ValueError(f"{flag}: cannot read {text!r} as a comma-separated list of {kind.__name__}s") from None


@app.command("sweep", context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def sweep_command(
    ctx: typer.Context,
    out: Path = typer.Option(..., "--output", "-o", help="Folder of the sweep: one sub-folder per run."),
    backend: str = typer.Option("train", "--backend", help="train: grposcope train on a model (each run a "
                                "child process); simulate: the Bernoulli simulator (seconds per run)."),
    group_sizes: str = typer.Option("4,8", "--group_sizes", help="Group sizes G, comma separated."),
    levels: str = typer.Option("default", "--levels", help="train: arithmetic levels (easy, medium, hard; "
                               "join several with +); simulate: difficulty_mean values (e.g. -2,0,1); "
                               "default: the base options' dataset."),
    estimators: str = typer.Option("grpo", "--estimators", help="Advantage estimators, comma separated."),
    samplers: str = typer.Option("fixed", "--samplers", help="Samplers, comma separated."),
    seeds: str = typer.Option("0", "--seeds", help="Seeds, comma separated."),
    config: Optional[Path] = typer.Option(None, "--config", help="train: a YAML of GRPOConfig options for "
                                          "every run (default: the quickstart preset); simulate: of SimConfig "
                                          "options."),
    max_steps: int = typer.Option(20, "--max_steps", help="Steps of each run."),
    save_steps: int = typer.Option(10, "--save_steps", help="train: a checkpoint every this many steps, "
                                   "so that an interrupted run continues (only the newest is kept)."),
    keep_models: bool = typer.Option(False, "--keep_models", help="train: keep each finished run's model and "
                                     "checkpoints (by default only its logs stay: ~2 GB a run otherwise)."),
    redo_changed: bool = typer.Option(False, "--redo_changed", help="Run again, with these settings, the runs "
                                      "of --output that were done (or checkpointed) with other settings; without "
                                      "it the sweep refuses to mix them."),
) -> None:
    """Run a grid of short runs (group size x level x estimator x sampler x seed), one output folder each.
    Finished runs are skipped and interrupted ones resumed, so the same command continues a sweep; runs done
    with other settings are refused (--redo_changed runs them again). Any further --name value is a GRPOConfig
    option (train) or SimConfig field (simulate) for every run.

    \b
    Examples:
      grposcope sweep --output runs/sweep --group_sizes 4,8,16 --seeds 0,1
      grposcope sweep --output runs/lv --levels easy,medium,hard --max_steps 30
      grposcope sweep --output runs/sim --backend simulate --levels=-3,-1,1
      grposcope report runs/sweep --regress --output runs/sweep_report
    """
    _console_logging()
    try:
        plan = _plan(ctx.args, out, backend, group_sizes, levels, estimators, samplers, seeds, config,
                     max_steps, save_steps)
        redo = _changed_runs(plan, out, backend, redo_changed)
    except USER_ERRORS as err:
        raise fail(err) from None
    try:
        failed = _run_all(plan, out, keep_models, redo)
    except _Stopped as stop:
        typer.secho(f"error: {_stopped_message(stop, plan, out)}", fg="red", err=True)
        raise typer.Exit(128 + stop.signum) from None
    done = sum(1 for _, folder, _ in plan if (folder / "summary.json").is_file())
    typer.echo(f"{done} of {len(plan)} runs done in {out}; see them with: grposcope report {out} --output "
               f"{out}/report" + (" --regress" if done >= 3 else ""))
    if failed:
        typer.secho(f"error: {len(failed)} run(s) failed: " + "; ".join(failed), fg="red", err=True)
        raise typer.Exit(1)


def _plan(extra: list[str], out: Path, backend: str, group_sizes: str, levels: str, estimators: str,
          samplers: str, seeds: str, config: Optional[Path], max_steps: int, save_steps: int) -> list[tuple]:
    """[(point, folder, how to run it)], every run's settings checked before the first starts."""
    from .. import sweep

    if backend not in sweep.BACKENDS:
        raise ValueError(f"--backend must be one of {', '.join(sweep.BACKENDS)}, got {backend!r}")
    for flag, value in (("--max_steps", max_steps), ("--save_steps", save_steps)):
        if value < 1:
            raise ValueError(f"{flag} must be >= 1 (steps), got {value}")
    points = sweep.grid(_list(group_sizes, "--group_sizes", int), _list(levels, "--levels"),
                        _list(estimators, "--estimators"), _list(samplers, "--samplers"),
                        _list(seeds, "--seeds", int))
    base = read_yaml(config) if config is not None else {}
    base.update(parse_overrides(extra))
    check_writable(out, "--output", folder=True)
    names = len({p.sampler for p in points})
    if backend == "simulate":
        base, components = _sim_options(base)
        base["steps"] = max_steps
        return [(p, out / p.name(names), sweep.sim_config(p, _point_options(base, components, p))) for p in points]
    base = coerce_all(base)
    if config is None:
        from ..presets import preset

        base = {**preset("quickstart"), **base}
    base.update(max_steps=max_steps, save_steps=save_steps, save_total_limit=1, overwrite_output_dir=True)
    sweep.check_train_grid(points, base, out)
    return [(p, out / p.name(names), sweep.train_values(p, base, out / p.name(names))) for p in points]


def _sim_options(values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """SimConfig fields from the command line or a YAML, typed, and apart from them the samplers' and
    estimators' options, flags of their own as train takes them (cli/sim_options.py); an unknown name fails
    with the known ones."""
    import typing

    from ..sim.config import SimConfig
    from .options import coerce
    from .sim_options import component_flags

    hints, flags = typing.get_type_hints(SimConfig), component_flags()
    unknown = sorted(set(values) - set(hints) - set(flags))
    if unknown:
        raise ValueError(f"unknown simulator option(s) {unknown}; SimConfig's fields: {', '.join(sorted(hints))}; "
                         "and the samplers' and estimators' options (grposcope simulate --help lists them)")
    fields = {k: coerce(k, v, hints[k]) if isinstance(v, str) else v for k, v in values.items() if k in hints}
    components = {k: coerce(k, v, flags[k]) if isinstance(v, str) else v for k, v in values.items()
                  if k not in hints}
    return fields, components


def _point_options(base: dict[str, Any], components: dict[str, Any], point: Any) -> dict[str, Any]:
    """A run's SimConfig fields: each component option given to the run's sampler or estimator when it takes
    it, or when another entry of its family declares it (the run then says that it is not used, as a train
    run does: components/options.py)."""
    from ..components.families import FAMILIES
    from ..components.options import declared

    options = declared()
    out = {"sampler_options": dict(base.get("sampler_options") or {}),
           "estimator_options": dict(base.get("estimator_options") or {})}
    for key, value in components.items():
        for family, name, field in (("sampler", point.sampler, "sampler_options"),
                                    ("advantage_estimator", point.estimator, "estimator_options")):
            if FAMILIES[family].takes(name, key) or (key in options and options[key].family == family):
                out[field][key] = value
    return {**base, **out}


def _changed_runs(plan: list[tuple], out: Path, backend: str, redo: bool) -> set[str]:
    """The runs kept from an earlier sweep (done, or a train checkpoint) whose recorded settings differ from
    this sweep's; refused unless `redo` (then they are run again)."""
    from .. import sweep

    changed: dict[str, dict[str, tuple[Any, Any]]] = {}
    for _, folder, how in plan:
        then = sweep.recorded_settings(folder) if sweep.started_before(folder, backend) else None
        diff = sweep.changed_settings(then, sweep.settings_of(how)) if then is not None else {}
        if diff:
            changed[folder.name] = diff
    if changed and not redo:
        names = list(changed)
        shown = ", ".join(names[:4]) + (f" and {len(names) - 4} more" if len(names) > 4 else "")
        options: dict[str, tuple[Any, Any]] = {}
        for diff in changed.values():
            for key, values in diff.items():
                options.setdefault(key, values)
        what = "; ".join(f"{_flag(key, backend)} {_shown(a)} then, {_shown(b)} now" for key, (a, b) in options.items())
        raise ValueError(f"{len(names)} run(s) in {out} were done (or started) with other settings than this "
                         f"sweep's: {shown} ({what}); give another --output for these settings, or pass "
                         "--redo_changed to run them again with these settings (their logs are replaced)")
    return set(changed)


def _flag(key: str, backend: str) -> str:
    return "--max_steps" if backend == "simulate" and key == "steps" else f"--{key}"


def _shown(value: Any) -> str:
    return "unset" if value is None else repr(value) if isinstance(value, str) else str(value)


class _Stopped(Exception):
    """A signal asked the sweep to stop; `run` is the run it interrupted (None between runs)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum, self.run, self.pid = signum, None, None  # type: int, Path | None, int | None


@contextmanager
def _stop_on_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP raise _Stopped in the sweep (the main thread) while runs are going on. The
    first one also makes the others do nothing, so that a second Ctrl-C cannot cut short the ending of the
    child; the handlers from before come back at the end."""
    kinds = [getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n)]

    def stop(signum: int, frame: Any) -> None:
        for kind in kinds:
            signal.signal(kind, lambda *_: None)  # not SIG_IGN: a process started later would inherit it
        raise _Stopped(signum)

    if threading.current_thread() is not threading.main_thread():  # signal.signal works in the main thread only
        yield
        return
    previous = {kind: signal.signal(kind, stop) for kind in kinds}
    try:
        yield
    finally:
        for kind, handler in previous.items():
            signal.signal(kind, handler)


def _run_all(plan: list[tuple], out: Path, keep_models: bool, redo: set[str]) -> list[str]:
    """Runs what is not done yet, with a progress bar over runs; returns the failed runs' descriptions."""
    from .. import sweep
    from ..logging.console import format_eta

    out.mkdir(parents=True, exist_ok=True)
    todo = [(p, folder, how) for p, folder, how in plan if folder.name in redo or not sweep.is_done(folder)]
    again = f" ({len(redo)} done with other settings, run again)" if redo else ""
    typer.echo(f"sweep: {len(plan)} runs, {len(plan) - len(todo)} done before, {len(todo)} to run{again}")
    failed: list[str] = []
    with _stop_on_signals(), _Progress(len(todo)) as progress:
        t0 = time.perf_counter()
        for i, (point, folder, how) in enumerate(todo):
            progress.start(folder.name)
            if folder.name in redo:
                sweep.clear_run(folder)
            if isinstance(how, dict):  # a simulated run keeps its settings in its summary.json
                sweep.record_settings(folder, how)
            error = _run_one(folder, how, out, keep_models)
            if error:
                failed.append(error)
            elapsed = time.perf_counter() - t0
            progress.finish(folder.name, format_eta(elapsed / (i + 1) * (len(todo) - i - 1)))
    return failed


def _run_one(folder: Path, how: Any, out: Path, keep_models: bool) -> str | None:
    """One run: train in a child process (its output in <run>.log), or the simulator here. A signal ends the
    child before _Stopped goes on up. Returns the failure's description, or None."""
    from .. import sweep

    proc = None
    try:
        if not isinstance(how, dict):
            sweep.simulate_into(how, folder)
            return None
        with open(out / f"{folder.name}.log", "a") as log:
            proc = sweep.start_child(sweep.train_command(how, sweep.has_checkpoint(folder)), log)
            try:
                code = proc.wait()
            finally:
                if proc.poll() is None:  # a signal (or an error) while the child runs: end it, then go on up
                    sweep.stop_child(proc)
        if code != 0:
            return f"{folder.name} (exit {code}; see {out / f'{folder.name}.log'})"
        if not keep_models:
            sweep.tidy(folder)
        return None
    except _Stopped as stop:
        stop.run, stop.pid = folder, proc.pid if proc is not None else None
        raise


def _stopped_message(stop: _Stopped, plan: list[tuple], out: Path) -> str:
    """What a signal stopped, and how to continue: the same command keeps finished runs and resumes."""
    from .. import sweep

    done = sum(1 for _, folder, _ in plan if sweep.is_done(folder))
    where = ""
    if stop.run is not None:
        name = stop.run.name
        if sweep.is_done(stop.run):
            then = f"{name} had just finished and is kept"
        elif sweep.has_checkpoint(stop.run):
            then = f"{name} continues from its newest checkpoint (--resume)"
        else:
            then = f"{name} starts again" + (" (it had no checkpoint yet)" if stop.pid else "")
        where = f" during {name}" + (f" (its training process, PID {stop.pid}, was ended)" if stop.pid else "")
    else:
        then = "the remaining runs start"
    return (f"sweep stopped by {stop}{where}; {done} of {len(plan)} runs done in {out}. To continue, run the "
            f"same grposcope sweep command again (--output {out}): finished runs are kept and {then}")


class _Progress:
    """A rich bar over runs in a terminal; one plain line per run elsewhere (a log file, CI)."""

    def __init__(self, total: int) -> None:
        from rich.console import Console

        self.total, self.done, self.bar = total, 0, None
        if Console().is_terminal and total:
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

            self.bar = Progress(TextColumn("sweep"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                TextColumn("{task.description}"))
            self.task = self.bar.add_task("", total=total)

    def __enter__(self) -> "_Progress":
        if self.bar is not None:
            self.bar.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.__exit__(*exc)

    def start(self, name: str) -> None:
        if self.bar is not None:
            self.bar.update(self.task, description=f"running {name}")

    def finish(self, name: str, eta: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1, description=f"{name} done, about {eta} left")
        else:
            typer.echo(f"[{self.done}/{self.total}] {name} done, about {eta} left")
