"""The simulator's settings: one dataclass, every field documented once (docs/simulator.md has the why).

This module imports no torch, so that `grposcope --help` can show the defaults without loading it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..errors import InputTypeError
from ..eval_settings import MAX_SEED

# The most steps one run may take. A default step takes 3-5 ms on one core, so 100,000 steps are minutes;
# 10**12 ran for ever (and its no-signal alarm flooded the terminal). The memory a run needs is checked on its
# own (sim/memory.py), so this is the only bound on the work that memory does not catch.
MAX_STEPS = 100_000


@dataclass
class SimConfig:
    """A simulated RLVR run: N prompts, a shared linear logit model, Bernoulli rewards, REINFORCE on `w`."""

    # who decides what trains: names in grposcope.sampling.SAMPLERS and core.advantages.ESTIMATORS
    sampler: str = "fixed"
    estimator: str = "grpo"
    # their keyword arguments, spelled as GRPOConfig's fields: e.g. {"exit_rule": "pos"}
    sampler_options: dict[str, Any] = field(default_factory=dict)
    estimator_options: dict[str, Any] = field(default_factory=dict)  # e.g. {"virtual_sample_alpha": 0.5}

    # the prompts: p_i = sigmoid(z_i + w . x_i)
    prompts: int = 10_000  # N training prompts
    heldout_frac: float = 0.1  # extra prompts (a fraction of N) never trained on: transfer through w
    features: int = 16  # k, the length of x_i and w
    shared_skill: float = 1.0  # mean of each coordinate of x_i * sqrt(k): how much one skill serves all
    difficulty_mean: float = -1.0  # mu of z_i ~ Normal(mu, sigma)
    difficulty_std: float = 2.5  # sigma: large gives the U-shaped spread of p seen in RLVR data

    # the run
    num_generations: int = 16  # G, samples per group
    batch_size: int = 256  # B, prompts handed to the sampler per step
    steps: int = 200
    lr: float = 0.05  # step size of w += lr * mean(A * (y - p) * x)
    seed: int = 0
    threads: int = 1  # torch threads while simulating: the tensors are small, and extra threads mostly wait

    # completion lengths (tokens), for the samplers' token accounting only: they never change a reward
    length_correct: float = 250.0  # median length of a correct completion
    length_wrong: float = 450.0  # median length of a wrong one (wrong answers ramble more)
    length_spread: float = 0.3  # std of log(length) around the median
    max_length: int = 1024  # completions are cut here, as a generator's max_new_tokens would

    def __post_init__(self) -> None:
        from ..core.advantages import ESTIMATORS
        from ..sampling import SAMPLERS

        SAMPLERS.get(self.sampler)  # an unknown name fails here, with the known ones
        ESTIMATORS.get(self.estimator)
        for name in ("prompts", "features", "steps", "batch_size", "max_length", "threads"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"{name} must be an int >= 1, got {value!r}")
        if self.steps > MAX_STEPS:
            raise ValueError(f"steps (--steps) must be at most {MAX_STEPS:,} (a default step takes a few ms; "
                             f"more steps take hours), got {self.steps:,}; e.g. --steps 2000")
        if not isinstance(self.num_generations, int) or self.num_generations < 2:
            raise ValueError(f"num_generations must be an int >= 2 (a group needs two samples to compare), "
                             f"got {self.num_generations!r}")
        if not isinstance(self.seed, int) or not 0 <= self.seed <= MAX_SEED:
            raise ValueError(f"seed must be an int in [0, {MAX_SEED}], got {self.seed!r}")
        for name in ("shared_skill", "difficulty_mean", "difficulty_std", "length_spread"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise ValueError(f"{name} must be a finite number, got {value!r}")
        if self.batch_size > self.prompts:
            raise ValueError(f"batch_size={self.batch_size} is larger than prompts={self.prompts}: a batch "
                             "would hold a prompt twice; lower batch_size or raise prompts")
        positive = {"lr": self.lr, "length_correct": self.length_correct, "length_wrong": self.length_wrong}
        for name, value in positive.items():
            if not (math.isfinite(value) and value > 0):
                raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
        if not 0 < self.heldout_frac <= 1:
            raise ValueError(f"heldout_frac must be in (0, 1] (held-out prompts per training prompt), got "
                             f"{self.heldout_frac!r}")
        if not self.difficulty_std >= 0 or not self.length_spread >= 0:
            raise ValueError("difficulty_std and length_spread must be >= 0")
        for name in ("sampler_options", "estimator_options"):
            if not isinstance(getattr(self, name), dict):
                raise InputTypeError(f"{name} must be a dict of keyword arguments, got {getattr(self, name)!r}")
        # an old keyword (core/registry.py, RENAMED) warns and is stored under its config field's name
        self.sampler_options = SAMPLERS.current(self.sampler, self.sampler_options)
        self.estimator_options = ESTIMATORS.current(self.estimator, self.estimator_options)

    @property
    def heldout(self) -> int:
        """Held-out prompts: at least one."""
        return max(1, round(self.heldout_frac * self.prompts))

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def defaults() -> dict[str, Any]:
    """Every field's default, for the command line's help (one place defines them: the dataclass)."""
    from dataclasses import MISSING, fields

    return {f.name: f.default for f in fields(SimConfig) if f.default is not MISSING}
