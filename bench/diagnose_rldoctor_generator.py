"""grposcope and rldoctor 0.2.0 on runs from rldoctor's own generator, at seeds and lengths other than its defaults
(seed 0, 400 steps), each written in three real log formats and read back through each tool's CLI.

rldoctor's `simulate(name, n_steps=400, seed=0, eval_every=25)` draws twelve scenarios, each showing one failure.
Its records hold, in every scenario, the same per-step keys: reward, reward_std, frac_reward_zero_std, entropy,
kl, clip_ratio/{low,high,region}_mean, grad_norm, completions/mean_length, completions/clipped_ratio,
learning_rate, step_time, perf/throughput, rewards/{correctness,format}/mean; and eval/accuracy (held out) on
every 25th step and the last. Its config (num_generations 8, max_response_length 2048, ...) is not part of the
records, and no format below carries it. Step i (from 0) is written as step i + 1: TRL and verl count from 1.

How each record key is written: TRL's trainer_state.json (log_history) | TensorBoard as transformers writes it
(the TRL key under train/, eval_x as eval/x) | verl's file logger. * = no such name in that engine: the name it
would most plausibly use.

| record key                | TRL trainer_state.json  | TensorBoard         | verl file logger                        |
|---------------------------|-------------------------|---------------------|-----------------------------------------|
| reward                    | (same)                  | train/reward        | critic/score/mean + critic/rewards/mean |
| reward_std                | (same)                  | train/reward_std    | critic/score/std *                      |
| frac_reward_zero_std      | (same)                  | train/(same)        | critic/score/frac_zero_std *            |
| entropy                   | (same)                  | train/entropy       | actor/entropy                           |
| kl (to the reference)     | kl                      | train/kl            | actor/kl_loss (use_kl_loss=True)        |
| clip_ratio/region_mean    | (same)                  | train/(same)        | actor/pg_clipfrac                       |
| clip_ratio/low_mean       | (same)                  | train/(same)        | actor/pg_clipfrac_low * (1)             |
| clip_ratio/high_mean      | (same)                  | train/(same)        | actor/pg_clipfrac_high * (1)            |
| grad_norm                 | (same)                  | train/grad_norm     | actor/grad_norm                         |
| completions/mean_length   | (same)                  | train/(same)        | response_length/mean                    |
| completions/clipped_ratio | (same)                  | train/(same)        | response_length/clip_ratio              |
| learning_rate             | (same)                  | train/learning_rate | actor/lr                                |
| step_time                 | (same; TRL >= 0.22)     | train/step_time     | perf/time_per_step                      |
| perf/throughput           | (same) *                | train/(same) *      | perf/throughput                         |
| rewards/<f>/mean          | (same)                  | train/(same)        | critic/score/<f>/mean * (2)             |
| eval/accuracy (held out)  | eval_reward, own record | eval/reward         | val-core/openai/gsm8k/reward/mean@1     |

Names checked in TRL 0.21.0 / 1.16.0 `trainer/grpo_trainer.py`, transformers 4.55 `TensorBoardCallback` and
`rewrite_logs` (eval_x -> eval/x, else train/x; logdir runs/<%b%d_%H-%M-%S>_<host>), verl 0.9.1
`trainer/ppo/metric_utils.py`, `trainer/ppo/core_algos.py`, `utils/tracking.py` (FileLogger: {"step", "data"}
lines in <project>/<experiment>.jsonl; verl 0.5.0 has no file logger). (1) verl's own actor/pg_clipfrac_lower
is the dual-clip fraction, another quantity, so the sides get new names. (2) verl logs per-function rewards
only for validation (val-aux/...). TRL also writes `epoch` into every record (so train/epoch in TensorBoard);
the verl eval is merged into that step's line, as verl's trainer does. No loss is written (TRL and verl log
one): rldoctor's records have none.

A run is right for a tool when the scenario's detector fired at warning or critical (the healthy scenario: when
nothing did); anything else at warning or critical is a false alarm. Both tools run at their defaults.

    python3 -m venv /work/scratch/rldoctor-venv
    /work/scratch/rldoctor-venv/bin/pip install 'rldoctor[tensorboard]==0.2.0'
    .venv/bin/python bench/diagnose_rldoctor_generator.py --rldoctor-venv /work/scratch/rldoctor-venv \\
        | tee bench/results/diagnose_rldoctor_generator.txt
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from pathlib import Path

# rldoctor's scenario -> the grposcope detector that names its failure (as in diagnose_rldoctor_demos.py);
# rldoctor's own expected detectors come from its EXPECTED_DETECTIONS, dumped with the records.
GRPOSCOPE_EXPECTS = {"healthy": None, "entropy_collapse": "entropy_collapse", "saturated_groups": "advantage_collapse",
                     "too_hard": "advantage_collapse", "reward_hacking": "reward_hacking",
                     "length_hacking": "length_growth", "truncation": "truncation", "kl_blowup": "kl_drift",
                     "clip_saturation": "clip_saturation", "grad_spikes": "gradient_pathology", "plateau": "plateau",
                     "format_domination": "reward_composition"}
FORMATS = ("trainer_state", "tensorboard", "verl")
ALARM = ("warning", "critical")

# Run in rldoctor's venv: one setting's twelve scenarios, with rldoctor's expected detector for each.
DUMP = """
import json, sys
from rl_doctor.simulate import EXPECTED_DETECTIONS, SCENARIOS, simulate
seed, steps, every = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
json.dump({s: {"records": simulate(s, n_steps=steps, seed=seed, eval_every=every)[0],
               "expects": EXPECTED_DETECTIONS[s]}
           for s in SCENARIOS}, sys.stdout)
"""

# rldoctor's record key -> verl's name (reward and rewards/<f>/mean: in write_verl)
VERL_RENAME = {"reward_std": "critic/score/std", "frac_reward_zero_std": "critic/score/frac_zero_std",
               "entropy": "actor/entropy", "kl": "actor/kl_loss", "clip_ratio/region_mean": "actor/pg_clipfrac",
               "clip_ratio/low_mean": "actor/pg_clipfrac_low", "clip_ratio/high_mean": "actor/pg_clipfrac_high",
               "grad_norm": "actor/grad_norm", "completions/mean_length": "response_length/mean",
               "completions/clipped_ratio": "response_length/clip_ratio", "learning_rate": "actor/lr",
               "step_time": "perf/time_per_step", "perf/throughput": "perf/throughput",
               "eval/accuracy": "val-core/openai/gsm8k/reward/mean@1"}


def trl_history(records: list[dict]) -> list[dict]:
    """TRL's log_history: one train record a step (Trainer adds epoch and step), an eval record after it."""
    n = len(records)
    history = []
    for r in records:
        step = r["step"] + 1
        history.append({**{k: v for k, v in r.items() if k not in ("step", "eval/accuracy")},
                        "epoch": round(step / n, 4), "step": step})
        if "eval/accuracy" in r:
            history.append({"eval_reward": r["eval/accuracy"], "epoch": round(step / n, 4), "step": step})
    return history


def write_trainer_state(records: list[dict], folder: Path) -> Path:
    n = len(records)
    path = folder / f"checkpoint-{n}" / "trainer_state.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {"best_metric": None, "best_model_checkpoint": None, "epoch": 1.0, "eval_steps": 25, "global_step": n,
             "is_hyper_param_search": False, "is_local_process_zero": True, "is_world_process_zero": True,
             "log_history": trl_history(records), "logging_steps": 1, "max_steps": n, "num_input_tokens_seen": 0,
             "num_train_epochs": 1, "save_steps": n, "total_flos": 0.0, "train_batch_size": 8,
             "trial_name": None, "trial_params": None}
    path.write_text(json.dumps(state, indent=2))
    return path


def write_tensorboard(records: list[dict], folder: Path) -> Path:
    """As transformers' TensorBoardCallback: rewrite_logs' tags at state.global_step, in runs/<date>_<host>."""
    from torch.utils.tensorboard import SummaryWriter

    runs = folder / "runs"
    writer = SummaryWriter(log_dir=str(runs / f"{datetime.now().strftime('%b%d_%H-%M-%S')}_{socket.gethostname()}"))
    writer.add_text("args", json.dumps({"output_dir": str(folder), "logging_steps": 1, "eval_steps": 25}))
    for log in trl_history(records):
        step = log.pop("step")
        for key, value in log.items():
            tag = "eval/" + key[len("eval_"):] if key.startswith("eval_") else "train/" + key
            writer.add_scalar(tag, value, step)
    writer.close()
    return runs


def write_verl(records: list[dict], folder: Path, experiment: str) -> Path:
    """verl's FileLogger: <project>/<experiment>.jsonl, one {"step", "data"} line a step, validation merged in."""
    path = folder / "rldoctor_sim" / f"{experiment}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        for r in records:
            data = {"critic/score/mean": r["reward"], "critic/rewards/mean": r["reward"]}  # no KL in the reward
            for key, value in r.items():
                if key.startswith("rewards/"):
                    data["critic/score/" + key[len("rewards/"):]] = value
                elif key in VERL_RENAME:
                    data[VERL_RENAME[key]] = value
            out.write(json.dumps({"step": r["step"] + 1, "data": data}) + "\n")
    return path


def run_tool(command: list[str], out_json: Path, rldoctor: bool) -> list[tuple[str, str]] | str:
    """(detector, severity) of every finding, lower-cased; or the error text when the tool read nothing."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode not in (0, 1) or not out_json.exists():
        return f"ERROR rc {done.returncode}: {' '.join((done.stderr or done.stdout).strip().splitlines()[-1:])}"
    findings = json.loads(out_json.read_text())
    # rldoctor: {"findings": [...]}; grposcope: its one JSON shape, {"schema": ..., "runs": [{"findings": [...]}]}
    findings = findings["findings"] if rldoctor else [f for run in findings["runs"] for f in run["findings"]]
    return [(f["detector"], f["severity"].lower()) for f in findings]


def score(found: list | str, expected: str | None) -> tuple[bool, list[str], str]:
    """(right, false alarms, what fired): right when the expected detector alarmed, or nothing did for healthy."""
    if isinstance(found, str):
        return False, [], found
    fired = {d: s for d, s in found if s in ALARM}
    right = (expected in fired) if expected else not fired
    others = sorted(d for d in fired if d != expected)
    return right, others, ", ".join(f"{d} ({s})" for d, s in sorted(fired.items())) or "nothing"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rldoctor-venv", type=Path, required=True, help="a venv with rldoctor[tensorboard]==0.2.0")
    parser.add_argument("--grposcope", default=str(Path(sys.executable).parent / "grposcope"))
    parser.add_argument("--settings", default="11:400,23:400,37:400,11:200,11:800",
                        help="seed:steps[:eval_every],... (rldoctor's eval_every defaults to 25)")
    parser.add_argument("--out", type=Path, default=Path("/tmp/rldoctor-generator"))
    args = parser.parse_args()

    jobs = []  # (setting, scenario, format, tool, command, json path, expected detector)
    for setting in args.settings.split(","):
        seed, steps, every = (setting.split(":") + ["25"])[:3]
        dump = subprocess.run([str(args.rldoctor_venv / "bin" / "python"), "-c", DUMP, seed, steps, every],
                              check=True, capture_output=True, text=True)
        for scenario, gen in json.loads(dump.stdout).items():
            base = args.out / f"seed{seed}-{steps}steps-eval{every}" / scenario
            shutil.rmtree(base, ignore_errors=True)  # TensorBoard adds a new runs/<date> folder on each write
            paths = {"trainer_state": write_trainer_state(gen["records"], base / "trl"),
                     "tensorboard": write_tensorboard(gen["records"], base / "trl"),
                     "verl": write_verl(gen["records"], base / "verl", scenario)}
            label = f"seed {seed}, {steps} steps" + (f", eval every {every}" if every != "25" else "")
            for fmt, path in paths.items():
                g_json, r_json = base / f"grposcope-{fmt}.json", base / f"rldoctor-{fmt}.json"
                jobs.append((label, scenario, fmt, "grposcope",
                             [args.grposcope, "diagnose", str(path), "--json", str(g_json)], g_json,
                             GRPOSCOPE_EXPECTS[scenario]))
                jobs.append((label, scenario, fmt, "rldoctor",
                             [str(args.rldoctor_venv / "bin" / "rl-doctor"), "diagnose", str(path), "-f", "json",
                              "-o", str(r_json)], r_json, (gen["expects"] or [None])[0]))

    # The CLIs start slowly (grposcope ~2 s), so run them side by side.
    with ThreadPoolExecutor(max_workers=os.cpu_count() or 2) as pool:
        found = list(pool.map(lambda j: run_tool(j[4], j[5], j[3] == "rldoctor"), jobs))

    right: dict[tuple, int] = {}
    alarmed: dict[tuple, int] = {}
    lines = []
    for (label, scenario, fmt, tool, _, _, expected), result in zip(jobs, found):
        ok, others, fired = score(result, expected)
        right[label, fmt, tool] = right.get((label, fmt, tool), 0) + ok
        alarmed[label, fmt, tool] = alarmed.get((label, fmt, tool), 0) + bool(others)
        if not ok or others:
            verdict = ("kept healthy clean" if expected is None else f"caught {expected}") if ok else (
                "false alarm on healthy" if expected is None else f"MISSED {expected}")
            lines.append(f"| {label} | {scenario} | {fmt} | {tool} | {verdict} | {fired} |")

    labels = list(dict.fromkeys(j[0] for j in jobs))
    versions = [subprocess.run(c, capture_output=True, text=True).stdout.strip() for c in
                ([args.grposcope, "--version"], [str(args.rldoctor_venv / "bin" / "rl-doctor"), "--version"])]
    print(f"{' and '.join(versions)}, at their defaults; runs written to {args.out}\n")
    print("Right (expected detector at warning or critical; healthy: none), with runs that had another alarm:\n")
    print("| setting | format | grposcope | rldoctor |")
    print("|---|---|---|---|")
    for label in labels:
        for fmt in FORMATS:
            cells = [f"{right[label, fmt, t]} of 12 ({alarmed[label, fmt, t]} with other alarms)"
                     for t in ("grposcope", "rldoctor")]
            print(f"| {label} | {fmt} | {cells[0]} | {cells[1]} |")
    print("\n| setting | grposcope | rldoctor |")
    print("|---|---|---|")
    for label in labels:
        cells = [f"{sum(right[label, f, t] for f in FORMATS)} of 36" for t in ("grposcope", "rldoctor")]
        print(f"| {label} | {cells[0]} | {cells[1]} |")
    for tool in ("grposcope", "rldoctor"):
        total = sum(v for (_, _, t), v in right.items() if t == tool)
        print(f"\n{tool}: {total} of {12 * len(FORMATS) * len(labels)} in all", end="")
    print("\n\nMisses and false alarms (what fired = every warning or critical):\n")
    print("| setting | scenario | format | tool | verdict | what fired |")
    print("|---|---|---|---|---|---|")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
