"""`grposcope probe` and `grposcope forecast`: measure each prompt's pass rate, then forecast collapse for any
group size and sampler before a run (docs/report.md, "Forecast"; the math is in grposcope.reports.forecast)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Optional

import typer

from ..eval_settings import MAX_SEED
from ..files import check_output_file
from ..logging.jsonl import json_safe
from ..reports.forecast import ALL, RULE, STAGNATION_ACR
from ..reports.forecast_plot import plot_forecast
from ..reports.plots import pyplot
from ..reports.run_counts import counts_from_run
from ..runs.file_kinds import unreadable
from ..terminal import markup_safe
from .app import _console_logging, app, fail, wide_console
from .probe import PROBE_ERRORS, read_probe

# The options that set the amount of work: option -> (the most it may be, a usual value). The Monte Carlo
# runs draw about mc_groups x G samples per G and sampler, at max(budget // G, 64) x G samples a step, so
# beyond these a forecast takes hours or more memory than a machine has (--group_sizes 10**9 --budget 10**9
# asked for 4 GB at once; --mc_groups 10**12 ran for ever). Measured on 2 busy cores, two probed prompts:
# the defaults 7 s, --mc_groups 10000 39 s, --budget 8192 23 s, --budget 65536 over 100 s.
WORK_BOUNDS = {"--group_sizes": (1024, "2,4,8,16,32"), "--budget": (8192, 64), "--mc_groups": (10_000, 1000)}


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

            write_json_atomic(json_out, json_safe({"source": source, "measured": measured, **result.to_dict()}))
        if plot is not None:
            plot_forecast(result, plot, f"grposcope forecast: {source}")
    except PROBE_ERRORS as err:
        raise fail(unreadable(err)) from None
    _print_forecast(result, source, measured)
    written = [str(p) for p in (json_out, plot) if p is not None]
    if written:
        typer.echo(f"written: {', '.join(written)}")


def _forecast_input(o: dict[str, Any]) -> tuple[str, list[tuple[int, int]], list[str], dict | None]:
    """Checks every option, then reads the counts: (source, counts, notes, measured ACR of the run or None)."""
    from ..reports.forecast import FORMULAS, all_samplers, record_counts, sampler_registry

    if (o["probe"] is None) == (o["from_run"] is None):
        raise ValueError("give a probe file or --from_run RUN_DIR (one of them)")
    o["sizes"] = _int_list(o["group_sizes"], "--group_sizes")
    o["names"] = (all_samplers() if o["samplers"].strip() == ALL
                  else list(dict.fromkeys(n.strip() for n in o["samplers"].split(",") if n.strip())))
    registry = sampler_registry()
    for name in o["names"]:
        if registry is not None:
            registry.get(name)  # unknown: fails with the known names
        elif name not in FORMULAS:
            raise ModuleNotFoundError(f"--samplers {name}: costing it runs the sampler, which needs torch: pip install "
                                      f"'grposcope[train]' (without it: {', '.join(FORMULAS)})", name="torch")
    for name, low in (("budget", 1), ("mc_groups", 1), ("steps", 1)):
        if o[name] < low:
            raise ValueError(f"--{name} must be >= {low}, got {o[name]}")
    for flag, value in (("--group_sizes", max(o["sizes"])), ("--budget", o["budget"]),
                        ("--mc_groups", o["mc_groups"])):
        high, example = WORK_BOUNDS[flag]
        if value > high:
            raise ValueError(f"{flag} must be at most {high:,} (the Monte Carlo runs draw about mc_groups x G "
                             f"samples per G and sampler; more takes many minutes), got {value:,}; "
                             f"e.g. {flag} {example}")
    if not 0 <= o["target_acr"] <= 1:
        raise ValueError(f"--target_acr is an ACR, in [0, 1]; got {o['target_acr']}")
    if not 0 <= o["seed"] <= MAX_SEED:
        raise ValueError(f"--seed must be in [0, {MAX_SEED}] (it seeds the Monte Carlo runs), got {o['seed']}")
    if o["success_threshold"] is not None and not math.isfinite(o["success_threshold"]):
        raise ValueError(f"--success_threshold must be a finite number (a reward), got {o['success_threshold']}")
    if min(o["sizes"]) > o["budget"]:
        raise ValueError(f"--budget {o['budget']} is smaller than every group size; a step needs at least G samples")
    for path, flag, name in ((o["json_out"], "--json", "forecast.json"), (o["plot"], "--plot", "forecast.png")):
        if path is not None:
            check_output_file(path, flag, o["overwrite"], name, inputs=(o["probe"], o["from_run"]))
    if o["plot"] is not None:
        pyplot("--plot")  # a missing matplotlib fails now
    if o["from_run"] is not None:
        return counts_from_run(o["from_run"], o["steps"], o["success_threshold"])
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
