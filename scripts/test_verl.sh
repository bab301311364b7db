#!/usr/bin/env bash
# Runs tests/verl (grposcope.integrations.verl against verl 0.9.1, on the CPU) in its own environment, .venv-verl:
# verl pins transformers<5.11, which the main .venv cannot share. Sets it up on the first run: torch 2.13.0 (CPU)
# first and alone, then verl 0.9.1, TransferQueue and pytest pinned by requirements/verl-constraints.txt, then grposcope itself
# (editable, no dependencies: grposcope.core needs torch only). A re-run reinstalls only when this script, the
# constraints or pyproject.toml changed. Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
python="${PYTHON:-python3}"
venv=.venv-verl
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
install() {
  # pip's own failures still fail the script (pipefail); only the notices about configured package
  # locations that do not exist on this machine are filtered out
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "$@" 2>&1 \
    | { grep -v "^WARNING: Location '.*' is ignored" || true; }
}
stamp="$venv/.grposcope-installed"
inputs="$(cat scripts/test_verl.sh requirements/verl-constraints.txt pyproject.toml | sha256sum)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$inputs" ]; then
  # torch first and alone: a bare `torch` requirement (tensordict's, torchdata's) would pull a CUDA build
  install torch==2.13.0
  # scipy: grposcope.diagnose (the trend tests), read by the file-logger test
  install -c requirements/verl-constraints.txt verl==0.9.1 cachetools fastapi uvicorn transferqueue pytest scipy
  install --no-deps -e .
  echo "$inputs" > "$stamp"
fi
exec "$venv/bin/python" -m pytest tests/verl "$@"
