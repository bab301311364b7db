"""grposcope diagnose in CI (issue 55): both spellings of an option, the output and its format, the one JSON shape,
the exit codes, and a short text that leads with the cause and speaks the run's engine."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
QUICKSTART = HERE / "fixtures" / "runs" / "quickstart"  # grposcope's own run: no_signal_steps critical
STOCK_TRL = HERE.parent / "experiments" / "results" / "stock_report" / "trl_out"  # collapse and steps without signal
HEALTHY = HERE / "fixtures" / "real_runs" / "gsm8k-grpo-qwen3-baseline"  # its callout: nothing fires


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """The installed command, as CI runs it: real stdout, stderr and exit code."""
    grposcope = Path(sys.executable).parent / "grposcope"
    return subprocess.run([str(grposcope), *map(str, args)], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_exit_codes_are_0_clean_1_a_finding_2_an_error(tmp_path):
    assert cli("diagnose", HEALTHY, "--fail_on", "warning").returncode == 0
    failed = cli("diagnose", QUICKSTART, "--fail-on", "critical")  # the other spelling
    assert failed.returncode == 1 and "--fail_on critical: " in failed.stderr
    for args in (["diagnose", tmp_path / "nope"], ["diagnose", QUICKSTART, "--fail_on", "severe"],
                 ["diagnose", QUICKSTART, "--no_such_option"], ["diagnose", QUICKSTART, "--format", "xml"]):
        result = cli(*args)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and result.stderr.startswith("error: "), result.stderr


@pytest.mark.parametrize("spelling", ["--entropy_floor", "--entropy-floor"])
def test_every_option_takes_both_spellings(spelling):
    result = cli("diagnose", QUICKSTART, spelling, "0.4", "--max-steps", "30")
    assert result.returncode == 0, result.stderr


def test_json_on_stdout_is_the_one_shape_and_the_text_goes_to_stderr(tmp_path):
    result = cli("diagnose", QUICKSTART, STOCK_TRL, "--format", "json", "-o", "-")
    document = json.loads(result.stdout)
    assert document["schema"] == "grposcope.findings/1" and [r["run"] for r in document["runs"]] == [
        "quickstart", "trl_out"]
    run = document["runs"][0]
    assert {"findings", "cost", "cost_line", "unchecked", "worst", "source"} <= set(run)
    assert run["cost"]["steps"] == 20 and run["worst"] == "critical"
    beside = cli("diagnose", QUICKSTART, "--json", "-")
    assert json.loads(beside.stdout) == json.loads(cli("diagnose", QUICKSTART, "--format", "json").stdout)
    assert "no_signal_steps" in beside.stderr  # the text, on stderr
    assert not (tmp_path / "-").exists() and not Path("-").exists()


@pytest.mark.parametrize("fmt, check", [("md", lambda t: t.startswith("# grposcope diagnose")),
                                        ("html", lambda t: t.startswith("<!doctype html>") and "</html>" in t),
                                        ("text", lambda t: t.startswith("quickstart ") and "\x1b" not in t)])
def test_each_format_to_a_file(tmp_path, fmt, check):
    out = tmp_path / f"diagnosis.{fmt}"
    result = cli("diagnose", QUICKSTART, "--format", fmt, "-o", out)
    assert result.returncode == 0 and result.stdout == "", result.stderr
    assert check(out.read_text())


def test_an_output_is_never_an_input_nor_an_existing_file_without_overwrite(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_bytes((QUICKSTART / "metrics.jsonl").read_bytes())
    before = (run / "metrics.jsonl").read_bytes()
    for flag in ("-o", "--json"):
        result = cli("diagnose", run, flag, run / "metrics.jsonl", "--overwrite")
        assert result.returncode == 2 and "is one of the runs given" in result.stderr
    assert (run / "metrics.jsonl").read_bytes() == before
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    result = cli("diagnose", run, "--json", notes)
    assert result.returncode == 2 and "pass --overwrite" in result.stderr and notes.read_text() == "mine"
    assert cli("diagnose", run, "--json", notes, "--overwrite").returncode == 0
    assert json.loads(notes.read_text())["schema"] == "grposcope.findings/1"


def test_the_text_leads_with_the_cause_and_speaks_the_runs_engine():
    text = cli("diagnose", STOCK_TRL).stdout
    findings = [line.split()[1] for line in text.splitlines() if line.startswith("  CRITICAL ")
                or line.startswith("  WARNING ")]
    assert findings[0] == "advantage_collapse" and "no_signal_steps" not in findings  # one cause, not two CRITICALs
    assert "- and so no_signal_steps (critical)" in text
    assert "fix (grposcope)" not in text and "fix (verl)" not in text and "      fix: " in text  # TRL's terms only
    assert "arXiv 2503.14476" in text and "DAPO: An Open-Source" not in text  # papers by number
    assert len(text.splitlines()) <= 25, text
    full = cli("diagnose", STOCK_TRL, "--verbose").stdout
    assert "fix (grposcope)" in full and "fix (verl)" in full and "DAPO: An Open-Source" in full
    assert "  CRITICAL no_signal_steps" in full


def test_a_wrapped_line_keeps_its_indent():
    from rich.console import Console

    from grposcope.diagnose import diagnose
    from grposcope.diagnose.render import rich_diagnosis
    from grposcope.runs import load_run

    console = Console(width=70, record=True, color_system=None)
    for renderable in rich_diagnosis(diagnose(load_run(STOCK_TRL))):
        console.print(renderable)
    lines = console.export_text().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("  CRITICAL"))  # after the run's header
    body = [line for line in lines[first:] if line.strip()]
    assert all(line.startswith("  ") for line in body), [line for line in body if not line.startswith("  ")]
    evidence = [i for i, line in enumerate(lines) if line.startswith("      - ")]
    wrapped = [lines[i + 1] for i in evidence if i + 1 < len(lines) and not lines[i + 1].lstrip().startswith(
        ("- ", "fix", "refs", "CRITICAL", "WARNING", "INFO", "cost", "not checked", "keys"))]
    assert wrapped and all(line.startswith(" " * 6) for line in wrapped), wrapped


def test_a_fix_the_run_already_has_is_not_suggested_again():
    from grposcope.diagnose import diagnose
    from grposcope.diagnose.findings import applied_settings, without_applied
    from grposcope.runs import load_run

    fix = ("skip_no_signal_steps=True (the default); use_avspo=True or sampler='dynamic' / 'reinforce_ada' so that "
           "steps carry signal")
    assert without_applied(fix, {"use_avspo": False}) == fix
    said = without_applied(fix, {"use_avspo": True, "skip_no_signal_steps": True})
    assert said.startswith("sampler='dynamic'")
    assert "already on in this run: skip_no_signal_steps=True, use_avspo=True" in said
    # grposcope's own run shows AVSPO in its metrics (avspo/*): its collapse fix names the next lever
    run = load_run(QUICKSTART)
    assert applied_settings(run)["use_avspo"] is True
    text = cli("diagnose", QUICKSTART).stdout
    collapse = text.split("advantage_collapse", 1)[1]
    assert "fix: use_avspo=True" not in collapse and "already on in this run: use_avspo=True" in " ".join(
        collapse.split())
    assert diagnose(run).findings  # the data keeps every finding; only what is said changes


def test_the_live_diagnosis_says_no_fix_the_trainer_has_on(caplog):
    import logging

    from grposcope.diagnose.live import LiveDiagnosis

    live = LiveDiagnosis("r", every=2, settings={"use_avspo": True, "skip_no_signal_steps": True})
    with caplog.at_level(logging.WARNING, logger="grposcope"):
        for step in range(1, 9):
            live.add(step, {"reward": 0.0, "reward_std": 0.0, "grad_norm": 0.0, "frac_reward_zero_std": 1.0})
    said = " ".join(r.getMessage() for r in caplog.records)
    assert "fix: use_avspo=True" not in said and "fix: skip_no_signal_steps=True" not in said
    assert "already on in this run" in said


def test_one_name_for_the_output_and_the_old_one_still_works_with_a_note(tmp_path):
    new = cli("report", QUICKSTART, "-o", tmp_path / "a")
    assert new.returncode == 0 and (tmp_path / "a" / "report.md").is_file() and "note: --out" not in new.stderr
    old = cli("report", QUICKSTART, "--out", tmp_path / "b")
    assert old.returncode == 0 and (tmp_path / "b" / "report.md").is_file()
    assert "note: --out is now --output" in old.stderr
    for command in ("report", "probe", "sweep", "simulate", "eval", "diagnose"):
        assert "--output" in cli(command, "--help").stdout, command


def test_the_demo_shows_a_diagnosis_of_a_shipped_run():
    result = cli("demo")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("demo  (a TRL run") and "CRITICAL advantage_collapse" in result.stdout
    assert "grposcope diagnose OUTPUT_DIR" in result.stdout


def test_an_alarm_never_advises_an_option_the_run_has_on(caplog):
    import logging

    from grposcope.core.alarms import AlarmRules, Alarms

    alarms = Alarms(AlarmRules(stagnation_acr=0.35, stagnation_steps=2))
    alarms.settings = {"use_avspo": True}  # as grposcope's trainer sets it from its config
    with caplog.at_level(logging.WARNING, logger="grposcope"):
        for step in range(1, 5):
            alarms.update(step, acr=1.0)
    said = " ".join(r.getMessage() for r in caplog.records if "alarm at step" in r.getMessage())
    assert "stagnation" in said and "use_avspo=True," not in said and "already on in this run: use_avspo=True" in said



def test_text_output_in_a_pipe_has_no_trailing_spaces():
    out = cli("diagnose", STOCK_TRL).stdout  # rich pads each line to the console's 160 columns in a pipe
    lines = out.splitlines()
    assert lines and not [line for line in lines if line.endswith(" ")]
    assert max(map(len, lines)) > 100  # still laid out for 160 columns, not rich's 80
