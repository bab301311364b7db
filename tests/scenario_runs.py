"""Synthetic GRPO runs with known labels, written independently of the detectors (and of tests/scenarios.py), and
writers that put one run into each log format a practitioner ends up with. Used by tests/test_diagnose_scenarios.py
and bench/diagnose_scenario_runs.py.

How a run is made (`simulate`): a training set of prompts, each with a fixed difficulty (a logit offset drawn once
per run); at step t the policy's pass rate on prompt j is sigmoid(L(t) + k(t) * z_j), where L(t) is solved so the
mean pass rate over the prompts is the scenario's reward curve and k(t) (1 by default) polarizes the pass rates
(an entropy-collapsing policy answers each prompt the same way every time). Each step draws B = 16 prompts of the
set in epoch order and G = 8 completions per prompt, each a Bernoulli reward; TRL's metrics come from those groups
as TRL computes them: `reward` the batch mean, `reward_std` the mean of the per-group (unbiased) std,
`frac_reward_zero_std` the share of groups of one reward, `rewards/<func>/mean|std` per function. The gradient norm
is log-normal, scaled by the square root of the share of groups with a signal, and exactly 0.0 (with `loss` exactly
0.0) on a step whose groups all collapsed when beta = 0, as TRL logs it. Completion lengths are drawn per
completion (log-normal around the scenario's length curve) and cut at max_completion_length, which gives
mean/max/min length and `completions/clipped_ratio` consistently. Entropy, KL (logged only when beta > 0, as TRL
does), clip fractions (exactly 0.0 when num_iterations = 1: the ratio is 1 on-policy) follow each scenario's
curve with auto-correlated multiplicative noise. The held-out score `eval_reward` is the mean of 256 Bernoulli
draws at the scenario's eval curve, every 10 steps (NaN on the other steps).

`expected` of each scenario: the detectors that should fire (warning or critical) on it. Usually one; a second
only where the failure itself puts the second one's evidence in the log, with the reason next to it.
`expected_for(run, fmt)` removes what a format cannot carry (verl's metrics have no per-function rewards).
"""

from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np

G, B = 8, 16  # completions per prompt, prompts per step
EVAL_EVERY = 10
EVAL_N = 256  # held-out prompts scored per evaluation
DATASET = 7473  # prompts in the training set (GSM8K's train split): the epoch in the logs
DETECTORS = ("advantage_collapse", "no_signal_steps", "entropy_collapse", "kl_drift", "length_growth", "truncation",
             "clip_saturation", "gradient_pathology", "reward_hacking", "reward_composition", "plateau",
             "no_learning", "pinned_reward", "loss_explosion", "held_out_regression", "negative_kl", "clip_near_one",
             "length_collapse")
FORMATS = ("trainer_state", "tensorboard", "verl", "wandb-export", "csv", "jsonl", "wandb-jsonl")


class ScenarioRun(dict):
    """One synthetic run: a dict of per-step series in TRL's log_history names (numpy arrays of the run's length,
    NaN where a step did not log the metric: `eval_*` off the evaluation steps), plus its label."""

    def __init__(self, name: str, seed: int, series: dict[str, np.ndarray], expected: frozenset[str],
                 config: dict, why: str = "") -> None:
        super().__init__(series)
        self.name, self.seed, self.expected, self.config, self.why = name, seed, expected, config, why

    @property
    def steps(self) -> int:
        return len(self["reward"])

    @property
    def healthy(self) -> bool:
        return not self.expected

    def train_keys(self) -> list[str]:
        return [k for k in self if not k.startswith("eval_")]

    def eval_keys(self) -> list[str]:
        return [k for k in self if k.startswith("eval_")]

    def eval_steps(self) -> list[int]:
        return [int(i) + 1 for i in np.flatnonzero(np.isfinite(self["eval_reward"]))]


# ------------------------------------------------------------------------------------------------------- curves


def frac(steps: int) -> np.ndarray:
    """Training progress x in (0, 1] at each step."""
    return np.arange(1, steps + 1) / steps


def rise(x: np.ndarray, a: float, b: float, k: float = 2.0) -> np.ndarray:
    """From a to b, concave (fast then slower) for k > 0, linear as k -> 0."""
    return a + (b - a) * (1 - np.exp(-k * x)) / (1 - math.exp(-k)) if k > 1e-9 else a + (b - a) * x


def rise_then_flat(x: np.ndarray, a: float, b: float, at: float) -> np.ndarray:
    """From a to b by progress `at` (quadratic ease-out), then b."""
    u = np.minimum(x / at, 1.0)
    return a + (b - a) * (1 - (1 - u) ** 2)


def peak_then_fall(x: np.ndarray, a: float, top: float, end: float, at: float) -> np.ndarray:
    """From a up to `top` at progress `at`, then down to `end` by the last step."""
    up = a + (top - a) * (1 - (1 - np.minimum(x / at, 1)) ** 2)
    down = top + (end - top) * np.clip((x - at) / (1 - at), 0, 1) ** 1.3
    return np.where(x <= at, up, down)


def ar_noise(rng: np.random.Generator, n: int, sd: float, phi: float = 0.6) -> np.ndarray:
    """Auto-correlated Gaussian noise of stationary standard deviation sd."""
    e = rng.normal(0.0, sd * math.sqrt(1 - phi * phi), n)
    out = np.empty(n)
    prev = rng.normal(0.0, sd)
    for i in range(n):
        prev = phi * prev + e[i]
        out[i] = prev
    return out


def _levels(target: np.ndarray, k: np.ndarray, z: np.ndarray) -> np.ndarray:
    """L(t) such that mean_j sigmoid(L + k z_j) = target(t), by bisection (z: a quadrature of the prompt set)."""
    lo, hi = np.full(len(target), -30.0), np.full(len(target), 30.0)
    for _ in range(50):
        mid = (lo + hi) / 2
        mean = (1 / (1 + np.exp(-(mid[:, None] + k[:, None] * z[None, :])))).mean(axis=1)
        high = mean > target
        hi, lo = np.where(high, mid, hi), np.where(high, lo, mid)
    return (lo + hi) / 2


def group_rewards(rng: np.random.Generator, mean: np.ndarray, spread: float, k: np.ndarray | None = None,
                  b: int = B, g: int = G, pool: int = 2048) -> np.ndarray:
    """(steps, b, g) 0/1 rewards: prompts of a fixed-difficulty training set taken in epoch order."""
    n = len(mean)
    k = np.ones(n) if k is None else k
    z_set = rng.normal(0.0, spread, pool)  # the prompts' difficulties, fixed for the run
    quad = np.quantile(z_set, (np.arange(64) + 0.5) / 64)
    levels = _levels(np.clip(mean, 1e-4, 1 - 1e-4), k, quad)
    order = np.concatenate([rng.permutation(pool) for _ in range(n * b // pool + 1)])[: n * b].reshape(n, b)
    p = 1 / (1 + np.exp(-(levels[:, None] + k[:, None] * z_set[order])))
    return (rng.random((n, b, g)) < p[..., None]).astype(float)


# --------------------------------------------------------------------------------------------------- simulation


@dataclass
class Shape:
    """A scenario's curves and settings; x = progress in (0, 1]. Anything not given is a healthy default."""

    reward: Callable[[np.ndarray], np.ndarray] = lambda x: rise(x, 0.30, 0.60)
    eval: Callable[[np.ndarray], np.ndarray] | None = None  # None: a little under the train reward
    spread: float = 1.6  # logit sd of the prompts' difficulties
    polarize: Callable[[np.ndarray], np.ndarray] | None = None  # k(x)
    entropy: Callable[[np.ndarray], np.ndarray] = lambda x: 0.80 - 0.18 * x
    entropy_noise: float = 0.04
    length: Callable[[np.ndarray], np.ndarray] = lambda x: 380 + 30 * x  # mean uncapped length, tokens
    length_sigma: float = 0.45
    cap: int = 1024  # max_completion_length
    beta: float = 0.0
    kl: Callable[[np.ndarray], np.ndarray] = lambda x: 0.001 + 0.03 * np.sqrt(x)
    num_iterations: int = 1
    clip: Callable[[np.ndarray], np.ndarray] = lambda x: 0.004 + 0.01 * x  # clip region share, num_iterations > 1
    grad: float = 0.25  # median gradient norm with every group carrying signal
    grad_sigma: float = 0.3
    lr: float = 1e-6
    schedule: str = "linear"  # transformers' lr_scheduler_type: linear or constant (warmup 3% either way)
    prompts: int = B
    funcs: tuple[str, ...] = ("accuracy",)


def simulate(rng: np.random.Generator, steps: int, shape: Shape, rewards: dict[str, np.ndarray] | None = None
             ) -> dict[str, np.ndarray]:
    """A run's series under `shape`. `rewards`: per-function (steps, b, G) rewards when the scenario makes its own;
    else one function of 0/1 rewards at the shape's reward curve."""
    x = frac(steps)
    k = shape.polarize(x) if shape.polarize is not None else None
    if rewards is None:
        rewards = {shape.funcs[0]: group_rewards(rng, shape.reward(x), shape.spread, k, b=shape.prompts)}
    total = sum(rewards.values())
    n, b, g = total.shape
    out: dict[str, np.ndarray] = {}
    group_std = total.std(axis=2, ddof=1)
    collapsed = np.ptp(total, axis=2) == 0
    active = 1 - collapsed.mean(axis=1)
    out["reward"] = total.mean(axis=(1, 2))
    out["reward_std"] = group_std.mean(axis=1)
    out["frac_reward_zero_std"] = collapsed.mean(axis=1)
    for name, r in rewards.items():
        out[f"rewards/{name}/mean"] = r.mean(axis=(1, 2))
        out[f"rewards/{name}/std"] = r.reshape(n, -1).std(axis=1, ddof=1)

    # lengths: one draw per completion, cut at the cap
    mean_len = np.maximum(shape.length(x) * np.exp(ar_noise(rng, n, 0.04)), 8)
    mu = np.log(mean_len) - shape.length_sigma ** 2 / 2
    raw = np.exp(mu[:, None] + shape.length_sigma * rng.standard_normal((n, b * g)))
    raw = np.maximum(np.round(raw), 1)
    cut = np.minimum(raw, shape.cap)
    hit = raw >= shape.cap
    out["completions/mean_length"] = cut.mean(axis=1)
    out["completions/min_length"] = cut.min(axis=1)
    out["completions/max_length"] = cut.max(axis=1)
    ended = np.where(hit, np.nan, cut)
    with np.errstate(invalid="ignore"):
        out["completions/mean_terminated_length"] = np.where(hit.all(axis=1), 0.0, np.nanmean(
            np.where(hit.all(axis=1)[:, None], 0.0, ended), axis=1))
    out["completions/clipped_ratio"] = hit.mean(axis=1)

    out["entropy"] = np.maximum(shape.entropy(x) * np.exp(ar_noise(rng, n, shape.entropy_noise, 0.5)
                                                          + rng.normal(0, shape.entropy_noise / 2, n)), 1e-3)
    kl = None
    if shape.beta > 0:
        kl = np.maximum(shape.kl(x) * np.exp(ar_noise(rng, n, 0.08, 0.7) + rng.normal(0, 0.05, n)), 1e-6)
        out["kl"] = kl

    if shape.num_iterations > 1:
        region = np.clip(shape.clip(x) * np.exp(ar_noise(rng, n, 0.08) + rng.normal(0, 0.05, n)), 0, 0.95)
        share_low = np.clip(0.45 + rng.normal(0, 0.03, n), 0.2, 0.8)
        low, high = region * share_low, region * (1 - share_low)
    else:
        low = high = region = np.zeros(n)
    out["clip_ratio/low_mean"] = low
    out["clip_ratio/low_min"] = low * rng.uniform(0.3, 0.8, n)
    out["clip_ratio/high_mean"] = high
    out["clip_ratio/high_max"] = high * rng.uniform(1.2, 2.0, n)
    out["clip_ratio/region_mean"] = low + high

    # gradient norm and loss: exactly 0.0 when no group carries a signal and no KL term pulls (beta = 0)
    grad = shape.grad * np.sqrt(active) * np.exp(rng.normal(0, shape.grad_sigma, n) + ar_noise(rng, n, 0.1, 0.8))
    loss = rng.normal(0, 0.012, n) * np.sqrt(active)
    if kl is not None:
        grad = np.where(active == 0, shape.grad * 0.05 * np.exp(rng.normal(0, 0.3, n)), grad) * (1 + 0.5 * kl)
        loss = loss + shape.beta * kl
    out["grad_norm"] = np.where(active == 0, 0.0, grad) if kl is None else grad
    out["loss"] = np.where(active == 0, 0.0, loss) if kl is None else loss

    warmup = max(1, round(0.03 * n))
    t = np.arange(1, n + 1)
    decay = np.clip((n - t) / max(n - warmup, 1), 0, 1) if shape.schedule == "linear" else np.ones(n)
    out["learning_rate"] = shape.lr * np.where(t <= warmup, t / warmup, decay)
    out["step_time"] = (6.0 + 0.028 * out["completions/max_length"] + 0.002 * cut.sum(axis=1) / g) \
        * np.exp(rng.normal(0, 0.06, n))
    out["num_tokens"] = np.cumsum((170 + out["completions/mean_length"]) * b * g)

    ev = shape.eval(x) if shape.eval is not None else 0.92 * shape.reward(x)
    score = np.full(n, np.nan)
    at = np.arange(EVAL_EVERY - 1, n, EVAL_EVERY)
    score[at] = rng.binomial(EVAL_N, np.clip(ev[at], 0, 1)) / EVAL_N
    out["eval_reward"] = score
    out["eval_reward_std"] = np.sqrt(score * (1 - score))
    out["eval_loss"] = np.where(np.isfinite(score), rng.normal(0, 0.01, n), np.nan)
    out["eval_runtime"] = np.where(np.isfinite(score), 40 + 0.05 * out["completions/mean_length"]
                                   * np.exp(rng.normal(0, 0.05, n)), np.nan)
    return out


def _config(shape: Shape, steps: int) -> dict:
    return {"num_generations": G, "per_device_train_batch_size": shape.prompts * G, "max_completion_length":
            shape.cap, "beta": shape.beta, "num_iterations": shape.num_iterations, "epsilon": 0.2,
            "epsilon_high": 0.28 if shape.num_iterations > 1 else 0.2, "learning_rate": shape.lr,
            "lr_scheduler_type": shape.schedule, "warmup_ratio": 0.03, "max_steps": steps, "logging_steps": 1,
            "eval_steps": EVAL_EVERY, "reward_funcs": list(shape.funcs), "loss_type": "dapo"}


# ----------------------------------------------------------------------------------------------------- scenarios


@dataclass(frozen=True)
class Scenario:
    name: str
    build: Callable[[np.random.Generator, int], tuple[dict[str, np.ndarray], Shape]]
    expected: frozenset[str]
    why: str  # what the run shows, and why `expected` holds what it holds
    steps: int = 300


SCENARIOS: dict[str, Scenario] = {}


def scenario(name: str, expected: tuple[str, ...], why: str, steps: int = 300):
    def register(build):
        SCENARIOS[name] = Scenario(name, build, frozenset(expected), why, steps)
        return build
    return register


def make(name: str, seed: int = 0, steps: int | None = None) -> ScenarioRun:
    """Scenario `name` drawn with `seed` over `steps` steps (its own default length when None)."""
    sc = SCENARIOS[name]
    n = sc.steps if steps is None else steps
    rng = np.random.default_rng([seed, sum(map(ord, name))])
    series, shape = sc.build(rng, n)
    return ScenarioRun(name, seed, series, sc.expected, _config(shape, n), sc.why)


def _run(rng, n, shape: Shape) -> tuple[dict[str, np.ndarray], Shape]:
    return simulate(rng, n, shape), shape


# -- failures


@scenario("too_hard", ("advantage_collapse", "no_signal_steps"),
          "Mean reward ~0.05: most groups are all wrong (frac_reward_zero_std ~0.85). With 16 groups a step, some "
          "steps have every group collapsed, and with beta = 0 TRL then logs grad_norm and loss exactly 0.0: the "
          "no-signal steps are the same failure seen step by step, so no_signal_steps is expected too. The flat "
          "reward is the collapse, not a plateau after learning.")
def too_hard(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise(x, 0.03, 0.06, 0.5), spread=3.0,
                              eval=lambda x: rise(x, 0.03, 0.05, 0.5), entropy=lambda x: 0.78 - 0.04 * x,
                              length=lambda x: 520 + 20 * x))


@scenario("saturated", ("advantage_collapse",),
          "Reward climbs to ~0.97 by 40% of the run and stays: most groups are all correct. beta = 0.04, so the KL "
          "term keeps the gradient non-zero on all-collapsed steps (no exact-zero grad_norm: no_signal_steps not "
          "expected). The flat top is the saturation itself, reported as the collapse, not as a plateau.")
def saturated(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise_then_flat(x, 0.55, 0.97, 0.4), spread=1.4,
                              eval=lambda x: rise_then_flat(x, 0.50, 0.90, 0.4), beta=0.04,
                              kl=lambda x: 0.001 + 0.03 * np.sqrt(x), entropy=lambda x: 0.62 - 0.15 * x))


@scenario("entropy_collapse", ("entropy_collapse",),
          "Entropy decays exponentially from 0.7 towards 0.05 (about 0.06 at the end); the reward rises for the "
          "first quarter and then stalls at ~0.5 while pass rates polarize somewhat (zero-std share ~0.3-0.45, "
          "a healthy run's range at this reward). The stalled reward is the entropy collapse's consequence: "
          "plateau is not expected as a separate finding, only the cause.")
def entropy_collapse(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise_then_flat(x, 0.30, 0.50, 0.25),
                              eval=lambda x: rise_then_flat(x, 0.28, 0.45, 0.25),
                              entropy=lambda x: 0.05 + 0.65 * np.exp(-x / 0.2), entropy_noise=0.05,
                              polarize=lambda x: 1 + 0.5 * (1 - np.exp(-x / 0.2))))


@scenario("kl_blowup", ("kl_drift",),
          "beta = 0.04; KL to the reference grows exponentially: ~0.003 at the start, ~0.07 at mid-run, ~1.5 at "
          "the end. Reward, eval, entropy and lengths stay ordinary.")
def kl_blowup(rng, n):
    return _run(rng, n, Shape(beta=0.04, kl=lambda x: 0.003 * np.exp(6.2 * x)))


@scenario("truncation", ("truncation",),
          "max_completion_length 1024 with completions whose uncut mean is ~1000-1080 tokens: 35-45% of them "
          "hit the cap every step (completions/max_length = 1024). Length barely grows (under 10%).")
def truncation(rng, n):
    return _run(rng, n, Shape(length=lambda x: 990 + 90 * x, cap=1024, reward=lambda x: rise(x, 0.25, 0.42, 1.0),
                              eval=lambda x: rise(x, 0.24, 0.38, 1.0)))


@scenario("length_growth", ("length_growth",),
          "Mean completion length grows 2.5x (300 -> 750 tokens, cap 4096: nothing truncated) while the held-out "
          "score stays flat at ~0.42; the train reward creeps up 0.40 -> 0.55 the whole run (no plateau, and no "
          "fall of the eval score: not reward hacking).")
def length_growth(rng, n):
    return _run(rng, n, Shape(length=lambda x: 300 + 450 * x, cap=4096, reward=lambda x: rise(x, 0.40, 0.55, 0.3),
                              eval=lambda x: np.full_like(x, 0.42)))


@scenario("clip_saturation", ("clip_saturation",),
          "num_iterations = 4 with a large learning rate: 20-40% of tokens clipped (clip_ratio/region_mean, low "
          "~45% of it) all run long. Reward and the rest ordinary.")
def clip_saturation(rng, n):
    return _run(rng, n, Shape(num_iterations=4, clip=lambda x: 0.22 + 0.15 * x, lr=5e-6, grad=0.35))


def _spiky(rng, n, nonfinite: bool):
    series, shape = _run(rng, n, Shape(grad=0.22))
    grad, loss = series["grad_norm"], series["loss"]
    gaps = rng.integers(18, 40, n)
    at = np.cumsum(gaps)
    at = at[(at >= 10) & (at < n)]
    factor = np.exp(rng.uniform(math.log(10), math.log(50), len(at)))
    median = np.median(grad)
    grad[at] = median * factor
    loss[at] *= rng.uniform(3, 8, len(at))
    if nonfinite:
        quiet = np.setdiff1d(np.arange(20, n - 5), at)
        bad = rng.choice(quiet, 3, replace=False)
        grad[bad] = [math.inf, math.nan, math.inf]
    return series, shape


@scenario("gradient_spikes", ("gradient_pathology",),
          "grad_norm log-normal around ~0.2, with a spike of 10-50x its median every 18-40 steps (about ten); the "
          "loss jumps on those steps. Everything else ordinary.")
def gradient_spikes(rng, n):
    return _spiky(rng, n, nonfinite=False)


@scenario("gradient_nonfinite", ("gradient_pathology",),
          "gradient_spikes plus three non-finite grad norms (inf, NaN, inf) on quiet steps, as an fp16 loss-scaler "
          "overflow logs them (the optimizer step skipped, the loss still finite).")
def gradient_nonfinite(rng, n):
    return _spiky(rng, n, nonfinite=True)


@scenario("reward_hacking", ("reward_hacking", "held_out_regression"),
          "Train reward rises 0.30 -> 0.72 the whole run; the held-out score peaks at ~0.46 a third of the way in "
          "and falls to ~0.25 by the end (a held-out fall, whatever the training reward does). Lengths stay flat.")
def reward_hacking(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise(x, 0.30, 0.72, 1.2),
                              eval=lambda x: peak_then_fall(x, 0.30, 0.46, 0.25, 0.35)))


@scenario("reward_composition", ("reward_composition",),
          "Two reward functions: format (0/1) learned 0.30 -> 0.75 carries all the variance; accuracy is 0 on "
          "every completion of every step (mean 0, std 0). The summed reward has ordinary group variance (no "
          "advantage collapse) and keeps rising (no plateau).")
def reward_composition(rng, n):
    shape = Shape(reward=lambda x: rise(x, 0.30, 0.75, 1.5), funcs=("format", "accuracy"),
                  eval=lambda x: rise(x, 0.28, 0.70, 1.5))
    x = frac(n)
    fmt = group_rewards(rng, shape.reward(x), shape.spread)
    return simulate(rng, n, shape, {"format": fmt, "accuracy": np.zeros_like(fmt)}), shape


@scenario("plateau", ("plateau",),
          "Reward rises 0.25 -> 0.55 and the held-out score 0.22 -> 0.48 over the first 45% of the run, then both "
          "stay flat; groups keep their variance (zero-std share ~0.3), entropy decays slowly, nothing else wrong.")
def plateau(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise_then_flat(x, 0.25, 0.55, 0.45),
                              eval=lambda x: rise_then_flat(x, 0.22, 0.48, 0.45)))


@scenario("no_signal", ("no_signal_steps",),
          "A healthy learner (reward 0.35 -> 0.60, beta = 0) whose verifier timed out in three bursts of 2-4 steps: "
          "those steps score every completion 0, so every group collapses and TRL logs reward 0, reward_std 0, "
          "frac_reward_zero_std 1, grad_norm 0.0 and loss 0.0. Under 4% of the steps: not a run-wide collapse.")
def no_signal(rng, n):
    shape = Shape(reward=lambda x: rise(x, 0.35, 0.60, 1.5))
    x = frac(n)
    r = group_rewards(rng, shape.reward(x), shape.spread)
    edges = np.linspace(max(n // 10, 1), max(n - 6, 2), 4).astype(int)  # one burst in each third: never overlapping
    starts = [int(rng.integers(lo, max(hi - 5, lo + 1))) for lo, hi in zip(edges[:-1], edges[1:])]
    for s in starts:
        r[s: s + int(rng.integers(2, 5))] = 0.0
    return simulate(rng, n, shape, {"accuracy": r}), shape


# -- healthy runs: nothing above info


@scenario("healthy_steady", (),
          "Steady climb 0.30 -> 0.62 (eval 0.28 -> 0.56), entropy decaying slowly 0.85 -> 0.64, lengths ~400 of "
          "1024, beta = 0, num_iterations = 1.")
def healthy_steady(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise(x, 0.30, 0.62, 1.0), eval=lambda x: rise(x, 0.28, 0.56, 1.0),
                              entropy=lambda x: 0.85 - 0.21 * x))


@scenario("healthy_fast_long", (),
          "A fast learner (0.20 -> 0.72, eval 0.18 -> 0.62, still rising at the end) whose completions lengthen "
          "2.2x (280 -> 620 tokens, cap 2048: under 1% cut) as it learns to reason longer, the held-out score "
          "rising with them. Entropy at a real model's level, 0.42 -> 0.34: low but steady, never collapsing.")
def healthy_fast_long(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise(x, 0.20, 0.72, 2.0), eval=lambda x: rise(x, 0.18, 0.62, 2.0),
                              length=lambda x: 280 + 340 * x, cap=2048, entropy=lambda x: 0.42 - 0.08 * x,
                              schedule="constant"))


@scenario("healthy_noisy", (),
          "Flat-ish but learning: 8 prompts a step (noisy), reward 0.38 -> 0.50 and eval 0.35 -> 0.45 linearly; "
          "beta = 0.02 (KL 0.0005 -> 0.02, growing like sqrt), num_iterations = 2 (0.4-1.5% of tokens clipped), "
          "entropy noisy around 0.6.")
def healthy_noisy(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise(x, 0.38, 0.50, 0.0), eval=lambda x: rise(x, 0.35, 0.45, 0.0),
                              prompts=8, beta=0.02, kl=lambda x: 0.0005 + 0.02 * np.sqrt(x), num_iterations=2,
                              entropy=lambda x: 0.62 - 0.05 * x, entropy_noise=0.08, grad_sigma=0.45))


@scenario("healthy_short", (), "A 40-step run: reward 0.25 -> 0.38, four evaluations rising 0.24 -> 0.34.", steps=40)
def healthy_short(rng, n):
    return _run(rng, n, Shape(reward=lambda x: rise(x, 0.25, 0.38, 0.5), eval=lambda x: rise(x, 0.24, 0.34, 0.5)))


HEALTHY = tuple(name for name, sc in SCENARIOS.items() if not sc.expected)

# what a format's log cannot carry: verl's metrics have no per-function reward (its reward manager's extra
# infos reach the rollout dump and the validation metrics only)
CANNOT_CARRY = {"verl": {"reward_composition"}}


def expected_for(run: ScenarioRun, fmt: str) -> frozenset[str]:
    return frozenset(run.expected - CANNOT_CARRY.get(fmt, set()))


# ------------------------------------------------------------------------------------------------------ writers


def _records(run: ScenarioRun) -> list[tuple[int, float, dict[str, float], dict[str, float] | None]]:
    """(step, epoch, train record, eval record or None) per step, NaN train values kept (logged NaN)."""
    train, ev = run.train_keys(), run.eval_keys()
    out = []
    per_step = run.config["per_device_train_batch_size"] // G
    for i in range(run.steps):
        step = i + 1
        epoch = round(step * per_step / DATASET, 4)
        rec = {k: float(run[k][i]) for k in train}
        e = {k: float(run[k][i]) for k in ev} if math.isfinite(run["eval_reward"][i]) else None
        out.append((step, epoch, rec, e))
    return out


def write_trainer_state(run: ScenarioRun, folder: Path) -> Path:
    """transformers' trainer_state.json in the output folder; returns the folder (what a user points at)."""
    history = []
    for step, epoch, rec, e in _records(run):
        history.append({**rec, "epoch": epoch, "step": step})
        if e is not None:
            history.append({**e, "eval_samples_per_second": EVAL_N / e["eval_runtime"],
                            "eval_steps_per_second": EVAL_N / 8 / e["eval_runtime"], "epoch": epoch, "step": step})
    runtime = float(np.sum(run["step_time"]))
    n = run.steps
    history.append({"epoch": history[-1]["epoch"], "step": n, "total_flos": 0.0, "train_loss":
                    float(np.nanmean(run["loss"])), "train_runtime": runtime, "train_samples_per_second":
                    n * run.config["per_device_train_batch_size"] / runtime, "train_steps_per_second": n / runtime})
    state = {"best_global_step": None, "best_metric": None, "best_model_checkpoint": None,
             "epoch": history[-1]["epoch"], "eval_steps": EVAL_EVERY, "global_step": n,
             "is_hyper_param_search": False, "is_local_process_zero": True, "is_world_process_zero": True,
             "log_history": history, "logging_steps": 1, "max_steps": n, "num_input_tokens_seen": 0,
             "num_train_epochs": 1, "save_steps": 500, "stateful_callbacks": {"TrainerControl": {
                 "args": {"should_epoch_stop": False, "should_evaluate": False, "should_log": False,
                          "should_save": True, "should_training_stop": True}, "attributes": {}}},
             "total_flos": 0.0, "train_batch_size": run.config["per_device_train_batch_size"], "trial_name": None,
             "trial_params": None}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "trainer_state.json").write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
    return folder


def _rewrite(logs: dict[str, float]) -> dict[str, float]:
    """transformers' integrations.rewrite_logs: eval_<k> -> eval/<k>, everything else train/<k>."""
    return {(f"eval/{k[5:]}" if k.startswith("eval_") else f"train/{k}"): v for k, v in logs.items()}


def write_tensorboard(run: ScenarioRun, folder: Path) -> Path:
    """Events as transformers' TensorBoardCallback writes them (through torch's SummaryWriter) under
    output_dir/runs/<date>_<host>/: the file-version event, the args as a text summary, then one event per scalar,
    tags train/<key> and eval/<key>. Written with tensorboard's own record writer and protos (what SummaryWriter
    writes, without its queue and thread). Returns output_dir/runs."""
    from tensorboard.compat.proto import event_pb2, summary_pb2, tensor_pb2, tensor_shape_pb2, types_pb2
    from tensorboard.summary.writer.record_writer import RecordWriter

    log_dir = folder / "runs" / "Nov26_22-00-00_gpu-node-7"
    log_dir.mkdir(parents=True, exist_ok=True)
    wall = 1_764_190_000.0
    path = log_dir / f"events.out.tfevents.{int(wall)}.gpu-node-7.4242.0"
    with path.open("wb") as handle:
        writer = RecordWriter(handle)

        def event(step: int, value: summary_pb2.Summary.Value) -> None:
            writer.write(event_pb2.Event(wall_time=wall, step=step, summary=summary_pb2.Summary(value=[value]))
                         .SerializeToString())

        writer.write(event_pb2.Event(wall_time=wall, file_version="brain.Event:2").SerializeToString())
        text = json.dumps({**run.config, "output_dir": str(folder)}, indent=2).encode()
        event(0, summary_pb2.Summary.Value(
            tag="args/text_summary", metadata=summary_pb2.SummaryMetadata(
                plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="text")),
            tensor=tensor_pb2.TensorProto(dtype=types_pb2.DT_STRING, string_val=[text], tensor_shape=
                                          tensor_shape_pb2.TensorShapeProto(dim=[
                                              tensor_shape_pb2.TensorShapeProto.Dim(size=1)]))))
        for step, epoch, rec, e in _records(run):
            wall += rec["step_time"]
            for logs in ([rec] if e is None else [rec, e]):
                for tag, v in _rewrite({**logs, "epoch": epoch}).items():
                    event(step, summary_pb2.Summary.Value(tag=tag, simple_value=v))
        runtime = float(np.sum(run["step_time"]))
        for tag, v in _rewrite({"train_runtime": runtime, "train_loss": float(np.nanmean(run["loss"])),
                                "total_flos": 0.0}).items():
            event(run.steps, summary_pb2.Summary.Value(tag=tag, simple_value=v))
        writer.flush()
    return folder / "runs"


VERL_DATA_SOURCE = "openai/gsm8k"


def verl_record(run: ScenarioRun, i: int) -> dict[str, float]:
    """Step i's metrics under verl's names (what its trainer logs: critic/score/*, actor/*, response_length/*,
    timing_s/*, val-core/<data source>/reward/mean@1 on validation steps)."""
    g = run.config["num_generations"]
    b = run.config["per_device_train_batch_size"] // g
    score = float(run["reward"][i])
    d = {"training/global_step": i + 1, "training/epoch": 0,
         "critic/score/mean": score, "critic/score/max": 1.0 if score > 0 else 0.0,
         "critic/score/min": 0.0 if score < 1 else 1.0,
         "critic/rewards/mean": score, "critic/rewards/max": 1.0 if score > 0 else 0.0,
         "critic/rewards/min": 0.0 if score < 1 else 1.0,
         "critic/advantages/mean": 0.0, "critic/advantages/max": 2.47 if run["frac_reward_zero_std"][i] < 1 else 0.0,
         "critic/advantages/min": -2.47 if run["frac_reward_zero_std"][i] < 1 else 0.0,
         "actor/entropy": float(run["entropy"][i]), "actor/pg_loss": float(run["loss"][i]),
         "actor/grad_norm": float(run["grad_norm"][i]), "actor/lr": float(run["learning_rate"][i]),
         "actor/pg_clipfrac": float(run["clip_ratio/region_mean"][i]),
         "actor/pg_clipfrac_lower": float(run["clip_ratio/low_mean"][i]) * 0.02,  # dual-clip share: tiny
         "actor/ppo_kl": float(run["clip_ratio/region_mean"][i]) * 0.05,
         "response_length/mean": float(run["completions/mean_length"][i]),
         "response_length/max": float(run["completions/max_length"][i]),
         "response_length/min": float(run["completions/min_length"][i]),
         "response_length/clip_ratio": float(run["completions/clipped_ratio"][i]),
         "prompt_length/mean": 170.0, "prompt_length/max": 260.0, "prompt_length/min": 90.0,
         "prompt_length/clip_ratio": 0.0, "timing_s/step": float(run["step_time"][i]),
         "timing_s/gen": float(run["step_time"][i]) * 0.6, "perf/total_num_tokens": (170 + float(
             run["completions/mean_length"][i])) * b * g}
    if "kl" in run:
        d["actor/kl_loss"] = float(run["kl"][i])
        d["actor/kl_coef"] = float(run.config["beta"])
    if math.isfinite(run["eval_reward"][i]):
        d[f"val-core/{VERL_DATA_SOURCE}/reward/mean@1"] = float(run["eval_reward"][i])
    return d


def write_verl(run: ScenarioRun, folder: Path) -> Path:
    """verl's file logger (trainer.logger=['console','file']): <folder>/<experiment>.jsonl of {"step", "data"}
    lines. Returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / f"{run.name}.jsonl").open("w") as out:
        for i in range(run.steps):
            out.write(json.dumps({"step": i + 1, "data": verl_record(run, i)}) + "\n")
    return folder


def _wandb_rows(run: ScenarioRun) -> list[dict[str, float]]:
    """W&B history as transformers' WandbCallback logs it: one row per log call (train, then eval on evaluation
    steps), keys rewritten to train/<k> and eval/<k>, train/global_step and train/epoch in each, `_step` counting
    the log calls."""
    rows, call, t0 = [], 0, 1_764_190_000.0
    clock = 0.0
    for step, epoch, rec, e in _records(run):
        clock += rec["step_time"]
        for logs in ([rec] if e is None else [rec, e]):
            rows.append({"_step": call, "_runtime": round(clock, 3), "_timestamp": round(t0 + clock, 3),
                         "train/global_step": step, **_rewrite({**logs, "epoch": epoch})})
            call += 1
    return rows


def write_wandb_export(run: ScenarioRun, folder: Path) -> Path:
    """`run.history()` saved with pandas' to_csv: a column per key, an empty cell where a row lacks the key and
    where the value is NaN (pandas writes NaN as ''), inf as 'inf'. Returns the CSV."""
    rows = _wandb_rows(run)
    columns = list(dict.fromkeys(k for r in rows for k in r))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "wandb_export.csv"
    with path.open("w", newline="") as out:
        w = csv.writer(out)
        w.writerow(["", *columns])
        for i, r in enumerate(rows):
            w.writerow([i, *("" if (v := r.get(k)) is None or (isinstance(v, float) and math.isnan(v)) else
                             ("inf" if v == math.inf else "-inf" if v == -math.inf else repr(v)) for k in columns)])
    return path


def write_wandb_jsonl(run: ScenarioRun, folder: Path) -> Path:
    """`run.scan_history()` dumped a row per line (only the keys each row has; NaN as JSON's NaN)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "wandb_history.jsonl"
    with path.open("w") as out:
        for r in _wandb_rows(run):
            out.write(json.dumps(r) + "\n")
    return path


def _flat_rows(run: ScenarioRun) -> tuple[list[str], list[dict[str, float]]]:
    rows = [{"step": step, "epoch": epoch, **rec, **(e or {})} for step, epoch, rec, e in _records(run)]
    return ["step", "epoch", *run.train_keys(), *run.eval_keys()], rows


def write_csv(run: ScenarioRun, folder: Path) -> Path:
    """A generic CSV: step, then a column per TRL key; eval columns empty off the evaluation steps."""
    columns, rows = _flat_rows(run)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "metrics.csv"
    with path.open("w", newline="") as out:
        w = csv.writer(out)
        w.writerow(columns)
        for r in rows:
            w.writerow([repr(r[k]) if k in r else "" for k in columns])
    return path


def write_jsonl(run: ScenarioRun, folder: Path, name: str = "train_log.jsonl") -> Path:
    """A generic JSONL: one object per step with `step` and TRL's keys (eval keys on evaluation steps)."""
    _, rows = _flat_rows(run)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    with path.open("w") as out:
        for r in rows:
            out.write(json.dumps(r) + "\n")
    return path


WRITERS: dict[str, Callable[[ScenarioRun, Path], Path]] = {
    "trainer_state": write_trainer_state, "tensorboard": write_tensorboard, "verl": write_verl,
    "wandb-export": write_wandb_export, "csv": write_csv, "jsonl": write_jsonl, "wandb-jsonl": write_wandb_jsonl}
assert tuple(WRITERS) == FORMATS


def write(run: ScenarioRun, folder: str | Path, fmt: str) -> Path:
    """Write `run` into `folder` in format `fmt`; returns the path to give `load_run` / `grposcope diagnose`."""
    return WRITERS[fmt](run, Path(folder))


def log_file(path: Path, fmt: str) -> Path:
    """The single file behind a written path, for tools that want a file (rldoctor): trainer_state.json, the verl
    logger's .jsonl; TensorBoard stays a folder."""
    if fmt == "trainer_state":
        return path / "trainer_state.json"
    if fmt == "verl":
        return next(path.glob("*.jsonl"))
    return path
