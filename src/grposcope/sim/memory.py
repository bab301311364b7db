"""Memory before it is spent: the simulator's check of a config against what this machine can give a run.

A run that asks for more memory than the machine has does not fail cleanly: torch prints its allocator's
error (`DefaultCPUAllocator: can't allocate memory: you tried to allocate 1024000000000 bytes`), or the
system kills the process once it has taken every byte. So the size a run will need is worked out from its
config and compared with this machine's memory first (grposcope.machine's `available_memory`, which the
trainer's check reads too). Standard library only: importing it costs nothing.
"""

from __future__ import annotations

from typing import Any

from ..errors import RunError
from ..machine import available_memory, gib

# What one sample (one Bernoulli draw) of a simulated step takes at the step's peak, in bytes. Measured on
# this machine (peak RSS over 2 steps of 16 prompts x 2^20 samples): fixed + grpo 28, dynamic 37, budgeted 46,
# reinforce_ada 90; with fixed, avspo 32, rloo and dr_grpo 39, pool 58. 24 is below every one of them, so the
# check never refuses a run that would fit.
BYTES_PER_SAMPLE = 24


def sim_samples(config: Any) -> int:
    """Samples one simulated step draws at least: B x G (fixed; dynamic's first batch; reinforce_ada's pools
    hold at least G per prompt), or budgeted's sample_budget."""
    budget = config.sampler_options.get("sample_budget") if config.sampler == "budgeted" else None
    if isinstance(budget, int) and not isinstance(budget, bool) and budget > 0:
        return budget  # budgeted spends its budget however it splits it into groups
    return config.batch_size * config.num_generations


def sim_step_bytes(config: Any) -> int:
    """What one simulated step needs at least, in bytes: its samples and the prompts (N + H feature vectors
    of k float32s, made whole and then split)."""
    prompts = (config.prompts + config.heldout) * (config.features + 1) * 4 * 2
    return sim_samples(config) * BYTES_PER_SAMPLE + prompts


def check_memory(*configs: Any, available: int | None = None) -> None:
    """Raises RunError for the first config whose step cannot fit in `available` bytes (default: this
    machine's, `available_memory`), before any run allocates: the message says how big and what to lower. Each
    config's sampler checks its own step first (`Sampler.check_step`: knapsack's budget and table)."""
    from ..components.build import make_with  # the samplers import torch: only when a run is about to start

    available = available_memory() if available is None else available
    for config in configs:
        sampler = make_with("sampler", config.sampler, config.sampler_options, config.seed)
        check_step = getattr(sampler, "check_step", None)  # a plug-in may not derive from Sampler
        if check_step is not None:
            check_step(config.batch_size, config.num_generations, available)
    if available is None:
        return
    for config in configs:
        needed = sim_step_bytes(config)
        if needed > available:
            budget = sim_samples(config) != config.batch_size * config.num_generations  # budgeted's sample_budget
            lower = ("sample_budget (--sample_budget N; what fixed spends is batch_size x G = "
                     f"{config.batch_size * config.num_generations:,})" if budget
                     else "num_generations or batch_size (or prompts, features)")
            raise RunError(
                f"a simulated step needs ~{gib(needed)} (G={config.num_generations}, batch_size="
                f"{config.batch_size}: {sim_samples(config):,} samples a step{' (sample_budget)' if budget else ''}; "
                f"prompts={config.prompts}, features={config.features}) but this machine has {gib(available)} "
                f"available; lower {lower}"
            )
