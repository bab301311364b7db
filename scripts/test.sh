#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), lints (ruff, configured in pyproject.toml) and runs the test suite. Extra
# arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests bench
exec .venv/bin/python -m pytest "$@"
