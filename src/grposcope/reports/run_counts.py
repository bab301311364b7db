"""A run's groups as (k samples, successes) counts: what `grposcope forecast --from_run` forecasts from, and what
`grposcope diagnose` prices the samplers with (the groups a run's rollouts hold: grposcope's completions.jsonl, a
stock TRL run's completions parquet, a verl rollout dump)."""

from __future__ import annotations

import math
import statistics
from functools import partial
from pathlib import Path
from typing import Any


def counts_from_run(run: Path, steps: int, threshold: float | None) -> tuple[str, list, list[str], dict | None]:
    """(source, counts, notes, measured) of a run's folder: a grposcope run's completions.jsonl, else a stock
    TRL or verl run's rollout files."""
    from ..runs.file_kinds import check_file
    from ..runs.load import run_kind

    if not run.is_dir():
        raise FileNotFoundError(f"--from_run {run} is not a folder; give a run's output_dir")
    check_file(run / "completions.jsonl")  # a FIFO there would be "no completions.jsonl", the wrong cause
    kind = run_kind(run)
    if kind in ("trl", "verl") and not (run / "completions.jsonl").is_file():
        return _from_stock_run(run, kind, steps, threshold)
    if kind is None and not (run / "completions.jsonl").is_file():
        raise FileNotFoundError(f"--from_run {run} holds none of: completions.jsonl (a grposcope run), "
                                "completions/completions_*.parquet (stock TRL with log_completions=True), "
                                "{step}.jsonl files (a verl rollout dump, trainer.rollout_data_dir)")
    return _from_grposcope_run(run, steps, 0.5 if threshold is None else threshold)


def _from_grposcope_run(run: Path, steps: int, threshold: float) -> tuple[str, list, list[str], dict | None]:
    """(k, successes) per (step, prompt) group of the run's first logged steps, with what to keep in mind."""
    from ..logging.completions import read_completions
    from ..runs.file_kinds import read_utf8_log
    from ..runs.metric_columns import read_metric_columns

    path = run / "completions.jsonl"
    groups = history_groups(read_utf8_log(read_completions, path), steps, threshold)
    if not groups:
        raise ValueError(f"{path} holds no completions")
    g = statistics.mode(r["k"] for r in groups)  # the run's group size: most groups are whole
    logged = sorted({r["step"] for r in groups})
    # a group cut short by num_completions_to_print (the last of a step) would be forecast by the plug-in,
    # which for a group of 1 says "never mixes": left out
    whole = [r for r in groups if r["k"] >= g]
    notes = [f"from {len(whole)} groups of steps {logged[0]}-{logged[-1]} of {path}: completions.jsonl holds "
             "only the first num_completions_to_print completions of each logged step (16 by default), so few "
             f"groups ({len(groups) - len(whole)} cut short left out); groups of {g} give an unbiased forecast "
             f"only for G <= {g}"]
    measured = None
    if (run / "metrics.jsonl").is_file():
        columns = read_metric_columns(run / "metrics.jsonl")  # streamed: a long run's log is not held whole
        notes += columns.notes()
        wanted = set(logged)
        rows = [i for i, step in enumerate(columns.steps) if step in wanted]
        nan_column = [math.nan] * len(columns.steps)
        acr_column = columns.series.get("collapse/acr", nan_column)
        dropped = columns.series.get("sampler/prompts_dropped", nan_column)
        rounds = columns.series.get("sampler/rounds_mean", nan_column)
        acr = [acr_column[i] for i in rows if math.isfinite(acr_column[i])]
        # a step that did not log them (NaN) is as a step that dropped nothing and drew once
        if any((dropped[i] == dropped[i] and dropped[i]) or (rounds[i] == rounds[i] and rounds[i] != 1)
               for i in rows):
            notes.append("this run's sampler dropped, re-drew or balanced groups: completions.jsonl shows the "
                         "groups kept, which are more often mixed than the groups drawn")
        if acr:  # the ACR of the groups as drawn, with its SE over steps
            measured = {"g": g, "steps": len(acr), **_mean_and_se(acr)}
    return str(path), [(r["k"], r["successes"]) for r in whole], notes, measured


STOCK_KINDS = {"trl": "a stock TRL output folder (completions/*.parquet)",
               "verl": "a verl rollout dump ({step}.jsonl)"}


def _from_stock_run(folder: Path, kind: str, steps: int, threshold: float | None
                    ) -> tuple[str, list, list[str], dict | None]:
    """(k, successes) per (step, prompt) group of the last `steps` steps a stock TRL or verl run wrote
    rollouts for, the ACR those groups had, and what to keep in mind."""
    from ..runs.engine_runs import success_threshold
    from ..runs.rollouts import plural, step_span

    rollouts = _last_rollouts(folder, kind, steps)
    low, high = rollouts.reward_range()
    threshold, how = success_threshold(low, high, threshold)
    groups = [g for s in rollouts.steps for g in s.rewards]
    counts = [(len(g), sum(r >= threshold for r in g)) for g in groups]
    sizes = rollouts.group_sizes()
    g = max(sizes, key=lambda size: (sizes[size], size))  # the run's group size: the most common
    seen = [s.step for s in rollouts.steps]
    notes = [f"from {plural(len(groups), 'group')} of steps {step_span(seen)} (the last {plural(len(seen), 'step')} "
             f"with rollouts, --steps {steps}) of {STOCK_KINDS[kind]} {folder}: groups of {g} give an unbiased "
             f"forecast only for G <= {g}"]
    if len(sizes) > 1:
        notes.append("group sizes: " + ", ".join(f"{plural(n, 'group')} of {size}" for size, n in
                                                 sorted(sizes.items(), reverse=True))
                     + " (completions left out of their groups, see below)")
    notes.append(f"a completion succeeds when its reward is >= {threshold:g} ({how}); rewards seen in "
                 f"[{low:g}, {high:g}]")
    if len({r for group in groups for r in group}) > 2:
        notes.append("the rewards take more than two values: the forecast counts a group as collapsed when all "
                     "its completions succeed or all fail, the measured collapse/acr only when all its rewards "
                     "are equal")
    measured = {"g": g, "steps": len(seen), **_mean_and_se(_step_acrs(rollouts, threshold)),
                "from": "the rollout files, as grposcope report computes it"}
    return f"{folder} ({kind})", counts, notes + rollouts.notes, measured


def _last_rollouts(folder: Path, kind: str, steps: int) -> Any:
    """The rollouts of the last `steps` steps that have any. The last `steps` files are read first, and twice
    as many while some cannot serve (a file still being written, TRL's repeats of one generation batch):
    a long run's dump is never read whole for a few steps."""
    from ..runs.formats.trl import trl_reward_names
    from ..runs.rollouts import read_trl, read_verl, trl_files, verl_files

    names, state_notes = None, []  # type: list[str] | None, list[str]
    if kind == "trl":
        files = trl_files(folder)
        names = trl_reward_names(folder, state_notes) if files else None
        read = partial(read_trl, folder, names)
    else:
        files, read = verl_files(folder), partial(read_verl, folder)
    if not files:
        raise FileNotFoundError(f"--from_run {folder} is a TRL folder without completions/completions_*.parquet; "
                                "give the output_dir of a TRL run with log_completions=True")
    take = steps
    while True:
        rollouts = read({step for step, _ in files[-take:]})
        if len(rollouts.steps) >= steps or take >= len(files):
            break
        take = min(2 * take, len(files))
    if not rollouts.steps:
        raise ValueError(f"--from_run {folder}: no group could be read from the rollout files; "
                         + "; ".join(rollouts.notes[:3]))
    rollouts.steps = rollouts.steps[-steps:]
    rollouts.notes[:0] = state_notes
    return rollouts


def _step_acrs(rollouts: Any, threshold: float) -> list[float]:
    """Each step's collapse/acr, as grposcope report computes it from the same groups."""
    from ..core.diagnostics import collapse_metrics
    from ..runs.engine_runs import step_rewards

    return [collapse_metrics(step_rewards(step), threshold)["collapse/acr"] for step in rollouts.steps]


def _mean_and_se(values: list[float]) -> dict[str, float]:
    """{"acr": the mean, "acr_se": its standard error over steps (NaN for one step)}."""
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return {"acr": statistics.fmean(values), "acr_se": se}


def history_groups(rows: list[dict[str, Any]], steps: int, success_threshold: float = 0.5) -> list[dict]:
    """completions.jsonl rows -> {step, k, successes} per (step, prompt) group of the first `steps` logged
    steps. A reward that is None (every reward function returned None) is a failure: the trainer scores it 0."""
    for i, row in enumerate(rows):
        if any(key not in row for key in ("step", "prompt", "reward")):
            raise ValueError(f"completions row {i + 1} lacks step, prompt or reward; is it grposcope's file?")
    first = set(sorted({row["step"] for row in rows})[:steps])
    groups: dict[tuple[int, str], dict[str, Any]] = {}
    for row in (r for r in rows if r["step"] in first):
        group = groups.setdefault((row["step"], repr(row["prompt"])), {"step": row["step"], "k": 0, "successes": 0})
        group["k"] += 1
        group["successes"] += int(row["reward"] is not None and row["reward"] >= success_threshold)
    return list(groups.values())
