"""`grposcope report`'s output: report.md (a table row per run, links to the PNGs) and report.html (the same
with every plot embedded as a data URI: one file that opens offline, without a CDN or a server)."""

from __future__ import annotations

import base64
import html
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..diagnose.render import _md as md_text  # one escape for report.md, the diagnoses' and the table's
from ..files import atomic_output, write_text_atomic
from ..logging.console import format_eta
from ..runs.record import Run
from ..terminal import terminal_safe
from .figures import RunFigures, run_figures
from .regression import Fit, fit_line

COLUMNS = ("run", "source", "steps", "final acc.", "best acc.", "mean ACR", "acr_100", "mean acr_post",
           "alarms (first step)", "samples gen.", "tokens gen.", "wall time")


@dataclass
class Report:
    runs: list[Run]
    figures: list[RunFigures]
    plots: list[tuple[str, str]]  # (PNG file name, caption)
    fit: Fit | None = None
    regression_points: list[tuple[str, float, float]] | None = None  # (run, acr_100, final accuracy)
    skipped: list[str] | None = None  # runs left out of the regression, and why
    unread: list[str] = field(default_factory=list)  # paths given that could not be read, and why
    diagnoses: list = field(default_factory=list)  # grposcope diagnose's findings, one Diagnosis per run
    no_plots: str = ""  # why no plot was drawn (an install without matplotlib)


def regression_inputs(runs: list[Run], figures: list[RunFigures]) -> tuple[list[tuple[str, float, float]], list[str]]:
    """(run, acr_100, final accuracy) of every run that has both; the others named with what they lack."""
    points, skipped = [], []
    for run, fig in zip(runs, figures):
        missing = [what for what, v in (("acr_100", fig.acr_100), ("a held-out accuracy", fig.final_accuracy))
                   if v is None]
        if missing:
            skipped.append(f"{run.name} (no {' or '.join(missing)})")
        elif fig.acr_100 is not None and fig.final_accuracy is not None:
            points.append((run.name, fig.acr_100, fig.final_accuracy))
    return points, skipped


def fit_runs(runs: list[Run], figures: list[RunFigures]) -> tuple[Fit, list[tuple[str, float, float]], list[str]]:
    points, skipped = regression_inputs(runs, figures)
    if len(points) < 3:
        lacking = f"; left out: {', '.join(skipped)}" if skipped else ""
        raise ValueError(f"--regress fits final accuracy against acr_100 and needs at least 3 runs with both, "
                         f"got {len(points)}{lacking}. A line through fewer points says nothing; add runs "
                         "(grposcope sweep launches a grid of short ones)")
    fit = fit_line([p[1] for p in points], [p[2] for p in points])
    return fit, points, skipped


# steps.csv: one row per run and step, the ACR family and the signals of the alarms (docs/report.md)
STEP_COLUMNS = ("groups", "collapse/acr", "collapse/acr_all_correct", "collapse/acr_all_wrong", "collapse/acr_ema",
                "collapse/acr_cumulative", "collapse/acr_100", "collapse/volatility", "collapse/acr_post",
                "alarm/stagnation", "entropy/mean", "alarm/entropy_collapse", "kl/mean", "alarm/kl_drift",
                "alarm/no_signal", "reward/mean")


def write_steps_csv(runs: list[Run], path: Path) -> None:
    """steps.csv: `run`, `step` and STEP_COLUMNS for every step where a run logged one of them; a value the
    run did not log at that step is left empty (never interpolated)."""
    import csv

    with atomic_output(path, "--output") as tmp, tmp.open("w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(("run", "step", *STEP_COLUMNS))
        for run in runs:
            columns = [run.values(name) for name in STEP_COLUMNS]
            for i, step in enumerate(run.steps):
                cells = [column[i] for column in columns]
                if any(math.isfinite(v) for v in cells):
                    writer.writerow((terminal_safe(run.name), step, *("" if not math.isfinite(v) else _csv_number(v)
                                                       for v in cells)))


def _csv_number(value: float) -> str:
    return str(int(value)) if value.is_integer() and abs(value) < 1e15 else repr(value)


def _steps(run: Run, figures: RunFigures) -> str:
    """The steps a run's figures rest on; "30 of 300" when a stock run's rollouts hold part of it (the steps
    whose ACR could be computed, of the steps it trained)."""
    return f"{len(run.points('collapse/acr')[0])} of {run.steps_trained}" if run.steps_trained else str(figures.steps)


def _num(value: float | None, digits: int = 3) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _count(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def _duration(seconds: float | None) -> str:
    return "n/a" if seconds is None else format_eta(seconds)


def table_rows(report: Report) -> list[list[str]]:
    rows = []
    for run, f in zip(report.runs, report.figures):
        alarms = ", ".join(f"{a.name} {a.first_step}" for a in f.alarms) or "none"
        rows.append([run.name, run.source, _steps(run, f), _num(f.final_accuracy), _num(f.best_accuracy),
                     _num(f.acr_mean), _num(f.acr_100), _num(f.acr_post_mean), alarms,
                     _count(f.samples_generated), _count(f.tokens_generated), _duration(f.wall_time_s)])
    return rows


def fit_sentence(fit: Fit) -> str:
    sign = "+" if fit.slope >= 0 else "-"
    return (f"final accuracy = {fit.intercept:.3f} {sign} {abs(fit.slope):.3f} x acr_100 over {fit.n} runs: "
            f"Pearson r = {fit.r:.3f}, R^2 = {fit.r2:.3f}, p = {fit.p_value:.3g} (two-sided, t with "
            f"{fit.n - 2} degrees of freedom)")


def _notes(report: Report) -> list[str]:
    notes = [f"{run.name}: read {run.found}" for run in report.runs if run.found]
    notes += [f"{run.name}: {note}" for run in report.runs for note in run.notes]
    if report.skipped:
        notes.append(f"left out of the regression: {', '.join(report.skipped)}")
    notes += [f"not read: {why}" for why in report.unread]
    notes += [report.no_plots] if report.no_plots else []
    return notes


def write_markdown(report: Report, path: Path) -> None:
    lines = ["# grposcope report", "", f"{len(report.runs)} run(s); written {time.strftime('%Y-%m-%d %H:%M')}.",
             "Accuracy is held-out pass@1; the best includes the evaluation before training. acr_100 is the "
             "mean ACR over the first 100 steps (docs/metrics.md).", ""]
    if report.diagnoses:  # first: what is wrong, before the figures (grposcope diagnose's findings)
        from ..diagnose.render import markdown

        lines += [markdown(report.diagnoses), ""]
    lines += ["| " + " | ".join(COLUMNS) + " |", "|" + "|".join("---" for _ in COLUMNS) + "|"]
    # a run's name is a folder's name, any text: escaped so that a renderer shows it (no live HTML, no split row)
    lines += ["| " + " | ".join(map(md_text, row)) + " |" for row in table_rows(report)]
    if report.fit is not None:
        lines += ["", "## Regression", "", fit_sentence(report.fit) + ".", "", "![regression](regression.png)"]
    lines += ["", "Every step's figures: [steps.csv](steps.csv).", "", "## Plots", ""]
    lines += [f"![{md_text(caption)}]({name})\n" for name, caption in report.plots]
    notes = _notes(report)
    if notes:
        lines += ["## Notes", ""] + [f"- {md_text(note)}" for note in notes]
    write_text_atomic(path, "\n".join(lines) + "\n", "--output")


_STYLE = """body{font-family:system-ui,-apple-system,Segoe UI,sans-serif;font-size:16px;line-height:1.45;
margin:24px auto;max-width:1180px;color:#222;padding:0 16px}table{border-collapse:collapse;font-size:13px;margin:12px 0}
th,td{border:1px solid #ccc;padding:4px 6px;text-align:right;white-space:nowrap}
th{background:#f3f3f3;white-space:normal}td:first-child,th:first-child,td:nth-child(2),td:nth-child(9),
th:nth-child(2),th:nth-child(9),.alarms td,.alarms th{text-align:left}
.alarms td:last-child{white-space:normal;min-width:16em}figure{margin:18px 0}
figcaption{font-size:13px;color:#555}img{max-width:100%;height:auto}.fit{font-family:monospace;font-size:13px}
.table{overflow-x:auto}p,li,figcaption{overflow-wrap:anywhere}tr.raised td:nth-child(9){background:#fde8e8}
tr:target,tr:target td{background:#fff3bf}nav ol{padding-left:1.4em}nav li{margin:2px 0}
@media (max-width:600px){body{margin:8px auto;padding:0 10px}h1{font-size:1.5em}}"""


def _img(folder: Path, name: str, caption: str) -> str:
    data = base64.b64encode((folder / name).read_bytes()).decode("ascii")
    return (f'<figure id="plot-{_esc(Path(name).stem)}"><img alt="{_esc(caption)}" '
            f'src="data:image/png;base64,{data}"><figcaption>{_esc(caption)} ({_esc(name)})'
            "</figcaption></figure>")


def _alarm_id(run_number: int, alarm: str) -> str:
    return f"alarm-{run_number}-{alarm}"


def _table_html(report: Report) -> str:
    """The summary table; row i is `run-i` (the contents link to it), and each alarm links to its line in the
    alarms section."""
    esc = _esc
    head = "".join(f"<th>{esc(c)}</th>" for c in COLUMNS)
    alarm_column = COLUMNS.index("alarms (first step)")
    body = []
    for i, (row, figures) in enumerate(zip(table_rows(report), report.figures), 1):
        cells = [f"<td>{esc(cell)}</td>" for cell in row]
        if figures.alarms:
            cells[alarm_column] = "<td>" + ", ".join(
                f"<a href='#{_alarm_id(i, a.name)}'>{esc(a.name)} {a.first_step}</a>" for a in figures.alarms) + "</td>"
        raised = " class='raised'" if figures.alarms else ""
        body.append(f"<tr id='run-{i}'{raised}>" + "".join(cells) + "</tr>")
    return f"<div class='table'><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def _alarms_html(report: Report) -> str:
    """Every alarm any run raised, with its first step and what to do about it (the advice training prints)."""
    from ..core.alarms import ADVICE as ALARM_ADVICE

    esc = _esc
    raised = [(i, run, a) for i, (run, f) in enumerate(zip(report.runs, report.figures), 1) for a in f.alarms]
    if not raised:
        return "<section id='alarms'><h2>Alarms</h2><p>No alarm was raised in any run.</p></section>"
    rows = "".join(
        f"<tr id='{_alarm_id(i, a.name)}'><td><a href='#run-{i}'>{esc(run.name)}</a></td><td>{esc(a.name)}</td>"
        f"<td>{a.first_step}</td><td>{a.steps_on}</td><td>{esc(ALARM_ADVICE.get(a.name, ''))}</td></tr>"
        for i, run, a in raised)
    return ("<section id='alarms'><h2>Alarms</h2><div class='table'><table class='alarms'><thead><tr><th>run</th>"
            "<th>alarm</th><th>first step</th><th>steps raised</th><th>what it means</th></tr></thead>"
            f"<tbody>{rows}</tbody></table></div></section>")


def _findings_count(report: Report) -> str:
    counts = [sum(f.severity == s for d in report.diagnoses for f in d.findings) for s in ("critical", "warning")]
    return f"{counts[0]} critical, {counts[1]} warning"


def _findings_html(report: Report) -> str:
    from ..diagnose.render import html_section

    return html_section(report.diagnoses) if report.diagnoses else ""


def _contents_html(report: Report, notes: list[str]) -> str:
    """Links to every section and plot, and to every run's row: with many runs, the way to one of them."""
    esc = _esc
    alarms = sum(len(f.alarms) for f in report.figures)
    items = [f"<li><a href='#findings'>Findings</a>: {_findings_count(report)}</li>"] if report.diagnoses else []
    items += [f"<li><a href='#summary'>Summary</a>: {len(report.runs)} run(s)</li>",
             f"<li><a href='#alarms'>Alarms</a>: {alarms or 'none'}"
             f"{'' if not alarms else ' in ' + str(sum(bool(f.alarms) for f in report.figures)) + ' run(s)'}</li>"]
    if report.fit is not None:
        items.append("<li><a href='#regression'>Regression</a></li>")
    plots = "".join(f"<li><a href='#plot-{esc(Path(name).stem)}'>{esc(caption)}</a></li>"
                    for name, caption in report.plots)
    items.append(f"<li><a href='#plots'>Plots</a><ol>{plots}</ol></li>")
    if notes:
        items.append(f"<li><a href='#notes'>Notes</a>: {len(notes)}</li>")
    runs = "".join(f"<li><a href='#run-{i}'>{esc(run.name)}</a>{' (alarm)' if f.alarms else ''}</li>"
                   for i, (run, f) in enumerate(zip(report.runs, report.figures), 1))
    return (f"<nav id='contents' aria-label='Contents'><h2>Contents</h2><ol>{''.join(items)}</ol>"
            f"<details{' open' if len(report.runs) <= 12 else ''}><summary>Runs ({len(report.runs)})</summary>"
            f"<ol>{runs}</ol></details></nav>")


def write_html(report: Report, folder: Path, path: Path) -> None:
    esc = _esc
    notes = _notes(report)
    parts = ["<!doctype html><html lang='en'><head><meta charset='utf-8'>"
             "<meta name='viewport' content='width=device-width, initial-scale=1'><title>grposcope report</title>"
             f"<style>{_STYLE}</style></head><body><h1>grposcope report</h1>",
             f"<p>{len(report.runs)} run(s); written {esc(time.strftime('%Y-%m-%d %H:%M'))}. Accuracy is held-out "
             "pass@1; the best includes the evaluation before training. acr_100 is the mean ACR over the first "
             "100 steps.</p>", _contents_html(report, notes), _findings_html(report),
             "<section id='summary'><h2>Summary</h2>", _table_html(report), "</section>", _alarms_html(report)]
    if report.fit is not None:
        parts += [f"<section id='regression'><h2>Regression</h2><p class='fit'>{esc(fit_sentence(report.fit))}</p>",
                  _img(folder, "regression.png", "final eval/accuracy against collapse/acr_100, one point per run"),
                  "</section>"]
    parts += ["<section id='plots'><h2>Plots</h2>"] + [_img(folder, name, caption) for name, caption in report.plots]
    parts.append("</section>")
    if notes:
        parts += ["<section id='notes'><h2>Notes</h2><ul>", *(f"<li>{esc(n)}</li>" for n in notes), "</ul></section>"]
    write_text_atomic(path, "".join(parts) + "</body></html>\n", "--output")


def _esc(text: object) -> str:
    """HTML-escaped, with the terminal's control characters shown (a run folder named with ESC ... BEL writes
    none of them into report.html: `cat` of the file acts on no terminal)."""
    return html.escape(terminal_safe(text))


def write_findings_json(diagnoses: list, path: Path) -> None:
    """The findings as JSON, in the one shape `grposcope diagnose --format json` writes (diagnose.document)."""
    import json

    from ..diagnose import document
    from ..logging.jsonl import json_safe

    write_text_atomic(path, json.dumps(json_safe(document(diagnoses)), indent=2, allow_nan=False) + "\n", "--output")


def build_report(runs: list[Run], out: Path, regress: bool, entropy_floor: float, kl_bound: float,
                 unread: list[str] | None = None) -> Report:
    """Plots, report.md and report.html for `runs` in `out` (which exists and is writable); `unread`: the
    paths given that could not be read, with why, for the notes."""
    from .plots import draw_all, plot_regression

    figures = [run_figures(run) for run in runs]
    report = Report(runs, figures, [], unread=unread or [])
    if regress:  # before any plot: a refused regression writes nothing
        report.fit, report.regression_points, report.skipped = fit_runs(runs, figures)
    try:  # matplotlib is drawn with below: imported now, once
        import matplotlib  # noqa: F401
    except ImportError:  # a plain install: the tables, findings and steps.csv without the plots
        report.no_plots = ("no plots: they need matplotlib, which a plain install leaves out: pip install "
                           "'grposcope[report]'")
    else:
        report.plots = draw_all(runs, out, entropy_floor, kl_bound)
        if report.fit is not None and report.regression_points is not None:
            points = report.regression_points
            plot_regression(runs, [p[1] for p in points], [p[2] for p in points], report.fit, out)
    from ..diagnose import Options, diagnose
    from .sampler_evidence import add_sampler_evidence

    report.diagnoses = [diagnose(run, Options(entropy_floor=entropy_floor, kl_bound=kl_bound)) for run in runs]
    add_sampler_evidence(report.diagnoses)
    write_steps_csv(runs, out / "steps.csv")
    write_findings_json(report.diagnoses, out / "findings.json")
    write_markdown(report, out / "report.md")
    write_html(report, out, out / "report.html")
    return report
