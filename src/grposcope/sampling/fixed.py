"""`fixed`: G completions for every prompt of the batch, all of them trained on (plain GRPO)."""

from __future__ import annotations

from typing import Any

from .base import READS, DrawFn, MorePrompts, Sampler, Selection, accounting, sample_numbers
from .registry import SAMPLERS


@SAMPLERS.register("fixed", reads=READS, hosts=("grposcope", "trl", "verl"))
class Fixed(Sampler):
    closed_form = True  # B groups of G, a share 1 - ACR of them mixed (forecast.fixed_cost)
    per_prompt = True  # every prompt gets its G samples, whatever the others do

    def sample(self, prompts: list[Any], draw: DrawFn, more: MorePrompts, g: int) -> Selection:
        drawn = draw(prompts, g)  # (B, G)
        metrics = accounting([drawn], drawn.rewards, rounds=1, dropped=0)
        return Selection(list(prompts), sample_numbers(drawn, 0), drawn.rewards, [drawn], None, metrics,
                         as_drawn=drawn.rewards)
