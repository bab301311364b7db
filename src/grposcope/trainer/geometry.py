"""How a run's batches fit together, with TRL 1.16's meaning of the batch options.

- `per_device_train_batch_size` completions go through one forward/backward pass (a micro-batch);
- `gradient_accumulation_steps` micro-batches make one optimizer step;
- `steps_per_generation` micro-batches are generated at once (`generation_batch_size` completions), so one
  generation feeds `steps_per_generation / gradient_accumulation_steps` optimizer steps;
- a generation batch holds whole groups of `num_generations` completions.
Where a generation batch would hold less than one group (the seed example's 1 x 8), grposcope accumulates
micro-batches until a step holds whole groups, and says so once.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .config import GRPOConfig


@dataclass(frozen=True)
class Geometry:
    micro_batch: int  # completions per forward/backward pass
    accumulation: int  # micro-batches per optimizer step
    steps_per_generation: int  # micro-batches per generation batch
    num_generations: int  # G
    note: str | None = None  # said once on the console when grposcope changed the user's accumulation

    @property
    def generation_batch(self) -> int:  # completions generated at once
        return self.micro_batch * self.steps_per_generation

    @property
    def prompts_per_generation(self) -> int:
        return self.generation_batch // self.num_generations

    @property
    def optimizer_batch(self) -> int:  # completions per optimizer step
        return self.micro_batch * self.accumulation

    @property
    def optimizer_steps_per_generation(self) -> int:
        return self.steps_per_generation // self.accumulation


def geometry_for(config: GRPOConfig) -> Geometry:
    micro, accum, g = config.per_device_train_batch_size, config.gradient_accumulation_steps, config.num_generations
    if config.generation_batch_size is not None and config.steps_per_generation is not None:
        raise ValueError("set generation_batch_size or steps_per_generation, not both (TRL's rule)")
    if config.generation_batch_size is not None:
        if config.generation_batch_size % micro:
            raise ValueError(
                f"generation_batch_size ({config.generation_batch_size}) must be a multiple of "
                f"per_device_train_batch_size ({micro})"
            )
        spg = config.generation_batch_size // micro
    else:
        spg = config.steps_per_generation or accum
    note = None
    if micro * spg < g and config.generation_batch_size is None and config.steps_per_generation is None:
        if g % micro:
            raise ValueError(
                f"a step must hold whole groups: per_device_train_batch_size ({micro}) must divide "
                f"num_generations ({g}), or set gradient_accumulation_steps so that "
                f"per_device_train_batch_size * gradient_accumulation_steps is a multiple of {g}"
            )
        accum = spg = g // micro
        note = (
            f"per_device_train_batch_size={micro} x gradient_accumulation_steps="
            f"{config.gradient_accumulation_steps} holds less than one group of {g}: accumulating {accum} "
            f"micro-batches so that each step trains one prompt with its {g} completions"
        )
    if (micro * spg) % g:
        raise ValueError(
            f"the generation batch ({micro} x {spg} = {micro * spg} completions) must be a multiple of "
            f"num_generations ({g}) so that it holds whole groups: change per_device_train_batch_size, "
            "gradient_accumulation_steps or num_generations"
        )
    if spg % accum:
        raise ValueError(
            f"steps_per_generation ({spg}) must be a multiple of gradient_accumulation_steps ({accum})"
        )
    return Geometry(micro, accum, spg, g, note)


def total_steps(config: GRPOConfig, geometry: Geometry, num_prompts: int) -> int:
    """Optimizer steps of the run: max_steps, or enough generations to pass num_train_epochs over the data."""
    if config.max_steps > 0:
        return config.max_steps
    generations = math.ceil(config.num_train_epochs * num_prompts / geometry.prompts_per_generation)
    return max(1, generations * geometry.optimizer_steps_per_generation * config.num_iterations)
