"""The core layer depends on torch only."""

from __future__ import annotations

import subprocess
import sys


def test_core_imports_torch_but_not_transformers():
    code = (
        "import sys, grposcope.core\n"
        "assert 'torch' in sys.modules, 'core should use torch'\n"
        "heavy = [m for m in ('transformers', 'accelerate', 'peft', 'trl', 'datasets') if m in sys.modules]\n"
        "assert not heavy, f'core imported {heavy}'\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
