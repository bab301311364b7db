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
    ("import grposcope.core", HEAVY + UPPER + ("grposcope.sampling",)),
    ("import grposcope.sampling", HEAVY + UPPER),
    ("from grposcope.sim import SimConfig, simulate\n"  # the simulator's imports are lazy: run it
     "simulate(SimConfig(prompts=50, batch_size=8, num_generations=4, steps=1))", HEAVY + UPPER),
    # the integrations sit on top: the own trainer never loads them, and their package loads no host
    ("import grposcope.trainer, grposcope.cli", ("grposcope.integrations", "trl", "verl")),
    ("import grposcope.integrations", HEAVY + UPPER + ("verl",)),
], ids=["core", "sampling", "sim", "trainer", "integrations"])
def test_lower_layers_import_nothing_above_them(code, forbidden):
    loaded = modules_loaded_by(code)
    assert "torch" in loaded or code == "import grposcope.integrations"  # that one is a namespace, no code
    assert not [m for m in forbidden if m in loaded], [m for m in forbidden if m in loaded]
