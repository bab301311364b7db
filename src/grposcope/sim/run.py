"""`simulate(config)`: a simulated RLVR run through the trainer's samplers, estimators and collapse monitor.

One step, as the trainer's (docs/simulator.md):
    p = sigmoid(z + X w)                                   (N,) the policy this step samples from
    selection = sampler.sample(batch, draw, more, G)       who trains, on which Bernoulli(p) rewards
    A = estimator(selection.rewards, pool=selection.pool, as_drawn=selection.as_drawn)  (B', G)
    w += lr * mean_ij A_ij (y_ij - p_i) x_i                 REINFORCE on the kept samples
"""

from __future__ import annotations

import contextlib
import math
import time
from dataclasses import dataclass
from typing import Any, Iterator

import torch

from ..components.build import make_with
from ..core import advantages
from ..core.diagnostics import CollapseMonitor
from ..sampling import Sampler
from ..sampling.stream import PromptStream
from .config import SimConfig
from .memory import check_memory
from .model import Population, Simulated, make_population, policy_gradient, success_prob

# the generators of one run, each from its own seed, so that e.g. a sampler that draws more samples does not
# change the prompts or their order
_WORLD, _ORDER, _DRAWS = 0, 1, 2


@dataclass
class SimResult:
    """A finished simulation: one list per metric with one value per step, a summary, and the final w."""

    config: SimConfig
    history: dict[str, list[float]]  # "step", "samples_total", "accuracy", ... -> (steps,) values
    summary: dict[str, float]
    weights: torch.Tensor  # (k,) w after the last step
    initial_accuracy: float
    seconds: float  # wall time: the only part of a result that the seed does not fix

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the config, the summary, the history, the final w and the wall time."""
        return {"config": self.config.to_dict(), "summary": self.summary, "history": self.history,
                "weights": self.weights.tolist(), "seconds": self.seconds}


def simulate(config: SimConfig, population: Population | None = None) -> SimResult:
    """Runs `config.steps` steps. `population` replaces the generated prompts (then config.prompts,
    features, shared_skill, difficulty_* and heldout_frac are not used): e.g. hand-made prompts in tests."""
    check_memory(config)  # a step too big for this machine fails here with its size, not in torch's allocator
    with _torch_threads(config.threads):
        return _simulate(config, population)


def _simulate(config: SimConfig, population: Population | None) -> SimResult:
    t0 = time.perf_counter()
    pop = population or make_population(
        config.prompts, config.heldout, config.features, config.shared_skill, config.difficulty_mean,
        config.difficulty_std, _generator(config.seed, _WORLD),
    )
    if config.batch_size > pop.size:
        raise ValueError(f"batch_size={config.batch_size} is larger than the population's {pop.size} prompts")
    sampler, estimator = build_sampler(config), build_estimator(config)
    order, monitor = PromptStream(range(pop.size), _seed(config.seed, _ORDER)), CollapseMonitor()
    draws = _generator(config.seed, _DRAWS)
    lengths = {"length_correct": config.length_correct, "length_wrong": config.length_wrong,
               "spread": config.length_spread, "max_length": config.max_length}
    w = torch.zeros(pop.features.shape[1], dtype=pop.features.dtype)  # (k,) at first p_i = sigmoid(z_i)
    initial = success_prob(pop.logits, pop.features, w).mean().item()
    history: dict[str, list[float]] = {}
    total = 0.0
    for step in range(1, config.steps + 1):
        p = success_prob(pop.logits, pop.features, w)  # (N,) sampled from before this step's update
        draw = Simulated(p, draws, lengths)
        metrics, grad, generated = _step(config, pop, p, sampler, estimator, monitor, order, draw)
        w = w + config.lr * grad
        total += generated
        metrics.update({
            "step": float(step),
            "samples_total": total,
            "grad_norm": grad.norm().item(),
            "accuracy": success_prob(pop.logits, pop.features, w).mean().item(),
            "heldout_accuracy": success_prob(pop.heldout_logits, pop.heldout_features, w).mean().item(),
        })
        _append(history, metrics, step)
    summary = summarize(history, initial, config.num_generations)
    return SimResult(config, history, summary, w, initial, time.perf_counter() - t0)


def _step(config: SimConfig, pop: Population, p: torch.Tensor, sampler: Sampler,
          estimator: advantages.AdvantageEstimator, monitor: CollapseMonitor, order: PromptStream,
          draw: Simulated) -> tuple[dict[str, float], torch.Tensor, int]:
    """Sample, score, advantage, diagnose: the step's metrics, the REINFORCE gradient (k,) and the samples
    drawn."""
    selection = sampler.sample(order.take(config.batch_size), draw, order.take, config.num_generations)
    rewards = selection.rewards  # (B', G) in {0, 1}
    out = estimator(rewards, pool=selection.pool, as_drawn=selection.as_drawn)  # advantages (B', G)
    rows = torch.tensor(selection.prompts, dtype=torch.long)  # (B',) prompt indices
    grad = policy_gradient(pop.features[rows], p[rows], rewards, out.advantages)  # (k,)
    metrics = {**selection.metrics, **out.metrics, "reward/mean": rewards.mean().item()}
    # the ACR family reads the groups as first drawn; acr_post what reaches the update
    assert selection.as_drawn is not None  # Selection.__post_init__ fills it
    metrics.update(monitor.update(selection.as_drawn, out.advantages))  # collapse/acr*, acr_post, alarms
    return metrics, grad, selection.samples_generated


def build_sampler(config: SimConfig) -> Sampler:
    """The registry's sampler (or a plug-in's, by dotted path), seeded from the run's seed unless its options
    set one: built as every host builds its components (components.build)."""
    return make_with("sampler", config.sampler, config.sampler_options, config.seed)


def build_estimator(config: SimConfig) -> advantages.AdvantageEstimator:
    """The registry's estimator (stateful ones, such as avspo, live for the whole run)."""
    return make_with("advantage_estimator", config.estimator, config.estimator_options, config.seed)


def summarize(history: dict[str, list[float]], initial_accuracy: float, g: int) -> dict[str, float]:
    """The run in a few numbers; means are over steps."""
    steps = len(history["step"])
    generated = history["samples_total"][-1]
    informative_groups = math.fsum(kept / g * frac for kept, frac in zip(history["sampler/samples_kept"],
                                                                         history["sampler/informative_frac"]))
    return {
        "steps": float(steps),
        "initial_accuracy": initial_accuracy,
        "final_accuracy": history["accuracy"][-1],
        "final_heldout_accuracy": history["heldout_accuracy"][-1],
        "samples_generated": generated,
        "samples_per_step": generated / steps,
        "tokens_generated": math.fsum(history["sampler/tokens_generated"]),
        "informative_frac": _mean(history["sampler/informative_frac"]),
        "acr": _mean(history["collapse/acr"]),
        "acr_post": _mean(history["collapse/acr_post"]),
        # what the sampler's generation budget bought: the number that ranks samplers
        "informative_groups_per_1k_samples": 1000 * informative_groups / generated if generated else 0.0,
    }


def _append(history: dict[str, list[float]], metrics: dict[str, float], step: int) -> None:
    """Adds one step; a metric missing on some step (none today) would misalign the lists, so it fails."""
    if step > 1 and set(metrics) != set(history):
        raise RuntimeError(f"step {step} logged different metrics: {sorted(set(metrics) ^ set(history))}")
    for name, value in metrics.items():
        history.setdefault(name, []).append(float(value))


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """torch's intra-op threads set to n, and back afterwards. Measured on 2 busy cores: with 2 threads a
    200-step run took 3-18 s instead of 0.2-3 s, the threads spinning on tensors too small to share."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _mean(values: list[float]) -> float:
    return math.fsum(values) / len(values) if values else 0.0


def _seed(seed: int, stream: int) -> int:
    return seed * 1_000_003 + 7919 * stream  # not seed + stream: seed 1's world would be seed 0's order


def _generator(seed: int, stream: int) -> torch.Generator:
    return torch.Generator().manual_seed(_seed(seed, stream))
