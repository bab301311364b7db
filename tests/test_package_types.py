"""grposcope ships a py.typed marker (PEP 561), so a user's mypy reads grposcope's own annotations: they must
hold. mypy over the package as a user's mypy follows an installed one (follow_imports=silent), third-party
packages without types ignored: no error."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_mypy_finds_no_error_in_the_package():
    pytest.importorskip("mypy")
    result = subprocess.run([sys.executable, "-m", "mypy", "--ignore-missing-imports", "--follow-imports=silent",
                             "--no-incremental", "src/grposcope"], capture_output=True, text=True, cwd=ROOT,
                            timeout=900)
    assert result.returncode == 0 and result.stdout.startswith("Success"), result.stdout + result.stderr


# What the check found on its way to 0 errors, each now a behaviour of its own (a TRL parquet's infinite
# advantage cell is tests/test_stock_runs.py's).


def test_resolve_names_a_resume_spec_that_is_no_checkpoint(tmp_path):
    from grposcope.trainer import checkpoint

    with pytest.raises(TypeError, match="resume_from_checkpoint=False names no checkpoint"):
        checkpoint.resolve(False, tmp_path)


def test_unused_options_reads_a_config_with_a_field_without_default():
    import dataclasses

    from grposcope import GRPOConfig
    from grposcope.trainer.options import unused_options

    @dataclasses.dataclass
    class Required(GRPOConfig):  # a user's subclass may add a required field: it was called as a factory
        team: str = dataclasses.field(default=dataclasses.MISSING, kw_only=True)  # type: ignore[assignment]

    assert unused_options(Required(team="a")) == []
