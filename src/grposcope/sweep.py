"""`grposcope sweep`: a grid of short runs, one output folder each, so that collapse can be related to outcome
across runs (`grposcope report --regress`), as the ACR paper does with acr_100 and final accuracy.

The grid's axes are the group size G, the difficulty level, the advantage estimator, the sampler and the seed.
Two backends run a point of the grid:
- `train`: `grposcope train` in a child process on the embedded model (or any model the base options name);
  a level is an arithmetic level (`easy`, `hard`, or several joined by `+`: `easy+medium`);
- `simulate`: the Bernoulli simulator in this process; a level is the mean base logit `difficulty_mean`
  (e.g. `-2`: hard, `1`: easy). Its metrics.jsonl has grposcope's names, the held-out accuracy (the mean
  success probability of the held-out prompts) as `eval/accuracy`, so `grposcope report` reads it like a run.

Resumable: a run whose folder holds summary.json is done and skipped; a `train` run with a checkpoint continues
from it (`--resume`); anything else starts again. Each run's settings are kept (a `train` run's in
`<out>/<run>.settings.json` when it starts, a simulated run's in its summary.json), so that a sweep run again
with other settings finds the runs they do not match.

A `train` child runs in its own process group (a signal to the sweep ends the child and whatever it started)
and, on Linux, dies with the sweep even when the sweep is killed with SIGKILL (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import itertools
import json
import math
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DONE_FILE = "summary.json"
SETTINGS_SUFFIX = ".settings.json"
BACKENDS = ("train", "simulate")
# Options the sweep sets for its own bookkeeping: they do not change what a run computes.
BOOKKEEPING = ("output_dir", "save_steps", "save_total_limit", "overwrite_output_dir")
STOP_GRACE_S = 10.0  # how long a train child gets to end after SIGTERM before SIGKILL


@dataclass(frozen=True)
class Point:
    """One run of the grid."""

    group_size: int
    level: str
    estimator: str
    sampler: str
    seed: int

    def name(self, samplers: int) -> str:
        """The run's folder name: `g8-easy-grpo-s0` (the sampler joins it when the grid has several)."""
        level = self.level.replace("+", "_")
        try:  # a simulator level is a number: g8-mu-2-grpo-s0 reads better than g8--2-grpo-s0
            level = f"mu{float(self.level):g}"
        except ValueError:
            pass
        sampler = f"-{self.sampler}" if samplers > 1 else ""
        return f"g{self.group_size}-{level}-{self.estimator}{sampler}-s{self.seed}"


def grid(group_sizes: list[int], levels: list[str], estimators: list[str], samplers: list[str],
         seeds: list[int]) -> list[Point]:
    """Every combination, seeds innermost (so the first runs to finish cover the most settings)."""
    for axis, values in (("--group_sizes", group_sizes), ("--levels", levels), ("--estimators", estimators),
                         ("--samplers", samplers), ("--seeds", seeds)):
        if not values:
            raise ValueError(f"{axis} needs at least one value")
        if len(set(values)) != len(values):
            raise ValueError(f"{axis} repeats a value: {values}")
    bad = [g for g in group_sizes if g < 2]
    if bad:
        raise ValueError(f"--group_sizes must be >= 2 (a group of one has no spread to normalise), got {bad}")
    bad = [s for s in seeds if s < 0]
    if bad:
        raise ValueError(f"--seeds must be >= 0, got {bad}")
    return [Point(*combo) for combo in itertools.product(group_sizes, levels, estimators, samplers, seeds)]


def is_done(folder: Path) -> bool:
    return (folder / DONE_FILE).is_file()


# --- the train backend ----------------------------------------------------------------------------------------

def train_values(point: Point, base: dict[str, Any], folder: Path) -> dict[str, Any]:
    """The GRPOConfig options of one run: the base options with the point's settings on top."""
    values = dict(base)
    values.update(output_dir=str(folder), num_generations=point.group_size, seed=point.seed,
                  advantage_estimator=point.estimator, use_avspo=False, sampler=point.sampler)
    dataset = str(values.get("dataset_name", "arithmetic")).split(":")[0]
    if point.level != "default":
        if dataset != "arithmetic":
            raise ValueError(f"--levels are the arithmetic task's levels, but the runs train on {dataset!r}; "
                             "leave --levels at 'default' for another dataset")
        values["dataset_name"] = f"arithmetic:{point.level.replace('+', ',')}"
    return values


def check_levels(levels: list[str]) -> None:
    """Every arithmetic level named: a child would find an unknown one only when it builds its data, after the
    runs before it had run."""
    from .data.arithmetic import LEVELS

    for level in levels:
        parts = level.split("+")
        unknown = [part for part in parts if part not in LEVELS]
        if level != "default" and (unknown or len(set(parts)) != len(parts)):
            problem = f"unknown arithmetic level(s) {unknown}" if unknown else "names a level twice"
            raise ValueError(f"--levels {level!r}: {problem}; known: {', '.join(LEVELS)}, or default (the "
                             "base options' dataset); join several with +, e.g. --levels easy,easy+medium")


def check_train_grid(points: list[Point], base: dict[str, Any], out: Path) -> None:
    """Builds every run's GRPOConfig before the first starts, so a bad value fails at once, not hours in."""
    from .trainer.config import GRPOConfig
    from .trainer.geometry import geometry_for

    check_levels(list(dict.fromkeys(p.level for p in points)))
    for point in points:
        try:  # the options, then the batch geometry (whole groups per step), which the trainer checks at start
            geometry_for(GRPOConfig.from_dict(train_values(point, base, out / point.name(1))))
        except ValueError as err:
            raise ValueError(f"the run {point.name(1)} would fail: {err}") from None


def train_command(values: dict[str, Any], resume: bool) -> list[str]:
    """`python -m grposcope.cli train --name value ...` for these options."""
    args = [sys.executable, "-m", "grposcope.cli", "train"]
    for key, value in values.items():
        text = json.dumps(value) if isinstance(value, (bool, dict, list)) or value is None else str(value)
        args += [f"--{key}", text]
    return args + (["--resume"] if resume else [])


def has_checkpoint(folder: Path) -> bool:
    from .trainer.run_folder import latest_checkpoint

    return folder.is_dir() and latest_checkpoint(str(folder)) is not None


def tidy(folder: Path) -> None:
    """Removes a finished run's model and checkpoints (about 0.5 GB and 1.6 GB each for the embedded model);
    its metrics.jsonl, completions.jsonl and summary.json stay."""
    import shutil

    for path in [folder / "model", *folder.glob("checkpoint-*")]:
        shutil.rmtree(path, ignore_errors=True)


# --- the simulate backend -------------------------------------------------------------------------------------

def sim_config(point: Point, base: dict[str, Any]) -> Any:
    from .sim import SimConfig

    if point.level == "default":  # --levels' default names the train backend's dataset: no simulator level
        raise ValueError("with --backend simulate a level is the mean base logit difficulty_mean, and --levels "
                         "defaults to 'default', which names the train backend's dataset and no difficulty_mean: "
                         "give the simulator's levels, e.g. --levels=-2,0,1 (finite numbers: -2 hard, 1 easy)")
    try:
        level = float(point.level)
    except ValueError:
        level = math.nan
    if not math.isfinite(level):
        raise ValueError(f"with --backend simulate a level is the mean base logit difficulty_mean (a finite "
                         f"number such as -2 for hard or 1 for easy), got {point.level!r}")
    return SimConfig(**{**base, "num_generations": point.group_size, "difficulty_mean": level,
                        "estimator": point.estimator, "sampler": point.sampler, "seed": point.seed})


def simulate_into(config: Any, folder: Path) -> None:
    """Runs the simulation and writes it as a run: metrics.jsonl (one record per step) and summary.json."""
    from .logging.jsonl import encode_record
    from .sim import simulate

    result = simulate(config)
    folder.mkdir(parents=True, exist_ok=True)
    history, now = result.history, time.time()
    renamed = {"heldout_accuracy": "eval/accuracy", "accuracy": "train/accuracy"}
    lines = []
    for i, step in enumerate(history["step"]):
        metrics = {renamed.get(k, k): v[i] for k, v in history.items() if k not in ("step",)}
        metrics["perf/step_s"] = result.seconds / len(history["step"])
        lines.append(encode_record(int(step), metrics, now))
    (folder / "metrics.jsonl").write_text("".join(lines), encoding="utf-8")
    summary = {"steps": len(lines), "wall_time_s": result.seconds, "backend": "simulate",
               "config": config.to_dict(), **{k: v for k, v in result.summary.items() if _finite(v)}}
    (folder / DONE_FILE).write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")


def _finite(value: Any) -> bool:
    return not isinstance(value, float) or math.isfinite(value)


# --- each run's settings --------------------------------------------------------------------------------------

def settings_of(how: Any) -> dict[str, Any]:
    """What a run computes from: its GRPOConfig options (train) or SimConfig (simulate), as JSON values."""
    values = dict(how) if isinstance(how, dict) else how.to_dict()
    values = {k: v for k, v in values.items() if k not in BOOKKEEPING}
    return json.loads(json.dumps(values, default=str))


def settings_file(folder: Path) -> Path:
    """`<out>/<run>.settings.json`, beside the run's log (the run folder belongs to the trainer)."""
    return folder.parent / f"{folder.name}{SETTINGS_SUFFIX}"


def record_settings(folder: Path, how: Any) -> None:
    from .files import write_text_atomic

    write_text_atomic(settings_file(folder), json.dumps(settings_of(how), indent=2, sort_keys=True) + "\n")


def recorded_settings(folder: Path) -> dict[str, Any] | None:
    """The settings a run was started with: its settings file (train), else the config in its summary.json
    (simulate); None when neither says (a train run of an older sweep)."""
    for path, key in ((settings_file(folder), None), (folder / DONE_FILE, "config")):
        try:
            values = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        values = values.get(key) if key and isinstance(values, dict) else values
        if isinstance(values, dict):
            return {k: v for k, v in values.items() if k not in BOOKKEEPING}
    return None


def changed_settings(then: dict[str, Any], now: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """{option: (value then, value now)} for every option whose value differs (None: not set)."""
    return {k: (then.get(k), now.get(k)) for k in sorted(set(then) | set(now)) if then.get(k) != now.get(k)}


def started_before(folder: Path, backend: str) -> bool:
    """Whether the sweep would keep something of an earlier attempt: a finished run, or a train checkpoint."""
    return is_done(folder) or (backend == "train" and has_checkpoint(folder))


def clear_run(folder: Path) -> None:
    """Makes a run start again: its summary (the done mark), model and checkpoints go; the trainer replaces
    its logs (the sweep passes overwrite_output_dir)."""
    tidy(folder)
    (folder / DONE_FILE).unlink(missing_ok=True)


# --- the train child ------------------------------------------------------------------------------------------

# Run in the child before it becomes `grposcope train` (os.execv keeps the PID and the setting): the kernel
# sends SIGKILL to the child when the sweep dies, even by SIGKILL, which no handler of the sweep could catch.
# PR_SET_PDEATHSIG (1) follows the thread that started the child: the sweep starts children from its main
# thread. A child whose parent is already gone (it died before prctl ran) exits at once.
_DIE_WITH_PARENT = """\
import ctypes, os, signal, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL), 0, 0, 0)
except (AttributeError, OSError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)
os.execv(sys.argv[2], sys.argv[2:])
"""


def start_child(args: list[str], log: Any) -> subprocess.Popen:
    """Starts `args` (a train command) with its output in `log`, in a process group of its own (so that the
    sweep can end it and its helpers together, and Ctrl-C in a terminal reaches the sweep alone), made to die
    with the sweep on Linux. No preexec_fn: the sweep may run a progress-bar thread, and preexec_fn is not
    safe with threads."""
    if sys.platform.startswith("linux"):
        args = [sys.executable, "-c", _DIE_WITH_PARENT, str(os.getpid()), *args]
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=os.name == "posix")


def stop_child(proc: subprocess.Popen, grace_s: float = STOP_GRACE_S) -> None:
    """Ends a child started by `start_child` and everything in its process group: SIGTERM, then SIGKILL
    after `grace_s`; returns once the child has exited and been reaped."""
    if proc.poll() is None:
        _signal_group(proc, signal.SIGTERM)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(proc, signal.SIGKILL)
            proc.wait()
    _signal_group(proc, signal.SIGKILL)  # helpers of the child that outlived it (its group is still its PID)


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    try:
        if os.name == "posix":
            os.killpg(proc.pid, signum)
        elif proc.poll() is None:
            proc.send_signal(signum)
    except (ProcessLookupError, PermissionError):
        pass
