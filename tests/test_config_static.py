"""GRPOConfig is visible to static tools: the components' options are dataclass fields in source
(components/fields.py, rendered from the components' signatures by `python -m grposcope.cli.render` and kept in
step here), so an IDE, mypy or pyright sees `acr_threshold_init` and reports a misspelt option before anything
runs; a stale file fails both configs in one line naming that command."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from grposcope.trainer.config_doc import FIELDS_FILE, render_fields

ROOT = Path(__file__).resolve().parents[1]


def test_components_fields_py_is_rendered_from_the_registrations():
    assert FIELDS_FILE.read_text() == render_fields(), (
        "components/fields.py differs from the components' signatures: run python -m grposcope.cli.render")


def test_the_one_render_command_finds_every_rendered_file_current():
    from grposcope.cli.render import main

    assert main(["--check"]) == 0


def test_a_declaration_components_fields_py_lacks_fails_both_configs_in_one_line(monkeypatch):
    """A throwaway estimator with one option, registered after fields.py was rendered: the configs name the
    file, the option and the command, instead of an AttributeError from deep inside their checks."""
    from grposcope.components.options import FieldsOutOfDate
    from grposcope.core.advantages import ESTIMATORS, AdvantageEstimator
    from grposcope.trainer.config import GRPOConfig

    ESTIMATORS.names()  # the family's own entries, loaded before the tables are copied
    for table in ("_entries", "_docs", "_ranges", "_reads", "_hosts"):
        monkeypatch.setattr(ESTIMATORS, table, dict(getattr(ESTIMATORS, table)))

    @ESTIMATORS.register("x", hosts=("grposcope", "trl"))
    class X(AdvantageEstimator):
        """Args:
            x_scale: a throwaway option."""

        def __init__(self, x_scale: float = 1.0) -> None: ...

    line = ("components/fields.py is out of date: option x_scale of advantage estimator 'x' is not a field; "
            "run python -m grposcope.cli.render")
    with pytest.raises(FieldsOutOfDate) as err:
        GRPOConfig()
    assert str(err.value) == line
    trl_config = pytest.importorskip("grposcope.integrations.trl_config")
    with pytest.raises(FieldsOutOfDate) as err:
        trl_config.GRPOConfig(output_dir="unused", report_to="none", use_cpu=True, bf16=False)
    assert str(err.value) == line


def test_every_declared_option_is_a_field_of_both_configs_with_its_default():
    import dataclasses

    from grposcope.components.options import declared
    from grposcope.trainer.config import GRPOConfig

    fields = {f.name: f.default for f in dataclasses.fields(GRPOConfig)}
    for name, option in declared().items():
        assert fields[name] == option.default, name


USER_SCRIPT = """\
from grposcope import GRPOConfig
from grposcope.integrations.trl import GRPOConfig as TRLGRPOConfig

good = GRPOConfig(use_avspo=True, acr_threshold_init=0.3)
bad = GRPOConfig(use_avspo=True, acr_threshhold_init=0.3)
trl_good = TRLGRPOConfig(output_dir="out", use_avspo=True, acr_threshold_init=0.3)
trl_bad = TRLGRPOConfig(output_dir="out", use_avspo=True, acr_threshhold_init=0.3)
"""


def test_the_package_ships_its_py_typed_marker():
    # without it (PEP 561) a user's mypy says "module is installed, but missing library stubs or py.typed
    # marker" and checks nothing against grposcope
    import grposcope

    assert (Path(grposcope.__file__).parent / "py.typed").is_file()


def test_mypy_sees_both_configs_and_reports_a_misspelt_option(tmp_path):
    """A user's script against the installed package, as the user's mypy reads it: grposcope, TRL and
    transformers are read for their types (follow_imports=silent: what mypy does with an installed package),
    torch and the other heavy ones not at all, which keeps the check under a minute."""
    pytest.importorskip("mypy")
    pytest.importorskip("trl")
    (tmp_path / "user_script.py").write_text(USER_SCRIPT)
    (tmp_path / "mypy.ini").write_text(
        "[mypy]\nfollow_imports = silent\nignore_missing_imports = True\n"
        "[mypy-torch.*,numpy.*,scipy.*,yaml.*,rich.*,typer.*,safetensors.*]\nfollow_imports = skip\n")
    result = subprocess.run([sys.executable, "-m", "mypy", "--config-file", "mypy.ini", "--no-incremental",
                             "user_script.py"], capture_output=True, text=True, cwd=tmp_path, timeout=900)
    lines = [line for line in result.stdout.splitlines() if line.startswith("user_script.py")]
    assert [line.split(":")[1] for line in lines] == ["5", "7"], result.stdout + result.stderr
    assert all('Unexpected keyword argument "acr_threshhold_init" for "GRPOConfig"' in line for line in lines)


def test_pyright_sees_both_configs_and_reports_a_misspelt_option(tmp_path):
    """The same script through pyright (the checker behind VS Code), pointed at this interpreter's packages.
    The TRL config's help decorator is typed to return the class it gets: typed `type -> type`, pyright saw a
    bare `type` and took any keyword."""
    pytest.importorskip("trl")
    pyright = Path(sys.executable).with_name("pyright")
    if not pyright.exists():
        pytest.skip("pyright is not installed (pip install 'grposcope[test]')")
    (tmp_path / "user_script.py").write_text(USER_SCRIPT)
    (tmp_path / "pyrightconfig.json").write_text(
        '{"include": ["user_script.py"], "pythonVersion": "3.11"}')
    result = subprocess.run([str(pyright), "--pythonpath", sys.executable, "user_script.py"], capture_output=True,
                            text=True, cwd=tmp_path, timeout=900)
    errors = [line.strip() for line in result.stdout.splitlines() if " - error: " in line]
    assert [e.split(":")[1] for e in errors] == ["5", "7"], result.stdout + result.stderr
    assert all('No parameter named "acr_threshhold_init"' in e for e in errors)
