"""grposcope diagnose and rldoctor 0.2.0 on real training logs from public repositories (tests/fixtures/real_runs/),
scored against what a careful RL engineer wrote down in each run's CALLOUT.md before either tool was run.

The corpus is split once, at random, with the seed in tests/fixtures/real_runs/SPLIT.json (`split`): code and
thresholds were changed looking at the tuning half only (tests/test_real_runs.py checks it); the held-out
half's table is what this script prints with `--half held_out`, as it comes out.

Each run is given to each tool as a user would give it: the run's folder when it holds more than one log or a
TRL output folder, else its one log file (rldoctor takes a file or a TensorBoard folder: given a folder, it is
tried on each log file of the run and the first it reads is kept, its best chance). Per detector the callout
says `fire`, `quiet` or `cannot tell`; a tool's verdict per run:
- found: a `fire` detector fired at warning or critical (rldoctor's `length_pathology` stands for grposcope's
  `length_growth` and `truncation`; rldoctor has no `no_signal_steps`, so that callout is not counted for it);
- missed: a `fire` detector did not;
- false alarm: a `quiet` detector fired at warning or critical;
- unreadable: the tool refused the input.

    python3 -m venv /work/scratch/rldoctor-venv && /work/scratch/rldoctor-venv/bin/pip install rldoctor==0.2.0
    .venv/bin/python bench/diagnose_real_runs.py split --seed 20261128          # once; writes SPLIT.json
    .venv/bin/python bench/diagnose_real_runs.py split --seed N                 # runs added later, once each
    .venv/bin/python bench/diagnose_real_runs.py split                          # ... all held out (round 2)
    .venv/bin/python bench/diagnose_real_runs.py table --half held_out \\
        --rldoctor /work/scratch/rldoctor-venv/bin/rl-doctor > bench/results/diagnose_real_runs_held_out.txt
"""

from __future__ import annotations

import argparse
import json
import random
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "real_runs"
SPLIT = CORPUS / "SPLIT.json"
NOT_LOGS = {"CALLOUT.md", "SOURCE.md"}
DETECTORS = ("advantage_collapse", "no_signal_steps", "entropy_collapse", "kl_drift", "length_growth", "truncation",
             "clip_saturation", "gradient_pathology", "reward_hacking", "reward_composition", "plateau",
             # round 3's callouts name these too (issue 65's failures); the earlier rounds' callouts do not
             "no_learning", "pinned_reward", "loss_explosion", "held_out_regression", "negative_kl", "clip_near_one",
             "length_collapse")
# rldoctor's detector -> the grposcope detectors it stands for, read generously: its plateau says "training reward is
# flat" (no_learning), its length_pathology covers length in both directions and the cap, its gradient_pathology
# the loss's explosions (it reads no loss), its reward_hacking a held-out fall
RLDOCTOR = {"length_pathology": ("length_growth", "truncation", "length_collapse"),
            "plateau": ("plateau", "no_learning"),
            "gradient_pathology": ("gradient_pathology", "loss_explosion"),
            "reward_hacking": ("reward_hacking", "held_out_regression")}
RLDOCTOR_ALARMS = {"length_pathology": ("length_growth", "truncation")}
CALL = re.compile(r"^\s*-\s*`?(\w+)`?\s*:\s*\**(fire|warn|quiet|cannot tell)", re.I)


def callout(run: Path) -> dict[str, str]:
    """detector -> 'fire' / 'quiet' / 'cannot tell', from CALLOUT.md's `## Expected findings` lines. The runs
    added in round 2 were annotated with a fourth word, `warn` (a finding expected at warning level): it is scored
    as `fire` (found only when the detector fired at warning or critical), a rule set before either tool ran on
    them."""
    text = (run / "CALLOUT.md").read_text(encoding="utf-8")
    section = text.split("Expected findings", 1)[-1]
    found = {}
    for line in section.splitlines():
        m = CALL.match(line)
        if m and m.group(1) in DETECTORS:
            found[m.group(1)] = {"warn": "fire"}.get(m.group(2).lower(), m.group(2).lower())
    return found


def logs(run: Path) -> list[Path]:
    return sorted(p for p in run.rglob("*") if p.is_file() and p.name not in NOT_LOGS)


def given(run: Path) -> Path:
    """What a user would give: the one log file, else the run's folder."""
    files = logs(run)
    return files[0] if len(files) == 1 and files[0].parent == run else run


@dataclass
class Outcome:
    fired: set[str] = field(default_factory=set)  # warning or critical
    info: set[str] = field(default_factory=set)
    error: str = ""
    read: str = ""  # what was given / read

    def verdict(self, calls: dict[str, str], rldoctor: bool = False) -> tuple[list[str], list[str], list[str]]:
        """(found, missed, false alarms) against the callout."""
        if self.error:
            return [], [], []
        fired = set(self.fired)
        # a false alarm is counted against rldoctor's own name only (its length_pathology for both of grposcope's
        # length_growth and truncation, as in rounds 1-2): the generous reading above finds, it does not accuse
        alarmed = {g for f in fired for g in RLDOCTOR_ALARMS.get(f, (f,))} if rldoctor else fired
        if rldoctor:
            fired = {g for f in fired for g in RLDOCTOR.get(f, (f,))}
        fire = [d for d, c in calls.items() if c == "fire" and not (rldoctor and d == "no_signal_steps")]
        quiet = [d for d, c in calls.items() if c == "quiet"]
        if rldoctor:  # one rldoctor detector for several of grposcope's: a false alarm only if none is expected
            quiet = [d for d in quiet if not any(d in group and set(group) & set(fire) for group in RLDOCTOR.values())]
        return ([d for d in fire if d in fired], [d for d in fire if d not in fired],
                [d for d in quiet if d in alarmed])


def run_grposcope(run: Path) -> Outcome:
    from grposcope.diagnose import diagnose
    from grposcope.runs import load_runs

    path = given(run)
    try:
        runs = load_runs(path, run.name)
    except (ValueError, FileNotFoundError, OSError) as err:
        return Outcome(error=str(err).splitlines()[0][:160], read=str(path.relative_to(CORPUS)))
    out = Outcome(read=str(path.relative_to(CORPUS)))
    from grposcope.runs.record import parts

    for one in [part for run in runs for part in parts(run)]:  # as the command line reads them (--segments long)
        for f in diagnose(one).findings:
            (out.fired if f.severity in ("warning", "critical") else out.info).add(f.detector)
    return out


def run_rldoctor(run: Path, command: str) -> Outcome:
    path = given(run)
    tries = [path] if path.is_file() else logs(run)
    errors = []
    for one in tries:
        done = subprocess.run([command, "diagnose", str(one), "-f", "json", "--no-color"], capture_output=True,
                              text=True, timeout=300)
        try:
            report = json.loads(done.stdout)
        except json.JSONDecodeError:
            errors.append(f"{one.name}: " + (done.stderr.strip().splitlines() or ["no output"])[-1][:120])
            continue
        out = Outcome(read=str(one.relative_to(CORPUS)))
        for f in report.get("findings", []):
            severity = str(f.get("severity", "")).lower()
            if severity in ("warning", "critical", "info"):
                (out.fired if severity != "info" else out.info).add(str(f.get("detector")))
        return out
    return Outcome(error="; ".join(errors), read=str(path.relative_to(CORPUS)))


def split(seed: int | None) -> None:
    """The runs not yet split, shuffled with `seed`: the first half tunes, the rest is held out. The first split
    is the file's `tuning` / `held_out`; runs added later are split once each time, into `added`. Without a seed
    every new run is held out (a batch added after the held-out half was seen: the tuning half is large enough)."""
    runs = sorted(p.name for p in CORPUS.iterdir() if (p / "CALLOUT.md").is_file())
    done = json.loads(SPLIT.read_text()) if SPLIT.exists() else None
    named = set() if done is None else set(half(done, "tuning")) | set(half(done, "held_out"))
    new = [r for r in runs if r not in named]
    if not new:
        sys.exit("every run of the corpus is split already")
    random.Random(seed).shuffle(new)
    cut = len(new) // 2 if seed is not None else 0
    part = {"seed": seed, "tuning": sorted(new[:cut]), "held_out": sorted(new[cut:])}
    if seed is None:
        part["method"] = "every run held out: added after the first held-out half was reported and read"
    if done is None:
        done = {**part, "method": "random.Random(seed).shuffle(sorted(run ids)); the first half tunes, the rest is "
                "held out; runs added later are split the same way with a seed of their own, under `added`"}
    else:
        done.setdefault("added", []).append(part)
    SPLIT.write_text(json.dumps(done, indent=2) + "\n")
    print(f"{len(new)} runs: {cut} tuning, {len(new) - cut} held out (seed {seed}) -> {SPLIT}")


def half(split_file: dict, which: str) -> list[str]:
    """The runs of one half, over the first split and every later one. Held-out runs that were reported and then
    read to change the code (`seen`) count as tuning runs from then on."""
    runs = split_file[which] + [r for part in split_file.get("added", []) for r in part[which]]
    seen = [r for part in split_file.get("seen", []) for r in part["runs"]]
    return runs + seen if which == "tuning" else [r for r in runs if r not in seen]


def cell(found: list[str], missed: list[str], false: list[str], error: str) -> str:
    if error:
        return "unreadable"
    parts = [f"found {', '.join(found)}" if found else "", f"missed {', '.join(missed)}" if missed else "",
             f"false alarm {', '.join(false)}" if false else ""]
    return "; ".join(p for p in parts if p) or "right (nothing expected, nothing fired)"


def table(which: str, rldoctor: str | None) -> None:
    chosen = half(json.loads(SPLIT.read_text()), which)
    totals = {"grposcope": [0, 0, 0, 0], "rldoctor": [0, 0, 0, 0]}  # found, missed, false alarms, unreadable
    print("| run | callout: fire | grposcope fired (info) | grposcope verdict | rldoctor fired (info) | "
          "rldoctor verdict |")
    print("|---|---|---|---|---|---|")
    for name in chosen:
        run = CORPUS / name
        calls = callout(run)
        fire = [d for d, c in calls.items() if c == "fire"]
        row = [name, ", ".join(fire) or "(none)"]
        for tool, outcome in (("grposcope", run_grposcope(run)),
                              ("rldoctor", run_rldoctor(run, rldoctor) if rldoctor else None)):
            if outcome is None:
                row += ["-", "-"]
                continue
            found, missed, false = outcome.verdict(calls, rldoctor=tool == "rldoctor")
            for i, count in enumerate((len(found), len(missed), len(false), int(bool(outcome.error)))):
                totals[tool][i] += count
            shown = ", ".join(sorted(outcome.fired)) or "-"
            if outcome.info:
                shown += f" ({', '.join(sorted(outcome.info))})"
            row += [outcome.error[:90] if outcome.error else shown, cell(found, missed, false, outcome.error)]
        print("| " + " | ".join(row) + " |")
    print()
    for tool, (found, missed, false, unreadable) in totals.items():
        if tool == "rldoctor" and not rldoctor:
            continue
        named = f" ({found / (found + missed):.0%} of the fire/warn callouts named)" if found + missed else ""
        print(f"{tool}: {found} found, {missed} missed, {false} false alarm(s), {unreadable} unreadable of "
              f"{len(chosen)} runs{named}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    s = sub.add_parser("split")
    s.add_argument("--seed", type=int, help="omitted: every new run is held out")
    t = sub.add_parser("table")
    t.add_argument("--half", choices=("tuning", "held_out"), required=True)
    t.add_argument("--rldoctor", help="rldoctor 0.2.0's rl-doctor command (a scratch venv's)")
    args = parser.parse_args()
    if args.command == "split":
        split(args.seed)
    else:
        table(args.half, args.rldoctor)


if __name__ == "__main__":
    main()
