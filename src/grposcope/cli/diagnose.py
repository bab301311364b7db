"""`grposcope diagnose`: findings from whatever a run logged (docs/diagnose.md)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, List, Optional

import typer

from ..runs.file_kinds import unreadable
from ..terminal import terminal_safe
from .app import USER_ERRORS, _console_logging, app, fail, wide_console
from .report import expand_runs, readable, run_names


@app.command("diagnose")
def diagnose_command(
    runs: List[Path] = typer.Argument(None, help="Runs, read from what is inside: a grposcope output folder, a "
                                      "TRL output or checkpoint folder or its trainer_state.json, a TensorBoard "
                                      "event folder, a W&B offline run folder or history export, a verl "
                                      "file-logger .jsonl or rollout dump, a JSONL or CSV of step metrics; or "
                                      "a folder of runs.", readable=False),  # unreadable: the readers name it
    output_format: str = typer.Option("text", "--format", help="text, md, json or html (the JSON: "
                                      "docs/diagnose.md, 'JSON')."),
    output: str = typer.Option("-", "--output", "-o", help="Where the diagnosis goes: a file, or - for stdout."),
    json_path: Optional[str] = typer.Option(None, "--json", help="Also write the findings as JSON to this file "
                                            "(- for stdout, the text then goes to stderr)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --output or --json file."),
    fail_on: Optional[str] = typer.Option(None, "--fail_on", help="Exit 1 when a finding of this severity or "
                                          "worse fires: warning or critical (for CI); 2 is a usage or input "
                                          "error."),
    entropy_floor: float = typer.Option(0.5, "--entropy_floor", help="Nats: entropy_collapse's floor."),
    kl_bound: float = typer.Option(0.5, "--kl_bound", help="kl_drift's bound on the mean per-token KL."),
    num_generations: Optional[int] = typer.Option(None, "--num_generations", help="Completions per prompt (G), "
                                                  "when the log does not say it (estimates of collapse)."),
    max_completion_length: Optional[int] = typer.Option(None, "--max_completion_length", help="The length cap, "
                                                        "when the log does not say it."),
    max_steps: Optional[int] = typer.Option(None, "--max_steps", help="Steps the run was planned for (when "
                                            "entropy would reach its floor within the run)."),
    gpus: Optional[int] = typer.Option(None, "--gpus", help="GPUs the run used: the cost in GPU-hours."),
    gpu_hour_cost: Optional[float] = typer.Option(None, "--gpu_hour_cost", help="Price of one GPU-hour: the cost "
                                                  "in money (with --gpus)."),
    step_key: Optional[str] = typer.Option(None, "--step_key", help="A table's step column, when it is none of "
                                           "step, global_step, _step, iteration, iter, update, ..."),
    maps: Optional[List[str]] = typer.Option(None, "--map", help="KEY=METRIC: read the log's KEY as the "
                                             "catalogue's METRIC (e.g. --map acc=reward/mean); repeat for more."),
    pattern: Optional[str] = typer.Option(None, "--pattern", help="A console log's line format: a regular "
                                          "expression with a named group `step` and one named group per metric, "
                                          "e.g. 'it (?P<step>\\d+) R (?P<reward>[-.\\d]+)'."),
    engine: Optional[str] = typer.Option(None, "--engine", help="Read the keys as this engine's (openrlhf, "
                                         "nemo_rl, tinker_cookbook, ...; docs/diagnose.md lists them), when the "
                                         "log's keys do not name it."),
    segments: str = typer.Option("long", "--segments", help="A log whose steps start again (a restart, runs "
                                 "appended to one file): 'long' diagnoses the last run in it and every earlier one "
                                 "of 20 or more logged steps, 'last' the last alone, 'each' every one."),
    only: Optional[str] = typer.Option(None, "--only", help="Comma-separated detectors to run (default: all)."),
    list_detectors: bool = typer.Option(False, "--list", help="List the detectors, what each reads and its fix."),
    verbose: bool = typer.Option(False, "--verbose", help="Say what each unchecked detector needs; list every "
                                 "unknown key."),
) -> None:
    """Diagnose runs from their logs: each finding names the failure, the first step it holds, the figures it
    fired on, the option to change in grposcope, TRL and verl, and its paper; then the share of generated
    samples and tokens that bought no gradient.

    \b
    Examples:
      grposcope diagnose output/quickstart
      grposcope diagnose trl_out/checkpoint-500/trainer_state.json --fail_on critical
      grposcope diagnose trl_out/runs/ verl_logs/exp.jsonl --json findings.json --gpus 8
      grposcope diagnose trl_out --format json -o - | jq '.runs[0].findings[].detector'
    """
    _console_logging()
    from ..diagnose import DETECTORS

    try:
        if list_detectors:
            return _list(DETECTORS)
        names = _checked(runs, fail_on, output_format, output, json_path, overwrite, only)
        _check_reading(pattern, engine, segments)
        options = _options(entropy_floor, kl_bound, num_generations, max_completion_length, max_steps, gpus,
                           gpu_hour_cost)
        from ..runs import ReadOptions

        diagnoses = _diagnosed(runs, ReadOptions(step_key=step_key, mapping=parse_maps(maps or []),
                                                 pattern=pattern, engine=engine, segments=segments), options, names)
        if json_path is not None and json_path != "-":
            _write(json_path, "--json", render(diagnoses, "json", verbose))
        if output != "-":
            _write(output, "--output", render(diagnoses, output_format, verbose))
    except USER_ERRORS as err:
        raise fail(unreadable(err)) from None
    _emit(diagnoses, output, output_format, json_path, verbose, fail_on)


def _checked(runs: list[Path] | None, fail_on: str | None, output_format: str, output: str,
             json_path: str | None, overwrite: bool, only: str | None) -> list[str] | None:
    """The command line checked before any log is read; returns the detectors --only names (None: all)."""
    from ..diagnose import DETECTORS, SEVERITIES

    if not runs:
        raise ValueError("give one or more runs (a run's output folder or log file); --list shows the detectors")
    if fail_on is not None and fail_on not in SEVERITIES[1:]:
        raise ValueError(f"--fail_on must be warning or critical, got {fail_on!r}")
    if output_format not in FORMATS:
        raise ValueError(f"--format must be one of {', '.join(FORMATS)}, got {output_format!r}")
    if output == "-" and json_path == "-" and output_format != "text":
        raise ValueError(f"--json - and --format {output_format} both want stdout: give -o FILE for one of them")
    for flag, target in (("--output", output), ("--json", json_path)):
        check_target(flag, target, runs, overwrite)
    names = [n.strip() for n in (only or "").split(",") if n.strip()] or None
    if only is not None and not names:
        raise ValueError(f"--only {only!r} names no detector; give some, e.g. --only advantage_collapse,"
                         "kl_drift (--list shows them), or leave --only out for all")
    for name in names or []:
        DETECTORS.get(name)  # an unknown name fails with the known ones
    return names


def _check_reading(pattern: str | None, engine: str | None, segments: str) -> None:
    """--pattern, --engine and --segments checked before any log is read: a bad pattern is named as one."""
    if pattern is not None:
        from ..runs.read_options import line_pattern

        line_pattern(pattern)
    if engine is not None:
        from ..runs.engines import get

        get(engine)  # an unknown name fails with the known ones
    if segments not in ("long", "last", "each"):
        raise ValueError(f"--segments must be long, last or each, got {segments!r}")


def _options(entropy_floor: float, kl_bound: float, num_generations: int | None,
             max_completion_length: int | None, max_steps: int | None, gpus: int | None,
             gpu_hour_cost: float | None) -> Any:
    """diagnose.Options from the command line, in the ranges Options and the callback use (one table)."""
    from ..components.ranges import check_options
    from ..diagnose import Options

    check_options(dict(entropy_floor=entropy_floor, kl_bound=kl_bound, num_generations=num_generations,
                       max_completion_length=max_completion_length, max_steps=max_steps, gpus=gpus,
                       gpu_hour_cost=gpu_hour_cost), prefix="--")
    if gpu_hour_cost is not None and gpus is None:
        typer.secho("note: --gpu_hour_cost prices GPU-hours, which need --gpus: no money figure is given", err=True)
    return Options(entropy_floor, kl_bound, None, num_generations, max_completion_length, max_steps, gpus,
                   gpu_hour_cost)


def _diagnosed(runs: list[Path], read: Any, options: Any, names: list[str] | None) -> list[Any]:
    """Each run given (a path given twice, once), read by content and diagnosed; a run that cannot be read is
    skipped with its line when others can."""
    from ..diagnose import diagnose
    from ..reports.sampler_evidence import add_sampler_evidence
    from ..runs import load_runs
    from ..runs.record import parts

    unique = list({os.path.realpath(r): r for r in reversed(runs)}.values())[::-1]  # the first of each, in order
    if len(unique) < len(runs):
        typer.secho(f"note: {len(runs) - len(unique)} run(s) given twice: each is diagnosed once", err=True)
    paths, _ = readable(unique, lambda given: expand_runs(given, any_text=read.pattern is not None))
    named = dict(zip(paths, run_names(paths)))
    loaded, _ = readable(paths, lambda one: load_runs(one[0], named[one[0]], read))
    loaded = [part for run in loaded for part in parts(run, read.segments)]  # the earlier runs of a log first
    diagnoses = [diagnose(run, options, names) for run in loaded]
    add_sampler_evidence(diagnoses)  # what only rollouts show: each sampler's yield on these prompts
    return diagnoses


def _emit(diagnoses: list[Any], output: str, output_format: str, json_path: str | None, verbose: bool,
          fail_on: str | None) -> None:
    """What goes to stdout (and the text to stderr beside --json -), then exit 1 on a finding at --fail_on."""
    from ..diagnose.findings import rank

    if json_path == "-":
        typer.echo(render(diagnoses, "json", verbose), nl=False)
    if output == "-":
        if output_format != "text":
            typer.echo(render(diagnoses, output_format, verbose), nl=False)
        else:
            print_diagnoses(wide_console(160, stderr=json_path == "-"), diagnoses, verbose)
    worst = [f for d in diagnoses for f in d.findings if fail_on and rank(f.severity) >= rank(fail_on)]
    if worst:
        typer.echo(terminal_safe(f"--fail_on {fail_on}: {len(worst)} finding(s) at {fail_on} or worse"), err=True)
        raise typer.Exit(1)


@app.command("demo")
def demo_command(verbose: bool = typer.Option(False, "--verbose", help="Every engine's fix, the papers' titles.")
                 ) -> None:
    """What a diagnosis looks like, on a run shipped with grposcope: a stock TRL GRPOTrainer's 8 steps whose every
    reward was 0 (its trainer_state.json).

    \b
    Examples:
      grposcope demo
    """
    from importlib.resources import as_file, files

    from ..diagnose import diagnose
    from ..runs import load_run

    with as_file(files("grposcope.diagnose") / "demo" / "trainer_state.json") as path:
        result = diagnose(load_run(path, "demo"))
    print_diagnoses(wide_console(160), [result], verbose, gap=False)
    typer.echo("\nthe run shipped with grposcope: a stock TRL GRPOTrainer, 8 steps, every reward 0. Yours: "
               "grposcope diagnose OUTPUT_DIR (docs/diagnose.md)")


def parse_maps(maps: list[str]) -> tuple[tuple[str, str], ...]:
    """`--map KEY=METRIC` pairs; METRIC must be a catalogue name (or a reward function's `reward/<f>/mean`)."""
    from ..runs.catalogue import CATALOGUE, resolve

    pairs = []
    for item in maps:
        key, sep, metric = item.partition("=")
        if not sep or not key or not metric:
            raise ValueError(f"--map {item!r}: write KEY=METRIC, e.g. --map acc=eval/accuracy")
        found = resolve(metric)
        if metric not in CATALOGUE and (found is None or found[0] != metric):
            raise ValueError(f"--map {item!r}: {metric!r} is not a metric of the catalogue; "
                             f"`grposcope diagnose --list` and docs/metrics.md name them (e.g. reward/mean, "
                             "entropy/mean, collapse/acr, eval/accuracy)")
        pairs.append((key, metric))
    return tuple(pairs)


def _list(detectors) -> None:
    from rich.table import Table

    from ..runs.catalogue import CATALOGUE

    table = Table(title="grposcope diagnose: detectors")
    for column in ("detector", "catches", "reads", "fix (grposcope)"):
        table.add_column(column)
    for name in detectors.names():
        d = detectors.make(name)
        reads = " + ".join(" or ".join(n for n in group) for group in d.needs) or "-"
        table.add_row(name, d.summary, reads, d.fix.grposcope)
    wide_console(200).print(table)
    typer.echo(f"{len(CATALOGUE)} metrics in the catalogue (docs/metrics.md, 'Names in other logs')")


FORMATS = ("text", "md", "json", "html")


def check_target(flag: str, target: str | None, inputs: list[Path] | None, overwrite: bool) -> None:
    """An output file is never one of the runs given nor inside one (diagnosing a run writes nothing into it),
    and an existing one is replaced only with --overwrite (files.check_output_file)."""
    if target is None or target == "-":
        return
    from ..files import check_not_an_input, check_output_file

    try:
        check_not_an_input(target, flag, inputs or [], inside=True)
    except ValueError:
        raise ValueError(f"{flag} {target} is one of the runs given (or inside one): diagnosing a run does not "
                         "write into it; choose another file") from None
    check_output_file(target, flag, overwrite, "findings.json" if flag == "--json" else "findings.txt")


def render(diagnoses, output_format: str, verbose: bool) -> str:
    """The diagnosis as text (what the terminal shows, without colour), Markdown, JSON (diagnose.document) or a
    standalone HTML page."""
    from ..diagnose import document
    from ..diagnose.render import html_section, markdown
    from ..logging.jsonl import json_safe

    if output_format == "json":
        return json.dumps(json_safe(document(diagnoses)), indent=2, allow_nan=False) + "\n"
    if output_format == "md":
        return markdown(diagnoses, heading="# grposcope diagnose") + "\n"
    if output_format == "html":
        return ("<!doctype html><html><head><meta charset='utf-8'><title>grposcope diagnose</title></head><body>"
                + html_section(diagnoses) + "</body></html>\n")
    from io import StringIO

    from rich.console import Console

    buffer = StringIO()
    print_diagnoses(Console(file=buffer, width=120, color_system=None, force_terminal=False), diagnoses, verbose)
    return buffer.getvalue()


def print_diagnoses(console: Any, diagnoses, verbose: bool, gap: bool = True) -> None:
    """Each diagnosis as the terminal shows it (diagnose.render.rich_diagnosis), a blank line after each."""
    from ..diagnose.render import rich_diagnosis

    for d in diagnoses:
        for renderable in rich_diagnosis(d, verbose):
            console.print(renderable)
        if gap:
            console.print()


def _write(target: str, flag: str, text: str) -> None:
    from ..files import write_text_atomic

    write_text_atomic(Path(target), text, flag)
