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
import logging
import os
import sys
from importlib import metadata
from types import ModuleType
from typing import Any, Callable

import torch

from ..core.advantages import ESTIMATORS, AdvantageEstimator
from ..sampling import SAMPLERS
from . import verl_skip
from .verl_groups import group_rows, run_estimator, verl_name
from .verl_hooks import when_imported

TESTED_VERL = "0.9.1"
CONFIG_KEY = "grposcope"  # algorithm.grposcope.<field>
STATE_FILE = "grposcope_estimators.pt"  # beside verl's data.pt in each global_step_<n> folder
SAMPLER_KEY = "sampler"  # algorithm.grposcope.sampler: the sampler wrapped around verl's rollout manager
SAMPLER_STATE = "grposcope_sampler"  # the sampler's (and monitor's) entry in STATE_FILE
LEGACY_TRAINER = "verl.trainer.ppo.ray_trainer"  # RayPPOTrainer, the trainer of trainer.use_v1=False
V1_TRAINER = "verl.trainer.ppo.v1.trainer_base"  # PPOTrainer, the base of trainer.use_v1=True's trainers


# verl's name -> grposcope's registry name: the estimators registered with "verl" among their hosts
NAMES = {verl_name(name): name for name in ESTIMATORS.names_in("verl")}
SHARED_FIELDS = {"success_threshold": 0.5}  # read by the collapse metrics of every estimator
SKIP_KEY = "skip_no_signal_steps"  # algorithm.grposcope.skip_no_signal_steps: the workers' no-signal skip
RUN_FIELDS = (SKIP_KEY,)  # keys of algorithm.grposcope that belong to the run, not to an estimator or sampler

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


def grposcope_section(config: Any) -> dict[str, Any]:
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


def sampler_fields(section: dict[str, Any]) -> set[str]:
    """The keys of algorithm.grposcope that belong to its sampler: `sampler` and the options and run-wide
    fields the named sampler reads (empty without a sampler; an unknown name fails with the known ones)."""
    name = section.get(SAMPLER_KEY)
    if name is None:
        return set()
    return {SAMPLER_KEY, *(o.field for o in SAMPLERS.options(name)), *SAMPLERS.reads(name)}


def estimator_params(name: str, config: Any) -> tuple[dict[str, Any], float]:
    """The keyword arguments of estimator `name` and the success threshold, from algorithm.grposcope.

    An option neither the estimator nor the configured sampler reads fails with the list of those they do (a
    typo, or an AVSPO option set while another estimator is chosen, would otherwise be silently ignored)."""
    section = grposcope_section(config)
    fields = config_fields(name)
    theirs = sampler_fields(section)
    unknown = sorted(set(section) - set(fields) - set(SHARED_FIELDS) - set(RUN_FIELDS) - theirs)
    if unknown:
        known = ", ".join(sorted(set(fields) | set(SHARED_FIELDS) | set(RUN_FIELDS) | theirs))
        raise ValueError(f"algorithm.{CONFIG_KEY}.{unknown[0]} is not an option of advantage estimator {name!r}; "
                         f"it reads: {known}")
    check_ranges(section)
    params = {key: plain_value(value) for key, value in section.items() if key in fields}
    threshold = section.get("success_threshold", SHARED_FIELDS["success_threshold"])
    return params, float(threshold)


def check_ranges(section: dict[str, Any]) -> None:
    """grposcope's option ranges (trainer/config_checks.RANGES, the one table) on algorithm.grposcope's keys.
    Imported here, not at the top: the workers import this module and never read options."""
    from ..trainer.config_checks import check_options

    check_options(section)


def plain_value(value: Any) -> Any:
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
        step = None
        if grposcope_section(config).get(SAMPLER_KEY) is not None:  # the sampler's pools, as_drawn and filler rows
            from . import verl_sampling  # it imports this module

            step = verl_sampling.recorded_step(index)
            index = step.relabel(index)
        groups = group_rows(index, scores.shape[0])
        pool_of = step.pools(groups, index) if step is not None else None
        adv, slot.metrics = run_estimator(slot.get(params), scores, groups, threshold, pool_of=pool_of,
                                          as_drawn=step.as_drawn if step is not None else None)  # (N,)
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


# States beside the estimators' in STATE_FILE: the sampler wrapper's (verl_sampling), under SAMPLER_STATE
_holders: dict[str, Any] = {}  # key -> an object with state_dict() / load_state_dict()
_waiting: dict[str, Any] = {}  # states read before their holder was attached


def attach_state(key: str, holder: Any) -> None:
    """Saves and loads `holder`'s state with the estimators', under `key`; a state read earlier loads now."""
    _holders[key] = holder
    if key in _waiting:
        holder.load_state_dict(_waiting.pop(key))


def state_dict() -> dict[str, Any]:
    """{verl name: state} of the estimators built (or waiting to be) in this process, and {key: state} of the
    attached holders (the sampler's and the collapse monitor's under SAMPLER_STATE)."""
    states = {name: s for name, slot in _slots().items() if (s := slot.state_dict()) is not None}
    states.update(_waiting)
    states.update({key: holder.state_dict() for key, holder in _holders.items()})
    return states


def load_state_dict(states: dict[str, Any]) -> None:
    for name, state in states.items():
        if name in NAMES:
            _slots()[name].load_state_dict(state)
        elif name in _holders:
            _holders[name].load_state_dict(state)
        else:
            _waiting[name] = state


def reset() -> None:
    """Forgets every estimator, state and recorded sampler step of this process (tests; a new run in the same
    process)."""
    for slot in _slots().values():
        slot.reset()
    _holders.clear()
    _waiting.clear()
    sampling = sys.modules.get(f"{__package__}.verl_sampling")
    if sampling is not None:
        sampling.reset()


def save_state(folder: str) -> None:
    """Writes STATE_FILE into a checkpoint folder; nothing when no grposcope state exists in this process."""
    states = state_dict()
    if states:
        os.makedirs(folder, exist_ok=True)
        torch.save(states, os.path.join(folder, STATE_FILE))


def load_state(folder: str, quiet: bool = False) -> None:
    """Reads STATE_FILE from the checkpoint folder verl resumes from; a folder without it is logged (unless
    `quiet`: a run that uses no grposcope estimator or sampler) and everything starts from its initial state."""
    path = os.path.join(folder, STATE_FILE)
    if os.path.exists(path):
        load_state_dict(torch.load(path, weights_only=True))
        logger.info("grposcope: state loaded from %s", path)
    elif not quiet:
        logger.warning("grposcope: %s has no %s; the estimators and the sampler start from their initial state",
                       folder, STATE_FILE)


def uses_grposcope(config: Any) -> bool:
    """Whether a run's config chooses a grposcope estimator or sampler.  config: verl's whole config."""
    algorithm = config.get("algorithm") if hasattr(config, "get") else None
    if algorithm is None:
        return False
    return algorithm.get("adv_estimator") in NAMES or grposcope_section(algorithm).get(SAMPLER_KEY) is not None


def skip_setting(config: Any) -> bool | None:
    """Whether verl's workers skip an optimizer step without signal: `algorithm.grposcope.skip_no_signal_steps`
    when set; else on for a run that chooses a grposcope estimator or sampler (as in grposcope's trainer and its
    TRL integration), and None for any other run: the entry point loads into every verl run on a machine with
    grposcope installed, and a stock run must update as stock verl does (GRPOSCOPE_SKIP_NO_SIGNAL_STEPS, if the
    launcher set it, then decides).  config: verl's whole config."""
    value = grposcope_section(config.get("algorithm")).get(SKIP_KEY)
    if value is not None:
        if not isinstance(value, bool):
            raise ValueError(f"algorithm.{CONFIG_KEY}.{SKIP_KEY} must be true or false, got {value!r}")
        return value
    return True if uses_grposcope(config) else None


def forward_skip(config: Any) -> None:
    """Settles the skip in the TaskRunner before verl builds its workers, and hands the decision to every worker
    group it builds: verl's RayWorkerGroup passes `worker_env` into each worker's Ray runtime environment, where
    verl_skip reads GRPOSCOPE_SKIP_NO_SIGNAL_STEPS when the worker imports grposcope."""
    setting = skip_setting(config)
    if setting is not None:
        os.environ[verl_skip.ENV] = "1" if setting else "0"
    if verl_skip.ENV not in os.environ:
        return
    from verl.single_controller.ray.base import RayWorkerGroup

    if getattr(RayWorkerGroup.__init__, "_grposcope", False):
        return
    original = RayWorkerGroup.__init__

    @functools.wraps(original)
    def init_with_env(self: Any, *args: Any, **kwargs: Any) -> None:
        if verl_skip.ENV in os.environ:
            kwargs["worker_env"] = {**(kwargs.get("worker_env") or {}), verl_skip.ENV: os.environ[verl_skip.ENV]}
        original(self, *args, **kwargs)

    init_with_env._grposcope = True  # type: ignore[attr-defined]
    RayWorkerGroup.__init__ = init_with_env


register()
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


def resume_folder(trainer_config: Any) -> str | None:
    """The global_step_<n> folder verl resumes from, or None (v1/trainer_base.py and ray_trainer.py,
    _load_checkpoint: a relative folder is taken from the working directory)."""
    from verl.utils.checkpoint.checkpoint_manager import find_latest_ckpt_path

    mode = trainer_config.get("resume_mode", "auto")
    if mode == "auto":
        return find_latest_ckpt_path(os.path.abspath(trainer_config.default_local_dir))
    if mode == "resume_path":
        return os.path.abspath(trainer_config.resume_from_path)
    return None


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
            from . import verl_sampling  # it imports this module

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
    "SKIP_KEY",
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
