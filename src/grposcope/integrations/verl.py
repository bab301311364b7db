"""grposcope's advantage estimators inside verl 0.9.1: `algorithm.adv_estimator=avspo`.

Importing this module registers, in verl's registry (verl/trainer/ppo/core_algos.py, `register_adv_est`), the
estimators verl lacks, under their own names:

    avspo           AVSPO, "Advantage Collapse in Group Relative Policy Optimization" (arXiv 2605.21125)
    grposcope_pool  Reinforce-Ada's pool baseline (arXiv 2510.04996); verl passes no pool, so the pool is the group
    grposcope_grpo  GRPO (arXiv 2402.03300) with float64 group statistics: exactly 0 on a group of equal rewards,
                    where verl's `grpo` (float32, epsilon 1e-6) leaves up to |A| = 0.106 on partial-credit rewards

verl's own grpo, rloo, Dr. GRPO (`norm_adv_by_std_in_grpo=False`) and DAPO's group filtering
(`algorithm.filter_groups`) are left to verl. Options come from `algorithm.grposcope.<field>`, with the field
names of grposcope's config (`+algorithm.grposcope.virtual_sample_alpha=0.5` on verl's command line: the `+`
because verl's config does not declare the key). verl calls the estimator inside its Ray TaskRunner, not in the
launching script, so the import must happen there: VERL_USE_EXTERNAL_MODULES, a "verl.plugins" entry point, or
naming GrposcopeCheckpointCallback in the config (docs/integrations.md, "verl").

Each estimator is built once per process and kept (AVSPO carries state from step to step). Its state survives
verl's checkpoints through `GrposcopeCheckpointCallback` (`trainer.checkpoint_callback_class`, v1 trainer only).
A verl estimator can return no metrics: each call's (`collapse/*` of the groups it saw, `avspo/*`) are kept in
`latest_metrics()`, in the TaskRunner; the ACR family reaches verl's logged metrics through the replay buffer of
grposcope.integrations.verl_metrics. Row grouping, padding rows, uneven groups: grposcope.integrations.verl_groups.

With GRPOSCOPE_SKIP_NO_SIGNAL_STEPS=1 in the workers' environment, the FSDP actor takes no optimizer step when
every gradient is exactly 0 (grposcope.integrations.verl_skip; opt-in in verl).

Limits: AVSPO takes one state update per call, and verl's v1 trainer calls compute_advantage once per
`parameter_sync_step` iteration (1 by default), not once per global step. The legacy trainer
(`trainer.use_v1=False`) calls no checkpoint callback: there AVSPO restarts from its initial state on resume.
In multi-turn agent loops verl's own grpo keeps only each session's last output (v1/utils.py,
compute_advantage_for_multi_trajectories); verl hands any other estimator every output, so these group them all.
"""

from __future__ import annotations

import logging
import os
from importlib import metadata
from typing import Any, Callable

import torch

from ..core.advantages import ESTIMATORS, AdvantageEstimator
from . import verl_skip
from .verl_groups import group_rows, run_estimator, verl_name

TESTED_VERL = "0.9.1"
CONFIG_KEY = "grposcope"  # algorithm.grposcope.<field>
STATE_FILE = "grposcope_estimators.pt"  # beside verl's data.pt in each global_step_<n> folder


# verl's name -> grposcope's registry name: the estimators registered with "verl" among their hosts
NAMES = {verl_name(name): name for name in ESTIMATORS.names_in("verl")}
SHARED_FIELDS = {"success_threshold": 0.5}  # read by the collapse metrics of every estimator

logger = logging.getLogger("grposcope")


def _require_verl() -> None:
    """Fails with the fix when verl is missing or is a version this adapter was not tested with."""
    try:
        found = metadata.version("verl")
    except metadata.PackageNotFoundError:
        raise ImportError(f"grposcope.integrations.verl needs verl: pip install verl=={TESTED_VERL} (in its own "
                          "virtual environment: verl pins transformers<5.11; scripts/test_verl.sh sets one up)"
                          ) from None
    if found != TESTED_VERL:
        raise ImportError(f"grposcope.integrations.verl is tested with verl {TESTED_VERL} only, found verl {found}: "
                          f"pip install verl=={TESTED_VERL}, or port the adapter (its verl calls are listed in "
                          "docs/integrations.md)")


_require_verl()

from verl.trainer.ppo import core_algos  # noqa: E402
from verl.trainer.ppo.checkpoint_callback import CheckpointCallback  # noqa: E402

# ---------------------------------------------------------------------------------------------------------
# Options: algorithm.grposcope.<field> -> the estimator's keyword argument of the same name


def config_fields(name: str) -> list[str]:
    """The config fields that verl estimator `name` reads from algorithm.grposcope: its keyword arguments."""
    core = NAMES[name]
    return [o.field for o in ESTIMATORS.options(core)] + list(ESTIMATORS.reads(core))


def _section(config: Any) -> dict[str, Any]:
    """algorithm.grposcope as a plain dict ({} when absent). config: verl's algorithm DictConfig, a dict, an
    AlgoConfig dataclass (which has no such field) or None."""
    if config is None:
        return {}
    section = config.get(CONFIG_KEY) if hasattr(config, "get") else getattr(config, CONFIG_KEY, None)
    if section is None:
        return {}
    try:
        from omegaconf import OmegaConf

        if OmegaConf.is_config(section):
            section = OmegaConf.to_container(section, resolve=True)
    except ImportError:  # verl depends on omegaconf; a plain dict needs nothing
        pass
    if not isinstance(section, dict):
        raise ValueError(f"algorithm.{CONFIG_KEY} must be a mapping of grposcope options, got {section!r}")
    return section


def estimator_params(name: str, config: Any) -> tuple[dict[str, Any], float]:
    """The keyword arguments of estimator `name` and the success threshold, from algorithm.grposcope.

    An option the estimator does not read fails with the list of those it does (a typo, or an AVSPO option
    set while another estimator is chosen, would otherwise be silently ignored)."""
    section = _section(config)
    fields = config_fields(name)
    unknown = sorted(set(section) - set(fields) - set(SHARED_FIELDS))
    if unknown:
        known = ", ".join(sorted(set(fields) | set(SHARED_FIELDS)))
        raise ValueError(f"algorithm.{CONFIG_KEY}.{unknown[0]} is not an option of advantage estimator {name!r}; "
                         f"it reads: {known}")
    params = {key: _plain(value) for key, value in section.items() if key in fields}
    threshold = section.get("success_threshold", SHARED_FIELDS["success_threshold"])
    return params, float(threshold)


def _plain(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value  # virtual_reward_range is a pair


# ---------------------------------------------------------------------------------------------------------
# One estimator per name and process, kept across steps


class Slot:
    """The estimator behind one verl name in this process: built on first use, rebuilt only if its options
    change, with a state to load when it is built (a resumed run) and the metrics of its last call."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.reset()

    def reset(self) -> None:
        self.estimator: AdvantageEstimator | None = None
        self.params: dict[str, Any] | None = None
        self.pending: dict[str, Any] | None = None
        self.metrics: dict[str, float] = {}

    def get(self, params: dict[str, Any]) -> AdvantageEstimator:
        if self.estimator is None or params != self.params:
            if self.estimator is not None:
                logger.warning("algorithm.%s changed: advantage estimator %r starts again from its initial state",
                               CONFIG_KEY, self.name)
            self.estimator, self.params = ESTIMATORS.make(NAMES[self.name], **params), dict(params)
            if self.pending is not None:
                self.estimator.load_state_dict(self.pending)
                self.pending = None
        return self.estimator

    def state_dict(self) -> dict[str, Any] | None:
        return self.estimator.state_dict() if self.estimator is not None else self.pending

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.estimator is not None:
            self.estimator.load_state_dict(state)
        else:
            self.pending = state


def make_verl_estimator(name: str) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """verl's estimator signature around grposcope's estimator `name`; the function carries its Slot."""
    slot = Slot(name)

    def estimate(token_level_rewards: torch.Tensor, response_mask: torch.Tensor, index: Any = None,
                 config: Any = None, **kwargs: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """token_level_rewards, response_mask (N, T); index (N,) prompt uids -> (advantages, returns) (N, T)."""
        if index is None:
            raise ValueError(f"advantage estimator {name!r} needs the prompt uids (verl's non_tensor_batch['uid'])")
        params, threshold = estimator_params(name, config)
        # float64: a score spread over several tokens sums to the same value in any order
        scores = token_level_rewards.sum(dim=-1, dtype=torch.float64)  # (N,)
        groups = group_rows(index, scores.shape[0])
        adv, slot.metrics = run_estimator(slot.get(params), scores, groups, threshold)  # (N,)
        advantages = (adv.unsqueeze(-1) * response_mask).to(token_level_rewards.dtype)  # (N, T)
        return advantages, advantages  # returns = advantages, as verl's grpo

    estimate.__name__ = f"grposcope_{NAMES[name]}_advantage"
    estimate.__qualname__ = estimate.__name__
    estimate.slot = slot  # type: ignore[attr-defined]
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


def _slots() -> dict[str, Slot]:
    return {name: core_algos.get_adv_estimator_fn(name).slot for name in NAMES}


def latest_metrics() -> dict[str, float]:
    """The metrics of the last call of each grposcope estimator in this process: `collapse/acr`,
    `collapse/acr_all_correct`, `collapse/acr_all_wrong`, `collapse/acr_post`, `avspo/*`, `grposcope/*`."""
    merged: dict[str, float] = {}
    for slot in _slots().values():
        merged.update(slot.metrics)
    return merged


def state_dict() -> dict[str, Any]:
    """{verl name: state} of the estimators built (or waiting to be) in this process."""
    return {name: s for name, slot in _slots().items() if (s := slot.state_dict()) is not None}


def load_state_dict(states: dict[str, Any]) -> None:
    for name, state in states.items():
        _slots()[name].load_state_dict(state)


def reset() -> None:
    """Forgets every estimator and state of this process (tests; a new run in the same process)."""
    for slot in _slots().values():
        slot.reset()


register()
if verl_skip.enabled():  # GRPOSCOPE_SKIP_NO_SIGNAL_STEPS=1: no optimizer step without signal (opt-in)
    verl_skip.install()


# ---------------------------------------------------------------------------------------------------------
# Checkpoints: trainer.checkpoint_callback_class=grposcope.integrations.verl.GrposcopeCheckpointCallback


class GrposcopeCheckpointCallback(CheckpointCallback):
    """Saves the estimators' state beside each verl checkpoint and loads it when verl resumes.

    verl's v1 trainer builds this in its TaskRunner (so naming it in the config also imports this module where
    the estimators run) and calls `on_save` after each checkpoint. verl has no load hook, so the constructor
    finds the folder verl will resume from, by verl's rules (`trainer.resume_mode`: auto, resume_path, disable),
    and loads the state from there before the first step. Subclass it to add your own `on_save`.
    """

    def __init__(self, config: Any = None) -> None:
        super().__init__(config=config)
        folder = resume_folder(config.trainer) if config is not None else None
        if folder is None:
            return
        path = os.path.join(folder, STATE_FILE)
        if os.path.exists(path):
            load_state_dict(torch.load(path, weights_only=True))
            logger.info("grposcope: estimator state loaded from %s", path)
        else:
            logger.warning("grposcope: %s has no %s; the estimators start from their initial state", folder,
                           STATE_FILE)

    def on_save(self, trainer: Any, global_step: int, checkpoint_dir: str, async_save: bool = False,
                **kwargs: Any) -> None:
        states = state_dict()
        if states:
            os.makedirs(checkpoint_dir, exist_ok=True)
            torch.save(states, os.path.join(checkpoint_dir, STATE_FILE))


def resume_folder(trainer_config: Any) -> str | None:
    """The global_step_<n> folder verl's v1 trainer resumes from, or None (v1/trainer_base.py, _load_checkpoint)."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    mode = trainer_config.get("resume_mode", "auto")
    if mode == "auto":
        return find_latest_ckpt_path(os.path.abspath(trainer_config.default_local_dir))
    if mode == "resume_path":
        return os.path.abspath(trainer_config.resume_from_path)
    return None


__all__ = [
    "CONFIG_KEY",
    "GrposcopeCheckpointCallback",
    "NAMES",
    "TESTED_VERL",
    "config_fields",
    "estimator_params",
    "latest_metrics",
    "load_state_dict",
    "register",
    "reset",
    "state_dict",
]
