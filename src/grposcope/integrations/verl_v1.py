"""grposcope inside verl 0.9.1's v1 trainer (`trainer.use_v1=true`, verl's default since 0.9.0).

grposcope.integrations.verl patches `verl.trainer.ppo.v1.trainer_base.PPOTrainer` when verl imports that module
(in the TaskRunner; never in the workers, which do not import it). Five of its methods are wrapped, once:

- `_build_replay_buffer`: with `algorithm.grposcope.sampler` set, builds grposcope's SampledReplayBuffer
  (verl_v1_sampling) in place of verl's, after refusing the setups it cannot serve; else verl's own.
- `_add_batch_to_generate`: with that buffer, hands the dataloader's prompts to it instead of the agent loop.
- `_compute_advantage`: then adds the estimator's metrics of that call (`avspo/*`, `collapse/acr_post`, the ACR
  family of the groups it saw) to the iteration's metrics, where verl logs them. Keys already there win: the
  sampler's and the metrics buffer's ACR, measured on the groups as drawn.
- `_save_checkpoint` / `_load_checkpoint`: write grposcope's state (estimators, sampler, monitor) into each
  `global_step_<n>` folder and read it from the folder verl resumes from, as in the legacy trainer, so no
  checkpoint callback needs naming (GrposcopeCheckpointCallback still works, and saves the same file).
- `init`: before verl builds its workers, settles the no-signal skip for them (verl.forward_skip).
"""

from __future__ import annotations

import functools
import os
from types import ModuleType
from typing import Any

from . import verl_run as plugin

TRAINER = "verl.trainer.ppo.v1.trainer_base"  # PPOTrainer, the base of verl's v1 trainers


def sampler_buffer(trainer: Any) -> Any:
    """grposcope's SampledReplayBuffer for the trainer's config, with verl's buffer arguments (v1/trainer_base.py,
    _build_replay_buffer); fails before the first step on a setup the samplers cannot serve."""
    from . import verl_sampling, verl_v1_sampling

    config = trainer.config
    name, params = verl_sampling.checked_sampler(config)
    v1 = config.trainer.v1
    if trainer.trainer_mode != "sync":
        raise ValueError(f"algorithm.{plugin.CONFIG_KEY}.{plugin.SAMPLER_KEY} needs trainer.v1.trainer_mode=sync "
                         f"(found {trainer.trainer_mode}): in the async modes generation runs ahead of the trainer, so "
                         "a sampler's later rounds would draw from a policy the step does not train. Use sync, or "
                         "verl's algorithm.filter_groups (DAPO's dynamic sampling), which the async buffers run")
    filter_groups = config.algorithm.get("filter_groups", None)
    if filter_groups is not None and filter_groups.get("enable", False):
        raise ValueError(f"algorithm.filter_groups and algorithm.{plugin.CONFIG_KEY}.{plugin.SAMPLER_KEY} both "
                         "choose which groups train: keep one")
    custom = v1.sampler.get("custom_sampler", None)
    if custom is not None and custom.get("path") and custom.get("name"):
        raise ValueError(f"trainer.v1.sampler.custom_sampler ({custom.get('name')}) and algorithm."
                         f"{plugin.CONFIG_KEY}.{plugin.SAMPLER_KEY} both replace verl's replay buffer: drop the "
                         "custom sampler (grposcope's sampler logs the collapse metrics itself)")
    reward_model = config.reward.reward_model
    if reward_model.get("enable", False) and not reward_model.get("enable_resource_pool", False):
        raise ValueError(f"algorithm.{plugin.CONFIG_KEY}.{plugin.SAMPLER_KEY} needs each completion's reward while "
                         "it samples: use a rule-based reward, or give the reward model its own resource pool "
                         "(reward.reward_model.enable_resource_pool=True); a colocated one scores after sampling")
    section = plugin.grposcope_section(config.algorithm)
    buffer = verl_v1_sampling.SampledReplayBuffer(
        trainer_mode=trainer.trainer_mode, trainer_config=v1.get(trainer.trainer_mode, {}),
        max_off_policy_threshold=v1.sampler.max_off_policy_threshold,
        max_off_policy_strategy=v1.sampler.max_off_policy_strategy, sampler_kwargs=v1.sampler.sampler_kwargs,
        refill_fn=trainer._add_prompts_to_generate,
        trainer=trainer, sampler=verl_sampling.make_sampler(name, params), name=name,
        g=int(config.actor_rollout_ref.rollout.n),
        success_threshold=float(section.get("success_threshold", plugin.SHARED_FIELDS["success_threshold"])),
        run_steps=config.trainer.get("total_training_steps", None))
    plugin.attach_state(plugin.SAMPLER_STATE, buffer)
    return buffer


def advantage_metrics(metrics: dict[str, Any]) -> None:
    """The grposcope estimator's metrics of its last call, into `metrics` where no key is there yet."""
    for key, value in plugin.latest_metrics().items():
        metrics.setdefault(key, value)


def patch(module: ModuleType) -> None:
    """Wraps module.PPOTrainer's methods, once (module docstring)."""
    cls = module.PPOTrainer
    if getattr(cls._build_replay_buffer, "_grposcope", False):
        return
    build, hand, advantage = cls._build_replay_buffer, cls._add_batch_to_generate, cls._compute_advantage
    save, load, init = cls._save_checkpoint, cls._load_checkpoint, cls.init

    @functools.wraps(build)
    def build_replay_buffer(self: Any) -> Any:
        if plugin.grposcope_section(self.config.algorithm).get(plugin.SAMPLER_KEY) is None:
            return build(self)
        return sampler_buffer(self)

    @functools.wraps(hand)
    def add_batch_to_generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        from .verl_v1_sampling import SampledReplayBuffer

        if not isinstance(getattr(self, "replay_buffer", None), SampledReplayBuffer):
            return hand(self, *args, **kwargs)
        self.replay_buffer.hand_over(self._next_train_batch())

    @functools.wraps(advantage)
    def compute_advantage(self: Any, batch: Any, metrics: dict) -> Any:
        out = advantage(self, batch, metrics=metrics)
        if plugin.uses_grposcope(self.config):
            advantage_metrics(metrics)
        return out

    @functools.wraps(save)
    def save_with_state(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = save(self, *args, **kwargs)
        plugin.save_state(os.path.join(self.config.trainer.default_local_dir, f"global_step_{self.global_steps}"))
        return out

    @functools.wraps(load)
    def load_with_state(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = load(self, *args, **kwargs)
        folder = plugin.resume_folder(self.config.trainer) if self.global_steps > 0 else None  # > 0: it resumed
        if folder is not None:
            plugin.load_state(folder, quiet=not plugin.uses_grposcope(self.config))
        return out

    @functools.wraps(init)
    def init_with_skip(self: Any, *args: Any, **kwargs: Any) -> Any:
        plugin.forward_skip(self.config)
        return init(self, *args, **kwargs)

    wrapped = (build_replay_buffer, add_batch_to_generate, compute_advantage, save_with_state, load_with_state,
               init_with_skip)
    for method in wrapped:
        method._grposcope = True  # type: ignore[union-attr]  # a marker: wrapped once
    (cls._build_replay_buffer, cls._add_batch_to_generate, cls._compute_advantage, cls._save_checkpoint,
     cls._load_checkpoint, cls.init) = wrapped


__all__ = ["TRAINER", "advantage_metrics", "patch", "sampler_buffer"]
