#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), lints (ruff, configured in pyproject.toml) and runs the test suite; then
# the verl integration's tests in their own environment (scripts/test_verl.sh: verl pins an older
# transformers). Extra arguments go to the main suite's pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check src tests bench examples experiments
.venv/bin/python -m pytest "$@"
bash scripts/test_verl.sh -q
