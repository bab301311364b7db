"""`dynamic`: DAPO's dynamic sampling ("DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
arXiv 2503.14476). Groups whose G rewards are all equal teach nothing under a group-relative advantage; they are
dropped and a fresh batch of prompts is drawn, until B informative groups are kept or `max_gen_batches`
batches were generated. Informative groups beyond B are not trained on.

Deviation from the paper's release (verl), which stops the run when the batches run out: a shortfall trains on
the informative groups kept and logs `sampler/shortfall` (`on_shortfall="error"` restores the strict
behaviour). When not one group was informative, the last batch trains as drawn (its zero advantages make no
update, but the step and its metrics stay consistent).
"""

from __future__ import annotations

from typing import Any

from ..errors import RunError
from .base import READS, DrawFn, KeptGroups, MorePrompts, Sampler, Selection
from .registry import SAMPLERS

SHORTFALL = ("train", "error")


@SAMPLERS.register("dynamic", reads=READS, hosts=("grposcope", "trl"))
class Dynamic(Sampler):
    """DAPO's dynamic sampling (arXiv 2503.14476): keeps only informative (mixed) groups. Its options are config fields
    of the same names.

    Args:
        max_gen_batches: dynamic, greso: batches generated per step at most while collecting informative groups (verl's
            max_num_gen_batches).
        on_shortfall: dynamic: when fewer informative groups than the batch were found, "train" on those kept (logged in
            `sampler/shortfall`) or stop with an "error" (verl's behaviour).
    """

    closed_form = True  # batches of B until B mixed groups: binomial sums in q = 1 - ACR (forecast.dynamic_cost)
    per_prompt = False  # whether batch i + 1 is drawn depends on the whole batch: recomputed at each smaller B

    def __init__(self, max_gen_batches: int = 3, on_shortfall: str = "train", success_threshold: float = 0.5,
                 seed: int = 0) -> None:
        super().__init__(success_threshold, seed)
        if not isinstance(max_gen_batches, int) or max_gen_batches < 1:
            raise ValueError(f"max_gen_batches must be an int >= 1 (batches generated per step), got "
                             f"{max_gen_batches!r}")
        if on_shortfall not in SHORTFALL:
            raise ValueError(f"unknown on_shortfall {on_shortfall!r}; known: {', '.join(SHORTFALL)}")
        self.max_gen_batches, self.on_shortfall = max_gen_batches, on_shortfall

    def sample(self, prompts: list[Any], draw: DrawFn, more: MorePrompts, g: int) -> Selection:
        want, batch, kept = len(prompts), list(prompts), KeptGroups()
        while True:
            kept.add(batch, draw(batch, g))  # (B, G)
            if len(kept.prompts) >= want or len(kept.draws) == self.max_gen_batches:
                break
            batch = more(want)  # a fresh batch, as DAPO draws them
        if len(kept.prompts) < want and self.on_shortfall == "error":
            raise RunError(
                f"dynamic sampling kept {len(kept.prompts)} informative groups of the {want} wanted after "
                f"{len(kept.draws)} batches (max_gen_batches={self.max_gen_batches}); raise max_gen_batches, "
                "make the prompts' difficulty fit the model, or set on_shortfall='train'"
            )
        return kept.selection(want)
