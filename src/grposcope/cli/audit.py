"""`grposcope audit-rewards`: several verifiers on saved completions, and how often they disagree
(grposcope.reports.audit)."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from ..files import check_output_file, write_text_atomic
from ..terminal import terminal_safe
from .app import USER_ERRORS, _console_logging, app, fail, wide_console

# reports.audit's and rewards.builtin's defaults, as plain values: importing those modules imports torch (2 s),
# which `--help` should not wait for. tests/test_audit.py checks that they agree.
_DEFAULT_VERIFIERS = "math_verify,boxed_exact,last_number,grposcope_default"
_DEFAULT_THRESHOLD = 0.05
VERIFY_TIMEOUT_S = 5.0
PROGRESS_MIN_PAIRS = 200  # fewer pairs are verified in a few seconds: no progress display
FLAGGED_EXIT_CODE = 1  # a finding, as diagnose --fail_on; 2 is a usage or input error (docs/usage.md)
_AUDIT_ERRORS = (*USER_ERRORS, ImportError)  # ImportError: math-verify is not installed


@app.command("audit-rewards")
def audit_rewards_command(
    file: Path = typer.Argument(..., help="A completions.jsonl with its answer column, a JSONL of "
                                '{"completion": ..., "answer": ...} pairs ("solution" works too), a stock TRL '
                                "output_dir (completions/*.parquet; with --answer_column) or a verl rollout dump "
                                "folder ({step}.jsonl; its gts are the answers)."),
    answer_column: Optional[str] = typer.Option(None, "--answer_column", help="With a stock TRL output_dir: the "
                                                "column of its completions parquet files that holds each "
                                                "completion's reference answer (a log_extra column)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Audit only the last N steps (default: all)."),
    verifiers: str = typer.Option(_DEFAULT_VERIFIERS, "--verifiers", help="Verifiers to compare, comma "
                                  "separated: math_verify, boxed_exact, last_number, grposcope_default."),
    threshold: float = typer.Option(_DEFAULT_THRESHOLD, "--threshold", help="Flag two verifiers that disagree "
                                    "on more than this share of the pairs both judge, in [0, 1]."),
    examples: int = typer.Option(3, "--examples", help="Examples shown of each kind of disagreement."),
    json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the whole report, examples "
                                            "included, to this JSON file."),
    timeout_s: float = typer.Option(VERIFY_TIMEOUT_S, "--timeout_s", help="Seconds math-verify may spend on "
                                    "one pair before it counts as wrong."),
    fail_on_flag: bool = typer.Option(False, "--fail_on_flag", help=f"Exit with code {FLAGGED_EXIT_CODE} when "
                                      "a disagreement is flagged (for CI)."),
    overwrite: bool = typer.Option(False, "--overwrite", help="Replace an existing --json file."),
) -> None:
    """Check the reward verifiers against each other on saved completions (docs/report.md).

    Each verifier scores every (completion, answer) pair right or wrong. The
    report gives each verifier's accuracy, how often every two disagree (each
    direction counted apart) with examples, and the groups that are all-wrong
    under one verifier only: a verifier that marks right answers wrong
    manufactures all-wrong collapse, groups with zero advantage.

    \b
    Examples:
      grposcope audit-rewards output/quickstart/completions.jsonl
      grposcope audit-rewards pairs.jsonl --fail_on_flag --json audit.json
      grposcope audit-rewards trl_output_dir --answer_column answer --steps 10
      grposcope audit-rewards verl_rollout_dump
    """
    _console_logging()
    try:
        names, pairs = _checked_input(file, verifiers, threshold, examples, timeout_s, json_out, overwrite,
                                      answer_column, steps)
        report = _run_audit(pairs, names, threshold, examples, timeout_s)
        if json_out is not None:
            import json

            write_text_atomic(json_out, json.dumps(report.to_dict(), indent=1, ensure_ascii=False) + "\n",
                              "--json")
    except _AUDIT_ERRORS as err:
        raise fail(err) from None
    _print_report(report, file)
    if json_out is not None:
        typer.echo(f"report written to {json_out}")
    if report.flagged and fail_on_flag:
        raise typer.Exit(FLAGGED_EXIT_CODE)


def _checked_input(file: Path, verifiers: str, threshold: float, examples: int, timeout_s: float,
                   json_out: Optional[Path], overwrite: bool, answer_column: Optional[str] = None,
                   steps: Optional[int] = None) -> tuple[list[str], list[Any]]:
    """Everything the user gave, checked before the first verification: options, the output, the file."""
    from ..reports.audit import verifier_names
    from ..reports.audit_input import read_audit_pairs

    if not 0.0 <= threshold <= 1.0:
        raise ValueError(f"--threshold must be in [0, 1] (a share of the pairs), got {threshold}")
    if examples < 0:
        raise ValueError(f"--examples must be >= 0, got {examples}")
    if not 0 < timeout_s < math.inf:
        raise ValueError(f"--timeout_s must be > 0 and finite, got {timeout_s}; the default is {VERIFY_TIMEOUT_S}")
    names = verifier_names(verifiers)
    if json_out is not None:
        check_output_file(json_out, "--json", overwrite, "audit.json", inputs=(file,))
    return names, read_audit_pairs(file, answer_column, steps)


def _run_audit(pairs: list[Any], names: list[str], threshold: float, examples: int, timeout_s: float) -> Any:
    """The verdicts (with a progress display when there are many pairs), the comparison, and math-verify's
    extractions for the examples shown."""
    from ..reports.audit import add_math_verify_extractions, audit, run_verifiers

    if "math_verify" in names:
        from ..rewards.verifier import default_verifier

        default_verifier().warm_up()  # a missing math-verify fails now, before any pair is scored
    with _Progress(len(pairs)) as progress:
        verdicts = run_verifiers(pairs, names, timeout_s, progress)
    report = audit(pairs, verdicts, threshold, examples)
    add_math_verify_extractions(report, timeout_s)
    return report


class _Progress:
    """Progress over pairs: a rich bar on a terminal, a plain line every tenth elsewhere (logs, CI); nothing
    for fewer than PROGRESS_MIN_PAIRS pairs. Used as `with _Progress(n) as report: report(done, total)`."""

    def __init__(self, total: int) -> None:
        self.total, self.bar, self.task, self.next_line = total, None, None, 0

    def __enter__(self):
        if self.total < PROGRESS_MIN_PAIRS:
            return None
        if sys.stderr.isatty():
            from rich.console import Console
            from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn, TimeRemainingColumn

            self.bar = Progress("verifying", BarColumn(), MofNCompleteColumn(), "pairs", TimeElapsedColumn(),
                                TimeRemainingColumn(), console=Console(stderr=True))
            self.task = self.bar.add_task("verify", total=self.total)
            self.bar.start()
        return self.update

    def update(self, done: int, total: int) -> None:
        if self.bar is not None:
            self.bar.update(self.task, completed=done)
        elif done >= self.next_line or done == total:
            typer.echo(f"verified {done}/{total} pairs", err=True)
            self.next_line = done + max(total // 10, 1)

    def __exit__(self, *exc: Any) -> None:
        if self.bar is not None:
            self.bar.stop()


# ---------------------------------------------------------------- the printed report


def _rate(right: int, judged: int) -> str:
    return f"{right / judged:.3f}" if judged else "-"


def _print_report(report: Any, file: Path) -> None:
    from rich.table import Table
    from rich.text import Text

    from ..reports.audit import WHY_IT_MATTERS, accuracy

    console = wide_console()
    groups = ""
    if report.groups:
        cut = f" (and {report.partial_groups} cut short, left out)" if report.partial_groups else ""
        groups = f", {len(report.groups)} groups{cut}"
    console.print(Text(terminal_safe(f"{file}: {len(report.pairs)} pairs{groups}"), style="bold"))
    table = Table()
    headers = ["verifier", "right", "judged", "accuracy"] + (["all-wrong groups"] if report.groups else [])
    for header in headers:
        table.add_column(header, justify="left" if header == "verifier" else "right")
    for name in report.names:
        right, judged = accuracy(report.verdicts[name])
        extra = [str(report.all_wrong_groups(name))] if report.groups else []
        table.add_row(name, str(right), str(judged), _rate(right, judged), *extra)
    console.print(table)
    console.print(_disagreement_table(report))
    _print_examples(console, report, file.is_dir())
    for comparison in report.flagged:
        console.print(Text(f"FLAG: {report.flag_sentence(comparison)}", style="bold red"))
    if report.flagged:
        console.print(Text(f"Why it matters: {WHY_IT_MATTERS}. Read the examples to see which verifier is "
                           "wrong before trusting its rewards."))
    else:
        console.print(Text(f"No two verifiers disagree on more than {report.threshold:.1%} of the pairs they "
                           "both judge."))


def _disagreement_table(report: Any) -> Any:
    """One row per pair of verifiers: pairs both judge, the disagreement rate, each direction apart, and the
    groups each one alone makes all-wrong."""
    from rich.table import Table

    table = Table(title="disagreements: A right / B wrong and A wrong / B right counted apart",
                  title_justify="left")
    headers = ["A", "B", "judged", "rate", "A right\nB wrong", "A wrong\nB right"]
    headers += ["all-wrong\nunder A only", "all-wrong\nunder B only"] if report.groups else []
    for header in [*headers, "flag"]:
        table.add_column(header, justify="left" if header in ("A", "B", "flag") else "right")
    flagged = report.flagged
    for c in report.comparisons:
        rate = "-" if not c.judged else f"{c.rate:.1%}"
        groups = [str(c.collapse_by_a), str(c.collapse_by_b)] if report.groups else []
        table.add_row(c.a, c.b, str(c.judged), rate, str(c.a_only), str(c.b_only), *groups,
                      f"> {report.threshold:.1%}" if c in flagged else "", style="red" if c in flagged else None)
    return table


def _print_examples(console: Any, report: Any, folder: bool = False) -> None:
    """Each kind of disagreement with its first examples: the line, the answer, the completion, and what
    each verifier read (✓ right, ✗ wrong, - cannot judge)."""
    from rich.text import Text

    marks = {True: "✓", False: "✗", None: "-"}
    for c in report.comparisons:
        for indices, count, kind in ((c.examples_a, c.a_only, f"{c.a} right, {c.b} wrong"),
                                     (c.examples_b, c.b_only, f"{c.a} wrong, {c.b} right")):
            if not indices:
                continue
            console.print(Text(f"{kind}: {len(indices)} of {count}", style="bold"))
            for i in indices:
                shown = report.example(i)
                views = "  ".join(f"{name} {marks[v['right']]} {_extracted(v['extracted'])}"
                                  for name, v in shown["verifiers"].items())
                where = _where(report.pairs[i], shown["line"], folder)
                line = f"  {where}: answer {shown['answer']} | {shown['completion']}"
                console.print(Text(terminal_safe(line)))  # model and data text: no control byte reaches the tty
                console.print(Text(terminal_safe(f"    {views}"), style="dim"))


def _where(pair: Any, line: int, folder: bool) -> str:
    """"line 3" in a JSONL file; "step 2, row 3" in a run's folder, whose rows sit in one file per step."""
    return f"step {pair.group[0]}, row {line}" if folder and pair.group is not None else f"line {line}"


def _extracted(value: Any) -> str:
    return "(none)" if value is None else f'"{value}"'
