"""The options components declare where they are registered (core/registry.py), gathered by config field, and
the one policy for an option a run sets that its chosen entry does not read.

The policy, the same in grposcope's trainer, the TRL subclass, verl's plug-in and the simulator:
- a key no entry of any family declares (and no host field) is an error naming the known ones: a typo;
- an option that another entry of the family declares, but the chosen one does not read, is a warning naming
  what reads it (`unread_component_option`). Not an error: an ablation keeps one config and flips
  `advantage_estimator` or `sampler` (AVSPO against GRPO on the same YAML), and the note says what is left
  unread without stopping the comparison.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from ..core.registry import dotted
from .families import FAMILIES
from .plugins import KWARGS, unread_kwargs


@dataclass(frozen=True)
class Declared:
    """One config field that components declare: who declares it, and its default, type and meaning."""

    field: str
    family: str  # a key of FAMILIES
    entries: tuple[str, ...]
    default: Any
    hint: Any
    doc: str


def declared() -> dict[str, Declared]:
    """Every option the registered components declare, by config field. Entries of a family may share an
    option (grpo, avspo and pool take advantage_eps) when they agree on its meaning and default."""
    out: dict[str, Declared] = {}
    for family, registry in FAMILIES.items():
        for name in registry.names():
            for option in registry.options(name):
                default, hint = registry.default(name, option)
                seen = out.get(option.field)
                if seen is None:
                    out[option.field] = Declared(option.field, family, (name,), default, hint, option.doc)
                    continue
                if (seen.family, seen.default, seen.doc) != (family, default, option.doc):
                    raise TypeError(f"option {option.field!r} is declared by {seen.family} "
                                    f"{', '.join(seen.entries)} and by {family} {name} with another "
                                    "family, default or meaning: give it one declaration, or two names")
                out[option.field] = dataclasses.replace(seen, entries=(*seen.entries, name))
    return out


def checked_entries(args: Any) -> list[tuple[str, str]]:
    """(family, entry) pairs a config check builds: the chosen entry of each family, and every other entry
    that declares an option the config sets away from its default, so that a bad value fails even where
    it is not used (unused_options says that it is not)."""
    pairs = {(family, getattr(args, family)) for family in FAMILIES}
    for field, option in declared().items():
        if getattr(args, field) != option.default:
            pairs.update((option.family, name) for name in option.entries)
    return sorted(pairs)


def unread_component_option(args: Any, field: str, options: dict[str, Declared] | None = None) -> str | None:
    """The note for a component option `field` that `args` sets but whose family's chosen entry does not read
    it; None when it is read, or is no component option (a config with fewer families: only those it has)."""
    family = next((f for f, kwargs in KWARGS.items() if kwargs == field), None)
    if family is not None:
        return unread_kwargs(args, family)
    option = (options if options is not None else declared()).get(field)
    if option is None or not hasattr(args, option.family):
        return None
    chosen = getattr(args, option.family)
    if chosen in option.entries or (dotted(chosen) and FAMILIES[option.family].takes(chosen, field)):
        return None  # a plug-in reads a config field that it names as a keyword
    return _not_read(field, getattr(args, field), option, chosen)


def _not_read(field: str, value: Any, option: Declared, chosen: str) -> str:
    """The note for an option that entry `chosen` of its family does not read, naming the entries that do."""
    return (f"{field}={value!r} is not used: {option.family}={chosen!r} does not read it (read by {option.family} "
            f"{', '.join(option.entries)})")


def without_unread(family: str, name: str, params: dict[str, Any]) -> dict[str, Any]:
    """`params` for entry `name` of `family` (the simulator's keyword arguments) under the policy above: an
    option another entry of the family declares and `name` does not take is dropped with a warning naming
    what reads it; any other key stays, for the entry's own error naming what it takes."""
    import warnings

    registry, options = FAMILIES[family], declared()
    kept = {}
    for key, value in params.items():
        option = options.get(key)
        if option is not None and option.family == family and not registry.takes(name, key):
            warnings.warn(_not_read(key, value, option, name), stacklevel=3)
            continue
        kept[key] = value
    return kept
