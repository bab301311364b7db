"""`knapsack`: Knapsack RL's allocation of the rollout budget ("Knapsack RL: Unlocking Exploration of LLMs via
Optimizing Budget Allocation", arXiv 2509.25849).

Each prompt of the batch is an item whose cost is the samples it is given and whose value is what they are
expected to teach. With p the prompt's success rate and N its samples:

    value(N, p) = P(non-zero gradient) x InfoGain = (1 - p^N - (1 - p)^N) x p (1 - p)^2

(the paper's InfoGain approximation). The step's budget (`sample_budget`, default B x G, what `fixed` spends) is
shared out by a knapsack solved exactly with dynamic programming, so that the sum of the values is largest:
prompts likely to be solved give their samples to hard ones, which may get several groups' worth.

1. Estimate. p is each prompt's success rate at its last draw, in this run. A prompt not drawn yet gets the run's
   success rate so far (1/2 before any sample). Each estimate is kept within [1/(2n), 1 - 1/(2n)], n the samples
   it rests on, so that a prompt that failed (or passed) every sample is still worth some budget, the more the
   more it is given: the paper's fallback for success rates of 0 and 1 moves budget to unsolved prompts.
2. Allocate. N is a multiple of G between 0 and `knapsack_max_groups` x G. The knapsack's table is as wide as
   what the step can spend: at most B x `knapsack_max_groups` groups, a prompt at most the whole budget
   (the same answer as a table as wide as the options say, whose extra columns could never be filled).
3. Draw and train. Each prompt given N > 0 draws N samples. Its G training samples are chosen from them as
   Reinforce-Ada chooses (up to G/2 correct and G/2 wrong), and its pool of N is the `pool` estimator's
   baseline. A prompt given 0 is not drawn this step.

Deviations from the paper, and why:
- N is a multiple of G, and a prompt trains on G of its N samples with the pool's mean as baseline, where the
  paper trains on all N with their group statistics: grposcope's loss and estimators take groups of G.
- The success rate of a prompt never drawn is the run's so far; the paper estimates from the previous epoch.
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.advantages import pool_stats
from ..errors import RunError
from ..machine import available_memory, gib
from .base import (
    READS,
    DrawFn,
    MorePrompts,
    Sampler,
    Selection,
    accounting,
    balanced,
    check_sample_budget,
    example_key,
    pick,
    sample_numbers,
)
from .registry import SAMPLERS

# The most groups of G one prompt may get in a step: far above the paper's largest allocation (93 samples, under
# 12 groups of 8). knapsack_max_groups=1e9 was taken, and asked for a 4 TB table before its first step.
MAX_GROUPS = 1024


def task_value(n: torch.Tensor, p: torch.Tensor) -> torch.Tensor:
    """Knapsack RL's value of n samples on a prompt of success rate p.  n (K,), p (B,) -> (B, K)"""
    p, n = p.double().unsqueeze(1), n.double().unsqueeze(0)  # (B, 1), (1, K)
    nonzero = (1.0 - p**n - (1.0 - p) ** n).clamp(min=0.0)  # (B, K): P(N samples not all equal); 0 at N = 0
    return nonzero * p * (1.0 - p) ** 2


def allocate(values: torch.Tensor, budget: int) -> torch.Tensor:
    """The exact knapsack: how many units (0 .. K-1) each prompt gets so that the summed values are largest,
    with at most `budget` units in all. values (B, K): prompt b's value for k units -> (B,) long

    Dynamic programming over prompts: best[c] is the largest value with c units spent on the prompts so far.
    O(B x budget x K).
    """
    b, k = values.shape
    best = torch.full((budget + 1,), float("-inf"), dtype=torch.float64)
    best[0] = 0.0
    choice = torch.zeros(b, budget + 1, dtype=torch.long)  # (B, C+1) units of prompt b at spent c
    units = torch.arange(k)  # (K,)
    for i in range(b):
        spent = torch.arange(budget + 1).unsqueeze(1) - units.unsqueeze(0)  # (C+1, K): spent before prompt i
        before = torch.where(spent >= 0, best[spent.clamp(min=0)], torch.tensor(float("-inf"), dtype=torch.float64))
        total = before + values[i].unsqueeze(0)  # (C+1, K)
        best, choice[i] = total.max(dim=1)
    left, out = int(torch.argmax(best)), torch.zeros(b, dtype=torch.long)
    for i in range(b - 1, -1, -1):  # walk back from the best total
        out[i] = choice[i, left]
        left -= int(out[i])
    return out


def allocation_units(prompts: int, budget: int, g: int, max_groups: int) -> tuple[int, int]:
    """What the knapsack of a step solves over: (C, M) the groups it may spend in all, and on one prompt. A
    budget beyond B x max_groups groups cannot be spent, and no prompt can get more than the whole budget."""
    capacity = min(budget // g, prompts * max_groups)
    return capacity, min(max_groups, capacity)


def allocation_bytes(prompts: int, capacity: int, most: int) -> int:
    """The least `allocate` takes (float64 and int64, 8 bytes a value): the values (B, M+1), the choices
    (B, C+1), and a prompt's three (C+1, M+1) tables (the units spent before, their best value, the sum)."""
    return 8 * (prompts * (most + 1) + prompts * (capacity + 1) + 3 * (capacity + 1) * (most + 1))


@SAMPLERS.register("knapsack", reads=READS, hosts=("grposcope",))
class Knapsack(Sampler):
    """Knapsack RL (arXiv 2509.25849): a fixed sample budget spread over the prompts by a knapsack. Its options are
    config fields of the same names.

    Args:
        knapsack_max_groups: knapsack: the most samples one prompt may get in a step, in groups of G (Knapsack RL, arXiv
            2509.25849).
    """

    makes_pool = True
    closed_form = False  # whom it draws depends on each prompt's last success rate: Monte Carlo
    per_prompt = False  # one budget shared by the batch

    def __init__(self, sample_budget: int | None = None, knapsack_max_groups: int = 4,
                 success_threshold: float = 0.5, seed: int = 0) -> None:
        super().__init__(success_threshold, seed)
        check_sample_budget(sample_budget)
        if isinstance(knapsack_max_groups, bool) or not isinstance(knapsack_max_groups, int) \
                or not 1 <= knapsack_max_groups <= MAX_GROUPS:
            raise ValueError(f"knapsack_max_groups must be an int in [1, {MAX_GROUPS}] (the most groups of G one "
                             "prompt may get in a step, e.g. 4, the default; Knapsack RL's hardest prompts got 93 "
                             f"samples, under 12 groups of 8), got {knapsack_max_groups!r}")
        self.budget, self.max_groups = sample_budget, knapsack_max_groups
        self.last: dict[Any, tuple[int, int]] = {}  # prompt key -> (successes, samples) at its last draw
        self.seen = torch.zeros(2, dtype=torch.float64)  # the run's successes and samples

    def estimates(self, prompts: list[Any], g: int) -> torch.Tensor:
        """Each prompt's success rate, kept within [1/(2n), 1 - 1/(2n)].  -> (B,) float64"""
        run_rate = float(self.seen[0] / self.seen[1]) if self.seen[1] else 0.5
        rates, counts = [], []
        for prompt in prompts:
            wins, drawn = self.last.get(example_key(prompt), (None, g))
            rates.append(run_rate if wins is None else wins / drawn)
            counts.append(drawn)
        n = torch.tensor(counts, dtype=torch.float64)  # (B,)
        return torch.minimum(torch.maximum(torch.tensor(rates, dtype=torch.float64), 0.5 / n), 1 - 0.5 / n)

    def step_budget(self, prompts: int, g: int) -> int:
        """The samples a step of `prompts` prompts may spend: sample_budget, or B x G."""
        budget = self.budget or prompts * g
        if budget < g:
            raise ValueError(f"sample_budget={budget} samples cannot fill one group of num_generations={g}")
        return budget

    def check_step(self, prompts: int, g: int, available: int | None = None) -> None:
        """Raises before a run when its steps of `prompts` prompts cannot run: a budget it could never spend (the
        step would quietly spend less), or a knapsack table bigger than `available` bytes (default: this
        machine's memory)."""
        budget, most = self.step_budget(prompts, g), prompts * self.max_groups * g
        if budget > most:
            raise ValueError(f"sample_budget={budget:,} is more than knapsack can spend in a step: {_prompts(prompts)} "
                             f"x knapsack_max_groups={self.max_groups} x num_generations={g} = {most:,} "
                             f"completions; lower sample_budget to at most {most:,}, or raise knapsack_max_groups")
        capacity, widest = allocation_units(prompts, budget, g, self.max_groups)
        need = allocation_bytes(prompts, capacity, widest)
        available = available_memory() if available is None else available
        if available is not None and need > available:
            raise RunError(f"knapsack's allocation of a step needs ~{gib(need)} (its table over {_prompts(prompts)} "
                           f"and {capacity:,} groups of G={g}, up to {widest:,} a prompt) but this machine has "
                           f"{gib(available)} available; lower sample_budget or knapsack_max_groups")

    def sample(self, prompts: list[Any], draw: DrawFn, more: MorePrompts, g: int) -> Selection:
        budget = self.step_budget(len(prompts), g)
        capacity, most = allocation_units(len(prompts), budget, g, self.max_groups)
        p = self.estimates(prompts, g)  # (B,)
        units = allocate(task_value(torch.arange(most + 1) * g, p), capacity)  # (B,)
        if not units.any():  # every value 0 (cannot happen with the bounds above): one group for the first
            units[0] = 1
        rows = units.nonzero().flatten()  # (B',)
        n = units[rows] * g  # (B',) samples per drawn prompt
        width = int(n.max())
        rewards = torch.zeros(len(rows), width)  # (B', N_max) each prompt's pool, padded
        numbers = torch.zeros(len(rows), width, dtype=torch.long)  # (B', N_max) the samples' step-wide numbers
        draws, offset = [], 0
        for level in sorted(set(n.tolist())):  # one draw per allocation: N samples of each prompt given N
            idx = (n == level).nonzero().flatten()  # (K,)
            drawn = draw(pick(prompts, rows[idx]), level)  # (K, N)
            draws.append(drawn)
            rewards[idx, :level] = drawn.rewards.to(rewards.dtype)
            numbers[idx, :level] = sample_numbers(drawn, offset)
            offset += drawn.rewards.numel()
        valid = torch.arange(width).unsqueeze(0) < n.unsqueeze(1)  # (B', N_max)
        wins = ((rewards >= self.success_threshold) & valid).sum(dim=1)  # (B',)
        for prompt, w, m in zip(pick(prompts, rows), wins.tolist(), n.tolist()):
            self.last[example_key(prompt)] = (w, m)
        self.seen += torch.tensor([float(wins.sum()), float(n.sum())], dtype=torch.float64)
        chosen = balanced(rewards, valid, g, self.success_threshold, self.generator)  # (B', G)
        kept = rewards.gather(1, chosen)  # (B', G)
        metrics = accounting(draws, kept, rounds=float(n.double().mean() / g), dropped=0,
                             groups_max=int(units.max()), prompts_skipped=len(prompts) - len(rows))
        return Selection(pick(prompts, rows), numbers.gather(1, chosen), kept, draws, pool_stats(rewards, valid),
                         metrics, as_drawn=rewards[:, :g])  # (B', G) each drawn prompt's first G samples

    def state_dict(self) -> dict[str, Any]:
        keys = list(self.last)
        return {**super().state_dict(), "seen": self.seen.clone(), "keys": [str(k) for k in keys],
                "key_is_int": [isinstance(k, int) for k in keys],
                "last": torch.tensor([self.last[k] for k in keys], dtype=torch.long).view(-1, 2)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.seen = state["seen"].clone()
        keys = [int(k) if is_int else k for k, is_int in zip(state["keys"], state["key_is_int"])]
        self.last = {k: (int(w), int(m)) for k, (w, m) in zip(keys, state["last"].tolist())}


def _prompts(count: int) -> str:
    return f"{count:,} prompt{'' if count == 1 else 's'}"
