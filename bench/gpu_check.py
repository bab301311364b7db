"""A GPU check that fits the minutes a borrowed GPU machine gives (under 8 on one H100, startup included).

On a randomly initialised model of Qwen2.5-0.5B's shape (and 1.5B's while the time budget allows), in bf16:
1. correctness, grposcope's own trainer: losses and the ACR family finite; a step whose rewards are all equal is
   skipped (logged, weights and AdamW's step count unchanged across it, and the next step moves them again); a
   run resumed from a checkpoint in a fresh trainer ends bit-identical to the straight run (deterministic kernels:
   `torch.use_deterministic_algorithms`, CUBLAS_WORKSPACE_CONFIG);
2. speed and memory of grposcope's own trainer, its TRL subclass and stock TRL (plain `generate`, no vLLM) on the
   same model, batch, forced completion length and seed: per-step times without the warm-up, their median,
   seconds per 1,000 completion tokens, and peak GPU memory (torch.cuda.max_memory_allocated, reset per run).
A random model earns no reward, so the rewards are scripted (a function of prompt, sample index and step) and
every completion is exactly L tokens long. Results go to OUT/gpu_check.json and OUT/gpu_check.txt after every
phase, so a run killed by its time limit still leaves what it measured.

    bash scripts/gpu_check.sh prepare     # here: grposcope's wheel, the wheels the GPU machine lacks, the tokenizer
    bash scripts/gpu_check.sh device      # there (docs/performance.md, "GPU check", has the exact call)
    .venv/bin/python bench/gpu_check.py --tiny --device cpu --out /tmp/gpu_check   # the CPU smoke, as CI runs it

The tiny size runs the same code paths on a CPU in float32 (bf16 is not safe on every CPU); its times are no
benchmark.
"""

from __future__ import annotations

import os

# cuBLAS reads this when its handle is made, so before torch loads: deterministic GEMMs for the resume check
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _gpu_check_runs as runs  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
CARRIED_TOKENIZER = REPO / ".gpu_check" / "tokenizer"  # scripts/gpu_check.sh prepare puts it there
# Sizes: "full" fills a few minutes of an H100 (8 x 8 completions of 256 tokens a timed step), "tiny" a CPU
# smoke of seconds. The correctness runs are smaller: what they check does not depend on the batch's size.
PROFILES = {
    "full": {"shapes": "0.5b", "dtype": "bfloat16", "prompts": 8, "generations": 8, "length": 256,
             "prompt_length": 64, "warmup": 1, "steps": 3, "check_prompts": 4, "check_generations": 4,
             "check_length": 32},
    "tiny": {"shapes": "tiny", "dtype": "float32", "prompts": 2, "generations": 4, "length": 8,
             "prompt_length": 16, "warmup": 1, "steps": 2, "check_prompts": 2, "check_generations": 4,
             "check_length": 8},
}
# A trainer's speed run on a later shape starts only if the time left covers this many times its run on the
# previous shape: generation, most of a step here, is bound by kernel launches (28 layers against 24), the update
# by FLOPs (3.1x the parameters); twice covers both unless the update dominates.
NEXT_SHAPE_FACTOR = 2.0


START = time.perf_counter()


def say(message: str) -> None:
    print(f"[{time.perf_counter() - START:6.1f}s] {message}", flush=True)


# --- the report, written after every phase ------------------------------------------------------------------


class Report:
    """gpu_check.json (every figure) and gpu_check.txt (the table), rewritten whole after every phase."""

    def __init__(self, out_dir: Path, settings: dict) -> None:
        self.out_dir = out_dir
        self.data: dict = {"status": "running", "settings": settings, "environment": {}, "shapes": {},
                           "skipped": [], "errors": [], "phase_seconds": {}, "checks": {}, "passed": False}

    def error(self, phase: str, err: BaseException) -> None:
        tail = traceback.format_exception(type(err), err, err.__traceback__)
        self.data["errors"].append({"phase": phase, "error": repr(err)[:500], "traceback": "".join(tail)[-4000:]})

    def save(self) -> None:
        self.data["checks"] = checks(self.data)
        self.data["passed"] = self.data["status"] == "complete" and bool(self.data["checks"]) \
            and all(self.data["checks"].values()) and not self.data["errors"]
        tmp = self.out_dir / "gpu_check.json.tmp"
        tmp.write_text(json.dumps(self.data, indent=1, default=str) + "\n")
        os.replace(tmp, self.out_dir / "gpu_check.json")
        (self.out_dir / "gpu_check.txt").write_text(table(self.data) + "\n")


def checks(data: dict) -> dict[str, bool]:
    """Every pass/fail figure of the report, by name; the check passes when all are true and nothing failed."""
    out = {}
    for shape, result in data["shapes"].items():
        c = result.get("correctness")
        if c:
            ns, rs = c["no_signal"], c["resume"]
            figures = {"losses_finite": c["losses_finite"], "grad_norms_finite": c["grad_norms_finite"],
                       "acr_family_finite": c["acr_family_finite"], "acr_as_scripted": c["acr_as_scripted"],
                       "no_signal_skipped": ns["skipped"], "no_signal_weights_unchanged": ns["weights_unchanged"],
                       "no_signal_adam_unchanged": ns["adam_step_count_unchanged"],
                       "no_signal_control_changed": ns["control_changed"],
                       "resume_weights_equal": rs["weights_equal"], "resume_losses_equal": rs["losses_equal"]}
            out.update({f"{shape}/{name}": ok for name, ok in figures.items()})
        for kind, s in result.get("speed", {}).items():
            timed = bool(s["measured_step_s"]) and runs.finite(s["measured_step_s"])
            out[f"{shape}/{kind}/timed"] = timed
            out[f"{shape}/{kind}/lengths_forced"] = s["lengths_forced"]
            out[f"{shape}/{kind}/losses_finite"] = s["losses_finite"]
            if "acr_family_finite" in s:
                out[f"{shape}/{kind}/acr_family_finite"] = s["acr_family_finite"]
    return out


def table(data: dict) -> str:
    """The short human summary: environment, each shape's correctness and a speed table."""
    env = data["environment"]
    versions = env.get("versions", {})
    lines = [f"GPU check ({data['status']}, {'PASSED' if data['passed'] else 'NOT PASSED'}): "
             f"{env.get('device_name', '?')}; torch {versions.get('torch')}, transformers "
             f"{versions.get('transformers')}, trl {versions.get('trl')}; {data['settings']['dtype']}"]
    for shape, result in data["shapes"].items():
        b = result.get("batch", {})
        lines.append(f"\n{shape}: {result.get('parameters', 0) / 1e6:.1f}M parameters; B={b.get('prompts')} prompts "
                     f"x G={b.get('generations')}, every completion {b.get('length')} tokens, prompts "
                     f"{b.get('prompt_length')} tokens")
        lines += correctness_lines(result.get("correctness"))
        lines += speed_lines(result.get("speed", {}))
    for skip in data["skipped"]:
        lines.append(f"skipped: {skip}")
    for err in data["errors"]:
        lines.append(f"ERROR in {err['phase']}: {err['error'][:300]}")
    failed = [name for name, ok in data["checks"].items() if not ok]
    lines.append(f"\nfailed checks: {', '.join(failed) if failed else 'none'}")
    return "\n".join(lines)


def correctness_lines(c: dict | None) -> list[str]:
    if not c:
        return []

    def mark(ok: bool) -> str:
        return "PASS" if ok else "FAIL"

    ns, rs, plan = c["no_signal"], c["resume"], c["plan"]
    return [
        f"  losses finite {mark(c['losses_finite'])}; grad norms finite {mark(c['grad_norms_finite'])}; ACR "
        f"family finite {mark(c['acr_family_finite'])}; ACR as scripted (0, and 1 on step "
        f"{plan['no_signal_step']}) {mark(c['acr_as_scripted'])}",
        f"  no-signal step {ns['step']}: skipped {mark(ns['skipped'])}, weights unchanged "
        f"{mark(ns['weights_unchanged'])}, AdamW steps unchanged {mark(ns['adam_step_count_unchanged'])}, next "
        f"step moves them {mark(ns['control_changed'])}",
        f"  resume from step {plan['resume_at']} to {plan['steps']}: weights bit-identical {mark(rs['weights_equal'])}"
        f" (max |diff| {rs['max_abs_diff']:.3g}), losses equal {mark(rs['losses_equal'])}",
    ]


def speed_lines(speed: dict) -> list[str]:
    if not speed:
        return []
    lines = [f"  {'trainer':<14} | {'s/step median (min-max)':<24} | {'s per 1k compl. tokens':<26} | "
             f"{'peak GPU MiB':>12} | measured steps"]
    for kind, s in speed.items():
        peak = s["gpu_memory"].get("peak_allocated_mib")
        lines.append(f"  {kind:<14} | {spread(s, 'step_s'):<24} | {spread(s, 's_per_1k_tokens'):<26} | "
                     f"{f'{peak:,.0f}' if peak is not None else '-':>12} | {len(s['measured_step_s'])}")
    return lines


def spread(s: dict, name: str) -> str:
    if s[f"median_{name}"] is None:
        return "-"
    return f"{s[f'median_{name}']:.3f} ({s[f'min_{name}']:.3f}-{s[f'max_{name}']:.3f})"


# --- the phases ---------------------------------------------------------------------------------------------


def attempt(report: Report, phase: str, fn):
    """Runs one phase; a failure is recorded with its traceback and the next phase still runs (a GPU minute
    spent on the phases that work is not lost to the one that does not). The report is written either way."""
    say(f"{phase}: start")
    t0 = time.perf_counter()
    try:
        value = fn()
        say(f"{phase}: done in {time.perf_counter() - t0:.1f} s")
    except Exception as err:  # noqa: BLE001 - recorded, and the check fails at the end
        report.error(phase, err)
        say(f"{phase}: FAILED: {err!r}"[:600])
        value = None
    report.data["phase_seconds"][phase] = time.perf_counter() - t0
    report.save()
    return value


def environment(device: str) -> dict:
    import importlib.metadata

    import grposcope

    def version(name: str) -> str | None:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return None

    names = ("torch", "transformers", "trl", "accelerate", "datasets", "peft", "tokenizers", "grposcope")
    env = {"python": platform.python_version(), "versions": {n: version(n) for n in names},
           "grposcope_from": os.path.dirname(grposcope.__file__), "device": device, "cpu_count": os.cpu_count()}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        env.update(device_name=torch.cuda.get_device_name(0), cuda=torch.version.cuda,
                   capability=".".join(map(str, torch.cuda.get_device_capability(0))),
                   gpu_memory_mib=props.total_memory / 2**20)
    else:
        env["device_name"] = f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    return env


def run_shape(report: Report, shape: str, first: bool, setup: runs.Setup, args, budget: "Budget",
              before: dict[str, float]) -> dict[str, float]:
    """One shape: its model, the correctness runs (first shape only: they check code, not size), then the three
    trainers' speed runs while the budget lasts. `before`: each trainer's seconds on the previous shape, from
    which a run's time is estimated (else from the run before it). Returns this shape's seconds by trainer."""
    tokenizer = runs.load_tokenizer(setup.tokenizer_dir)
    batch = runs.Batch(args.prompts, args.generations, args.length, args.prompt_length)
    master = attempt(report, f"{shape}/model", lambda: runs.build_master(shape, tokenizer, setup.dtype, args.seed))
    if master is None:
        return {}
    result = report.data["shapes"].setdefault(shape, {})
    result.update(config=runs.model_config(shape, tokenizer).to_dict(), parameters=runs.parameter_count(master),
                  batch=batch.__dict__)
    if first and not args.no_correctness:
        check_batch = runs.Batch(args.check_prompts, args.check_generations, args.check_length, args.prompt_length)
        plan = runs.CheckPlan(args.check_steps, args.resume_at, args.no_signal_step)
        c = attempt(report, f"{shape}/correctness", lambda: runs.correctness(master, setup, check_batch, plan))
        if c is not None:
            result["correctness"] = c
        runs.release(setup.device)
    took: dict[str, float] = {}
    for kind in args.trainers:
        estimate = estimate_s(kind, before, took)
        if not budget.allows(estimate):
            report.data["skipped"].append(f"{shape}/speed/{kind}: {budget.left():.0f} s left, estimated "
                                          f"{estimate:.0f} s")
            continue
        start = time.perf_counter()
        s = attempt(report, f"{shape}/speed/{kind}",
                    lambda: runs.speed(kind, master, setup, batch, args.warmup, args.steps))
        runs.release(setup.device)
        took[kind] = time.perf_counter() - start
        if s is not None:
            result.setdefault("speed", {})[kind] = s
            report.save()
    return took


def estimate_s(kind: str, before: dict[str, float], took: dict[str, float]) -> float:
    """A speed run's expected seconds: the same trainer's on the previous shape, scaled; else the last run's on
    this shape; the first run of the first shape always runs."""
    if kind in before:
        return before[kind] * NEXT_SHAPE_FACTOR
    return list(took.values())[-1] if took else 0.0


class Budget:
    def __init__(self, seconds: float) -> None:
        self.t0, self.seconds = time.perf_counter(), seconds

    def left(self) -> float:
        return self.seconds - (time.perf_counter() - self.t0)

    def allows(self, estimate: float) -> bool:
        return estimate <= self.left()


# --- the command line -----------------------------------------------------------------------------------------


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tiny", action="store_true", help="the tiny model and batch (the CPU smoke)")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu", choices=("cuda", "cpu"))
    parser.add_argument("--out", help="folder for gpu_check.json and gpu_check.txt (default: $OUT)")
    parser.add_argument("--shapes", help="comma-separated, of: " + ", ".join(runs.SHAPES) + " (default: the "
                        "profile's; later shapes run only while the budget lasts)")
    parser.add_argument("--budget-s", type=float, default=300.0,
                        help="seconds the check may take; later shapes and trainers are skipped past it")
    parser.add_argument("--dtype", choices=("bfloat16", "float32"), help="model weights in every trainer")
    parser.add_argument("--tokenizer", help="a folder with tokenizer.json (default: .gpu_check/tokenizer if "
                        "prepared, else the embedded model's)")
    parser.add_argument("--work-dir", help="checkpoints and output_dirs (default: a temporary folder, removed)")
    parser.add_argument("--trainers", default=",".join(runs.TRAINERS), help="speed runs, comma-separated")
    parser.add_argument("--trl-gradient-checkpointing", action="store_true",
                        help="TRL's default; off (the default here) it does the work grposcope's trainer does")
    parser.add_argument("--learning-rate", type=float, default=1e-5,
                        help="large enough that a bf16 step changes some weights (the skip check's control)")
    parser.add_argument("--seed", type=int, default=0)
    for name in ("prompts", "generations", "length", "prompt_length", "warmup", "steps", "check_prompts",
                 "check_generations", "check_length"):
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, help="default: the profile's")
    parser.add_argument("--check-steps", type=int, default=5, help="N: the straight correctness run's steps")
    parser.add_argument("--resume-at", type=int, default=3, help="k: the checkpoint the resumed run starts from")
    parser.add_argument("--no-signal-step", type=int, default=4, help="s: the step whose rewards are all equal")
    parser.add_argument("--no-correctness", action="store_true", help="speed runs only")
    args = parser.parse_args(argv)
    for key, value in PROFILES["tiny" if args.tiny else "full"].items():
        if getattr(args, key) is None:
            setattr(args, key, value)
    args.shapes, args.trainers = args.shapes.split(","), args.trainers.split(",")
    check_args(parser, args)
    return args


def check_args(parser, args) -> None:
    unknown = [s for s in args.shapes if s not in runs.SHAPES] + [t for t in args.trainers if t not in runs.TRAINERS]
    if unknown:
        parser.error(f"unknown shape or trainer: {', '.join(unknown)}")
    if not 1 <= args.resume_at < args.check_steps or not 2 <= args.no_signal_step < args.check_steps:
        parser.error("need 1 <= --resume-at < --check-steps and 2 <= --no-signal-step < --check-steps (the "
                     "no-signal check compares the steps before and after it)")
    if args.warmup < 1 or args.steps < 1:
        parser.error("--warmup and --steps must be >= 1 (the first step's time holds the trainer's start)")
    if args.device == "cuda" and not torch.cuda.is_available():
        parser.error("--device cuda, but torch sees no GPU; use --device cpu (with --tiny) here")
    if not (args.out or os.environ.get("OUT")):
        parser.error("give --out, or set OUT")


def tokenizer_folder(arg: str | None) -> Path:
    if arg:
        return Path(arg)
    if (CARRIED_TOKENIZER / "tokenizer.json").is_file():
        return CARRIED_TOKENIZER
    from grposcope.models.embedded import ensure_embedded_checkpoint

    return ensure_embedded_checkpoint("smollm2-135m-instruct")  # converted once, then cached


def main(argv=None) -> int:
    args = parse_args(argv)
    out_dir = Path(args.out or os.environ["OUT"])
    out_dir.mkdir(parents=True, exist_ok=True)
    work = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="gpu-check-"))
    report = Report(out_dir, dict(vars(args)))
    # `timeout` sends SIGTERM: leave through `finally`, so the report says where it stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    budget = Budget(args.budget_s)
    try:
        report.data["environment"] = environment(args.device)
        say(f"environment: {json.dumps(report.data['environment'])}")
        setup = runs.Setup(args.device, getattr(torch, args.dtype), args.seed, args.learning_rate,
                           tokenizer_folder(args.tokenizer), work, args.trl_gradient_checkpointing)
        report.data["settings"]["tokenizer_dir"] = str(setup.tokenizer_dir)
        took: dict[str, float] = {}
        for i, shape in enumerate(args.shapes):
            cheapest = min(took.values(), default=0.0) * NEXT_SHAPE_FACTOR  # no model is built for nothing
            if i and not budget.allows(cheapest):
                report.data["skipped"].append(f"{shape}: {budget.left():.0f} s left, its quickest run estimated "
                                              f"{cheapest:.0f} s")
                continue
            took = run_shape(report, shape, i == 0, setup, args, budget, took)
        report.data["status"] = "complete"
    except SystemExit:
        report.data["status"] = "killed (time limit)"
        raise
    except Exception as err:  # noqa: BLE001 - recorded; the exit code says the check failed
        report.error("setup", err)
        report.data["status"] = "failed"
    finally:
        report.data["elapsed_s"] = time.perf_counter() - budget.t0
        report.save()
        if not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    print("\n" + table(report.data), flush=True)
    return 0 if report.data["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
