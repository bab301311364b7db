"""Samplers: who gets how many completions (docs/algorithms.md, "Samplers").

    sampler = SAMPLERS.make("reinforce_ada", exit_rule="balance", round_size=8, max_rounds=4)
    selection = sampler.sample(prompts, draw, more, g=8)   # draw(prompts, n) generates and scores
    selection.prompts, selection.samples, selection.rewards, selection.pool, selection.metrics

Depends on torch only (and core); the trainer and the collapse simulator hand in their own `draw`.
"""

from __future__ import annotations

from ..core.registry import Registry
from .base import DrawFn, MorePrompts, Sampler, ScoredDraw, Selection, example_key, informative

SAMPLERS: Registry[Sampler] = Registry("sampler")


def make(name: str, **params) -> Sampler:
    """Builds the sampler registered as `name`; unknown names fail with the list of known ones."""
    return SAMPLERS.make(name, **params)


from . import budgeted, dynamic, fixed, reinforce_ada  # noqa: E402,F401  (register the samplers)

__all__ = ["SAMPLERS", "DrawFn", "ScoredDraw", "MorePrompts", "Sampler", "Selection", "informative", "make",
           "example_key"]
