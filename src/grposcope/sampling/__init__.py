"""Samplers: who gets how many completions (docs/algorithms.md, "Samplers").

    sampler = SAMPLERS.make("reinforce_ada", exit_rule="balance", round_size=8, max_rounds=4)
    selection = sampler.sample(prompts, draw, more, g=8)   # draw(prompts, n) generates and scores
    selection.prompts, selection.samples, selection.rewards, selection.pool, selection.metrics

Depends on torch only (and core); the trainer and the collapse simulator hand in their own `draw`.
"""

from __future__ import annotations

from ..core.registry import dotted
from .base import DrawFn, MorePrompts, Sampler, ScoredDraw, Selection, example_key, informative
from .registry import SAMPLERS


def make(name: str, **params) -> Sampler:
    """Builds the sampler registered as `name`; unknown names fail with the list of known ones."""
    return SAMPLERS.make(name, **params)


def pool_pairing(sampler: str, estimator: str) -> str | None:
    """Whether the sampler and the advantage estimator fit Reinforce-Ada's design (arXiv 2510.04996): the `pool`
    estimator's baseline is every reward drawn for the prompt, which only a pool-drawing sampler has.

    Raises ValueError for `pool` beside a sampler without pools (its baseline would silently be each group's
    mean: GRPO without the std); returns a warning for a pool-drawing sampler under another estimator (its
    extra samples then only choose the group, the paper's baseline is not used); else None.
    """
    makes_pool = getattr(SAMPLERS.get(sampler), "makes_pool", False)
    if estimator == "pool" and not makes_pool:
        drawing = [name for name in SAMPLERS.names_in("grposcope") if getattr(SAMPLERS.get(name), "makes_pool", False)]
        raise ValueError(f"advantage_estimator='pool' takes its baseline from every completion drawn for a prompt, "
                         f"and sampler={sampler!r} draws only the group: use sampler={drawing[0]!r} (or one of "
                         f"{', '.join(drawing)}), or advantage_estimator='grpo'")
    if makes_pool and estimator != "pool" and not dotted(estimator):  # a plug-in may read the pool
        return (f"sampler={sampler!r} draws a pool of completions per prompt, and advantage_estimator="
                f"{estimator!r} ignores it: Reinforce-Ada's baseline is the pool's mean (advantage_estimator='pool')")
    return None


__all__ = ["SAMPLERS", "DrawFn", "ScoredDraw", "MorePrompts", "Sampler", "Selection", "informative", "make",
           "example_key", "pool_pairing"]
