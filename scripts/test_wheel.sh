#!/usr/bin/env bash
# Checks grposcope the way a user gets it: builds the wheel and the sdist (python -m build, from .venv, which
# scripts/setup.sh makes); installs the wheel alone into a clean virtual environment (a plain install: no torch,
# no extra) and reads, diagnoses and reports fixture runs there; then installs it into another (not editable;
# torch 2.13.0 first and alone, then the wheel with its [train,report] extras, pinned by
# requirements/constraints.txt), and from a folder
# outside the checkout runs `grposcope --version`, `grposcope report` and `grposcope diagnose` on copies of the
# fixture runs in tests/fixtures, and `import grposcope.core`. Also checks that the wheel holds every file of
# src/grposcope and the licence, and that the sdist holds LICENSE, CHANGELOG.md and the whole test suite.
# Everything happens in a temporary folder, removed at the end; pip's cache is reused, so a second run downloads
# nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
checkout="$PWD"
started=$SECONDS
python="${PYTHON:-python3}"
unset PYTHONPATH  # the clean environment must find grposcope in its own site-packages, never in src/
[ -x .venv/bin/python ] || { echo "scripts/test_wheel.sh: no .venv; run bash scripts/setup.sh first" >&2; exit 1; }
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)"
[ -n "$version" ] || { echo "scripts/test_wheel.sh: no version line in pyproject.toml" >&2; exit 1; }

tmp="$(mktemp -d "${TMPDIR:-/tmp}/grposcope-wheel.XXXXXX")"
trap 'rm -rf "$tmp"' EXIT
say() { echo "+ [$((SECONDS - started)) s] $*" >&2; }  # what runs next, and the seconds spent so far
quiet_pip() {
  # pip's own failures still fail the script (pipefail); only the notices about configured package locations
  # that do not exist on this machine are filtered out, as in scripts/setup.sh
  "$@" 2>&1 | { grep -v "^WARNING: Location '.*' is ignored" || true; }
}
venv="$tmp/venv"
# --no-compile: no .pyc written at install for the thousands of modules (torch's, sympy's) these checks never import
pip_install() { quiet_pip "$venv/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile "$@"; }

say .venv/bin/python -m build --outdir "$tmp/dist" .
quiet_pip .venv/bin/python -m build --quiet --outdir "$tmp/dist" .
wheel="$tmp/dist/grposcope-$version-py3-none-any.whl"
sdist="$tmp/dist/grposcope-$version.tar.gz"
ls -l "$wheel" "$sdist" >&2

say "checking the wheel's and the sdist's contents"
.venv/bin/python - "$wheel" "$sdist" "$version" <<'EOF'
import sys, tarfile, zipfile
from pathlib import Path

wheel, sdist, version = sys.argv[1:]
in_wheel = set(zipfile.ZipFile(wheel).namelist())
# every file the package may read at run time (its code, and any data file added later) must ship in the wheel
source = {p.relative_to("src").as_posix() for p in Path("src/grposcope").rglob("*")
          if p.is_file() and "__pycache__" not in p.parts}
missing = sorted(source - in_wheel)
missing += [n for n in (f"grposcope-{version}.dist-info/licenses/LICENSE",) if n not in in_wheel]
in_sdist = set(tarfile.open(sdist).getnames())
shipped = ("LICENSE", "CHANGELOG.md", "pyproject.toml", "tests/conftest.py",
           "tests/fixtures/runs/quickstart/metrics.jsonl")
missing += [n for n in (f"grposcope-{version}/{f}" for f in shipped) if n not in in_sdist]
if missing:
    sys.exit(f"scripts/test_wheel.sh: not shipped: {missing}")
print(f"wheel: {len(in_wheel)} files, all {len(source)} of src/grposcope; sdist: {len(in_sdist)} entries, "
      "LICENSE, CHANGELOG.md and the test suite with its conftest.py among them")
EOF

# A plain `pip install grposcope`: no extra, no torch. It reads, diagnoses and reports the fixture runs, and an
# optional dependency a command meets is one line naming its extra (issue 55)
light="$tmp/light"
say "$python" -m venv "$light" "(a plain install: the wheel alone)"
"$python" -m venv "$light"
quiet_pip "$light/bin/python" -m pip install --quiet --disable-pip-version-check --no-compile \
  -c requirements/constraints.txt "$wheel"
"$light/bin/python" - "$light" <<'EOF'
import subprocess, sys
from importlib.metadata import distributions

names = sorted({d.metadata["Name"].lower() for d in distributions()})
heavy = [n for n in names if n in ("torch", "transformers", "accelerate", "tensorboard", "wandb", "matplotlib",
                                   "pyarrow") or n.startswith("nvidia")]
if heavy:
    sys.exit(f"scripts/test_wheel.sh: a plain install pulled {heavy}")
size = subprocess.run(["du", "-sm", sys.argv[1]], capture_output=True, text=True).stdout.split()[0]
print(f"plain install: {len(names)} distributions, {size} MB: {', '.join(names)}")
EOF
mkdir "$tmp/light-work"
cp -r tests/fixtures/runs/quickstart tests/fixtures/trl_tiny_run tests/fixtures/real_runs/xling-openrs-console \
  tests/fixtures/real_runs/incident-ops-grpo "$tmp/light-work/"
(
  cd "$tmp/light-work"
  for run in quickstart trl_tiny_run xling-openrs-console incident-ops-grpo; do
    say "grposcope diagnose $run (plain install)"
    "$light/bin/grposcope" diagnose "$run" > /dev/null
  done
  say "grposcope report quickstart (plain install: no matplotlib, no plots)"
  "$light/bin/grposcope" report quickstart --output light-report | tail -n 2
  [ -s light-report/report.html ] || { echo "scripts/test_wheel.sh: no light-report/report.html" >&2; exit 1; }
  say "grposcope diagnose trl_tiny_run/runs (plain install: TensorBoard needs its extra)"
  if "$light/bin/grposcope" diagnose trl_tiny_run/runs 2> tb.err; then
    echo "scripts/test_wheel.sh: a TensorBoard folder read without tensorboard" >&2; exit 1
  fi
  cat tb.err
  grep -q "pip install 'grposcope\[tensorboard\]'" tb.err && [ "$(wc -l < tb.err)" -eq 1 ] \
    || { echo "scripts/test_wheel.sh: expected one line naming grposcope[tensorboard]" >&2; exit 1; }
)

say "$python" -m venv "$venv"
"$python" -m venv "$venv"
# torch first and alone: a bare `torch` requirement would pull a multi-GB CUDA build
say "$venv/bin/pip" install torch==2.13.0
pip_install torch==2.13.0
say "$venv/bin/pip" install -c requirements/constraints.txt "$wheel[train,report]"
pip_install -c requirements/constraints.txt "$wheel[train,report]"
say "$venv/bin/pip" check
"$venv/bin/python" -m pip check --disable-pip-version-check

# From outside the checkout, on copies of the fixture runs: the commands write their outputs beside them
mkdir "$tmp/work"
cp -r tests/fixtures/runs/quickstart tests/fixtures/trl_tiny_run "$tmp/work/"
cd "$tmp/work"
say grposcope --version
printed="$("$venv/bin/grposcope" --version)"
echo "$printed"
[ "$printed" = "grposcope $version" ] \
  || { echo "scripts/test_wheel.sh: expected 'grposcope $version' (pyproject.toml)" >&2; exit 1; }
say grposcope report quickstart trl_tiny_run
"$venv/bin/grposcope" report quickstart trl_tiny_run
[ -s report/report.html ] || { echo "scripts/test_wheel.sh: grposcope report wrote no report/report.html" >&2; exit 1; }
say grposcope diagnose quickstart trl_tiny_run
"$venv/bin/grposcope" diagnose quickstart trl_tiny_run
say python -c "import grposcope.core"
"$venv/bin/python" - "$venv" "$checkout" <<'EOF'
import sys
from pathlib import Path

import grposcope.core

venv, checkout = (Path(p).resolve() for p in sys.argv[1:])
where = Path(grposcope.core.__file__).resolve()
if venv not in where.parents or checkout in where.parents:
    sys.exit(f"scripts/test_wheel.sh: grposcope.core came from {where}, not from the clean environment")
print(f"grposcope.core from {where.parent}")
EOF
cd "$checkout"
rm -rf "$tmp"
echo "scripts/test_wheel.sh: grposcope $version's wheel and sdist passed in $((SECONDS - started)) s (clean-up included)"
