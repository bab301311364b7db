"""grposcope diagnose on rldoctor 0.2.0's own twelve demo scenarios, a check on runs grposcope's thresholds were
never set on (they were set on seeds 0-4 of tests/scenarios.py, and this script was run after they were fixed).

rldoctor's simulator writes TRL-style step records; a scratch venv's python dumps them as JSONL files, and each
is read and diagnosed here like any user's log. Each demo names the one failure it shows; the table says whether
grposcope's matching detector fired (a warning or critical finding) and what else fired.

    python3 -m venv /tmp/rldoctor-venv && /tmp/rldoctor-venv/bin/pip install rldoctor==0.2.0
    .venv/bin/python bench/diagnose_rldoctor_demos.py --python /tmp/rldoctor-venv/bin/python --seeds 0,1,2
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from grposcope.diagnose import diagnose
from grposcope.runs import load_run

# rldoctor's demo -> the grposcope detector that names its failure (none: the healthy demo)
DEMOS = {"healthy": None, "entropy_collapse": "entropy_collapse", "saturated_groups": "advantage_collapse",
         "too_hard": "advantage_collapse", "reward_hacking": "reward_hacking", "length_hacking": "length_growth",
         "truncation": "truncation", "kl_blowup": "kl_drift", "clip_saturation": "clip_saturation",
         "grad_spikes": "gradient_pathology", "plateau": "plateau", "format_domination": "reward_composition"}

DUMP = """
import json, sys
from rl_doctor.simulate import simulate
name, seed, path = sys.argv[1], int(sys.argv[2]), sys.argv[3]
records, config = simulate(name, seed=seed)
with open(path, "w") as out:
    for r in records:
        out.write(json.dumps(r) + "\\n")
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", required=True, help="python of a venv with rldoctor 0.2.0")
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--out", type=Path, default=Path("/tmp/rldoctor-demos"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    hits = total = clean = 0
    print("| demo | seed | grposcope's detector | fired | other warnings or criticals |")
    print("|---|---|---|---|---|")
    for seed in [int(s) for s in args.seeds.split(",")]:
        for demo, detector in DEMOS.items():
            path = args.out / f"{demo}-s{seed}.jsonl"
            subprocess.run([args.python, "-c", DUMP, demo, str(seed), str(path)], check=True)
            d = diagnose(load_run(path))
            fired = sorted({f.detector for f in d.findings if f.severity in ("warning", "critical")})
            hit = (detector in fired) if detector else not fired
            others = [f for f in fired if f != detector]
            total += 1
            hits += hit
            clean += not others
            print(f"| {demo} | {seed} | {detector or '(none: healthy)'} | {'yes' if hit else 'NO'} | "
                  f"{', '.join(others) or '-'} |")
    print(f"named the demo's failure (or kept the healthy demo clean): {hits} of {total}; no other warning or "
          f"critical: {clean} of {total}")


if __name__ == "__main__":
    main()
