"""`budgeted`: grposcope's own sampler. It spends a fixed number of samples per step (`sample_budget`) where a
mixed group is most likely, using everything the run has seen of each prompt.

The rule (docs/algorithms.md, "budgeted"):
1. Belief. Each prompt keeps success and failure counts (s, f) from every sample ever drawn for it, discounted
   by `budget_decay` per step since they were last updated: the policy moves, so old evidence fades, and a
   prompt skipped long ago drifts back to the prior and is tried again (the revisit). Its success probability
   is believed to be Beta(a0 + s, b0 + f); the prior has strength `budget_prior_strength` and the run's recent
   success rate as its mean, so an unseen prompt starts from what is typical.
2. Value. A group of G samples is informative unless all G succeed or all fail:
       P(mixed) = 1 - E[p^G] - E[(1-p)^G],   E[p^G] = B(a+G, b) / B(a, b)  for p ~ Beta(a, b).
3. Spending. The step looks at `budget_candidates` x B prompts: the batch and the next ones of the data stream.
   It draws G samples for the prompts of highest P(mixed), in rounds: the first spends `budget_first_round` of
   the budget, each later one what is left. Every sample updates its prompt's counts; a group that came back
   all-equal is dropped, and the next round re-ranks the untried candidates. Prompts below `budget_min_p_mixed`
   are not drawn at all (almost surely solved, or hopeless, for now).
4. Output: the informative groups, at most B. When none is, the last round's groups train as drawn, so that a
   step always has a batch.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from .base import (
    READS,
    DrawFn,
    MorePrompts,
    Sampler,
    Selection,
    accounting,
    check_sample_budget,
    example_key,
    informative,
    pick,
    sample_numbers,
)
from .registry import SAMPLERS


def p_mixed(a: torch.Tensor, b: torch.Tensor, g: int) -> torch.Tensor:
    """P(g Bernoulli(p) samples are neither all 1 nor all 0) for p ~ Beta(a, b).  a, b (N,) -> (N,)

    E[p^g] = B(a+g, b) / B(a, b) = exp(lgamma(a+g) + lgamma(a+b) - lgamma(a) - lgamma(a+b+g)).
    """
    total = torch.lgamma(a + b) - torch.lgamma(a + b + g)
    all_ones = torch.exp(torch.lgamma(a + g) - torch.lgamma(a) + total)
    all_zeros = torch.exp(torch.lgamma(b + g) - torch.lgamma(b) + total)
    return (1.0 - all_ones - all_zeros).clamp(min=0.0)


# The most budget_candidates may be: 1e18 was taken and ran out of memory building the candidate list; 100 x
# the batch is far more than a step can draw from (greso's filter stops at the same multiple).
MAX_CANDIDATES = 100

@SAMPLERS.register("budgeted", reads=READS, hosts=("grposcope", "trl", "verl"))
class Budgeted(Sampler):
    """grposcope's budgeted sampler: a fixed sample budget spent where a mixed group is most likely. Its options are
    config fields of the same names.

    Args:
        sample_budget: budgeted, knapsack: completions generated per step (default: prompts per generation x
            num_generations, what "fixed" spends).
        budget_candidates: budgeted: prompts considered per step, as a multiple of the batch (the batch and the next
            ones).
        budget_first_round: budgeted: the share of the budget its first round spends; later rounds re-rank the untried
            prompts with what the first one taught.
        budget_decay: budgeted: per-step discount of a prompt's success/failure counts: old evidence fades as the policy
            moves, so a skipped prompt is tried again.
        budget_prior_strength: budgeted: the weight, in samples, of the prior (the run's recent success rate) in each
            prompt's belief.
        budget_min_p_mixed: budgeted: never draw a prompt whose chance of a mixed group is below this (almost surely
            solved or hopeless for now).
    """

    closed_form = False  # whom it draws depends on what it learnt of each prompt: Monte Carlo
    per_prompt = False  # one budget shared by the batch: it spends at most B x G by construction

    def __init__(self, sample_budget: int | None = None, budget_candidates: float = 4.0,
                 budget_first_round: float = 0.75, budget_decay: float = 0.95, budget_prior_strength: float = 2.0,
                 budget_min_p_mixed: float = 0.05, success_threshold: float = 0.5, seed: int = 0) -> None:
        super().__init__(success_threshold, seed)
        check_sample_budget(sample_budget)
        if not 1 <= budget_candidates <= MAX_CANDIDATES:
            raise ValueError(f"budget_candidates must be in [1, {MAX_CANDIDATES}] (prompts a step considers, as a "
                             "multiple of the batch, e.g. 4, the default; they are the next prompts of the data "
                             f"stream, so more only holds more of them in memory), got {budget_candidates!r}")
        if (budget_candidates < 1 or not 0 < budget_first_round <= 1 or not 0 < budget_decay <= 1
                or budget_prior_strength <= 0):
            raise ValueError(f"budgeted needs budget_candidates >= 1, 0 < budget_first_round <= 1, 0 < budget_decay "
                             f"<= 1 and budget_prior_strength > 0, got {budget_candidates}, {budget_first_round}, "
                             f"{budget_decay} and {budget_prior_strength}")
        if not 0 <= budget_min_p_mixed < 1:
            raise ValueError(f"budget_min_p_mixed must be in [0, 1), got {budget_min_p_mixed}")
        self.budget, self.candidates, self.first_round = sample_budget, budget_candidates, budget_first_round
        self.decay, self.prior_strength = budget_decay, budget_prior_strength
        self.min_p_mixed = budget_min_p_mixed
        self.index: dict[Any, int] = {}  # prompt key -> its row in the count tensors
        self.counts = torch.zeros(0, 3, dtype=torch.float64)  # (N, 3): successes, failures, step last updated
        self.step = 0
        self.rate = torch.tensor([1.0, 1.0], dtype=torch.float64)  # discounted successes, failures: the prior

    # --- belief -------------------------------------------------------------------------------------------

    def _rows(self, prompts: list[Any]) -> torch.Tensor:
        """Each prompt's row in the count tensors, new prompts added with no evidence.  -> (N,)"""
        rows = []
        for prompt in prompts:
            key = example_key(prompt)
            if key not in self.index:
                self.index[key] = len(self.index)
            rows.append(self.index[key])
        if len(self.index) > len(self.counts):  # grow by doubling: amortised O(1) per new prompt
            grown = torch.zeros(max(len(self.index), 2 * len(self.counts)), 3, dtype=torch.float64)
            grown[: len(self.counts)] = self.counts
            grown[len(self.counts) :, 2] = self.step
            self.counts = grown
        return torch.tensor(rows, dtype=torch.long)

    def _belief(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Beta(a, b) of each prompt's success probability, evidence discounted to this step.  -> (N,), (N,)"""
        mean = self.rate[0] / self.rate.sum()
        fade = self.decay ** (self.step - self.counts[rows, 2])  # (N,)
        return (self.prior_strength * mean + self.counts[rows, 0] * fade,
                self.prior_strength * (1 - mean) + self.counts[rows, 1] * fade)

    def _update(self, rows: torch.Tensor, rewards: torch.Tensor) -> None:
        """Adds a draw's outcomes to its prompts' counts.  rows (C,), rewards (C, G)"""
        wins = (rewards >= self.success_threshold).sum(dim=1).double()  # (C,)
        losses = rewards.shape[1] - wins
        fade = self.decay ** (self.step - self.counts[rows, 2])
        self.counts[rows, 0] = self.counts[rows, 0] * fade + wins
        self.counts[rows, 1] = self.counts[rows, 1] * fade + losses
        self.counts[rows, 2] = float(self.step)
        self.rate += torch.stack([wins.sum(), losses.sum()])

    # --- one step -----------------------------------------------------------------------------------------

    def sample(self, prompts: list[Any], draw: DrawFn, more: MorePrompts, g: int) -> Selection:
        want = len(prompts)
        budget = self.budget or want * g
        if budget < g:
            raise ValueError(f"sample_budget={budget} samples cannot fill one group of num_generations={g}")
        self.step += 1
        self.rate *= self.decay  # the prior follows the recent success rate
        pool = _distinct(list(prompts) + more(max(0, math.ceil(self.candidates * want) - want)))
        rows = self._rows(pool)  # (C,)
        untried = torch.ones(len(pool), dtype=torch.bool)
        # spent: samples drawn so far, also the next draw's offset
        draws, kept, spent, n_kept = [], [], 0, 0  # type: list[Any], list[Any], int, int
        while budget - spent >= g and untried.any() and n_kept < want:
            share = budget * self.first_round if not draws else budget - spent
            slots = min(max(1, int(share // g)), (budget - spent) // g, want - n_kept)
            a, b = self._belief(rows)
            value = torch.where(untried, p_mixed(a, b, g), torch.tensor(-1.0, dtype=torch.float64))  # (C,)
            noise = 1e-9 * torch.rand(len(pool), generator=self.generator, dtype=torch.float64)  # random ties
            order = torch.argsort(value + noise, descending=True)[:slots]
            chosen = order[value[order] >= self.min_p_mixed]  # (K,)
            if not len(chosen):
                break
            untried[chosen] = False
            drawn = draw(pick(pool, chosen), g)  # (K, G)
            draws.append(drawn)
            self._update(rows[chosen], drawn.rewards)
            useful = informative(drawn.rewards).nonzero().flatten()
            numbers = sample_numbers(drawn, spent)
            spent += drawn.rewards.numel()
            kept.append((chosen[useful], numbers[useful], drawn.rewards[useful]))
            n_kept += len(useful)
            last = (chosen, numbers, drawn.rewards)
        if not draws:  # every candidate below budget_min_p_mixed: the batch trains as `fixed` would draw it
            drawn = draw(list(prompts), g)
            draws.append(drawn)
            self._update(rows[:want], drawn.rewards)
            last = (torch.arange(want), sample_numbers(drawn, 0), drawn.rewards)
        chosen, numbers, rewards = (torch.cat([k[i] for k in kept]) for i in range(3)) if kept else last
        if not len(chosen):  # nothing informative: the last round trains as drawn
            chosen, numbers, rewards = last
        drawn_prompts = sum(d.rewards.shape[0] for d in draws)
        metrics = accounting(draws, rewards, rounds=1, dropped=drawn_prompts - len(chosen),
                             prompts_skipped=int(untried.sum()), candidates=len(pool))
        as_drawn = torch.cat([d.rewards for d in draws])  # (B0, G) every group drawn, kept or dropped
        return Selection(pick(pool, chosen), numbers, rewards, draws, None, metrics, as_drawn=as_drawn)

    # --- checkpoints --------------------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        keys = list(self.index)
        return {**super().state_dict(), "step": self.step, "rate": self.rate.clone(),
                "keys": [str(k) for k in keys], "key_is_int": [isinstance(k, int) for k in keys],
                "counts": self.counts[: len(keys)].clone()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        super().load_state_dict(state)
        self.step, self.rate = int(state["step"]), state["rate"].clone()
        keys = [int(k) if is_int else k for k, is_int in zip(state["keys"], state["key_is_int"])]
        self.index = {k: i for i, k in enumerate(keys)}
        self.counts = state["counts"].clone()


def _distinct(prompts: list[Any]) -> list[Any]:
    """The candidates without repeats (a small dataset comes round again within one step's look-ahead): a
    prompt is drawn at most once per step."""
    seen: set = set()
    out = []
    for p in prompts:
        key = example_key(p)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
