#!/usr/bin/env bash
# Sets up .venv (scripts/setup.sh) and runs the main job: `grposcope train`, the quickstart preset (the embedded
# SmolLM2-135M-Instruct on the arithmetic task, AVSPO on, on the CPU). Extra arguments go to `grposcope train`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/grposcope train --preset quickstart "$@"
