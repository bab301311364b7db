"""What a sampler is given and what it returns.

A sampler decides who gets how many completions. It never generates or scores: the caller (the trainer, or
the collapse simulator) hands it a `draw` function, and it answers which of the drawn samples train. Everything
is kept in tensors, so that the simulator can run ten thousand prompts a step.

Notation: B prompts handed over, n samples per prompt in one draw, G the group that trains (num_generations),
B' the prompts that train (B' <= B for samplers that drop collapsed groups), B0 the groups drawn, P_j every reward
drawn for prompt j this step (its pool, P_j >= G). Samples are numbered across the step's draws: draw d's row r is
sample offset(d) + r, where offset(d) is the number of samples drawn before it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

import torch

from ..core.advantages import PoolStats


@dataclass
class ScoredDraw:
    """n samples of each of B prompts, scored: what `draw(prompts, n)` returns."""

    rewards: torch.Tensor  # (B, n) float: sample j of prompt b is row b*n + j of `rows`
    lengths: torch.Tensor  # (B, n) completion tokens, for the accounting
    rows: Any = None  # the caller's per-sample data (the trainer's Rollout); the sampler never reads it


DrawFn = Callable[[list[Any], int], ScoredDraw]  # (prompts, n) -> n scored samples of each prompt
MorePrompts = Callable[[int], list[Any]]  # (count) -> the next prompts of the data stream


@dataclass
class Selection:
    """A sampler's answer: which prompts train, on which samples, against which baseline pool."""

    prompts: list[Any]  # B' prompts that train
    samples: torch.Tensor  # (B', G) long: the training samples, numbered across `draws` (see the notation)
    rewards: torch.Tensor  # (B', G) their rewards
    draws: list[ScoredDraw]  # every draw of the step, in order
    pool: PoolStats | None = None  # the pools' mean and std; None: each group is its own pool
    metrics: dict[str, float] = field(default_factory=dict)  # sampler/* accounting
    # (B0, G) the rewards of the groups as first drawn, before the sampler kept, dropped or balanced any:
    # every group drawn (B0 >= B') or each prompt's first G samples. The collapse rate and everything that
    # reads it (the monitor, AVSPO's signal) use these: the ACR a fixed sampler would have seen.
    as_drawn: torch.Tensor | None = None

    def __post_init__(self) -> None:
        if self.as_drawn is None:  # a sampler that neither drops nor balances: the kept groups are the drawn
            self.as_drawn = self.rewards

    @property
    def samples_generated(self) -> int:
        """Completions drawn this step, kept or not (`sampler/samples_generated`): what `max_samples` counts."""
        return samples_generated(self.draws)

    @property
    def tokens_generated(self) -> float:
        """Completion tokens of every sample drawn this step (`sampler/tokens_generated`)."""
        return tokens_generated(self.draws)


def samples_generated(draws: list[ScoredDraw]) -> int:
    return sum(d.rewards.numel() for d in draws)


def tokens_generated(draws: list[ScoredDraw]) -> float:
    return float(sum(d.lengths.sum().item() for d in draws))


# the run-wide config fields every sampler takes (core/registry.py, `reads`)
READS = ("success_threshold", "seed")


class Sampler:
    """Base class: `sample(prompts, draw, more, g)`, and state for checkpoints."""

    # whether `Selection.pool` holds each prompt's pool (every reward drawn for it), the baseline the `pool`
    # estimator is meant for; without one, `pool` falls back to each kept group's own mean
    makes_pool = False
    # What the collapse forecast (reports/forecast.py) knows of a sampler, so that it names none itself:
    # closed_form: its cost per step follows from the forecast ACR alone (each group mixed with chance 1 - ACR,
    # independently), so the forecast computes it by formula (`forecast.FORMULAS`, by name) and does not run it;
    # False: the forecast runs the sampler on the probe's measured outcomes (Monte Carlo).
    closed_form = False
    # per_prompt: it treats each prompt on its own, so its samples and informative groups per step scale with the
    # prompts per step: the forecast runs it on large batches and scales back, and fits a smaller budget with
    # fewer prompts at the same cost per informative group (else it recomputes a closed form at each smaller B).
    per_prompt = False

    def __init__(self, success_threshold: float = 0.5, seed: int = 0) -> None:
        self.success_threshold = success_threshold
        self.generator = torch.Generator().manual_seed(seed)  # down-sampling, tie-breaking

    def sample(self, prompts: list[Any], draw: DrawFn, more: MorePrompts, g: int) -> Selection:
        raise NotImplementedError

    def check_step(self, prompts: int, g: int, available: int | None = None) -> None:
        """Raises before a run (the trainer's, the simulator's) when its steps of `prompts` prompts and groups of
        `g` cannot run with these options, or need more than `available` bytes (default: this machine's
        memory) for the sampler's own tables. Most samplers have nothing to check."""

    def state_dict(self) -> dict[str, Any]:
        return {"generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.generator.set_state(state["generator"])


def example_key(prompt: Any) -> Hashable:
    """What identifies a prompt across steps: itself when it is a number or a string (the simulator), else its
    rendered text, else its `prompt` (the trainer's examples)."""
    if isinstance(prompt, (int, str)):
        return prompt
    return str(prompt.get("prompt_text", prompt.get("prompt")))


def informative(rewards: torch.Tensor) -> torch.Tensor:
    """Groups whose rewards are not all equal: those with a non-zero group-relative advantage.

    rewards (B, G) -> (B,) bool
    """
    return (rewards != rewards[:, :1]).any(dim=1)


def sample_numbers(drawn: ScoredDraw, offset: int) -> torch.Tensor:
    """The step-wide numbers of a draw's samples.  -> (B, n)"""
    b, n = drawn.rewards.shape
    return offset + torch.arange(b * n).view(b, n)


def accounting(draws: list[ScoredDraw], kept: torch.Tensor, rounds: float, dropped: int, **extra: float) -> dict:
    """The `sampler/*` metrics every sampler logs (docs/metrics.md). kept (B', G) the training rewards."""
    metrics = {
        "sampler/samples_generated": float(samples_generated(draws)),
        "sampler/tokens_generated": tokens_generated(draws),
        "sampler/samples_kept": float(kept.numel()),
        "sampler/informative_frac": informative(kept).float().mean().item() if kept.numel() else 0.0,
        "sampler/rounds_mean": float(rounds),
        "sampler/rounds": float(len(draws)),
        "sampler/prompts_dropped": float(dropped),
    }
    metrics.update({f"sampler/{k}": float(v) for k, v in extra.items()})
    return metrics


def check_sample_budget(sample_budget: int | None) -> None:
    """`sample_budget` (`budgeted`, `knapsack`): samples per step, or None for B x G."""
    if sample_budget is not None and (not isinstance(sample_budget, int) or sample_budget < 1):
        raise ValueError(f"sample_budget must be an int >= 1 (samples per step) or None (B x G), got "
                         f"{sample_budget!r}")


def pick(prompts: list[Any], index: torch.Tensor) -> list[Any]:
    return [prompts[i] for i in index.tolist()]


class KeptGroups:
    """The informative groups a step's draws yield, in the order drawn: dynamic sampling's bookkeeping
    (`dynamic`, `greso`)."""

    def __init__(self) -> None:
        self.draws: list[ScoredDraw] = []
        self.prompts: list[Any] = []  # the kept groups' prompts
        self._samples: list[torch.Tensor] = []  # per draw (U, G): the kept groups' step-wide sample numbers
        self._rewards: list[torch.Tensor] = []  # per draw (U, G)
        self._last: list[Any] = []  # the last batch drawn
        self.offset = 0  # samples drawn so far: the number of the next draw's first sample

    def add(self, batch: list[Any], drawn: ScoredDraw) -> None:
        """A draw of `batch`, (K, G): its informative groups are kept."""
        self.draws.append(drawn)
        useful = informative(drawn.rewards).nonzero().flatten()  # (U,)
        self.prompts += pick(batch, useful)
        self._samples.append(sample_numbers(drawn, self.offset)[useful])
        self._rewards.append(drawn.rewards[useful])
        self.offset += drawn.rewards.numel()
        self._last = list(batch)

    @property
    def mixed_share(self) -> float:
        """The share of the groups drawn so far that were informative."""
        return len(self.prompts) / sum(d.rewards.shape[0] for d in self.draws)

    def selection(self, want: int, **extra: float) -> Selection:
        """The first `want` kept groups (what is missing counted in `sampler/shortfall`); when not one group was
        informative, the last batch as drawn (its zero advantages make no update, and the step keeps a batch)."""
        prompts = self.prompts[:want]
        samples, rewards = torch.cat(self._samples)[:want], torch.cat(self._rewards)[:want]
        shortfall = want - len(prompts)
        if not prompts:
            last = self.draws[-1]
            prompts, rewards = self._last, last.rewards
            samples = sample_numbers(last, self.offset - rewards.numel())
        drawn_prompts = sum(d.rewards.shape[0] for d in self.draws)
        metrics = accounting(self.draws, rewards, rounds=1, dropped=drawn_prompts - len(prompts),
                             shortfall=shortfall, gen_batches=len(self.draws), **extra)
        as_drawn = torch.cat([d.rewards for d in self.draws])  # (B0, G) every group drawn, kept or dropped
        return Selection(prompts, samples, rewards, self.draws, None, metrics, as_drawn=as_drawn)


def balanced(pools: torch.Tensor, valid: torch.Tensor, g: int, threshold: float,
             generator: torch.Generator) -> torch.Tensor:
    """G positions in each pool: up to floor(G/2) correct and G - floor(G/2) wrong, at random, a short class
    filled from the other (Reinforce-Ada's down-sampling; every pool holds at least G valid rewards).

    pools, valid (B, P_max) -> (B, G)
    """
    is_correct = (pools >= threshold) & valid
    is_wrong = ~(pools >= threshold) & valid
    noise = torch.rand(pools.shape, generator=generator)  # (B, P_max) a random order within a class
    correct_first = torch.argsort(torch.where(is_correct, noise, 2.0), dim=1)  # (B, P_max)
    wrong_first = torch.argsort(torch.where(is_wrong, noise, 2.0), dim=1)
    n_correct = is_correct.sum(dim=1).clamp(max=g // 2)  # (B,)
    n_wrong = torch.minimum(is_wrong.sum(dim=1), g - n_correct)
    n_correct = g - n_wrong  # the wrong ones fell short: more correct ones (the pool holds >= G)
    j = torch.arange(g).unsqueeze(0)  # (1, G)
    from_correct = correct_first.gather(1, j.expand(len(pools), g))  # (B, G)
    from_wrong = wrong_first.gather(1, (j - n_correct.unsqueeze(1)).clamp(min=0))  # (B, G)
    return torch.where(j < n_correct.unsqueeze(1), from_correct, from_wrong)
