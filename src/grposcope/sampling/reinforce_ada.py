"""`reinforce_ada`: adaptive sampling by successive elimination ("Reinforce-Ada: An Adaptive Sampling
Framework for Reinforce-Style LLM Training", arXiv 2510.04996; defaults of its released code).

Each prompt is sampled in rounds of `round_size`, at most `max_rounds`. After a round, a prompt whose samples so
far satisfy the exit rule leaves the active set; only active prompts are sampled again:
- `pos`: at least one correct sample;
- `balance`: at least floor(G/2) correct and at least G - floor(G/2) wrong.
Each prompt's pool is then down-sampled to G: up to floor(G/2) correct and G - floor(G/2) wrong, drawn at
random (seeded), a shortfall of one class filled from the other. A prompt still unresolved after the last round
is kept (as the released code does) unless `drop_unresolved`. The advantage is meant to be the `pool`
estimator's: the baseline is the mean of every reward drawn for the prompt this step (`Selection.pool`).

Deviation: a prompt may exit only once it has at least G samples, so that its group can be filled; with the
released defaults (round_size 8, G <= 8) this changes nothing. When `drop_unresolved` would drop every prompt,
they all train instead (a step always has a batch).
"""

from __future__ import annotations

from typing import Any

import torch

from ..core.advantages import pool_stats
from .base import READS, DrawFn, MorePrompts, Sampler, Selection, accounting, balanced, pick, sample_numbers
from .registry import SAMPLERS

EXIT_RULES = ("pos", "balance")


@SAMPLERS.register("reinforce_ada", reads=READS, hosts=("grposcope", "trl", "verl"))
class ReinforceAda(Sampler):
    """Reinforce-Ada (arXiv 2510.04996): samples each prompt in rounds until its exit rule accepts it. Its options are
    config fields of the same names.

    Args:
        exit_rule: reinforce_ada: a prompt stops being sampled once it has at least one correct sample ("pos") or G/2
            correct and G/2 wrong ones ("balance").
        round_size: reinforce_ada: samples per prompt per round.
        max_rounds: reinforce_ada: rounds at most; a prompt still unresolved after them is kept (see drop_unresolved).
        drop_unresolved: reinforce_ada: drop prompts the exit rule never accepted instead of training on them.
    """

    makes_pool = True
    closed_form = False  # how many rounds a prompt takes depends on its own pass rate: Monte Carlo
    per_prompt = True  # each prompt draws rounds until it resolves, whatever the others do

    def __init__(self, exit_rule: str = "balance", round_size: int = 8, max_rounds: int = 4,
                 drop_unresolved: bool = False, success_threshold: float = 0.5, seed: int = 0) -> None:
        super().__init__(success_threshold, seed)
        if exit_rule not in EXIT_RULES:
            raise ValueError(f"unknown exit_rule {exit_rule!r}; known: {', '.join(EXIT_RULES)}")
        for name, value in (("round_size", round_size), ("max_rounds", max_rounds)):
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        self.exit_rule, self.round_size, self.max_rounds = exit_rule, round_size, max_rounds
        self.drop_unresolved = drop_unresolved

    def sample(self, prompts: list[Any], draw: DrawFn, more: MorePrompts, g: int) -> Selection:
        b, r = len(prompts), self.round_size
        if r * self.max_rounds < g:
            raise ValueError(f"round_size x max_rounds = {r * self.max_rounds} samples cannot fill a group of "
                             f"num_generations={g}: raise round_size or max_rounds")
        width = r * self.max_rounds
        rewards = torch.zeros(b, width)  # (B, P_max): each prompt's pool, filled round by round
        numbers = torch.zeros(b, width, dtype=torch.long)  # (B, P_max) the samples' step-wide numbers
        count = torch.zeros(b, dtype=torch.long)  # (B,) samples drawn per prompt
        active, resolved = torch.ones(b, dtype=torch.bool), torch.zeros(b, dtype=torch.bool)
        draws, offset = [], 0  # type: list[Any], int
        while active.any() and len(draws) < self.max_rounds:
            idx = active.nonzero().flatten()  # (A,)
            drawn = draw(pick(prompts, idx), r)  # (A, r)
            draws.append(drawn)
            cols = count[idx].unsqueeze(1) + torch.arange(r)  # (A, r)
            rewards[idx.unsqueeze(1), cols] = drawn.rewards.to(rewards.dtype)
            numbers[idx.unsqueeze(1), cols] = sample_numbers(drawn, offset)
            offset += drawn.rewards.numel()
            count[idx] += r
            exits = self._exits(rewards, count, g) & active  # (B,)
            resolved |= exits
            active &= ~exits
        keep = resolved if self.drop_unresolved and resolved.any() else torch.ones(b, dtype=torch.bool)
        rows = keep.nonzero().flatten()  # (B',)
        valid = torch.arange(width).unsqueeze(0) < count[rows].unsqueeze(1)  # (B', P_max)
        chosen = balanced(rewards[rows], valid, g, self.success_threshold, self.generator)  # (B', G) positions
        kept = rewards[rows].gather(1, chosen)  # (B', G)
        metrics = accounting(draws, kept, rounds=count.float().mean().item() / r, dropped=b - len(rows),
                             unresolved=int((~resolved).sum()))
        # every prompt has >= G samples (an exit needs G; the last round leaves r * max_rounds >= G)
        as_drawn = rewards[:, :g]  # (B, G) each prompt's first G samples, dropped prompts included
        return Selection(pick(prompts, rows), numbers[rows].gather(1, chosen), kept, draws,
                         pool_stats(rewards[rows], valid), metrics, as_drawn=as_drawn)

    def _exits(self, rewards: torch.Tensor, count: torch.Tensor, g: int) -> torch.Tensor:
        """The exit rule on every reward drawn so far.  rewards (B, P_max), count (B,) -> (B,) bool"""
        valid = torch.arange(rewards.shape[1]).unsqueeze(0) < count.unsqueeze(1)  # (B, P_max)
        correct = ((rewards >= self.success_threshold) & valid).sum(dim=1)  # (B,)
        if self.exit_rule == "pos":
            rule = correct >= 1
        else:
            rule = (correct >= g // 2) & (count - correct >= g - g // 2)
        return rule & (count >= g)
