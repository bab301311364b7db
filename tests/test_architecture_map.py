"""docs/architecture.md's layer drawing is the code's: every package and top-level module of grposcope is on
it, every `grposcope` command is named on the cli row, and no module imports a row above its own (imports
inside functions included, read from the source without importing it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "grposcope"
DOC = ROOT / "docs" / "architecture.md"


def drawn_rows(text: str) -> list[list[str]]:
    """The rows of the drawing under "## Layers", top first: each row's units ("cli", "errors", ...), read from
    the names at the start of its line ("cli/", "errors.py"); a line that starts with spaces continues a row."""
    section = text.split("## Layers", 1)[1]
    block = section.split("```", 2)[1]
    rows = []
    for line in block.splitlines():
        if not line.strip() or line.startswith(" "):
            continue
        head = re.split(r"\s{2,}", line.strip())[0]
        rows.append([re.sub(r"(/|\.py)$", "", word) for word in head.split()])
    return rows


def units() -> set[str]:
    """Every package (a folder with __init__.py) and top-level module of grposcope but its __init__."""
    found = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    found |= {p.stem for p in PACKAGE.glob("*.py") if p.name not in ("__init__.py", "__main__.py")}
    return found


def unit_of(path: Path) -> str:
    parts = path.relative_to(PACKAGE).parts
    return parts[0] if len(parts) > 1 else path.stem


def imported_units(path: Path) -> set[str]:
    """The grposcope units `path` imports anywhere in it (absolute or relative imports)."""
    module = [PACKAGE.name, *path.relative_to(PACKAGE).with_suffix("").parts]
    package = module if path.name == "__init__.py" else module[:-1]
    package = package[:-1] if path.name == "__init__.py" else package
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets: list[list[str]] = []
        if isinstance(node, ast.Import):
            targets = [alias.name.split(".") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package[: len(package) - node.level + 1] if node.level else []
            stem = base + (node.module.split(".") if node.module else [])
            # `from grposcope import manifest` / `from .. import terminal`: the imported names are the units
            targets = [stem + [alias.name] for alias in node.names] if stem == [PACKAGE.name] else [stem]
        for target in targets:
            if len(target) >= 2 and target[0] == PACKAGE.name:
                found.add(target[1])
    return found - {unit_of(path)}


def test_every_unit_is_on_the_map_once():
    rows = drawn_rows(DOC.read_text())
    drawn = [unit for row in rows for unit in row]
    assert len(drawn) == len(set(drawn)), f"drawn twice: {[u for u in drawn if drawn.count(u) > 1]}"
    missing, stale = units() - set(drawn), set(drawn) - units()
    assert not missing, f"modules missing from docs/architecture.md's layer drawing: {sorted(missing)}"
    assert not stale, f"docs/architecture.md draws modules that do not exist: {sorted(stale)}"


def test_no_module_imports_a_row_above_its_own():
    row_of = {unit: i for i, row in enumerate(drawn_rows(DOC.read_text())) for unit in row}
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE and path.name == "__init__.py":
            continue  # the package's front door imports the public API from everywhere
        unit = unit_of(path)
        for target in imported_units(path):
            if target in row_of and row_of[target] < row_of[unit]:
                upward.append(f"{path.relative_to(PACKAGE)} imports {target}")
    assert not upward, "imports pointing up the drawing: " + "; ".join(upward)


def test_every_command_is_named_on_the_cli_row():
    from typer.main import get_command

    from grposcope.cli import app

    commands = sorted(get_command(app).commands)
    cli_line = DOC.read_text().split("## Layers", 1)[1].split("```", 2)[1].split("integrations/", 1)[0]
    said = set(re.findall(r"[a-z][a-z-]+", cli_line))
    assert commands and not set(commands) - said, f"commands not named on the cli row: {set(commands) - said}"


@pytest.mark.parametrize("record", ["Rollout", "ScoredDraw", "Selection", "AdvantageOutput", "TrainBatch",
                                    "Generation", "Drawn", "LoggedFigures", "UpdateFigures", "TrainerState",
                                    "GenerationFigures", "OptimizerFigures", "Update", "StepMetrics"])
def test_the_steps_records_are_described_where_they_live(record):
    table = DOC.read_text().split("### The step's records", 1)[1].split("###", 1)[0]
    line = next((row for row in table.splitlines() if row.startswith(f"| `{record}` |")), None)
    assert line is not None, f"{record} is not in the records table"
    where = re.search(r"\| `([\w/]+\.py)` \|", line).group(1)
    assert re.search(rf"^class {record}\b", (PACKAGE / where).read_text(), re.M), f"{record} is not in {where}"
