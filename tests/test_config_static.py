"""GRPOConfig is visible to static tools: the components' options are dataclass fields in source
(components/fields.py, rendered from the registrations and kept in step here), so an IDE, mypy or pyright sees
`acr_threshold_init` and reports a misspelt option before anything runs."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from grposcope.trainer.config_doc import FIELDS_FILE, render_fields

ROOT = Path(__file__).resolve().parents[1]


def test_components_fields_py_is_rendered_from_the_registrations():
    assert FIELDS_FILE.read_text() == render_fields(), (
        "components/fields.py differs from the registrations: python -m grposcope.trainer.config_doc --fields")


def test_every_declared_option_is_a_field_of_both_configs_with_its_default():
    import dataclasses

    from grposcope.components.options import declared
    from grposcope.trainer.config import GRPOConfig

    fields = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    for name, option in declared().items():
        assert fields[name] == option.default, name


def test_mypy_sees_an_avspo_option_and_reports_a_misspelt_one(tmp_path):
    pytest.importorskip("mypy")
    script = tmp_path / "user_script.py"
    script.write_text(textwrap.dedent("""\
        from grposcope import GRPOConfig

        good = GRPOConfig(use_avspo=True, acr_threshold_init=0.4, virtual_sample_alpha=0.3)
        bad = GRPOConfig(use_avspo=True, acr_treshold_init=0.4)
    """))
    config = tmp_path / "mypy.ini"
    # grposcope's own modules are read for their types but not checked (follow_imports=silent); torch,
    # transformers and the rest are not read at all, which keeps the check to seconds
    config.write_text("[mypy]\nfollow_imports = silent\nignore_missing_imports = True\n"
                      "[mypy-torch.*,transformers.*,numpy.*,scipy.*,yaml.*,rich.*,typer.*,safetensors.*]\n"
                      "follow_imports = skip\n")
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(config), "--no-incremental",
                             str(script)], capture_output=True, text=True, cwd=tmp_path, timeout=600,
                            env={"MYPYPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
    lines = [line for line in result.stdout.splitlines() if line.startswith("user_script.py")]
    assert len(lines) == 1, result.stdout + result.stderr
    assert ':4: error: Unexpected keyword argument "acr_treshold_init" for "GRPOConfig"' in lines[0]
