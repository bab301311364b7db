"""What verl.py and its sampling modules share, below all of them: the keys of `algorithm.grposcope` and how
they are read and checked, the one estimator per name and process (Slot), the state saved beside verl's
checkpoints, and the run-wide settings handed to verl's workers (the no-signal skip). verl.py registers the
estimators in verl and wraps its trainers; verl_sampling, verl_v1 and verl_v1_sampling import this module, never
verl.py, so no module of the adapter imports one that imports it back.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import warnings
from importlib import metadata
from typing import Any

import torch

from ..components.build import make_with
from ..components.plugins import KWARGS, plugin_params, read_kwargs
from ..components.state import read_state_file
from ..core.advantages import ESTIMATORS, AdvantageEstimator
from ..core.registry import dotted
from ..sampling import SAMPLERS
from . import verl_skip
from .verl_groups import verl_name

TESTED_VERL = "0.9.1"
CONFIG_KEY = "grposcope"  # algorithm.grposcope.<field>
STATE_FILE = "grposcope_estimators.pt"  # beside verl's data.pt in each global_step_<n> folder
SAMPLER_KEY = "sampler"  # algorithm.grposcope.sampler: the sampler wrapped around verl's rollout manager
SAMPLER_STATE = "grposcope_sampler"  # the sampler's (and monitor's) entry in STATE_FILE


# verl's name -> grposcope's registry name: the estimators registered with "verl" among their hosts
NAMES = {verl_name(name): name for name in ESTIMATORS.names_in("verl")}
SHARED_FIELDS = {"success_threshold": 0.5}  # read by the collapse metrics of every estimator
SKIP_KEY = "skip_no_signal_steps"  # algorithm.grposcope.skip_no_signal_steps: the workers' no-signal skip
RUN_FIELDS = (SKIP_KEY,)  # keys of algorithm.grposcope that belong to the run, not to an estimator or sampler

logger = logging.getLogger("grposcope")


def require_verl() -> None:
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


require_verl()


# ---------------------------------------------------------------------------------------------------------
# Options: algorithm.grposcope.<field> -> the estimator's keyword argument of the same name


def config_fields(name: str) -> list[str]:
    """The config fields that verl estimator `name` reads from algorithm.grposcope: its keyword arguments."""
    core = NAMES[name]
    if ESTIMATORS.is_plugin(core):
        return plugin_fields(ESTIMATORS, "advantage_estimator", core)
    return [*ESTIMATORS.options(core), *ESTIMATORS.reads(core)]


def add_plugin(name: str) -> None:
    """Makes estimator plug-in `name` (its dotted path, algorithm.adv_estimator=mypkg.estimators:MyEstimator)
    one of NAMES, under that name, with the state a resumed run read for it before it was looked up."""
    ESTIMATORS.get(name)  # imports its module: a missing one fails with the fix
    NAMES[name] = name
    if name in _waiting:
        slot(name).load_state_dict(_waiting.pop(name))


# Plug-ins from outside grposcope (grposcope.components.plugins): their own keyword arguments come from
# algorithm.grposcope.<family>_kwargs; one that is a run-wide field of the family (success_threshold, seed)
# is read from algorithm.grposcope.<field>, as the built-in entries read it


def plugin_fields(registry: Any, family: str, name: str) -> list[str]:
    """The keys of algorithm.grposcope that plug-in `name` reads: its keyword arguments' mapping, and the
    run-wide fields the family's own entries read that it takes by name."""
    run_wide = {field for entry in registry.names() for field in registry.reads(entry)} | set(SHARED_FIELDS)
    return [KWARGS[family], *(field for field in run_wide if registry.takes(name, field))]


def plugin_keywords(registry: Any, family: str, name: str, section: dict[str, Any]) -> dict[str, Any]:
    """Plug-in `name`'s keyword arguments from algorithm.grposcope."""
    where = f"algorithm.{CONFIG_KEY}.{KWARGS[family]}"
    by_name = plugin_fields(registry, family, name)[1:]
    values = {**SHARED_FIELDS, **section}
    fields = {field: plain_value(values[field]) for field in by_name if field in values}
    return plugin_params(registry, name, read_kwargs(where, section.get(KWARGS[family])), fields, where)


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
    if SAMPLERS.is_plugin(name):
        return {SAMPLER_KEY, *plugin_fields(SAMPLERS, "sampler", name)}
    return {SAMPLER_KEY, *SAMPLERS.options(name), *SAMPLERS.reads(name)}


def estimator_params(name: str, config: Any) -> tuple[dict[str, Any], float]:
    """The keyword arguments of estimator `name` and the success threshold, from algorithm.grposcope.

    The one policy of every host (grposcope.components.options): a key no component declares fails with the
    list of those the estimator and the configured sampler read (a typo); another entry's option (an AVSPO
    option while grposcope_grpo is chosen) is left unread with a warning naming what reads it."""
    section = grposcope_section(config)
    fields = config_fields(name)
    theirs = sampler_fields(section)
    known = set(fields) | set(SHARED_FIELDS) | set(RUN_FIELDS) | theirs
    unread_elsewhere(section, known, f"algorithm.adv_estimator={name}",
                     f"is not an option of advantage estimator {name!r}; it reads")
    check_ranges(section)
    if ESTIMATORS.is_plugin(NAMES[name]):
        params = plugin_keywords(ESTIMATORS, "advantage_estimator", NAMES[name], section)
    else:
        params = {key: plain_value(value) for key, value in section.items() if key in fields}
    threshold = section.get("success_threshold", SHARED_FIELDS["success_threshold"])
    return params, float(threshold)


_warned: set[str] = set()  # the unread keys already noted in this process (an estimator runs every step)


def unread_elsewhere(section: dict[str, Any], known: set[str], chosen: str, refusal: str) -> None:
    """Applies the unread-option policy to algorithm.grposcope: a key no component declares raises
    `algorithm.grposcope.<key> <refusal>: <known>`; one another entry declares is warned about once."""
    from ..components.options import declared

    options = declared()
    for key in sorted(set(section) - known):
        option = options.get(key)
        if option is None:
            raise ValueError(f"algorithm.{CONFIG_KEY}.{key} {refusal}: {', '.join(sorted(known))}")
        if key not in _warned:
            _warned.add(key)
            warnings.warn(f"algorithm.{CONFIG_KEY}.{key}={section[key]!r} is not used: {chosen} does not read it "
                          f"(read by {option.family.replace('_', ' ')} {', '.join(option.entries)})", stacklevel=3)


def check_ranges(section: dict[str, Any]) -> None:
    """grposcope's option ranges (components/ranges.py, the one table) on algorithm.grposcope's keys.
    Imported here, not at the top: the workers import this module and never read options."""
    from ..components.ranges import check_options

    check_options(section)


def plain_value(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value  # virtual_reward_range is a pair


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
            self.estimator, self.params = make_with("advantage_estimator", NAMES[self.name], params), dict(params)
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


_slots_by_name: dict[str, Slot] = {}  # verl name -> the Slot its registered function calls


def slot(name: str) -> Slot:
    """The one Slot of verl estimator `name` in this process (verl.py's registered function holds it)."""
    return _slots_by_name.setdefault(name, Slot(name))


def _slots() -> dict[str, Slot]:
    return {name: slot(name) for name in NAMES}


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
    _warned.clear()
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
        load_state_dict(read_state_file(path, "Resume verl from another checkpoint (trainer.resume_from_path), or "
                                          "start a new run."))
        logger.info("grposcope: state loaded from %s", path)
    elif not quiet:
        logger.warning("grposcope: %s has no %s; the estimators and the sampler start from their initial state",
                       folder, STATE_FILE)


def uses_grposcope(config: Any) -> bool:
    """Whether a run's config chooses a grposcope estimator or sampler.  config: verl's whole config."""
    algorithm = config.get("algorithm") if hasattr(config, "get") else None
    if algorithm is None:
        return False
    estimator = algorithm.get("adv_estimator")
    return (estimator in NAMES or dotted(estimator)
            or grposcope_section(algorithm).get(SAMPLER_KEY) is not None)


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


