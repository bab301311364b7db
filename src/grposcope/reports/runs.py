"""Reading a finished (or running) run's logs into one shape, whichever trainer wrote them.

Read here:
- grposcope's own trainer: `<run>/metrics.jsonl` (one record per step, docs/metrics.md's names) and, once the
  run has ended, `<run>/summary.json` (the held-out accuracy before training and the wall time);
- TRL: `trainer_state.json`'s `log_history`, in `<run>/` or in its newest `checkpoint-*` folder. TRL's own
  names are mapped onto grposcope's (`reward` -> `reward/mean`, ...); the TRL integration already logs
  grposcope's names (`collapse/acr`, `sampler/...`) beside them. A stock TRL run has no `collapse/acr`: its
  `frac_reward_zero_std` stands in (the same quantity under TRL's default group scaling; under
  `scale_rewards="batch"` TRL measures the batch's std instead, and the report says which was used).
- stock TRL and verl rollouts (rollouts.py, engine_runs.py) for the ACR family per group.
Any other scalar log (TensorBoard events, a W&B run, verl's file logger, a JSONL or CSV of step metrics) is read
by logs.py and log_formats.py.

Notation: a run's `series[name]` is aligned with its `steps`; a step that did not log `name` holds NaN.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..diagnose.catalogue import resolve
from ..diagnose.runlog import ACCURACY, Run
from .rollouts import plural, step_span

TRL_ZERO_STD = "frac_reward_zero_std"
# TRL evaluates with its own eval loop: the held-out mean reward stands for accuracy (0/1 rewards make it one).
TRL_EVAL_REWARD = "eval_reward"

ACR_100_STEPS = 100  # as collapse/acr_100: the mean ACR over the first 100 steps


def run_kind(path: Path) -> str | None:
    """What `path` holds, from what is inside: "grposcope" (metrics.jsonl), "trl" (trainer_state.json, in the
    folder or a checkpoint-* folder, or TRL's completions/ parquet files), "verl" (a rollout dump of
    {step}.jsonl files), "verl-logger" (a verl file-logger .jsonl, or a folder holding one), "wandb" (an offline
    run), "tensorboard" (event files), "table" (a JSONL or CSV of step metrics), or None."""
    from .engine_runs import is_verl_logger
    from .file_kinds import check_file
    from .logs import kind_of
    from .rollouts import trl_files, verl_files

    if not path.is_dir():  # a FIFO, a socket or a link loop given itself: named, never opened
        check_file(path)
    else:  # the same where grposcope's or TRL's log belongs (else: "holds none of", the wrong cause)
        check_file(path / "metrics.jsonl")
        check_file(path / "trainer_state.json")
    if path.is_file():
        if path.name in ("metrics.jsonl", "trainer_state.json"):
            return "grposcope" if path.name == "metrics.jsonl" else "trl"
        if path.suffix == ".jsonl" and is_verl_logger(path):
            return "verl-logger"
        return kind_of(path)
    if not path.is_dir():
        return None
    if (path / "metrics.jsonl").is_file():
        return "grposcope"
    if _trainer_state(path) is not None or trl_files(path):
        return "trl"
    if verl_files(path):
        return "verl"
    loggers = [p for p in sorted(path.glob("*.jsonl")) if is_verl_logger(p)]
    if len(loggers) == 1:  # verl's file logger given as its folder (<project>/<experiment>.jsonl)
        return "verl-logger"
    return kind_of(path)


@dataclass(frozen=True)
class ReadOptions:
    """How a stock run's rollouts are read (`grposcope report`'s options of the same names)."""

    success_threshold: float | None = None  # None: 0.5 for rewards in [0, 1], else the midpoint of those seen
    entropy_floor: float = 0.5
    kl_bound: float = 0.5


def load_run(path: str | Path, name: str | None = None, options: ReadOptions = ReadOptions()) -> Run:
    """The run in `path`: a grposcope output folder, a TRL output or checkpoint folder, a verl rollout dump
    folder, a verl file-logger .jsonl (or its folder), metrics.jsonl / trainer_state.json themselves, a
    TensorBoard event folder or file, a W&B run folder, or a JSONL / CSV of step metrics."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist; give a run's output folder (with metrics.jsonl, or a "
                                "TRL trainer_state.json or completions/ folder) or a verl rollout dump folder")
    label = name or (path.parent.name if path.is_file() else path.name) or str(path)
    kind = run_kind(path)
    if kind == "grposcope":
        run = _grposcope_run(path if path.is_file() else path / "metrics.jsonl", label)
        run.found = "a grposcope run (metrics.jsonl)"
        return run
    if kind == "trl":
        return _stock_trl_run(path, label, options)
    if kind == "verl":
        return _verl_run(path, label, options)
    if kind == "verl-logger":
        if path.is_dir():
            from .engine_runs import is_verl_logger

            path = next(p for p in sorted(path.glob("*.jsonl")) if is_verl_logger(p))
        return _verl_logger_run(path, label)
    if kind in ("wandb", "tensorboard", "table"):
        from .logs import read_log

        return read_log(path, label)
    raise FileNotFoundError(f"{path} holds none of: metrics.jsonl (grposcope), trainer_state.json or "
                            "completions/completions_*.parquet (TRL, log_completions=True), {step}.jsonl files (a verl "
                            "rollout dump, trainer.rollout_data_dir), verl's file-logger .jsonl, TensorBoard events "
                            "(events.out.tfevents.*), a W&B run (*.wandb), a JSONL or CSV with a step column; is it "
                            "a run's output_dir?")


def _grposcope_run(metrics_path: Path, name: str) -> Run:
    from .metric_columns import read_metric_columns

    columns = read_metric_columns(metrics_path)  # streamed: one float per step and metric is kept
    steps = columns.steps
    if not steps:
        raise ValueError(f"{metrics_path} has no steps yet; report a run after its first logged step")
    odd = {name: [(step, value)] * count for name, (count, step, value) in columns.odd.items()}
    run = Run(name, metrics_path.parent, "grposcope", steps, dict(columns.series),
              notes=_odd_notes(odd, metrics_path) + columns.notes(), unknown=columns.unknown,
              nonfinite=columns.nonfinite)
    for metric, where in run.nonfinite.items():
        run.problems.append(f"{metrics_path}: {metric} is NaN or infinite at {len(where)} step(s) (the first: "
                            f"{where[0]})")
    summary = metrics_path.parent / "summary.json"
    if summary.is_file():
        figures = _read_json(summary)
        run.source = "simulate" if figures.get("backend") == "simulate" else run.source
        run.eval_before = _number(figures.get(f"{ACCURACY} before"))
        run.wall_time_s = _number(figures.get("wall_time_s"))
        after = _number(figures.get(f"{ACCURACY} after"))
        if after is not None and not run.has(ACCURACY):  # evaluated only at the end: show it at the last step
            run.series[ACCURACY] = [math.nan] * (len(steps) - 1) + [after]
    if run.wall_time_s is None:  # a run still going, or killed: the logged step times
        step_s = [v for v in run.values("perf/step_s") if math.isfinite(v)]
        first, last = columns.first_time, columns.last_time
        run.wall_time_s = math.fsum(step_s) if step_s else (last - first if first is not None and last != first
                                                            else None)
    return run


def _trainer_state(folder: Path) -> Path | None:
    """`folder/trainer_state.json`, else the one of the newest `checkpoint-<step>` folder."""
    if (folder / "trainer_state.json").is_file():
        return folder / "trainer_state.json"
    checkpoints = [(int(m.group(1)), p) for p in folder.glob("checkpoint-*")
                   if (m := re.fullmatch(r"checkpoint-(\d+)", p.name)) and (p / "trainer_state.json").is_file()]
    return max(checkpoints)[1] / "trainer_state.json" if checkpoints else None


def _trl_run(state_path: Path, name: str, state: Any = None) -> Run:
    """The run of a trainer_state.json (`state`: its content, when the caller has read it already)."""
    state = _read_json(state_path) if state is None else state
    history = state.get("log_history") if isinstance(state, dict) else None
    if not isinstance(history, list):
        raise ValueError(f"{state_path} has no log_history list; is it a transformers trainer_state.json?")
    bad = [(i, r["step"]) for i, r in enumerate(history) if isinstance(r, dict) and not _is_step(r.get("step", 0))]
    if bad:
        raise _bad_step(bad[0][1], state_path, f"log_history[{bad[0][0]}]")
    history = [{**r, "step": int(r["step"])} if isinstance(r, dict) and "step" in r else r for r in history]
    train = [r for r in history if isinstance(r, dict) and "step" in r and _is_train_record(r)]
    if not train:
        raise ValueError(f"{state_path} logged no training step yet (log_history has no record with a 'step' "
                         "and a reward or loss)")
    merged = _merge_by_step(train)
    steps, series, odd = _columns(merged, trl_name)
    run = Run(name, state_path.parent, "trl", steps, series, notes=_odd_notes(odd, state_path))
    _inspect(run, merged, trl_name, state_path)
    for key in ("max_steps", "logging_steps"):  # what the run planned, and how often it logged
        if _is_step(state.get(key)) and not isinstance(state[key], bool) and state[key] > 0:
            run.config[key] = int(state[key])
    if not run.has("collapse/acr") and run.has(TRL_ZERO_STD):
        run.series["collapse/acr"] = list(run.series[TRL_ZERO_STD])
        run.notes.append("collapse/acr is TRL's frac_reward_zero_std (a stock TRL run)")
    evals = {r["step"]: _number(r[TRL_EVAL_REWARD]) for r in history
             if isinstance(r, dict) and "step" in r and _number(r.get(TRL_EVAL_REWARD)) is not None}
    if evals:
        run.series[ACCURACY] = [evals.get(s, math.nan) for s in steps]
        run.notes.append("held-out accuracy is TRL's eval_reward (the mean reward of its eval loop)")
    end = [r for r in history if isinstance(r, dict) and "train_runtime" in r]
    step_s = [v for v in run.values("perf/step_s") if math.isfinite(v)]
    run.wall_time_s = _number(end[-1]["train_runtime"]) if end else (math.fsum(step_s) if step_s else None)
    return run


def _stock_trl_run(path: Path, name: str, options: ReadOptions) -> Run:
    """A TRL run: its log_history (if saved yet) and, with log_completions=True, the ACR family from its
    completions parquet files."""
    from .rollouts import read_trl, trl_files

    folder = path.parent if path.is_file() else path
    state = path if path.is_file() else _trainer_state(path)
    content = _read_json(state) if state is not None else None
    run = _trl_run(state, name, content) if state is not None else Run(name, folder, "trl", [], {})
    found = [f"{state.relative_to(folder) if state.is_relative_to(folder) else state}"] if state else []
    if not trl_files(folder):
        run.found = f"a TRL run ({', '.join(found)}; no completions/ folder)"
        if not run.has("collapse/acr_ema"):
            run.notes.append("no completions/*.parquet: run TRL with log_completions=True for the whole ACR family "
                             "(all-correct / all-wrong, acr_ema, acr_100, the alarms) computed from its rewards")
        return run
    if run.has("collapse/acr_ema"):  # grposcope's TRL subclass logged the family itself
        run.found = f"a TRL run with grposcope's integration ({', '.join(found)})"
        return run
    names = _reward_names(run)
    rollouts = read_trl(folder, names)
    if TRL_ZERO_STD in run.series:  # the stand-in from log_history gives way to the rollouts' own ACR
        run.series.pop("collapse/acr", None)
        run.notes[:] = [n for n in run.notes if "frac_reward_zero_std" not in n]
    _add_rollouts(run, rollouts, options)
    run.found = rollouts.found + (f" with {found[0]}" if found else "")
    planned = content.get("max_steps") if isinstance(content, dict) else None
    last = max([*run.steps, int(planned) if isinstance(planned, int) and planned > 0 else 0])
    if len(rollouts.steps) < last:
        run.steps_trained = last
    zero_std = [(s, v) for s, v in zip(run.steps, run.values(TRL_ZERO_STD)) if math.isfinite(v)]
    acr = dict(zip(*run.points("collapse/acr")))
    both = [(acr[s], v) for s, v in zero_std if s in acr]
    if both:
        run.notes.append(f"TRL's own frac_reward_zero_std over the same {len(both)} steps: mean "
                         f"{math.fsum(v for _, v in both) / len(both):.3f}, against collapse/acr "
                         f"{math.fsum(a for a, _ in both) / len(both):.3f} (TRL averages its metric over each "
                         "logging interval; the rollouts hold the last generation batch of it)")
    return run


def trl_reward_names(folder: Path, notes: list[str] | None = None) -> list[str] | None:
    """The reward function names of the TRL run in `folder`, from the `rewards/<name>/mean` its log_history
    logged; None before TRL saved a trainer_state.json (then every numeric column of its completion files but
    step and advantage is read as a reward function's, as `_stock_trl_run` does). `notes` gets what the log's
    values needed said (NaN, true/false: metric_columns.value_notes)."""
    from .metric_columns import VALUE_NOTE_ENDS

    state = _trainer_state(folder)
    if state is None:
        return None
    run = _trl_run(state, folder.name)
    if notes is not None:
        notes += [note for note in run.notes if note.endswith(VALUE_NOTE_ENDS)]
    return _reward_names(run)


def _reward_names(run: Run) -> list[str] | None:
    return [m.group(1) for key in run.series if (m := re.fullmatch(r"reward/(.+)/mean", key))] or None


def _verl_run(folder: Path, name: str, options: ReadOptions) -> Run:
    """A verl rollout dump, with the metrics of the file logger beside it when there is exactly one."""
    from .engine_runs import verl_logger_beside
    from .rollouts import read_verl

    rollouts = read_verl(folder)
    logger_path, note = verl_logger_beside(folder)
    run = _verl_logger_run(logger_path, name) if logger_path is not None else Run(name, folder, "verl", [], {})
    run.path = folder
    if note:
        run.notes.append(note)
    _add_rollouts(run, rollouts, options)
    run.found = rollouts.found + (f" with verl's file logger {logger_path}" if logger_path else "")
    missing = [s for s in range(1, max(run.steps) + 1) if s not in set(run.steps)] if run.steps else []
    if missing:
        run.notes.append(f"no rollouts for {plural(len(missing), 'step')} ({step_span(missing)})")
    return run


def _verl_logger_run(path: Path, name: str) -> Run:
    from .logs import read_verl_log

    run = read_verl_log(path, name)
    run.path = path.parent
    step_s = [v for v in run.values("perf/step_s") if math.isfinite(v)]
    run.wall_time_s = math.fsum(step_s) if step_s else None
    if not run.has("collapse/acr"):
        run.notes.append("metrics only: give the rollout dump folder (trainer.rollout_data_dir) for the ACR family")
    return run


def _add_rollouts(run: Run, rollouts: Any, options: ReadOptions) -> None:
    """The ACR family of `rollouts` into `run`'s series, on the union of its steps and the rollouts' steps."""
    from .engine_runs import replay

    if not rollouts.steps:
        raise ValueError(f"{run.path}: no group could be read from the rollout files; "
                         + "; ".join(rollouts.notes[:3]))
    engine = {s: {k: run.series[k][i] for k in run.series} for i, s in enumerate(run.steps)}
    computed, notes = replay(rollouts, engine, options.success_threshold, options.entropy_floor, options.kl_bound)
    steps = sorted(set(run.steps) | set(computed))
    index = {s: i for i, s in enumerate(run.steps)}
    series = {k: [v[index[s]] if s in index else math.nan for s in steps] for k, v in run.series.items()}
    for key in dict.fromkeys(k for m in computed.values() for k in m):
        series[key] = [computed.get(s, {}).get(key, math.nan) for s in steps]
    run.steps, run.series = steps, series
    run.from_rollouts = True  # the ACR family per group: diagnose's split is measured, not estimated
    run.notes += rollouts.notes + notes


def _is_train_record(record: dict[str, Any]) -> bool:
    return any(key in record for key in ("reward", "loss", "collapse/acr")) and "train_runtime" not in record


def _merge_by_step(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One record per step: TRL may log a step's metrics in several records (train and eval)."""
    merged: dict[int, dict[str, Any]] = {}
    for record in records:
        merged.setdefault(record["step"], {}).update(record)
    return [merged[step] for step in sorted(merged)]


def _columns(records: list[dict[str, Any]], rename: Any) -> tuple[list[int], dict[str, list[float]], dict]:
    """Records -> (steps, series, odd): every numeric key a series, NaN where a record lacks it; `odd` holds,
    per name, the values that are not numbers (a string, a list): {name: [(step, value), ...]}. One pass over the
    records; each key renamed once (a 100,000-step log repeats its keys on every line)."""
    steps = [r["step"] for r in records]
    names: dict[str, str] = {}  # key -> its name
    series: dict[str, list[float]] = {}
    odd: dict[str, list[tuple[int, Any]]] = {}
    n = len(records)
    for i, record in enumerate(records):
        for key, value in record.items():
            if key == "step" or key == "time":
                continue
            kind = type(value)
            number = value if kind is float else float(value) if kind is int or kind is bool else None
            name = names[key] if key in names else names.setdefault(key, rename(key))
            if number is not None:
                column = series.get(name)
                if column is None:
                    column = series[name] = [math.nan] * n
                column[i] = number
            elif value is not None:
                odd.setdefault(name, []).append((record["step"], value))
    return steps, series, odd


def trl_name(key: str) -> str:
    """TRL's log_history key as the catalogue names it (`reward` -> `reward/mean`); `frac_reward_zero_std` keeps its
    name (it becomes collapse/acr below, unless rollouts give the ACR per group) and so does an unknown key."""
    if key == TRL_ZERO_STD:
        return key
    found = resolve(key)
    return found[0] if found is not None else key


IGNORED = ("step", "time", "epoch", TRL_ZERO_STD)  # not metrics, or read by name


def _inspect(run: Run, records: list[dict[str, Any]], rename: Any, path: Path) -> None:
    """The keys the catalogue does not know (run.unknown), where a metric was logged as NaN or infinite
    (run.nonfinite, with one problem line per metric: the gradient detector needs both kinds of gap told apart)
    and as true / false; the last two also in one note each (metric_columns.value_notes)."""
    from .metric_columns import value_notes

    known: dict[str, bool] = {}
    bad: dict[str, list[int]] = {}  # the notes name a key as the file spells it, to find it there
    flags: dict[str, list[int]] = {}
    inf = math.inf
    for record in records:
        for key, value in record.items():
            kind = type(value)
            if key in IGNORED or not (kind is float or kind is int or kind is bool):
                continue
            if not (known[key] if key in known else known.setdefault(key, resolve(key) is not None)):
                run.unknown[key] = run.unknown.get(key, 0) + 1
            if kind is float and (value != value or value == inf or value == -inf):
                run.nonfinite.setdefault(rename(key), []).append(record["step"])
                bad.setdefault(key, []).append(record["step"])
            elif kind is bool:
                flags.setdefault(key, []).append(record["step"])
    for name, where in run.nonfinite.items():
        run.problems.append(f"{path}: {name} is NaN or infinite at {len(where)} step(s) (the first: {where[0]})")
    run.notes += value_notes(path, bad, flags)


def _odd_notes(odd: dict[str, list[tuple[int, Any]]], path: Path) -> list[str]:
    """A note per metric that had values that are not numbers: which, where, and how many."""
    notes = []
    for name, found in odd.items():
        step, value = found[0]
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:39] + "\u2026"
        notes.append(f"{name} has {len(found)} value(s) that are not numbers in {path} (the first: {shown} at "
                     f"step {step}); they are read as not logged (n/a in the table, gaps in the plots)")
    return notes


def _is_step(value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float)
                                                                         and value.is_integer())


def _bad_step(value: Any, path: Path, where: str) -> ValueError:
    """The error for a record whose step is not a whole number, naming the file and the record."""
    return ValueError(f"{path}: {where} has step {json.dumps(value)}; a step must be a whole number (the "
                      "optimizer step it was logged at): fix or remove that record")


def _number(value: Any) -> float | None:
    """A finite or NaN float for a JSON number (bools are flags, kept as 0/1); None for anything else."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return None


def _read_json(path: Path) -> Any:
    try:
        with path.open(encoding="utf-8") as handle:
            return json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); is the file complete?") from None
