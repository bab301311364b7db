"""grposcope diagnose (and rldoctor 0.2.0) on the independent scenario runs of tests/scenario_runs.py: every
scenario written in every log format, read with `load_run`, diagnosed, and tabled per format against its label.

    .venv/bin/python bench/diagnose_scenario_runs.py /tmp/scenario-runs [--seed 7] [--skip-rldoctor]

Cells: FIRED (a warning or critical finding), i (info only), - (nothing); a cell that disagrees with the label is
marked: `FIRED!` a false alarm, `MISS` (or `i MISS`) an expected detector that did not fire, `n/a` where the
format cannot carry the detector's evidence (scenario_runs.CANNOT_CARRY). Per format: correct cells / total and
the scenarios whose every cell is right. A detector grposcope does not have yet shows as silent.

rldoctor: installed in a scratch venv (`python3 -m venv /tmp/rldoctor-venv && /tmp/rldoctor-venv/bin/pip install
'rldoctor[tensorboard]==0.2.0'`), run as `rl-doctor diagnose FILE --format json` on the same files; its nine
detectors mapped onto grposcope's (its length_pathology onto length_growth and truncation; no_signal_steps has no
counterpart: n/a).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from scenario_runs import CANNOT_CARRY, DETECTORS, FORMATS, SCENARIOS, expected_for, log_file, make, write  # noqa: E402

from grposcope.diagnose import diagnose  # noqa: E402
from grposcope.runs import load_run  # noqa: E402

RLDOCTOR_EXE = "/tmp/rldoctor-venv/bin/rl-doctor"
# rldoctor's detector -> grposcope's detectors it covers
RLDOCTOR_NAMES = {"advantage_collapse": ("advantage_collapse",), "entropy_collapse": ("entropy_collapse",),
                  "kl_drift": ("kl_drift",), "length_pathology": ("length_growth", "truncation"),
                  "clip_saturation": ("clip_saturation",), "grad_pathology": ("gradient_pathology",),
                  "gradient_pathology": ("gradient_pathology",), "reward_hacking": ("reward_hacking",),
                  "reward_composition": ("reward_composition",), "plateau": ("plateau",)}
RLDOCTOR_NONE = {"no_signal_steps"}  # no rldoctor detector covers it
LEVEL = {"-": 0, "i": 1, "FIRED": 2}


def grposcope_cells(path: Path) -> dict[str, str]:
    cells = dict.fromkeys(DETECTORS, "-")
    for f in diagnose(load_run(path)).findings:
        mark = "FIRED" if f.severity in ("warning", "critical") else "i"
        if f.detector in cells and LEVEL[mark] > LEVEL[cells[f.detector]]:
            cells[f.detector] = mark
    return cells


def rldoctor_cells(path: Path, expected: frozenset[str]) -> dict[str, str]:
    """rldoctor's verdicts on grposcope's detectors. A detector of rldoctor's that covers two of ours
    (length_pathology) is scored once: on the one the label expects, else on the first; the other shows n/a."""
    done = subprocess.run([RLDOCTOR_EXE, "diagnose", str(path), "--format", "json"], capture_output=True, text=True)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {d: "err" for d in DETECTORS}
    cells = {d: ("n/a" if d in RLDOCTOR_NONE else "-") for d in DETECTORS}
    for f in report.get("findings", []):
        severity = str(f.get("severity", "")).upper()
        mark = "FIRED" if severity in ("WARNING", "CRITICAL") else "i" if severity == "INFO" else "-"
        for ours in RLDOCTOR_NAMES.get(f.get("detector", ""), ()):
            if LEVEL[mark] > LEVEL[cells[ours]]:
                cells[ours] = mark
    for names in {v for v in RLDOCTOR_NAMES.values() if len(v) > 1}:
        keep = next((n for n in names if n in expected), names[0])
        for n in names:
            if n != keep:
                cells[n] = "n/a"
    return cells


def judge(cells: dict[str, str], expected: frozenset[str], uncarried: set[str]) -> dict[str, tuple[str, bool | None]]:
    """detector -> (shown text, right?) ; None: not scored."""
    out = {}
    for d, mark in cells.items():
        if mark in ("n/a", "err") or d in uncarried:
            out[d] = ("n/a" if mark != "err" else "err", None if mark != "err" else False)
            continue
        fired = mark == "FIRED"
        if d in expected:
            out[d] = ("FIRED", True) if fired else (f"{mark} MISS".replace("- ", ""), False)
        else:
            out[d] = ("FIRED!", False) if fired else (mark, True)
    return out


def table(title: str, rows: dict[str, dict[str, str]], fmt: str) -> list[str]:
    heads = [d.replace("gradient_pathology", "gradient").replace("reward_composition", "composition")
             .replace("advantage_collapse", "adv_collapse").replace("no_signal_steps", "no_signal")
             .replace("entropy_collapse", "entropy") for d in DETECTORS]
    width = max(len(n) for n in rows) + 1
    lines = [f"\n{title}, {fmt}:", f"{'scenario':<{width}}  expected".ljust(width + 40) + " ".join(
        f"{h:>12}" for h in heads)]
    right = total = whole = 0
    uncarried = CANNOT_CARRY.get(fmt, set())
    for name, cells in rows.items():
        expected = SCENARIOS[name].expected
        marks = judge(cells, expected_for_name(name, fmt), uncarried)
        scored = [ok for _, ok in marks.values() if ok is not None]
        right += sum(scored)
        total += len(scored)
        whole += all(scored)
        label = ",".join(sorted(expected)) or "(healthy)"
        lines.append(f"{name:<{width}}  {label[:38]:<38}" + " ".join(f"{marks[d][0]:>12}" for d in DETECTORS))
    lines.append(f"{title}, {fmt}: {right}/{total} cells correct; {whole}/{len(rows)} scenarios fully correct")
    return lines


def expected_for_name(name: str, fmt: str) -> frozenset[str]:
    return frozenset(SCENARIOS[name].expected - CANNOT_CARRY.get(fmt, set()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="where the runs are written (emptied first)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--formats", nargs="+", default=list(FORMATS), choices=FORMATS)
    parser.add_argument("--scenarios", nargs="+", default=list(SCENARIOS), choices=list(SCENARIOS))
    parser.add_argument("--skip-rldoctor", action="store_true")
    args = parser.parse_args()
    if args.folder.exists():
        shutil.rmtree(args.folder)
    rldoctor = not args.skip_rldoctor
    if rldoctor and not Path(RLDOCTOR_EXE).exists():
        print(f"{RLDOCTOR_EXE} not found (install it as the docstring says); rldoctor skipped")
        rldoctor = False

    ours: dict[str, dict[str, dict[str, str]]] = {f: {} for f in args.formats}
    theirs: dict[str, dict[str, dict[str, str]]] = {f: {} for f in args.formats}
    start = time.perf_counter()
    for name in args.scenarios:
        run = make(name, args.seed)
        for fmt in args.formats:
            path = write(run, args.folder / name / fmt, fmt)
            assert expected_for(run, fmt) == expected_for_name(name, fmt)
            try:
                ours[fmt][name] = grposcope_cells(path)
            except Exception as e:  # a reader or detector that fails shows as err on every cell
                print(f"grposcope failed on {name} ({fmt}): {type(e).__name__}: {e}")
                ours[fmt][name] = {d: "err" for d in DETECTORS}
            if rldoctor:
                theirs[fmt][name] = rldoctor_cells(log_file(path, fmt), expected_for(run, fmt))
    print(f"{len(args.scenarios)} scenarios x {len(args.formats)} formats, seed {args.seed}, written to "
          f"{args.folder} ({time.perf_counter() - start:.1f} s)")
    lines = []
    for fmt in args.formats:
        lines += table("grposcope", ours[fmt], fmt)
    if rldoctor:
        for fmt in args.formats:
            lines += table("rldoctor 0.2.0", theirs[fmt], fmt)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
