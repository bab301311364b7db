#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py) on a borrowed GPU machine, in two steps (docs/performance.md, "GPU check"):
#
#   bash scripts/gpu_check.sh prepare      here, with network: fills .gpu_check/ (git-ignored) with grposcope's
#                                          wheel, the wheels the GPU machine lacks (CPython 3.12, manylinux x86-64,
#                                          the versions .venv tests) and the embedded model's tokenizer; prints
#                                          the sizes and the exact device call
#   bash scripts/gpu_check.sh device [ARGS]  there: installs those wheels into /tmp/site, runs the check with a
#                                          time limit, results into $OUT; ARGS go to bench/gpu_check.py
#
# The GPU machine has no network and its own torch, transformers, accelerate, peft, numpy, pandas, pyarrow, rich,
# typer, ... (/work/.library/device/KINDS.md); only what it lacks travels, 64 MiB at most with the working tree.
set -euo pipefail
cd "$(dirname "$0")/.."

CARRY=.gpu_check
# What grposcope's trainer, its TRL subclass and TRL import that the GPU machine's image lacks (found by running
# the check in a virtual environment holding only the image's packages and these)
CARRIED=(trl datasets dill multiprocess math-verify latex2sympy2_extended antlr4-python3-runtime)
LIMIT_MIB=64       # the working tree and the carried folder together
CARRY_MAX_MIB=55   # leaves room for the working tree
# The check's own limits there: its budget (later shapes and trainers are skipped past it) and a hard stop
BUDGET_S=${GPU_CHECK_BUDGET_S:-300}
TIMEOUT_S=${GPU_CHECK_TIMEOUT_S:-390}
SITE=${GPU_CHECK_SITE:-/tmp/site}  # where the carried wheels are installed there
PLATFORMS=(--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64
           --platform manylinux2014_x86_64 --platform manylinux1_x86_64)

mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }

prepare() {
  rm -rf "$CARRY"
  mkdir -p "$CARRY/wheels" "$CARRY/tokenizer"
  .venv/bin/python -m pip wheel -q --no-deps -w "$CARRY/wheels" .
  for name in "${CARRIED[@]}"; do
    version=$(.venv/bin/python -c 'import importlib.metadata as m, sys; print(m.version(sys.argv[1]))' "$name")
    .venv/bin/python -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${PLATFORMS[@]}" -d "$CARRY/wheels" "$name==$version"
  done
  # the embedded model's tokenizer (converted once into grposcope's cache); no weights travel
  .venv/bin/python - "$CARRY/tokenizer" <<'EOF'
import shutil
import sys

from grposcope.models.embedded import ensure_embedded_checkpoint

source = ensure_embedded_checkpoint("smollm2-135m-instruct")
for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "special_tokens_map.json"):
    if (source / name).is_file():
        shutil.copy(source / name, sys.argv[1])
EOF
  ls -l "$CARRY/wheels" "$CARRY/tokenizer"
  local carried tree
  carried=$(du -sb "$CARRY" | cut -f1)
  # what a device call sends besides the carried folder: tracked files and untracked ones git does not ignore
  tree=$(git ls-files -z -co --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  echo "carried folder $CARRY: $(mib "$carried") MiB (at most $CARRY_MAX_MIB); working tree: $(mib "$tree") MiB;" \
       "together $(mib $((carried + tree))) MiB (at most $LIMIT_MIB)"
  if (( carried > CARRY_MAX_MIB * 1048576 || carried + tree > LIMIT_MIB * 1048576 )); then
    echo "too large to travel: drop a wheel or shrink the working tree" >&2
    exit 1
  fi
  echo "the device call:"
  echo "  run(command=\"bash scripts/gpu_check.sh device\", carry=[\"$CARRY\"], timeout_s=$((TIMEOUT_S + 60)))"
}

device() {
  local out=${OUT:-$PWD/gpu_check_out}
  mkdir -p "$out"
  [ -d "$CARRY/wheels" ] || { echo "no $CARRY/wheels: run 'bash scripts/gpu_check.sh prepare' first" >&2; exit 2; }
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$SITE" \
    "$CARRY"/wheels/*.whl
  export PYTHONPATH=$SITE PYTHONUNBUFFERED=1 CUBLAS_WORKSPACE_CONFIG=:4096:8
  # what the image holds of what the check imports, for a failure's first question
  nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader || true
  python3 -m pip list 2>/dev/null | grep -i -E '^(torch|transformers|accelerate|tokenizers|huggingface.hub|pyarrow|pandas|numpy|peft|safetensors) ' || true
  set +e
  timeout -s TERM "$TIMEOUT_S" python3 bench/gpu_check.py --device cuda --shapes 0.5b,1.5b --budget-s "$BUDGET_S" \
    --out "$out" "$@" 2>&1 | tee "$out/gpu_check.log"
  local rc=${PIPESTATUS[0]}
  echo "bench/gpu_check.py exit code: $rc (0: every check passed; 1: see gpu_check.txt; 124: killed at ${TIMEOUT_S} s)"
  exit "$rc"
}

case "${1:-}" in
  prepare) prepare ;;
  device) shift; device "$@" ;;
  *) echo "usage: bash scripts/gpu_check.sh prepare | device [bench/gpu_check.py arguments]" >&2; exit 2 ;;
esac
