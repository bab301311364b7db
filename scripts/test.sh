#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh), lints (ruff, configured in pyproject.toml) and runs the test suite; then
# the verl integration's tests in their own environment (scripts/test_verl.sh: verl pins an older
# transformers). Extra arguments go to the main suite's pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The report's browser test (tests/test_report_browser.py) opens report.html in Debian's Chromium: installed here
# when missing and this runs as root with apt; otherwise that test is skipped and says why.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } \
      >/tmp/grposcope-chromium-install.log 2>&1 \
      || echo "scripts/test.sh: chromium could not be installed (see /tmp/grposcope-chromium-install.log);" \
              "the browser test will be skipped" >&2
  else
    echo "scripts/test.sh: no chromium, and no root apt-get to install it: the browser test will be skipped" >&2
  fi
fi
.venv/bin/ruff check src tests bench examples experiments
.venv/bin/python -m pytest "$@"
# the wheel and the sdist, installed into a clean environment and run from outside the checkout
bash scripts/test_wheel.sh
bash scripts/test_verl.sh -q
