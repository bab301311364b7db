"""Synthetic GRPO runs with known failures, for grposcope diagnose's scenario suite (tests/test_scenarios.py,
bench/diagnose_scenarios.py), and writers that put each run into every log format a practitioner has.

How a step is made: B prompts, each with its own pass rate p drawn from a Beta distribution whose mean m(t) is
the scenario's learning curve; G completions per prompt are Bernoulli(p). From those groups come the reward's
mean and std, `frac_reward_zero_std` (the share of groups with one reward) and the gradient norm, exactly 0
when every group collapsed (as TRL logs it) and log-normal otherwise. Entropy, KL, lengths, clipping and the
held-out score follow each scenario's own curve with noise. `expected` names the detectors that must fire
(warning or critical); where a failure genuinely brings another (every group of a too-hard step collapses, so
its gradient is 0), the comment says so.
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

G, B = 8, 16
EVAL_EVERY = 10


@dataclass
class Scenario:
    name: str
    expected: frozenset[str]
    series: dict[str, np.ndarray]  # TRL's log_history names -> (steps,) values, NaN where not logged
    evals: dict[int, float] = field(default_factory=dict)  # step -> held-out score (TRL's eval_reward)
    max_steps: int = 300

    @property
    def steps(self) -> int:
        return len(next(iter(self.series.values())))


def groups(rng: np.random.Generator, mean: np.ndarray, concentration: float, b: int = B, g: int = G
           ) -> dict[str, np.ndarray]:
    """Per step: reward mean and std, the share of collapsed groups, and whether every group collapsed."""
    n = len(mean)
    m = np.clip(mean, 1e-3, 1 - 1e-3)[:, None]
    p = rng.beta(m * concentration, (1 - m) * concentration, size=(n, b))  # (steps, B) pass rates
    wins = rng.random((n, b, g)) < p[..., None]  # (steps, B, G)
    rewards = wins.astype(float)
    collapsed = rewards.std(axis=2) == 0  # (steps, B)
    return {"reward": rewards.mean(axis=(1, 2)), "reward_std": rewards.reshape(n, -1).std(axis=1, ddof=1),
            "frac_reward_zero_std": collapsed.mean(axis=1), "all_collapsed": collapsed.all(axis=1)}


def base(rng: np.random.Generator, n: int, mean: np.ndarray, concentration: float = 4.0, *, b: int = B,
         entropy: np.ndarray | None = None, kl: np.ndarray | None = None, length: np.ndarray | None = None,
         cap: int = 1024, clip: float = 0.0, grad_scale: float = 0.3, eval_mean: np.ndarray | None = None
         ) -> tuple[dict[str, np.ndarray], dict[int, float]]:
    """A run's series with the given curves; the healthy defaults where a curve is not given."""
    t = np.arange(1, n + 1)
    r = groups(rng, mean, concentration, b=b)
    entropy = (0.9 - 0.25 * t / n) if entropy is None else entropy
    length = (200 + 20 * t / n) if length is None else length
    length = np.maximum(length + rng.normal(0, 0.03, n) * length, 5)
    truncated = np.clip(np.exp((length - cap) / (0.12 * cap)) + rng.normal(0, 0.002, n), 0, 1)
    grad = np.exp(rng.normal(np.log(0.8), grad_scale, n))
    grad[r["all_collapsed"]] = 0.0
    series = {
        "reward": r["reward"], "reward_std": r["reward_std"], "frac_reward_zero_std": r["frac_reward_zero_std"],
        "rewards/accuracy/mean": r["reward"], "rewards/accuracy/std": r["reward_std"],
        "entropy": np.maximum(entropy + rng.normal(0, 0.02, n), 1e-3),
        "kl": np.maximum((0.02 * np.sqrt(t / n) if kl is None else kl) * np.exp(rng.normal(0, 0.1, n)), 0),
        "loss": rng.normal(0, 0.01, n), "grad_norm": grad, "learning_rate": np.full(n, 1e-6),
        "completions/mean_length": length, "completions/max_length": np.minimum(length * 2.2, cap),
        "completions/clipped_ratio": truncated,
        "clip_ratio/low_mean": np.abs(rng.normal(clip * 0.3, 0.002 + clip * 0.03, n)),
        "clip_ratio/high_mean": np.abs(rng.normal(clip * 0.7, 0.002 + clip * 0.05, n)),
        "step_time": np.exp(rng.normal(np.log(60), 0.1, n)),
    }
    series["clip_ratio/region_mean"] = series["clip_ratio/low_mean"] + series["clip_ratio/high_mean"]
    eval_mean = mean if eval_mean is None else eval_mean
    evals = {int(s): float(np.clip(eval_mean[s - 1] + rng.normal(0, 0.015), 0, 1))
             for s in range(EVAL_EVERY, n + 1, EVAL_EVERY)}
    return series, evals


def ramp(n: int, start: float, end: float, until: int | None = None) -> np.ndarray:
    """A curve from start to end over the first `until` steps (all of them by default), flat after."""
    t = np.arange(1, n + 1)
    return start + (end - start) * np.minimum(t / (until or n), 1.0)


# --------------------------------------------------------------------------------------------------- scenarios


def healthy_climb(rng, n=300):
    return Scenario("healthy_climb", frozenset(), *base(rng, n, ramp(n, 0.30, 0.60)))


def healthy_fast(rng, n=300):
    # learns fast, then keeps gaining slowly; answers grow longer as they get better (eval rises with them)
    mean = ramp(n, 0.2, 0.55, until=120) + 0.1 * np.arange(n) / n
    return Scenario("healthy_fast", frozenset(), *base(rng, n, mean, length=ramp(n, 150, 330),
                                                        entropy=ramp(n, 1.0, 0.55)))


def healthy_noisy(rng, n=300):
    # fewer prompts per step, noisier figures, a slow gain
    return Scenario("healthy_noisy", frozenset(), *base(rng, n, ramp(n, 0.40, 0.52), concentration=6.0, b=8,
                                                         grad_scale=0.45))


def healthy_short(rng, n=40):
    return Scenario("healthy_short", frozenset(), *base(rng, n, ramp(n, 0.35, 0.5)), max_steps=40)


def too_hard(rng, n=300):
    # the reward flat at 0.04 (it never improves: no_learning); nearly every group all-wrong; on the steps where
    # all 16 collapse the gradient is exactly 0 (no_signal_steps)
    return Scenario("too_hard", frozenset({"advantage_collapse", "no_signal_steps", "no_learning"}),
                    *base(rng, n, np.full(n, 0.04), concentration=1.0, eval_mean=np.full(n, 0.05)))


def saturated(rng, n=300):
    # the data is learnt: groups all-correct; steps where all 16 collapse have no gradient (no_signal_steps)
    return Scenario("saturated", frozenset({"advantage_collapse", "no_signal_steps"}),
                    *base(rng, n, ramp(n, 0.6, 0.97, until=100), concentration=3.0))


def entropy_collapse(rng, n=300):
    t = np.arange(1, n + 1)
    entropy = 1.2 * np.exp(-t / 35) + 0.04
    return Scenario("entropy_collapse", frozenset({"entropy_collapse"}),
                    *base(rng, n, ramp(n, 0.30, 0.45, until=60), entropy=entropy))


def kl_blowup(rng, n=300):
    t = np.arange(1, n + 1)
    return Scenario("kl_blowup", frozenset({"kl_drift"}), *base(rng, n, ramp(n, 0.3, 0.5), kl=0.01 * np.exp(t / 60)))


def truncation(rng, n=300):
    # completions run into a 1024-token cap: 30-45% of them cut
    return Scenario("truncation", frozenset({"truncation"}),
                    *base(rng, n, ramp(n, 0.3, 0.45), length=np.full(n, 975.0)))


def length_growth(rng, n=300):
    # three times longer, the reward and the held-out score flat (no_learning); far below the 4096 cap
    return Scenario("length_growth", frozenset({"length_growth", "no_learning"}),
                    *base(rng, n, np.full(n, 0.40), length=ramp(n, 200, 620), cap=4096))


def clip_saturation(rng, n=300):
    return Scenario("clip_saturation", frozenset({"clip_saturation"}), *base(rng, n, ramp(n, 0.3, 0.5), clip=0.28))


def gradient_spikes(rng, n=300):
    series, evals = base(rng, n, ramp(n, 0.3, 0.55))
    spikes = rng.choice(np.arange(30, n), size=8, replace=False)
    series["grad_norm"][spikes] *= rng.uniform(15, 50, size=8)
    return Scenario("gradient_spikes", frozenset({"gradient_pathology"}), series, evals)


def gradient_nonfinite(rng, n=300):
    series, evals = base(rng, n, ramp(n, 0.3, 0.55))
    series["grad_norm"][[150, 151, 200]] = [np.nan, np.inf, np.nan]
    series["loss"][[150, 200]] = np.nan
    return Scenario("gradient_nonfinite", frozenset({"gradient_pathology"}), series, evals)


def reward_hacking(rng, n=300):
    # the training reward keeps rising; the held-out score peaks at step 100 and falls to below its start (a held-out
    # fall, whatever the training reward does: held_out_regression)
    eval_mean = np.concatenate([ramp(100, 0.30, 0.45), ramp(n - 100, 0.45, 0.22)])
    return Scenario("reward_hacking", frozenset({"reward_hacking", "held_out_regression"}),
                    *base(rng, n, ramp(n, 0.30, 0.85), concentration=8.0, eval_mean=eval_mean))


def reward_composition(rng, n=300):
    # two reward functions: format carries all of the reward's variance; accuracy is 0 on every completion
    series, evals = base(rng, n, ramp(n, 0.4, 0.6), eval_mean=np.full(n, 0.02))
    series["rewards/format/mean"], series["rewards/format/std"] = series.pop("rewards/accuracy/mean"), \
        series.pop("rewards/accuracy/std")
    series["rewards/accuracy/mean"], series["rewards/accuracy/std"] = np.zeros(n), np.zeros(n)
    return Scenario("reward_composition", frozenset({"reward_composition"}), series, evals)


def plateau(rng, n=300):
    # learnt for 100 steps, then nothing for 200; entropy and groups stay healthy
    return Scenario("plateau", frozenset({"plateau"}), *base(rng, n, ramp(n, 0.20, 0.55, until=100),
                                                            entropy=np.full(n, 0.85)))


def no_signal(rng, n=300):
    # two prompts per step at a flat 15% pass rate (no_learning): a third of the steps have every group collapsed
    # (and most groups collapse: advantage_collapse is genuine here too)
    return Scenario("no_signal", frozenset({"no_signal_steps", "advantage_collapse", "no_learning"}),
                    *base(rng, n, np.full(n, 0.15), concentration=3.0, b=2))


SCENARIOS: dict[str, Callable[..., Scenario]] = {f.__name__: f for f in (
    healthy_climb, healthy_fast, healthy_noisy, healthy_short, too_hard, saturated, entropy_collapse, kl_blowup,
    truncation, length_growth, clip_saturation, gradient_spikes, gradient_nonfinite, reward_hacking,
    reward_composition, plateau, no_signal)}


def make(name: str, seed: int) -> Scenario:
    return SCENARIOS[name](np.random.default_rng(seed))


# ----------------------------------------------------------------------------------------------------- writers

# TRL's names -> verl's (verl's file logger); a metric verl does not log is left out of the verl format
VERL = {"reward": "critic/score/mean", "entropy": "actor/entropy", "kl": "actor/kl_loss", "loss": "actor/pg_loss",
        "grad_norm": "actor/grad_norm", "learning_rate": "actor/lr", "completions/mean_length": "response_length/mean",
        "completions/max_length": "response_length/max", "completions/clipped_ratio": "response_length/clip_ratio",
        "clip_ratio/region_mean": "actor/pg_clipfrac", "clip_ratio/low_mean": "actor/pg_clipfrac_lower",
        "step_time": "timing_s/step"}
VERL_EVAL = "val-core/math/reward/mean@1"
FORMATS = ("trainer_state", "tensorboard", "verl", "wandb_export", "jsonl")


def _rows(s: Scenario) -> list[dict]:
    return [{k: float(v[i]) for k, v in s.series.items()} for i in range(s.steps)]


def write(s: Scenario, folder: Path, fmt: str) -> Path:
    """Writes `s` into `folder` in format `fmt`; returns the path to give grposcope diagnose."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = _rows(s)
    if fmt == "trainer_state":
        history = []
        for i, row in enumerate(rows, start=1):
            history.append({**row, "epoch": i / s.steps, "step": i})
            if i in s.evals:
                history.append({"eval_reward": s.evals[i], "eval_loss": 0.0, "epoch": i / s.steps, "step": i})
        path = folder / "trainer_state.json"
        path.write_text(json.dumps({"log_history": history, "global_step": s.steps, "max_steps": s.max_steps,
                                    "logging_steps": 1}))  # json writes NaN and Infinity as transformers does
        return path
    if fmt == "tensorboard":
        from torch.utils.tensorboard import SummaryWriter

        writer = SummaryWriter(str(folder / "runs" / "run0"))
        for i, row in enumerate(rows, start=1):
            for key, value in row.items():
                writer.add_scalar(f"train/{key}", value, i)
            if i in s.evals:
                writer.add_scalar("eval/reward", s.evals[i], i)  # transformers strips eval_ into eval/
        writer.close()
        return folder
    if fmt == "verl":
        path = folder / "experiment.jsonl"
        with path.open("w") as out:
            for i, row in enumerate(rows, start=1):
                data = {VERL[k]: v for k, v in row.items() if k in VERL}
                if i in s.evals:
                    data[VERL_EVAL] = s.evals[i]
                out.write(json.dumps({"step": i, "data": data}) + "\n")
        return path
    if fmt in ("wandb_export", "jsonl"):
        records = []
        for i, row in enumerate(rows, start=1):
            record = {"_step" if fmt == "wandb_export" else "step": i, **{f"train/{k}" if fmt == "wandb_export"
                                                                          else k: v for k, v in row.items()}}
            if i in s.evals:
                record["eval/reward" if fmt == "wandb_export" else "eval_reward"] = s.evals[i]
            records.append(record)
        if fmt == "jsonl":
            path = folder / "metrics_export.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in records))
            return path
        path = folder / "history.csv"
        keys = list(dict.fromkeys(k for r in records for k in r))
        with path.open("w", newline="") as out:
            table = csv.DictWriter(out, keys)
            table.writeheader()
            for r in records:
                table.writerow({k: ("" if k not in r else r[k]) for k in keys})
        return path
    raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
