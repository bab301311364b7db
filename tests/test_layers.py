"""Layers: core depends on torch only; sampling on torch and core; the simulator, run, on those two alone."""

from __future__ import annotations

import subprocess
import sys

import pytest

HEAVY = ("transformers", "accelerate", "peft", "trl", "datasets")
UPPER = ("grposcope.trainer", "grposcope.rollout", "grposcope.rewards", "grposcope.models")


def modules_loaded_by(code: str) -> list[str]:
    """The modules loaded after running `code` in a fresh interpreter."""
    result = subprocess.run([sys.executable, "-c", f"import sys\n{code}\nprint('\\n'.join(sys.modules))"],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.split()


@pytest.mark.parametrize("code, forbidden", [
    ("from grposcope.core import advantages, diagnostics, losses", HEAVY + UPPER + ("grposcope.sampling",)),
    ("import grposcope.sampling", HEAVY + UPPER),
    ("from grposcope.sim import SimConfig, simulate\n"  # the simulator's imports are lazy: run it
     "simulate(SimConfig(prompts=50, batch_size=8, num_generations=4, steps=1))", HEAVY + UPPER),
    # the integrations sit on top: the own trainer never loads them, and their package loads no host
    ("from grposcope.trainer import GRPOTrainer\nimport grposcope.cli", ("grposcope.integrations", "trl", "verl")),
    ("import grposcope.integrations", HEAVY + UPPER + ("verl",)),
    # what a plain install runs (issue 55): the CLI, the log readers, the diagnosis and the reports, without torch
    ("import grposcope.cli, grposcope.runs, grposcope.diagnose, grposcope.reports, grposcope.core.registry",
     ("torch",) + HEAVY + UPPER),
], ids=["core", "sampling", "sim", "trainer", "integrations", "logs"])
def test_lower_layers_import_nothing_above_them(code, forbidden):
    loaded = modules_loaded_by(code)
    # grposcope.integrations is a namespace, no code; the log readers' layer has no torch at all
    assert "torch" in loaded or code == "import grposcope.integrations" or "torch" in forbidden
    assert not [m for m in forbidden if m in loaded], [m for m in forbidden if m in loaded]


def _module_imports(src, deferred: bool = False) -> dict[str, set[str]]:
    """grposcope's modules -> the grposcope modules each imports when it is imported (module level, not under
    TYPE_CHECKING); with `deferred`, every import it holds: inside its functions (they run later) and under
    TYPE_CHECKING (type checkers and readers follow them)."""
    import ast
    from pathlib import Path

    files = {}
    for path in (Path(src) / "grposcope").rglob("*.py"):
        parts = path.relative_to(src).with_suffix("").parts
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found, todo = set(), list(ast.parse(path.read_text()).body)
        while todo:
            node = todo.pop()
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test) and not deferred:
                continue
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else [])) \
                    if node.level else node.module
                found |= {f"{base}.{a.name}" if f"{base}.{a.name}" in files else base for a in node.names}
            elif isinstance(node, (ast.If, ast.Try)):
                todo += node.body + node.orelse + getattr(node, "finalbody", [])
                todo += [n for h in getattr(node, "handlers", []) for n in h.body]
            elif deferred:
                todo += [child for child in ast.iter_child_nodes(node) if isinstance(child, ast.stmt)]
        graph[name] = {m for m in found if m in files and m != name}
    return graph


def test_no_module_imports_one_that_imports_it_back():
    """No circle, counting the imports inside functions and under TYPE_CHECKING too (they run later or never,
    but a circle is still a circle to read and to type-check). Registration needs none: a family's registry
    imports its entries' modules on the first lookup
    (core.registry), so no registry module imports its entries at its bottom and is imported back."""
    from pathlib import Path

    graph = _module_imports(Path(__file__).resolve().parents[1] / "src", deferred=True)
    assert len(graph) > 100
    circles = []
    for start in graph:  # a path from a module back to itself
        todo, seen = [(start, (start,))], set()
        while todo:
            node, path = todo.pop()
            for nxt in graph[node]:
                if nxt == start:
                    circles.append(" -> ".join(path + (start,)))
                elif nxt not in seen:
                    seen.add(nxt)
                    todo.append((nxt, path + (nxt,)))
    assert circles == []


@pytest.mark.parametrize("first", ["grposcope.sampling.budgeted", "grposcope.core.cispo", "grposcope.rollout.hf",
                                   "grposcope.sampling.registry"])
def test_a_familys_entries_do_not_depend_on_what_was_imported_first(first):
    code = (f"import {first}\n"
            "from grposcope.sampling import SAMPLERS\nfrom grposcope.core.losses import POLICY_LOSSES\n"
            "from grposcope.rollout import ROLLOUTS\n"
            "print(SAMPLERS.names_in('grposcope'), POLICY_LOSSES.names_in('grposcope'), ROLLOUTS.names())")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[0] == (
        "['fixed', 'dynamic', 'reinforce_ada', 'greso', 'knapsack', 'budgeted'] ['grpo', 'cispo', 'gspo'] "
        "['transformers']")
