"""Registries that cannot lose an entry (issue 57): the detectors, the log formats and the plug-in families whose
entries live in modules of their own are found by their registry's own discovery (core.registry.entry_modules),
never by an import line someone must remember.

Each check reads what the package's files define, independently of the registry (its own listing of the *.py
files in the package's folders, their classes or their `register` decorators), and compares it with what the
registry and the command line show. The planted-module tests prove the checks can fail: a module planted in a
temporary folder on the package's path is found with no line added anywhere, and the same module, hidden from a
discovery that went back to a list of modules, is named as missing.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from types import ModuleType

import pytest
from typer.testing import CliRunner

import grposcope.core.registry as core_registry
import grposcope.diagnose.detectors as detectors_package
import grposcope.runs.formats as formats_package
from grposcope.cli import app
from grposcope.core.loss_registry import POLICY_LOSSES
from grposcope.core.registry import Registry
from grposcope.diagnose.detectors import DETECTORS, Detector
from grposcope.rollout import ROLLOUTS
from grposcope.sampling import SAMPLERS, Sampler

PLANTED = "zz_planted"  # a module's name sorts last: between the named entries and `last` in `ordered`

# the order the formats were asked in before discovery (runs/formats/__init__.py's MODULES): behaviour kept
CLAIMING_ORDER = ["grposcope", "trl", "verl", "verl-logger", "wandb", "tensorboard", "table", "console", "folder"]


def package_modules(package: ModuleType) -> list[ModuleType]:
    """Every module in the folders of `package` (its *.py files but __init__, read from the disk, not through the
    registry's discovery), imported."""
    names = sorted({p.stem for folder in package.__path__ for p in Path(folder).glob("*.py")} - {"__init__"})
    return [importlib.import_module(f"{package.__name__}.{name}") for name in names]


def defined_classes(package: ModuleType, base: type) -> list[type]:
    """The subclasses of `base` that the modules of `package` define (not those they import)."""
    return [cls for module in package_modules(package) for _, cls in inspect.getmembers(module, inspect.isclass)
            if issubclass(cls, base) and cls is not base and cls.__module__ == module.__name__]


def defined_detectors() -> list[type[Detector]]:
    """The detectors the package defines: every Detector subclass, but a shared base another one derives from.
    A subclass without a name is a detector that forgot it, unless it is such a base."""
    classes = defined_classes(detectors_package, Detector)
    bases = {b for cls in classes for b in cls.__mro__[1:]}
    nameless = [cls.__qualname__ for cls in classes if not cls.name and cls not in bases]
    assert not nameless, f"Detector subclasses without a name: {nameless}"
    return [cls for cls in classes if cls.name]


def detector_rows(output: str) -> list[str]:
    """The detectors `grposcope diagnose --list` shows: the first cell of each row of its table."""
    cells = [line.split("│")[1].strip() for line in output.splitlines() if line.startswith("│")]
    return [cell for cell in cells if cell]


def listed_detectors() -> list[str]:
    """`grposcope diagnose --list`'s detectors, run in this process (where a module was planted)."""
    result = CliRunner().invoke(app, ["diagnose", "--list"])
    assert result.exit_code == 0, result.output
    return detector_rows(result.output)


def in_a_fresh_process(code: str) -> str:
    """What `code` prints in a new interpreter: there, only the registry's discovery has imported the entries'
    modules (in this one, the checks' own imports register them too)."""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout


def unlisted_detectors(shown: list[str]) -> list[str]:
    """The detectors a module of the package defines that `shown` (`diagnose --list`'s) lacks. Take `shown`
    before calling this: it imports every module of the package, which registers their detectors."""
    return [f"{cls.__module__}.{cls.__qualname__} ({cls.name!r})" for cls in defined_detectors()
            if cls.name not in shown or DETECTORS.get(cls.name) is not cls]


def registered_in_source(package: ModuleType, registry: Registry) -> dict[str, str]:
    """name -> module of every `@X.register("name", ...)` in the modules of `package` where X is `registry`."""
    found = {}
    for module in package_modules(package):
        for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "register"
                    and isinstance(node.func.value, ast.Name) and getattr(module, node.func.value.id, None) is registry
                    and node.args and isinstance(node.args[0], ast.Constant)):
                found[node.args[0].value] = module.__name__
    return found


def formats_in_source() -> dict[str, str]:
    """name -> module of every `@register("name", ...)` in the modules of runs/formats/."""
    found = {}
    for module in package_modules(formats_package):
        for node in ast.walk(ast.parse(Path(module.__file__).read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "register"
                    and node.args and isinstance(node.args[0], ast.Constant)):
                found[node.args[0].value] = module.__name__
    return found


def asked_formats() -> tuple[list[str], str]:
    """The formats `claiming` asks, in order, and the line that says them (`described`), in this process."""
    return [f.name for f in formats_package.formats()], formats_package.described()


def unlisted_formats(asked: list[str], said: str) -> list[str]:
    """The formats a module of runs/formats/ registers that `asked` (`formats()`) or `said` (the line listing
    them in the error on a path none claims) lacks."""
    source = formats_in_source()
    whats = {f.name: f.what for f in formats_package.FORMATS.values()}
    return [f"{module} ({name!r})" for name, module in source.items()
            if name not in asked or whats.get(name, "?") not in said]


# --- the package as it is -------------------------------------------------------------------------------------

def test_every_detector_a_module_defines_is_shown_by_diagnose_list():
    shown = detector_rows(in_a_fresh_process("from grposcope.cli import run\nimport sys\n"
                                             "sys.argv = ['grposcope', 'diagnose', '--list']\nrun()"))
    defined = defined_detectors()
    assert len(defined) >= 11  # the eleven of issue 57's time, at least
    assert unlisted_detectors(shown) == []
    # and nothing is listed that no module defines
    assert sorted(shown) == sorted(cls.name for cls in defined)


def test_every_detector_has_its_row_in_diagnose_md():
    """docs/diagnose.md's table of the detectors: when each fires, what keeps it quiet, its severity."""
    text = (Path(__file__).parents[1] / "docs" / "diagnose.md").read_text()
    table = text.split("\n## The detectors\n", 1)[1].split("\n## ", 1)[0]
    rows = {line.split("|")[1].strip().strip("`") for line in table.splitlines() if line.startswith("| `")}
    assert sorted(cls.name for cls in defined_detectors() if cls.name not in rows) == []


def test_every_log_format_a_module_registers_is_asked_and_said():
    asked, said = json.loads(in_a_fresh_process(
        "import json\nfrom grposcope.runs.formats import formats, described\n"
        "print(json.dumps([[f.name for f in formats()], described()]))"))
    assert len(formats_in_source()) >= len(CLAIMING_ORDER)
    assert unlisted_formats(asked, said) == []
    assert sorted(asked) == sorted(formats_in_source())


def test_the_formats_are_asked_in_the_order_they_always_were():
    """The claiming order is behaviour: a TRL folder with runs/ read as TensorBoard, any text as a console log,
    if it moved. Each format's place is its priority, not an import list's order."""
    names = [f.name for f in formats_package.formats()]
    assert [n for n in names if n in CLAIMING_ORDER] == CLAIMING_ORDER
    priorities = [f.priority for f in formats_package.formats()]
    assert len(set(priorities)) == len(priorities)  # no tie left to the order modules were imported in


@pytest.mark.parametrize("registry, package, where", [
    (SAMPLERS, "grposcope.sampling", "grposcope.sampling.registry import SAMPLERS"),
    (POLICY_LOSSES, "grposcope.core", "grposcope.core.loss_registry import POLICY_LOSSES"),
    (ROLLOUTS, "grposcope.rollout", "grposcope.rollout.registry import ROLLOUTS"),
], ids=["samplers", "policy losses", "rollout backends"])
def test_every_entry_a_module_registers_is_found(registry, package, where):
    found = json.loads(in_a_fresh_process(f"import json\nfrom {where} as r\nprint(json.dumps(r.names()))"))
    source = registered_in_source(importlib.import_module(package), registry)
    assert source and sorted(source) == found == registry.names()
    assert all(registry.get(name).__module__ == module for name, module in source.items())
    assert registry.package == package
    assert set(registry.first + registry.last) <= set(registry.names())  # the order names no stale entry


def test_every_sampler_class_a_module_defines_is_registered():
    registered = json.loads(in_a_fresh_process(
        "import json\nfrom grposcope.sampling import SAMPLERS as r\n"
        "print(json.dumps([f'{r.get(n).__module__}.{r.get(n).__qualname__}' for n in r.names()]))"))
    defined = defined_classes(importlib.import_module("grposcope.sampling"), Sampler)
    assert [f"{cls.__module__}.{cls.__qualname__}" for cls in defined
            if f"{cls.__module__}.{cls.__qualname__}" not in registered] == []


def test_the_families_keep_their_order():
    """The order tables and forecasts list them in: the baseline first, grposcope's own last."""
    assert SAMPLERS.ordered() == ["fixed", "dynamic", "reinforce_ada", "greso", "knapsack", "budgeted"]
    assert SAMPLERS.names_in("trl") == ["fixed", "dynamic", "reinforce_ada", "greso", "budgeted"]
    assert SAMPLERS.names_in("verl") == ["fixed", "reinforce_ada", "budgeted"]
    assert POLICY_LOSSES.ordered() == ["grpo", "cispo", "gspo"]
    assert ROLLOUTS.ordered() == ["transformers"]


def test_discovery_skips_private_modules_and_subpackages(tmp_path, monkeypatch):
    root = tmp_path / "discovered_pkg"
    (root / "sub").mkdir(parents=True)
    for path in ("__init__.py", "b.py", "a.py", "_helper.py", "sub/__init__.py", "notes.txt"):
        (root / path).write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert core_registry.entry_modules("discovered_pkg") == ["discovered_pkg.a", "discovered_pkg.b"]
    finally:
        sys.modules.pop("discovered_pkg", None)


# --- the checks can fail: a module planted on the package's path -------------------------------------------------

DETECTOR_MODULE = '''
from .base import Detector, register
from ..findings import Fix


@register
class Planted(Detector):
    name = "planted_detector"
    needs = (("reward/mean",),)
    summary = "a detector no import line names"
    fix = Fix(grposcope="none", trl="none", verl="none")

    def detect(self, view):
        return []
'''

UNREGISTERED_DETECTOR_MODULE = '''
from .base import Detector
from ..findings import Fix


class Forgotten(Detector):  # no @register
    name = "forgotten_detector"
    fix = Fix(grposcope="none", trl="none", verl="none")
'''

FORMAT_MODULE = '''
from . import register


def claims(path):
    return False


@register("planted-format", "a planted format no list names", claims, priority=60)
def read(path, name, options):
    raise AssertionError("never claims")
'''

SAMPLER_MODULE = '''
from .fixed import Fixed
from .registry import SAMPLERS


@SAMPLERS.register("planted_sampler")
class Planted(Fixed):
    """fixed, under another name"""
'''


def plant(monkeypatch, tmp_path: Path, package: ModuleType, source: str, registry: Registry | None = None) -> str:
    """Plants module `PLANTED` with `source` in a folder added to `package`'s path; `registry` (or the formats')
    forgets it found its entries and registers into copies of its tables, which the test's end puts back.
    Returns the planted module's dotted name (forgotten at the test's end)."""
    folder = tmp_path / package.__name__
    folder.mkdir()
    (folder / f"{PLANTED}.py").write_text(textwrap.dedent(source))
    monkeypatch.setattr(package, "__path__", [*package.__path__, str(folder)])
    if registry is None:
        monkeypatch.setattr(formats_package, "FORMATS", dict(formats_package.FORMATS))
        monkeypatch.setattr(formats_package, "_loaded", False)
    else:
        for table in ("_entries", "_docs", "_ranges", "_reads", "_hosts"):
            monkeypatch.setattr(registry, table, dict(getattr(registry, table)))
        monkeypatch.setattr(registry, "_modules", registry._modules)
        monkeypatch.setattr(registry, "_loaded", False)
    name = f"{package.__name__}.{PLANTED}"
    monkeypatch.setitem(sys.modules, name, None)  # put back (removed) when the test ends ...
    del sys.modules[name]  # ... and absent now, so that it is imported
    return name


def as_import_list(monkeypatch, target: ModuleType, planted: str) -> None:
    """Discovery gone back to a list of modules someone keeps: every module but the planted one."""
    found = core_registry.entry_modules
    monkeypatch.setattr(target, "entry_modules", lambda package: [m for m in found(package) if m != planted])


@pytest.fixture
def no_planted_attribute():
    yield
    for package in (detectors_package, formats_package, sys.modules["grposcope.sampling"]):
        if hasattr(package, PLANTED):
            delattr(package, PLANTED)


def test_a_planted_detector_module_is_found_and_listed(monkeypatch, tmp_path, no_planted_attribute):
    plant(monkeypatch, tmp_path, detectors_package, DETECTOR_MODULE, DETECTORS)
    shown = listed_detectors()
    assert "planted_detector" in shown
    assert unlisted_detectors(shown) == []


def test_the_detector_check_fails_on_a_detector_an_import_list_forgot(monkeypatch, tmp_path, no_planted_attribute):
    planted = plant(monkeypatch, tmp_path, detectors_package, DETECTOR_MODULE, DETECTORS)
    as_import_list(monkeypatch, core_registry, planted)
    shown = listed_detectors()
    assert "planted_detector" not in shown
    assert unlisted_detectors(shown) == [f"{planted}.Planted ('planted_detector')"]


def test_the_detector_check_fails_on_a_detector_never_registered(monkeypatch, tmp_path, no_planted_attribute):
    planted = plant(monkeypatch, tmp_path, detectors_package, UNREGISTERED_DETECTOR_MODULE, DETECTORS)
    assert unlisted_detectors(listed_detectors()) == [f"{planted}.Forgotten ('forgotten_detector')"]


def test_a_planted_log_format_is_found_and_asked_by_its_priority(monkeypatch, tmp_path, no_planted_attribute):
    plant(monkeypatch, tmp_path, formats_package, FORMAT_MODULE)
    asked, said = asked_formats()
    at = asked.index("planted-format")  # priority 60: after tensorboard's 50, before table's 70
    assert asked.index("tensorboard") < at < asked.index("table")
    assert [n for n in asked if n in CLAIMING_ORDER] == CLAIMING_ORDER
    assert "a planted format no list names" in said
    assert unlisted_formats(asked, said) == []


def test_the_format_check_fails_on_a_format_an_import_list_forgot(monkeypatch, tmp_path, no_planted_attribute):
    planted = plant(monkeypatch, tmp_path, formats_package, FORMAT_MODULE)
    as_import_list(monkeypatch, formats_package, planted)
    asked, said = asked_formats()
    assert "planted-format" not in asked
    assert unlisted_formats(asked, said) == [f"{planted} ('planted-format')"]


def test_a_format_without_a_priority_fails_to_register():
    with pytest.raises(TypeError, match="missing 1 required keyword-only argument: 'priority'"):
        formats_package.register("unplaced", "a format", lambda path: False)


def test_a_planted_sampler_is_found_and_listed_before_grposcopes_own(monkeypatch, tmp_path, no_planted_attribute):
    sampling = sys.modules["grposcope.sampling"]
    plant(monkeypatch, tmp_path, sampling, SAMPLER_MODULE, SAMPLERS)
    assert SAMPLERS.ordered() == ["fixed", "dynamic", "reinforce_ada", "greso", "knapsack", "planted_sampler",
                                  "budgeted"]
    assert SAMPLERS.names_in("verl") == ["fixed", "reinforce_ada", "budgeted"]  # it runs in grposcope's only
    assert sorted(registered_in_source(sampling, SAMPLERS)) == SAMPLERS.names()


def test_the_sampler_check_fails_on_a_sampler_an_import_list_forgot(monkeypatch, tmp_path, no_planted_attribute):
    sampling = sys.modules["grposcope.sampling"]
    planted = plant(monkeypatch, tmp_path, sampling, SAMPLER_MODULE, SAMPLERS)
    as_import_list(monkeypatch, core_registry, planted)
    found = SAMPLERS.names()
    assert "planted_sampler" not in found
    # the source check of test_every_entry_a_module_registers_is_found, and the class check, name it
    assert set(registered_in_source(sampling, SAMPLERS)) - set(found) == {"planted_sampler"}
    registered = {SAMPLERS.get(name) for name in found}
    assert [cls.__qualname__ for cls in defined_classes(sampling, Sampler) if cls not in registered] == ["Planted"]
