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
from it (`--resume`); anything else starts again.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DONE_FILE = "summary.json"
BACKENDS = ("train", "simulate")


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


def check_train_grid(points: list[Point], base: dict[str, Any], out: Path) -> None:
    """Builds every run's GRPOConfig before the first starts, so a bad value fails at once, not hours in."""
    from .trainer.config import GRPOConfig
    from .trainer.geometry import geometry_for

    for point in points:
        try:  # the options, then the batch geometry (whole groups per step), which the trainer checks at start
            geometry_for(GRPOConfig.from_dict(train_values(point, base, out / point.name(1))))
        except ValueError as err:
            raise ValueError(f"the run {point.name(1)} would fail: {err}") from None


def train_command(values: dict[str, Any], resume: bool) -> list[str]:
    """`python -m grposcope.cli train --name value ...` for these options."""
    import sys

    args = [sys.executable, "-m", "grposcope.cli", "train"]
    for key, value in values.items():
        text = json.dumps(value) if isinstance(value, (bool, dict, list)) or value is None else str(value)
        args += [f"--{key}", text]
    return args + (["--resume"] if resume else [])


def has_checkpoint(folder: Path) -> bool:
    from .trainer.checkpoint import latest_checkpoint

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

    try:
        level = float(point.level)
    except ValueError:
        raise ValueError(f"with --backend simulate a level is the mean base logit difficulty_mean (a number "
                         f"such as -2 for hard or 1 for easy), got {point.level!r}") from None
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
