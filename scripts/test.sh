#!/usr/bin/env bash
# Sets up .venv on a fresh machine (torch 2.13.0 CPU first, then grposcope with its test extras, pinned)
# and runs the test suite. Re-running it reuses the environment. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$python" -m venv .venv
# torch first and alone: a bare `torch` requirement would pull a multi-GB CUDA build
.venv/bin/python -m pip install --quiet torch==2.13.0
.venv/bin/python -m pip install --quiet -c requirements/constraints.txt -e ".[test]"
exec .venv/bin/python -m pytest "$@"
