"""A full disk while a command writes its output (`audit-rewards --json`, `simulate --output / --plot`,
`diagnose --json`): one error line naming the file and the fix, and no 0-byte file left for a rerun to refuse
as "already exists" (every output goes through files.atomic_output: a temporary file, then a rename)."""

from __future__ import annotations

import errno
import json
import os

import pytest
from typer.testing import CliRunner

from grposcope.cli import app
from grposcope.files import atomic_output, write_text_atomic

FIXTURE_RUN = os.path.join(os.path.dirname(__file__), "fixtures", "runs", "quickstart")


def _full_disk(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _invoke(args):
    result = CliRunner().invoke(app, [str(a) for a in args])
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


def _leftovers(folder):
    return sorted(p.name for p in folder.iterdir())


def test_write_text_atomic_leaves_the_old_file_on_a_full_disk(tmp_path, monkeypatch):
    path = tmp_path / "out.json"
    path.write_text("old\n")
    monkeypatch.setattr("grposcope.files.os.fsync", _full_disk)
    with pytest.raises(OSError, match=r"no space left on the disk of --json .*out\.json .*Free space on that "
                                      r"disk, or choose another --json"):
        write_text_atomic(path, "new\n", "--json")
    assert path.read_text() == "old\n"
    assert _leftovers(tmp_path) == ["out.json"]


def test_an_output_gets_the_mode_a_plain_write_gives(tmp_path):
    write_text_atomic(tmp_path / "a.json", "{}\n")
    (tmp_path / "b.json").write_text("{}\n")
    assert (tmp_path / "a.json").stat().st_mode == (tmp_path / "b.json").stat().st_mode


def test_a_refused_write_names_the_path_and_the_fix(tmp_path):
    def refuse(_tmp):
        raise PermissionError(errno.EACCES, "Permission denied")

    with pytest.raises(PermissionError, match=r"--output .*a\.png cannot be written \(Permission denied\); "
                                              r"choose another --output"):
        with atomic_output(tmp_path / "a.png", "--output") as tmp:
            refuse(tmp)
    assert _leftovers(tmp_path) == []


def test_simulate_on_a_full_disk_names_the_output_and_leaves_no_empty_file(tmp_path, monkeypatch):
    out = tmp_path / "sim.json"
    monkeypatch.setattr("grposcope.files.os.fsync", _full_disk)
    code, lines = _invoke(["simulate", "--steps", "3", "--prompts", "8", "--batch_size", "4", "--output", out])
    assert code == 2
    assert lines[-1].startswith("error: no space left on the disk of --output ")
    assert str(out) in lines[-1] and "Free space on that disk" in lines[-1]
    assert _leftovers(tmp_path) == []
    monkeypatch.undo()  # the disk has room again: the rerun writes, no "already exists"
    code, _ = _invoke(["simulate", "--steps", "3", "--prompts", "8", "--batch_size", "4", "--output", out])
    assert code == 0 and json.loads(out.read_text())["runs"]


def test_simulate_plot_on_a_full_disk_leaves_no_empty_png(tmp_path, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def half_then_full(self, fname, *args, **kwargs):
        open(fname, "wb").close()  # the 0-byte file a full disk used to leave
        _full_disk()

    monkeypatch.setattr(Figure, "savefig", half_then_full)
    code, lines = _invoke(["simulate", "--steps", "3", "--prompts", "8", "--batch_size", "4",
                           "--output", tmp_path / "sim.json", "--plot", tmp_path / "sim.png"])
    assert code == 2
    assert "no space left on the disk of --plot " in lines[-1] and "sim.png" in lines[-1]
    assert "sim.png" not in _leftovers(tmp_path)
    assert not [name for name in _leftovers(tmp_path) if name.startswith(".")]


def test_audit_json_on_a_full_disk_names_the_file(tmp_path, monkeypatch):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps({"completion": c, "answer": "4"}) + "\n" for c in ("4", "5", "\\boxed{4}")))
    out = tmp_path / "a.json"
    monkeypatch.setattr("grposcope.files.os.fsync", _full_disk)
    code, lines = _invoke(["audit-rewards", pairs, "--verifiers", "boxed_exact,last_number", "--json", out])
    assert code == 2
    assert lines[-1].startswith("error: no space left on the disk of --json ") and "a.json" in lines[-1]
    assert _leftovers(tmp_path) == ["pairs.jsonl"]


def test_diagnose_json_on_a_full_disk_names_the_file(tmp_path, monkeypatch):
    out = tmp_path / "findings.json"
    monkeypatch.setattr("grposcope.files.os.fsync", _full_disk)
    code, lines = _invoke(["diagnose", FIXTURE_RUN, "--json", out])
    assert code == 2, lines
    assert lines[-1].startswith("error: no space left on the disk of --json ") and "findings.json" in lines[-1]
    assert _leftovers(tmp_path) == []
