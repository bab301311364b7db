"""Each chosen component built once per run.

A config checks its options by building the chosen entries (a bad value fails with the entry's own rule,
before any model loads). `keep` holds those instances on the config, and `build` hands each one to the run
that asks for it, once, if its options have not changed since: the run's estimator is the one the check built.
A second run from the same config, or a config changed after its check, gets a new instance.
"""

from __future__ import annotations

from typing import Any

from ..core.registry import dotted
from .families import FAMILIES
from .plugins import build_plugin

_KEPT = "_grposcope_components"  # the config's attribute: {family: (options as built, instance)}


def _options_of(config: Any, family: str) -> list[tuple[str, Any]]:
    registry, name = FAMILIES[family], getattr(config, family)
    if dotted(name):  # a plug-in reads its *_kwargs and any config field it names: compare them all
        return [(name, None), *sorted((k, v) for k, v in vars(config).items() if not k.startswith("_"))]
    fields = [*registry.options(name), *registry.reads(name)]
    return [(name, None)] + [(field, getattr(config, field)) for field in fields]


def make(config: Any, family: str, name: str) -> Any:
    """Entry `name` of `family` with its options from `config`: a registered entry's declared options and
    the fields it reads; a plug-in's keyword arguments (components.plugins)."""
    if dotted(name):
        return build_plugin(FAMILIES[family], family, name, config)
    return FAMILIES[family].build(name, config)


def keep(config: Any, family: str, instance: Any) -> None:
    """Keeps `instance`, just built from `config` for its check, for the run."""
    kept = config.__dict__.setdefault(_KEPT, {})
    kept[family] = (_options_of(config, family), instance)


def build(config: Any, family: str) -> Any:
    """The entry `config` chooses in `family` (e.g. "sampler"), with its options from `config`: the instance
    the config's check built, when its options are unchanged, else a new one."""
    kept = config.__dict__.get(_KEPT, {}).pop(family, None)
    if kept is not None and kept[0] == _options_of(config, family):
        return kept[1]
    return make(config, family, getattr(config, family))


def check(config: Any, entries: list[tuple[str, str]]) -> None:
    """Builds each (family, entry) so that a bad option fails with its rule, even for an entry not chosen; the
    chosen entries' instances are kept for the run."""
    for family, name in entries:
        instance = make(config, family, name)
        if name == getattr(config, family, None):
            keep(config, family, instance)


def make_with(family: str, name: str, options: dict[str, Any], seed: int | None = None) -> Any:
    """Entry `name` of `family` from a mapping of options, for a host without a GRPOConfig (the simulator's
    `*_kwargs`, verl's algorithm.grposcope section): the one policy for another entry's option (dropped with a
    warning naming what reads it, components.options), and the run's `seed` when the entry takes one and the
    options set none. A dotted path is a plug-in (its keyword arguments are `options`)."""
    from .options import without_unread

    registry = FAMILIES[family]
    if dotted(name):
        registry.check_ranges(name, options)
        return registry.make(name, **options)
    seeded = {"seed": seed} if seed is not None and registry.takes(name, "seed") else {}
    params = {**seeded, **without_unread(family, name, options)}
    registry.check_ranges(name, params)  # the ranges declared with the options, as a config's check applies
    return registry.make(name, **params)
