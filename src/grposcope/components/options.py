"""The options components declare by their signatures (core/registry.py), gathered by config field; the check
that the configs built from them are current (components/fields.py); and the one policy for an option a run
sets that its chosen entry does not read.

The policy, the same in grposcope's trainer, the TRL subclass, verl's plug-in and the simulator:
- a key no entry of any family declares (and no host field) is an error naming the known ones: a typo;
- an option that another entry of the family declares, but the chosen one does not read, is a warning naming
  what reads it (`unread_component_option`). Not an error: an ablation keeps one config and flips
  `advantage_estimator` or `sampler` (AVSPO against GRPO on the same YAML), and the note says what is left
  unread without stopping the comparison.
"""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass
from typing import Any

from ..core.ranges import Range
from ..core.registry import dotted
from ..errors import UserError
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
    range: Range | None = None  # declared in the option's annotation (core/ranges.py); None: its entry checks it


RENDER = "python -m grposcope.cli.render"  # the one command that renders components/fields.py and the docs' tables
TRL_SHARED = ("scale_rewards",)  # TRL's own field, grpo's option: TRL's GRPOConfig keeps its declaration


class FieldsOutOfDate(UserError, RuntimeError):
    """components/fields.py lacks an option the registrations declare (or gives it another default)."""


def declared() -> dict[str, Declared]:
    """Every option the registered components declare, by config field: each entry's keyword arguments but
    the run-wide fields it reads, in the order of the entries (`Registry.names`) and of their signatures.
    Entries of a family may share an option (grpo, avspo and pool take advantage_eps): they must agree on
    its default and type, and at least one documents it (where several do, in the same words)."""
    out: dict[str, Declared] = {}
    for family, registry in FAMILIES.items():
        for name in registry.names():
            docs, ranges = registry.docs(name), registry.ranges(name)
            for field in registry.options(name):
                default, hint = registry.default(name, field)
                if default is inspect.Parameter.empty:
                    raise TypeError(f"{registry.kind} {name!r}: option {field!r} has no default; give it one "
                                    "(every option is a config field with a default)")
                doc, rule, seen = docs.get(field, ""), ranges.get(field), out.get(field)
                if seen is None:
                    out[field] = Declared(field, family, (name,), default, hint, doc, rule)
                    continue
                if (seen.family, seen.default, seen.hint) != (family, default, hint) or seen.doc and doc \
                        and seen.doc != doc or seen.range and rule and seen.range != rule:
                    raise TypeError(f"option {field!r} is declared by {seen.family} {', '.join(seen.entries)} "
                                    f"({seen.default!r}) and by {family} {name} ({default!r}) with another family, "
                                    "default, type, doc or range: give it one declaration, or two names")
                out[field] = dataclasses.replace(seen, entries=(*seen.entries, name), doc=seen.doc or doc,
                                                 range=seen.range or rule)
    for field, option in out.items():
        if not option.doc:
            raise TypeError(f"option {field!r} of {FAMILIES[option.family].kind} {', '.join(option.entries)} has no "
                            f"doc: add "
                            f"'{field}: what it does' to the Args: section of one of their docstrings")
    return out


def in_host(option: Declared, host: str) -> bool:
    """Whether an entry that runs in `host` (core.registry.HOSTS) declares `option`."""
    return bool(set(option.entries) & set(FAMILIES[option.family].names_in(host)))


def check_fields(config: Any, host: str) -> None:
    """Fails in one line, naming the command, when the config class of `config` (grposcope's GRPOConfig for
    host "grposcope", the TRL subclass's for "trl") lacks a field for an option that an entry running there
    declares, or gives it another default: components/fields.py was rendered before that declaration."""
    fields = {f.name: f for f in dataclasses.fields(config)}
    for field, option in declared().items():
        if host != "grposcope" and (not in_host(option, host) or field in TRL_SHARED):
            continue
        entry = f"{FAMILIES[option.family].kind} {option.entries[0]!r}"
        if field not in fields:
            problem = "is not a field"
        elif fields[field].default != option.default:
            problem = f"has the default {fields[field].default!r} there, {option.default!r} in its signature"
        else:
            continue
        raise FieldsOutOfDate(f"components/fields.py is out of date: option {field} of {entry} {problem}; run "
                              f"{RENDER}")


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
