"""grposcope's advantage estimators and samplers inside verl 0.9.1: `algorithm.adv_estimator=avspo`.

Importing this module registers, in verl's registry (verl/trainer/ppo/core_algos.py, `register_adv_est`), the
estimators verl lacks, under their own names:

    avspo           AVSPO, "Advantage Collapse in Group Relative Policy Optimization" (arXiv 2605.21125)
    grposcope_pool  Reinforce-Ada's pool baseline (arXiv 2510.04996): every reward a grposcope sampler drew for
                    the prompt this step (below); without a sampler verl passes no pool, so the pool is the group
    grposcope_grpo  GRPO (arXiv 2402.03300) with float64 group statistics: exactly 0 on a group of equal rewards,
                    where verl's `grpo` (float32, epsilon 1e-6) leaves up to |A| = 0.106 on partial-credit rewards

verl's own grpo, rloo, Dr. GRPO (`norm_adv_by_std_in_grpo=False`) and DAPO's group filtering
(`algorithm.filter_groups`) are left to verl. Options come from `algorithm.grposcope.<field>`, with the field
names of grposcope's config (`+algorithm.grposcope.virtual_sample_alpha=0.5` on verl's command line: the `+`
because verl's config does not declare the key). verl calls the estimator inside its Ray TaskRunner, not in the
launching script, so the import must happen there: VERL_USE_EXTERNAL_MODULES, a "verl.plugins" entry point, or
naming GrposcopeCheckpointCallback in the config (docs/integrations.md, "verl").

Samplers, in both of verl's trainers: `+algorithm.grposcope.sampler=reinforce_ada` (or `budgeted`) with the
sampler's options in the same section. When the TaskRunner imports a trainer's module, this module wraps its
methods (verl_hooks.when_imported): the legacy trainer's (verl/trainer/ppo/ray_trainer.py, `trainer.use_v1=False`)
`init_workers` then wraps the rollout manager it built (verl_sampling), `_save_checkpoint` and
`_load_checkpoint` carry grposcope's state; the v1 trainer's (v1/trainer_base.py, verl's default) are wrapped by
verl_v1, whose replay buffer runs the sampler (verl_v1_sampling). verl hands an estimator no pool: the sampler's
side records each prompt's pool by uid in this process (verl_sampling.SamplerStep), and the estimators read it
there: verl computes advantages there too.

Each estimator is built once per process and kept (AVSPO carries state from step to step). Its state, the
sampler's and the collapse monitor's are saved as STATE_FILE in each global_step_<n> folder and loaded on
resume, by the wrapped `_save_checkpoint` / `_load_checkpoint` of either trainer (`GrposcopeCheckpointCallback`
does the same in the v1 trainer). A verl estimator can return no metrics: each call's (`collapse/*` of the
groups it saw, `avspo/*`) are kept in `latest_metrics()`, in the TaskRunner; they reach verl's logged metrics
through the wrapped `_compute_advantage` (v1), or with a sampler through the logger hook of
grposcope.integrations.verl_sampling (legacy). Row grouping, padding rows,
uneven groups: grposcope.integrations.verl_groups.

No optimizer step without signal: `algorithm.grposcope.skip_no_signal_steps` (on by default for a run that uses
a grposcope estimator or sampler, left to verl otherwise: `skip_setting`), handed to the workers' environment
when verl builds them (`forward_skip`), where the FSDP actor then takes no optimizer step when every gradient
is exactly 0 (grposcope.integrations.verl_skip).

Limits: AVSPO takes one state update per call, and verl's v1 trainer calls compute_advantage once per
`parameter_sync_step` iteration (1 by default), not once per global step. In the v1 trainer the samplers need
`trainer.v1.trainer_mode=sync` (verl_v1_sampling).
In multi-turn agent loops verl's own grpo keeps only each session's last output (v1/utils.py,
compute_advantage_for_multi_trajectories); verl hands any other estimator every output, so these group them all.
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any, Callable

import torch

from ..core.registry import dotted
from . import verl_skip
from .verl_groups import group_rows, run_estimator
from .verl_hooks import when_imported

# The keys, state and settings the adapter's modules share (verl_run checks verl's version when imported), named
# here too as this module's public API
from .verl_run import (  # noqa: F401
    CONFIG_KEY,
    NAMES,
    SAMPLER_KEY,
    SAMPLER_STATE,
    SKIP_KEY,
    STATE_FILE,
    TESTED_VERL,
    add_plugin,
    attach_state,
    config_fields,
    estimator_params,
    forward_skip,
    grposcope_section,
    latest_metrics,
    load_state,
    load_state_dict,
    reset,
    resume_folder,
    save_state,
    skip_setting,
    slot,
    state_dict,
    uses_grposcope,
)

# isort: split
from verl.trainer.ppo import core_algos  # after verl_run's version check
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback

LEGACY_TRAINER = "verl.trainer.ppo.ray_trainer"  # RayPPOTrainer, the trainer of trainer.use_v1=False
V1_TRAINER = "verl.trainer.ppo.v1.trainer_base"  # PPOTrainer, the base of trainer.use_v1=True's trainers

# ---------------------------------------------------------------------------------------------------------
# One estimator per name and process, kept across steps


def make_verl_estimator(name: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """verl's estimator signature around grposcope's estimator `name`; the function carries its Slot."""
    held = slot(name)

    def estimate(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                 config: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """token_level_rewards, response_mask (N, T); index (N,) prompt uids -> (advantages, returns) (N, T)."""
        if index is None:
            raise ValueError(f"advantage estimator {name!r} needs the prompt uids (verl's non_tensor_batch['uid'])")
        params, threshold = estimator_params(name, config)
        # float64: a score spread over several tokens sums to the same value in any order
        scores = token_level_rewards.sum(dim=-1, dtype=torch.float64)  # (N,)
        step = None
        if grposcope_section(config).get(SAMPLER_KEY) is not None:  # the sampler's pools, as_drawn and filler rows
            from . import verl_sampling

            step = verl_sampling.recorded_step(index)
            index = step.relabel(index)
        groups = group_rows(index, scores.shape[0])
        pool_of = step.pools(groups, index) if step is not None else None
        adv, held.metrics = run_estimator(held.get(params), scores, groups, threshold, pool_of=pool_of,
                                          as_drawn=step.as_drawn if step is not None else None)  # (N,)
        advantages = (adv.unsqueeze(-1) * response_mask).to(token_level_rewards.dtype)  # (N, T)
        return advantages, advantages  # returns = advantages, as verl's grpo

    estimate.__name__ = f"grposcope_{NAMES[name].replace('.', '_').replace(':', '_')}_advantage"
    estimate.__qualname__ = estimate.__name__
    estimate.slot = held  # type: ignore[attr-defined]
    return estimate


def register() -> None:
    """Registers every name of NAMES in verl's registry. Again (a re-import): keeps the functions already
    there, so that their estimators and state stay the ones verl calls. A name verl or another plug-in took
    for a different function fails."""
    for name in NAMES:
        current = core_algos.ADV_ESTIMATOR_REGISTRY.get(name)
        if current is not None and hasattr(current, "slot"):
            continue
        if current is not None:
            raise ValueError(f"verl already has an advantage estimator named {name!r} ({current!r}); grposcope "
                             "does not replace it")
        core_algos.register_adv_est(name)(make_verl_estimator(name))


def get_adv_estimator_fn(name_or_enum: Any) -> Callable[..., Any]:
    """verl's lookup of an advantage estimator by name (both trainers call it through core_algos), which first
    registers a grposcope plug-in named by its dotted path: algorithm.adv_estimator=mypkg.estimators:MyEstimator
    (grposcope.components.plugins; its options in algorithm.grposcope.advantage_estimator_kwargs)."""
    name = getattr(name_or_enum, "value", name_or_enum)
    if dotted(name) and name not in core_algos.ADV_ESTIMATOR_REGISTRY:
        add_plugin(name)
        core_algos.register_adv_est(name)(make_verl_estimator(name))
    return _verl_lookup(name_or_enum)


register()
# verl's own lookup, kept under the wrapper: a re-import of this module wraps verl's, not its own wrapper
_verl_lookup = getattr(core_algos.get_adv_estimator_fn, "verl_lookup", core_algos.get_adv_estimator_fn)
get_adv_estimator_fn.verl_lookup = _verl_lookup  # type: ignore[attr-defined]
core_algos.get_adv_estimator_fn = get_adv_estimator_fn
if verl_skip.enabled():  # GRPOSCOPE_SKIP_NO_SIGNAL_STEPS=1 in this process: a worker (verl.forward_skip sets it)
    verl_skip.install()


# ---------------------------------------------------------------------------------------------------------
# Checkpoints: trainer.checkpoint_callback_class=grposcope.integrations.verl.GrposcopeCheckpointCallback


class GrposcopeCheckpointCallback(CheckpointCallback):
    """Saves grposcope's state beside each verl checkpoint and loads it when verl resumes (v1 trainer).

    verl's v1 trainer builds this in its TaskRunner (so naming it in the config also imports this module where
    the estimators run) and calls `on_save` after each checkpoint. verl has no load hook, so the constructor
    finds the folder verl will resume from, by verl's rules (`trainer.resume_mode`: auto, resume_path, disable),
    and loads the state from there before the first step. Subclass it to add your own `on_save`. Since the v1
    trainer's own `_save_checkpoint` / `_load_checkpoint` are wrapped too (verl_v1), naming it is no longer
    needed; it still imports this module in the TaskRunner.
    """

    def __init__(self, config: Any = None) -> None:
        super().__init__(config=config)
        folder = resume_folder(config.trainer) if config is not None else None
        if folder is not None:
            load_state(folder)

    def on_save(self, trainer: Any, global_step: int, checkpoint_dir: str, async_save: bool = False,
                **kwargs: Any) -> None:
        save_state(checkpoint_dir)


# ---------------------------------------------------------------------------------------------------------
# verl's legacy trainer (trainer.use_v1=False): the sampler around its rollout manager, the state across its
# checkpoints. Patched when verl imports the trainer's module, not here: importing it costs seconds in every
# process that imports verl (the workers too), and this module is imported by `import verl` itself.


def patch_legacy_trainer(module: ModuleType) -> None:
    """Wraps three methods of module.RayPPOTrainer, once: `init_workers` then puts the configured sampler
    around the rollout manager it built (verl_sampling.install); `_save_checkpoint` then writes STATE_FILE
    into the step's folder; `_load_checkpoint` then reads it from the folder verl resumed from."""
    cls = module.RayPPOTrainer
    if getattr(cls.init_workers, "_grposcope", False):
        return
    init_workers, save, load = cls.init_workers, cls._save_checkpoint, cls._load_checkpoint

    @functools.wraps(init_workers)
    def init_workers_and_sampler(self: Any, *args: Any, **kwargs: Any) -> Any:
        forward_skip(self.config)  # before the workers exist: they read it at import
        out = init_workers(self, *args, **kwargs)
        if grposcope_section(self.config.algorithm).get(SAMPLER_KEY) is not None:
            from . import verl_sampling

            verl_sampling.install(self)
        return out

    @functools.wraps(save)
    def save_with_state(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = save(self, *args, **kwargs)
        save_state(os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}"))
        return out

    @functools.wraps(load)
    def load_with_state(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = load(self, *args, **kwargs)
        folder = resume_folder(self.config.trainer) if self.global_steps > 0 else None  # > 0: it resumed
        if folder is not None:
            load_state(folder, quiet=not uses_grposcope(self.config))
        return out

    for method in (init_workers_and_sampler, save_with_state, load_with_state):
        method._grposcope = True  # type: ignore[attr-defined]
    cls.init_workers, cls._save_checkpoint, cls._load_checkpoint = (init_workers_and_sampler, save_with_state,
                                                                     load_with_state)


def patch_v1_trainer(module: ModuleType) -> None:
    from . import verl_v1  # its own module: the v1 trainer's samplers need TransferQueue

    verl_v1.patch(module)


when_imported(LEGACY_TRAINER, patch_legacy_trainer)
when_imported(V1_TRAINER, patch_v1_trainer)


__all__ = [
    "CONFIG_KEY",
    "GrposcopeCheckpointCallback",
    "NAMES",
    "SAMPLER_KEY",
    "SAMPLER_STATE",
    "SKIP_KEY",
    "STATE_FILE",
    "TESTED_VERL",
    "attach_state",
    "config_fields",
    "estimator_params",
    "latest_metrics",
    "load_state",
    "load_state_dict",
    "forward_skip",
    "patch_legacy_trainer",
    "patch_v1_trainer",
    "register",
    "reset",
    "save_state",
    "skip_setting",
    "state_dict",
]
