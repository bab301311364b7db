"""Issue 40, points 12 and 15 for `grposcope report` and `forecast`: a log that cannot be read and an output that
cannot be written are named in one line with the fix, not as a raw `[Errno 13]`; a full disk names the file
and leaves no 0-byte output behind for a rerun to refuse.

Tests run as root, where chmod does not stop a read: the refusal is the operating system's error, raised by
`open` (builtins.open and io.open, which pathlib calls) for the one path; a real chmod is tried where it can."""

from __future__ import annotations

import builtins
import errno
import io
import json
import os
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grposcope.cli import app

FIXTURES = Path(__file__).parent / "fixtures" / "runs"


def refuse_open(monkeypatch, target: Path, code: int = errno.EACCES) -> None:
    """`open` of `target` fails as the OS fails it (a PermissionError carrying the file's name)."""
    real = builtins.open

    def fake(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and Path(file).resolve() == target.resolve():
            raise OSError(code, os.strerror(code), os.fspath(file))
        return real(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake)
    monkeypatch.setattr(io, "open", fake)


def _one_line_error(result) -> str:
    assert result.exit_code == 2, result.output
    lines = result.output.strip().splitlines()
    assert len(lines) == 1, result.output
    return lines[0]


def test_report_on_an_unreadable_metrics_file_names_it_and_the_fix(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "quickstart", tmp_path / "run")
    refuse_open(monkeypatch, tmp_path / "run" / "metrics.jsonl")
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--output", str(tmp_path / "r")])
    path = tmp_path / "run" / "metrics.jsonl"
    assert _one_line_error(result) == (f"error: {path} cannot be read (Permission denied); let this user read it "
                                       f"(e.g. chmod a+rX {path}), or run grposcope as the user who wrote it")


def test_report_skips_an_unreadable_trl_log_of_two_runs_naming_it(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "quickstart", tmp_path / "run")
    shutil.copytree(FIXTURES / "trl_avspo", tmp_path / "trl")
    path = tmp_path / "trl" / "trainer_state.json"
    refuse_open(monkeypatch, path)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), str(tmp_path / "trl"), "--output",
                                      str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    assert f"skipped {tmp_path / 'trl'}: {path} cannot be read (Permission denied); let this user read it" in \
        " ".join(result.output.split()), result.output
    assert "[Errno" not in result.output


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads a file whatever its mode")
def test_report_on_a_metrics_file_without_read_permission(tmp_path):
    shutil.copytree(FIXTURES / "quickstart", tmp_path / "run")
    (tmp_path / "run" / "metrics.jsonl").chmod(0)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--output", str(tmp_path / "r")])
    assert "cannot be read (Permission denied); let this user read it" in _one_line_error(result)


def test_forecast_on_an_unreadable_probe_file_names_it_and_the_fix(tmp_path, monkeypatch):
    probe = tmp_path / "probe.jsonl"
    probe.write_text(json.dumps({"prompt": "a", "k": 8, "successes": 3}) + "\n")
    refuse_open(monkeypatch, probe)
    result = CliRunner().invoke(app, ["forecast", str(probe), "--mc_groups", "10"])
    assert _one_line_error(result) == (f"error: {probe} cannot be read (Permission denied); let this user read it "
                                       f"(e.g. chmod a+rX {probe}), or run grposcope as the user who wrote it")


def test_report_out_that_cannot_be_created_says_choose_another_out(tmp_path, monkeypatch):
    shutil.copytree(FIXTURES / "quickstart", tmp_path / "run")
    out = tmp_path / "r"
    real = Path.mkdir

    def refuse(self, *args, **kwargs):  # the folder above --output refuses a new entry
        if self == out:
            raise PermissionError(errno.EACCES, "Permission denied", str(self))
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Path, "mkdir", refuse)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--output", str(out)])
    assert _one_line_error(result) == (f"error: --output {out} cannot be written: creating it fails (Permission "
                                       "denied); choose another --output")


def _full_disk_at(monkeypatch, name: str) -> None:
    """A full disk when a file called `name` (or a temporary file for it) is written: the file is created, then
    the first write fails, as on a real full disk."""
    from matplotlib.figure import Figure

    real_open, real_savefig = builtins.open, Figure.savefig

    def is_it(file) -> bool:
        return isinstance(file, (str, os.PathLike)) and (Path(file).name == name or
                                                         Path(file).name.startswith(f".{name}."))

    def fake_open(file, mode="r", *args, **kwargs):
        if is_it(file) and ("w" in mode or "a" in mode):
            real_open(file, mode, *args, **kwargs).close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_open(file, mode, *args, **kwargs)

    def fake_savefig(self, fname, *args, **kwargs):
        if is_it(fname):
            real_open(fname, "wb").close()
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_savefig(self, fname, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(Figure, "savefig", fake_savefig)


def _error_line(result) -> str:
    """The error of a run that printed what it read first: one line, the last."""
    assert result.exit_code == 2, result.output
    errors = [line for line in result.output.strip().splitlines() if line.startswith("error")]
    assert len(errors) == 1 and result.output.strip().endswith(errors[0]), result.output
    return errors[0]


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir()) if folder.is_dir() else []


@pytest.mark.parametrize("name", ["acr.png", "report.md", "steps.csv", "report.html"])
def test_report_on_a_full_disk_names_the_file_and_leaves_no_empty_one(tmp_path, monkeypatch, name):
    shutil.copytree(FIXTURES / "quickstart", tmp_path / "run")
    out = tmp_path / "r"
    _full_disk_at(monkeypatch, name)
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--output", str(out)])
    line = _error_line(result)
    assert line.startswith(f"error: no space left on the disk of --output {out / name} (No space left on device)"), line
    assert line.endswith("choose another --output"), line
    assert _left(out) == []  # no 0-byte file, no temporary one, nothing a rerun refuses or that holds its room
    monkeypatch.undo()  # room again: the rerun is not refused by a file the full disk left
    result = CliRunner().invoke(app, ["report", str(tmp_path / "run"), "--output", str(out)])
    assert result.exit_code == 0, result.output


def test_forecast_plot_on_a_full_disk_names_it_and_leaves_no_empty_file(tmp_path, monkeypatch):
    probe = tmp_path / "probe.jsonl"
    probe.write_text("".join(json.dumps({"prompt": p, "k": 8, "successes": c}) + "\n" for p, c in (("a", 3), ("b", 8))))
    plot = tmp_path / "f.png"
    _full_disk_at(monkeypatch, "f.png")
    result = CliRunner().invoke(app, ["forecast", str(probe), "--mc_groups", "10", "--plot", str(plot)])
    line = _error_line(result)
    assert line.startswith(f"error: no space left on the disk of --plot {plot} (No space left on device)"), line
    assert _left(tmp_path) == ["probe.jsonl"]
