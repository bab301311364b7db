"""The sampler family's registry. Each sampler's module registers itself here on import; the registry imports
them on its first lookup (core.registry), so this module imports none of them and none imports the package."""

from __future__ import annotations

from ..core.registry import Registry
from .base import Sampler

# In the order forecasts and tables list them (SAMPLERS.names_in): the baseline first, grposcope's own last.
# Each declares the trainers it runs in (`hosts`, docs/integrations.md "What runs where").
SAMPLERS: Registry[Sampler] = Registry("sampler", entry_modules=(
    "grposcope.sampling.fixed", "grposcope.sampling.dynamic", "grposcope.sampling.reinforce_ada",
    "grposcope.sampling.greso", "grposcope.sampling.knapsack",
    "grposcope.sampling.budgeted"), plugins=True, base=Sampler)
