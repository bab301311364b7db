"""`grposcope probe` and `grposcope forecast`: measure each prompt's pass rate, then forecast collapse for any
group size and sampler before a run (docs/report.md, "Forecast"; the math is in grposcope.reports.forecast)."""

from __future__ import annotations

import math
import statistics
from functools import partial
from pathlib import Path
from typing import Any, Optional

import typer

from ..eval_settings import MAX_SEED
from ..files import check_writable
from ..reports.forecast import ALL, RULE, STAGNATION_ACR
from ..reports.forecast_plot import plot_forecast
from ..reports.plots import pyplot
from ..terminal import markup_safe
from .app import _console_logging, app, fail, wide_console
from .probe import PROBE_ERRORS, read_probe


@app.command("forecast")
def forecast_command(
    probe: Optional[Path] = typer.Argument(None, help="A probe file (grposcope probe), or none with --from_run."),
    from_run: Optional[Path] = typer.Option(None, "--from_run", help="A run's folder whose groups serve as the "
                                            "probe: a grposcope run (completions.jsonl), a stock TRL output_dir "
                                            "(completions/*.parquet, log_completions=True) or a verl rollout dump "
                                            "({step}.jsonl, trainer.rollout_data_dir)."),
    steps: int = typer.Option(5, "--steps", help="With --from_run: use the groups of the FIRST N logged steps of "
                              "a grposcope run, of the LAST N steps with rollouts of a stock TRL or verl run."),
    group_sizes: str = typer.Option("2,4,8,16,32", "--group_sizes", help="Group sizes G to forecast, comma "
                                    "separated."),
    budget: int = typer.Option(64, "--budget", help="Samples generated per step: B = budget // G prompts."),
    target_acr: float = typer.Option(STAGNATION_ACR, "--target_acr", help="The ACR the recommended G must reach "
                                     "(default: the stagnation alarm's threshold)."),
    samplers: str = typer.Option(ALL, "--samplers", help="Registered samplers to cost, comma separated, or "
                                 "all (every registered sampler)."),
    plot: Optional[Path] = typer.Option(None, "--plot", help="Also draw the forecast (a .png; needs matplotlib)."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write everything as JSON."),
    mc_groups: int = typer.Option(1000, "--mc_groups", help="Groups per G in each Monte Carlo sampler run."),
    seed: int = typer.Option(0, "--seed", help="Seeds the Monte Carlo runs."),
    success_threshold: Optional[float] = typer.Option(None, "--success_threshold", help="With --from_run: a "
                                                      "completion succeeds when its reward is >= this (default: "
                                                      "0.5; for a stock TRL or verl run, 0.5 when its rewards lie "
                                                      "in [0, 1], else their midpoint)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace existing --plot / --json files."),
) -> None:
    """Forecast collapse from pass rates: expected ACR per group size, draws to a mixed group, each
    sampler's samples per informative group, and a recommended G and sampler for a budget.

    \b
    Examples:
      grposcope forecast probe.jsonl --group_sizes 2,4,8,16,32 --budget 64
      grposcope forecast probe.jsonl --plot forecast.png --json forecast.json
      grposcope forecast --from_run output/quickstart --steps 5
      grposcope forecast --from_run trl_output_dir --steps 10
    """
    _console_logging()
    options = dict(locals())
    try:
        source, counts, notes, measured = _forecast_input(options)
        from ..reports.forecast import forecast

        result = forecast(counts, options["sizes"], budget, options["names"], target_acr, mc_groups, seed)
        result.notes = notes + result.notes
        if json_out is not None:
            from ..evaluation import write_json_atomic

            write_json_atomic(json_out, _finite({"source": source, "measured": measured, **result.to_dict()}))
        if plot is not None:
            plot_forecast(result, plot, f"grposcope forecast: {source}")
    except PROBE_ERRORS as err:
        raise fail(err) from None
    _print_forecast(result, source, measured)
    written = [str(p) for p in (json_out, plot) if p is not None]
    if written:
        typer.echo(f"written: {', '.join(written)}")


def _forecast_input(o: dict[str, Any]) -> tuple[str, list[tuple[int, int]], list[str], dict | None]:
    """Checks every option, then reads the counts: (source, counts, notes, measured ACR of the run or None)."""
    from ..reports.forecast import record_counts
    from ..sampling import SAMPLERS

    if (o["probe"] is None) == (o["from_run"] is None):
        raise ValueError("give a probe file or --from_run RUN_DIR (one of them)")
    o["sizes"] = _int_list(o["group_sizes"], "--group_sizes")
    o["names"] = (SAMPLERS.names_in("grposcope") if o["samplers"].strip() == ALL
                  else list(dict.fromkeys(n.strip() for n in o["samplers"].split(",") if n.strip())))
    for name in o["names"]:
        SAMPLERS.get(name)  # unknown: fails with the known names
    for name, low in (("budget", 1), ("mc_groups", 1), ("steps", 1)):
        if o[name] < low:
            raise ValueError(f"--{name} must be >= {low}, got {o[name]}")
    if not 0 <= o["target_acr"] <= 1:
        raise ValueError(f"--target_acr is an ACR, in [0, 1]; got {o['target_acr']}")
    if not 0 <= o["seed"] <= MAX_SEED:
        raise ValueError(f"--seed must be in [0, {MAX_SEED}] (it seeds the Monte Carlo runs), got {o['seed']}")
    if o["success_threshold"] is not None and not math.isfinite(o["success_threshold"]):
        raise ValueError(f"--success_threshold must be a finite number (a reward), got {o['success_threshold']}")
    if min(o["sizes"]) > o["budget"]:
        raise ValueError(f"--budget {o['budget']} is smaller than every group size; a step needs at least G samples")
    for path, flag in ((o["json_out"], "--json"), (o["plot"], "--plot")):
        if path is not None:
            if path.exists() and not o["overwrite"]:
                raise FileExistsError(f"{path} already exists; pass --overwrite to replace it, or choose another "
                                      f"{flag}")
            check_writable(path, flag)
    if o["plot"] is not None:
        pyplot("--plot")  # a missing matplotlib fails now
    if o["from_run"] is not None:
        return _from_run(o["from_run"], o["steps"], o["success_threshold"])
    path = o["probe"]
    header, records = read_probe(path)
    counts = []
    for number, record in records:
        try:
            counts.append(record_counts(record))
        except ValueError as err:
            raise ValueError(f"{path}: line {number}: {err}") from None
    if not counts:
        raise ValueError(f"{path} holds no probed prompt")
    about = f" ({header.get('model')} on {header.get('dataset')}, k = {header.get('k')})" if header else ""
    return f"{path}{about}", counts, [], None


def _finite(value: Any) -> Any:
    """JSON has no NaN or Infinity: null stands for both (an undefined SE, draws to a mix that never comes)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    return [_finite(item) for item in value] if isinstance(value, (list, tuple)) else value


def _int_list(text: str, flag: str) -> list[int]:
    values = []
    for item in (part.strip() for part in text.split(",") if part.strip()):
        try:
            values.append(int(item))
        except ValueError:
            raise ValueError(f"{flag}: {item!r} is not an integer") from None
    if not values or min(values) < 1:
        raise ValueError(f"{flag} needs group sizes >= 1, e.g. 2,4,8,16; got {text!r}")
    return values


def _from_run(run: Path, steps: int, threshold: float | None) -> tuple[str, list, list[str], dict | None]:
    """(source, counts, notes, measured) of a run's folder: a grposcope run's completions.jsonl, else a stock
    TRL or verl run's rollout files."""
    from ..reports.runs import run_kind

    if not run.is_dir():
        raise FileNotFoundError(f"--from_run {run} is not a folder; give a run's output_dir")
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
    from ..logging.jsonl import read_metrics

    path = run / "completions.jsonl"
    groups = history_groups(read_completions(path), steps, threshold)
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
        rows = [r for r in read_metrics(run / "metrics.jsonl") if r["step"] in set(logged)]
        acr = [r["collapse/acr"] for r in rows if math.isfinite(r.get("collapse/acr", math.nan))]
        if any(r.get("sampler/prompts_dropped", 0) or r.get("sampler/rounds_mean", 1) != 1 for r in rows):
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
    from ..reports.engine_runs import success_threshold
    from ..reports.rollouts import plural, step_span

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
    from ..reports.rollouts import read_trl, read_verl, trl_files, verl_files
    from ..reports.runs import trl_reward_names

    names = None
    if kind == "trl":
        files = trl_files(folder)
        names = trl_reward_names(folder) if files else None
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
    return rollouts


def _step_acrs(rollouts: Any, threshold: float) -> list[float]:
    """Each step's collapse/acr, as grposcope report computes it from the same groups."""
    from ..core.diagnostics import collapse_metrics
    from ..reports.engine_runs import step_rewards

    return [collapse_metrics(step_rewards(step), threshold)["collapse/acr"] for step in rollouts.steps]


def _mean_and_se(values: list[float]) -> dict[str, float]:
    """{"acr": the mean, "acr_se": its standard error over steps (NaN for one step)}."""
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else math.nan
    return {"acr": statistics.fmean(values), "acr_se": se}


# --------------------------------------------------------------------------- output


def _num(value: float, digits: int = 3) -> str:
    return "inf" if value == math.inf else "n/a" if not math.isfinite(value) else f"{value:.{digits}f}"


def _print_forecast(result: Any, source: str, measured: dict | None) -> None:
    from rich import box
    from rich.table import Table

    out = wide_console()
    acr = Table(title=f"collapse forecast: {len(result.counts)} prompts from {markup_safe(source)}",
                box=box.SIMPLE_HEAD)
    for header in ("G", "expected ACR", "all-correct", "all-wrong", "draws to a\nmixed group", "prompts that\n"
                   "never mix"):
        acr.add_column(header, justify="right")
    for a in result.acr.values():
        acr.add_row(str(a.g), f"{a.acr:.3f} ± {_num(a.acr_se)}", f"{a.all_correct:.3f}", f"{a.all_wrong:.3f}",
                    _num(a.draws_mean, 2), str(a.never_mixed))
    out.print(acr)
    cost = Table(title=f"samples per informative group (samples per step); budget {result.budget} per step",
                 box=box.SIMPLE_HEAD)
    cost.add_column("G", justify="right")
    cost.add_column("prompts\nper step", justify="right")
    for name in result.costs:
        cost.add_column(name, justify="right")
    for g in result.acr:
        cells = [_cost_cell(by_g[g]) for by_g in result.costs.values()]
        cost.add_row(str(g), str(max(1, result.budget // g)), *cells)
    out.print(cost)
    if measured is not None:
        out.print(f"measured collapse/acr over the {measured['steps']} steps ({measured.get('from', 'metrics.jsonl')}"
                  f"), G = {measured['g']}: {measured['acr']:.3f} ± {_num(measured['acr_se'])}")
    rec = result.recommendation
    out.print(f"[bold]recommended:[/bold] {rec.text}" if rec else "no recommendation: no sampler fits the "
                  "budget at any group size", highlight=False)
    if rec is not None:
        ranked = [f"{name} {c.prompts_per_step} -> {c.informative_per_1k:.1f}" if c else f"{name}: does not fit"
                  for name, c in sorted(rec.fits.items(), key=lambda item: -_per_1k(item[1]))]
        out.print(f"at G = {rec.g}, prompts per step that fit -> informative groups per 1,000 samples: "
                      f"{'; '.join(ranked)}", highlight=False)
    out.print(f"rule: {RULE}; target ACR {result.target_acr:g}", highlight=False, style="dim")
    for note in result.notes:
        out.print(f"note: {markup_safe(note)}", highlight=False, style="dim")


def _per_1k(cost: Any) -> float:
    return cost.informative_per_1k if cost is not None and math.isfinite(cost.informative_per_1k) else -1.0


def _cost_cell(c: Any) -> str:
    if c.note:
        return "n/a"
    spread = f" ± {c.se:.2f}" if math.isfinite(c.se) else ""
    return f"{_num(c.samples_per_informative, 1)}{spread} ({c.samples_per_step:.0f})"


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
