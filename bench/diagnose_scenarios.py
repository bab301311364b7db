"""grposcope diagnose on the scenario suite (tests/scenarios.py), every scenario in every log format; and rldoctor
0.2.0 on the same files, for docs/diagnose.md's side-by-side table.

    .venv/bin/python bench/diagnose_scenarios.py --out /tmp/scenarios --seeds 10,11,12
    .venv/bin/python bench/diagnose_scenarios.py --out /tmp/scenarios --rldoctor /tmp/rldoctor-venv/bin/rl-doctor

A cell is FIRED (a warning or critical finding), `i` (info only), `-` (silent) or `n/a` (the format does not
carry what the detector reads); `!` marks a cell that disagrees with the scenario's label. rldoctor is run at
its defaults (it has no thresholds to set on its command line); its detector names are mapped onto grposcope's.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from scenarios import FORMATS, SCENARIOS, make, write  # noqa: E402

from grposcope.diagnose import DETECTORS, diagnose  # noqa: E402
from grposcope.runs import load_run  # noqa: E402

# The shared categories: rldoctor's nine detectors, grposcope's mapped onto them (the three length detectors are
# rldoctor's length_pathology, a held-out fall its reward_hacking, a flat reward its plateau ("training reward is
# flat"), the loss's explosions its gradient_pathology; no_signal_steps, pinned_reward, negative_kl and
# clip_near_one have no counterpart there and are left out of the comparison).
SHARED = {"advantage_collapse": ["advantage_collapse"], "entropy_collapse": ["entropy_collapse"],
          "kl_drift": ["kl_drift"], "length_pathology": ["length_growth", "truncation", "length_collapse"],
          "clip_saturation": ["clip_saturation"], "gradient_pathology": ["gradient_pathology", "loss_explosion"],
          "reward_hacking": ["reward_hacking", "held_out_regression"], "reward_composition": ["reward_composition"],
          "plateau": ["plateau", "no_learning"]}


def shared(cells: dict[str, str]) -> dict[str, str]:
    """grposcope's cells on rldoctor's categories: FIRED if any mapped detector fired."""
    out = {}
    for category, names in SHARED.items():
        marks = [cells[n] for n in names]
        out[category] = ("FIRED" if "FIRED" in marks else "i" if "i" in marks else "n/a" if all(m == "n/a" for m in
                         marks) else "-")
    return out


def shared_labels(expected: frozenset[str]) -> frozenset[str]:
    return frozenset(c for c, names in SHARED.items() if set(names) & expected)


def grposcope_cells(path: Path) -> dict[str, str]:
    d = diagnose(load_run(path))
    cells = {name: ("n/a" if name in d.unchecked else "-") for name in DETECTORS.names()}
    for f in d.findings:
        mark = "FIRED" if f.severity in ("warning", "critical") else "i"
        if cells[f.detector] != "FIRED":
            cells[f.detector] = mark
    return cells


def rldoctor_cells(exe: str, path: Path) -> dict[str, str]:
    done = subprocess.run([exe, "diagnose", str(path), "--format", "json"], capture_output=True, text=True)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        return {name: "err" for name in SHARED}
    cells = {name: "-" for name in SHARED}
    for f in report.get("findings", []):
        severity, name = str(f.get("severity", "")).upper(), f.get("detector", "")
        if name == "grad_pathology":
            name = "gradient_pathology"
        if name in cells:
            cells[name] = {"WARNING": "FIRED", "CRITICAL": "FIRED", "INFO": "i", "SKIPPED": "n/a"}.get(severity, "-")
    return cells


def score(cells: dict[str, str], expected: frozenset[str]) -> tuple[int, int, bool]:
    """(cells right, cells judged, the scenario right): a labelled detector must fire, the others must not."""
    right = judged = 0
    for name, cell in cells.items():
        if cell == "n/a":
            continue
        judged += 1
        right += (cell == "FIRED") == (name in expected)
    return right, judged, right == judged


def table(tool: str, fmt: str, rows: dict[str, dict[str, str]], labels: dict[str, frozenset]) -> list[str]:
    names = list(next(iter(rows.values())))
    short = [n.replace("_", " ")[:12] for n in names]
    lines = [f"\n{tool}, {fmt}:", "| scenario | " + " | ".join(short) + " |", "|---" * (len(names) + 1) + "|"]
    total = [0, 0, 0]
    for scenario, cells in rows.items():
        marks = []
        for name in names:
            cell = cells[name]
            wrong = cell != "n/a" and ((cell == "FIRED") != (name in labels[scenario]))
            marks.append(cell + ("!" if wrong else ""))
        right, judged, whole = score(cells, labels[scenario])
        total = [total[0] + right, total[1] + judged, total[2] + whole]
        lines.append(f"| {scenario} | " + " | ".join(marks) + " |")
    lines.append(f"{tool}, {fmt}: {total[0]} of {total[1]} cells right; {total[2]} of {len(rows)} scenarios "
                 "entirely right")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, required=True, help="folder for the written logs")
    parser.add_argument("--seeds", default="10", help="comma-separated seeds; each scenario is run per seed")
    parser.add_argument("--formats", default=",".join(FORMATS))
    parser.add_argument("--rldoctor", default=None, help="rldoctor's rl-doctor executable (a scratch venv's)")
    args = parser.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    formats = args.formats.split(",")
    labels, ours, theirs = {}, defaultdict(dict), defaultdict(dict)
    for seed in seeds:
        for name in SCENARIOS:
            s = make(name, seed)
            key = f"{name}/s{seed}" if len(seeds) > 1 else name
            labels[key] = s.expected
            for fmt in formats:
                path = write(s, args.out / fmt / key.replace("/", "_"), fmt)
                ours[fmt][key] = grposcope_cells(path)
                if args.rldoctor:
                    theirs[fmt][key] = rldoctor_cells(args.rldoctor, path)
    lines = []
    for fmt in formats:
        lines += table("grposcope", fmt, ours[fmt], labels)
    if args.rldoctor:
        mapped = {k: shared_labels(v) for k, v in labels.items()}
        for fmt in formats:
            lines += table("rldoctor 0.2.0 (its nine detectors)", fmt, theirs[fmt], mapped)
        for fmt in formats:
            lines += table("grposcope on rldoctor's nine categories", fmt,
                           {k: shared(v) for k, v in ours[fmt].items()}, mapped)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
