"""`grposcope sweep`: a grid of short runs, one folder each, resumable (grposcope/sweep.py; docs/report.md)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any, Callable, Optional

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
    out: Path = typer.Option(..., "--out", help="Folder of the sweep: one sub-folder per run."),
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
) -> None:
    """Run a grid of short runs (group size x level x estimator x sampler x seed), one output folder each.
    Finished runs are skipped and interrupted ones resumed, so the same command continues a sweep. Any
    further --name value is a GRPOConfig option (train) or SimConfig field (simulate) for every run.

    \b
    Examples:
      grposcope sweep --out runs/sweep --group_sizes 4,8,16 --seeds 0,1
      grposcope sweep --out runs/lv --levels easy,medium,hard --max_steps 30
      grposcope sweep --out runs/sim --backend simulate --levels=-3,-1,1
      grposcope report runs/sweep --regress --out runs/sweep_report
    """
    _console_logging()
    try:
        plan = _plan(ctx.args, out, backend, group_sizes, levels, estimators, samplers, seeds, config,
                     max_steps, save_steps)
    except USER_ERRORS as err:
        raise fail(err) from None
    failed = _run_all(plan, out, keep_models)
    done = sum(1 for _, folder, _ in plan if (folder / "summary.json").is_file())
    typer.echo(f"{done} of {len(plan)} runs done in {out}; see them with: grposcope report {out} --out "
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
    if max_steps < 1 or save_steps < 1:
        raise ValueError("--max_steps and --save_steps must be >= 1")
    points = sweep.grid(_list(group_sizes, "--group_sizes", int), _list(levels, "--levels"),
                        _list(estimators, "--estimators"), _list(samplers, "--samplers"),
                        _list(seeds, "--seeds", int))
    base = read_yaml(config) if config is not None else {}
    base.update(parse_overrides(extra))
    check_writable(out, "--out", folder=True)
    names = len({p.sampler for p in points})
    if backend == "simulate":
        base = {**_sim_options(base), "steps": max_steps}
        return [(p, out / p.name(names), sweep.sim_config(p, base)) for p in points]
    base = coerce_all(base)
    if config is None:
        from ..presets import preset

        base = {**preset("quickstart"), **base}
    base.update(max_steps=max_steps, save_steps=save_steps, save_total_limit=1, overwrite_output_dir=True)
    sweep.check_train_grid(points, base, out)
    return [(p, out / p.name(names), sweep.train_values(p, base, out / p.name(names))) for p in points]


def _sim_options(values: dict[str, Any]) -> dict[str, Any]:
    """SimConfig fields from the command line or a YAML, typed; an unknown name fails with the known ones."""
    import typing

    from ..sim.config import SimConfig
    from .options import coerce

    hints = typing.get_type_hints(SimConfig)
    unknown = sorted(set(values) - set(hints))
    if unknown:
        raise ValueError(f"unknown simulator option(s) {unknown}; SimConfig's fields: {', '.join(sorted(hints))}")
    return {k: coerce(k, v, hints[k]) if isinstance(v, str) else v for k, v in values.items()}


def _run_all(plan: list[tuple], out: Path, keep_models: bool) -> list[str]:
    """Runs what is not done yet, with a progress bar over runs; returns the failed runs' descriptions."""
    from .. import sweep
    from ..logging.console import format_eta

    out.mkdir(parents=True, exist_ok=True)
    todo = [(p, folder, how) for p, folder, how in plan if not sweep.is_done(folder)]
    typer.echo(f"sweep: {len(plan)} runs, {len(plan) - len(todo)} done before, {len(todo)} to run")
    failed: list[str] = []
    with _Progress(len(todo)) as progress:
        t0 = time.perf_counter()
        for i, (point, folder, how) in enumerate(todo):
            progress.start(folder.name)
            if isinstance(how, dict):  # train: a child process, its output in <run>.log
                resume = sweep.has_checkpoint(folder)
                with open(out / f"{folder.name}.log", "a") as log:
                    code = subprocess.run(sweep.train_command(how, resume), stdout=log, stderr=subprocess.STDOUT,
                                          stdin=subprocess.DEVNULL).returncode
                if code != 0:
                    failed.append(f"{folder.name} (exit {code}; see {out / f'{folder.name}.log'})")
                elif not keep_models:
                    sweep.tidy(folder)
            else:
                sweep.simulate_into(how, folder)
            elapsed = time.perf_counter() - t0
            progress.finish(folder.name, format_eta(elapsed / (i + 1) * (len(todo) - i - 1)))
    return failed


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
