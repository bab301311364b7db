"""Runs the grposcope CLI as a plain `pip install grposcope` has it: without torch, transformers and the other
optional dependencies (the extras of pyproject.toml). A finder placed first on sys.meta_path refuses them, so
an import of one fails as it would where it is not installed; at exit the script fails if any was imported.

    python tests/light_install.py diagnose RUN            # BLOCK_MORE=tensorboard,matplotlib also refuses these
"""

import os
import sys

BLOCKED = {"torch", "transformers", "accelerate", "safetensors", "math_verify", "gguf", "peft", "trl", "datasets",
           "pyarrow", "reasoning_gym", "deepspeed", "verl", *filter(None, os.environ.get("BLOCK_MORE", "").split(","))}


class Refuse:
    """A meta-path finder that makes the blocked packages look absent."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None


sys.meta_path.insert(0, Refuse())
from grposcope.cli import run  # noqa: E402

sys.argv = ["grposcope", *sys.argv[1:]]
try:
    run()
finally:
    leaked = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
    if leaked:
        print(f"light_install.py: imported {leaked}", file=sys.stderr)
        os._exit(3)
