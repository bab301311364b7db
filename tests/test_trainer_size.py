"""DESIGN.md's size rule, held for the trainer (src/grposcope/trainer/): no function over 60 lines, no module of
500 lines or more, so that a step reads top to bottom on a screen or two."""

from __future__ import annotations

import ast
from pathlib import Path

TRAINER = Path(__file__).resolve().parents[1] / "src" / "grposcope" / "trainer"
MAX_FUNCTION = 60  # lines, from `def` to the last line of the body (decorators not counted)
MAX_MODULE = 500


def function_lengths(path: Path) -> dict[str, int]:
    """Lines of each function and method in `path`, by `name:line`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {f"{node.name}:{node.lineno}": node.end_lineno - node.lineno + 1 for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}


def test_function_lengths_count_from_def_to_the_last_line(tmp_path):
    path = tmp_path / "probe.py"  # f: lines 2-5 (its decorator not counted), g: lines 9-10
    path.write_text('@decorator\ndef f(x):\n    """doc"""\n\n    return x\n\n\n'
                    'class A:\n    def g(self):\n        pass\n')
    assert function_lengths(path) == {"f:2": 4, "g:9": 2}


def test_no_trainer_function_is_over_60_lines():
    long = [f"{path.name}:{name} ({n} lines)" for path in sorted(TRAINER.glob("*.py"))
            for name, n in function_lengths(path).items() if n > MAX_FUNCTION]
    assert not long, f"functions over {MAX_FUNCTION} lines in src/grposcope/trainer/: {long}; split them"


def test_no_trainer_module_reaches_500_lines():
    big = {path.name: n for path in sorted(TRAINER.glob("*.py"))
           if (n := len(path.read_text(encoding="utf-8").splitlines())) >= MAX_MODULE}
    assert not big, f"modules of {MAX_MODULE} lines or more in src/grposcope/trainer/: {big}; move a part out"
