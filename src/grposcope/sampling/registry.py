"""The sampler family's registry. Each module of this package that defines a sampler registers it here on
import; the registry imports every module of the package on its first lookup (core.registry, `entry_modules`),
so this module imports none of them, none imports the package, and a new sampler's module is found, not listed."""

from __future__ import annotations

from ..core.registry import Registry
from .base import Sampler

# The order forecasts and tables list them (SAMPLERS.names_in): the baseline first, grposcope's own last; a
# sampler named in neither comes between, by its module's name. Each declares the trainers it runs in (`hosts`,
# docs/integrations.md "What runs where").
SAMPLERS: Registry[Sampler] = Registry("sampler", package=__package__, first=(
    "fixed", "dynamic", "reinforce_ada", "greso", "knapsack"), last=("budgeted",), plugins=True, base=Sampler)
