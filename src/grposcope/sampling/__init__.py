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


# Registered in the order forecasts and tables list them (SAMPLERS.names_in): the baseline first, grposcope's
# own last. Each declares the trainers it runs in (`hosts`): reinforce_ada and budgeted draw other numbers of
# completions per prompt than num_generations, so for now they run in grposcope's own trainer only.
# isort: off
from . import fixed  # noqa: E402,F401
from . import dynamic  # noqa: E402,F401
from . import reinforce_ada  # noqa: E402,F401
from . import budgeted  # noqa: E402,F401
# isort: on

__all__ = ["SAMPLERS", "DrawFn", "ScoredDraw", "MorePrompts", "Sampler", "Selection", "informative", "make",
           "example_key"]
