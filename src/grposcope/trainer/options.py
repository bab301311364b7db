"""Which component reads each GRPOConfig option.

Components declare their options where they are registered (core/registry.py). This module gathers them for
the trainer: `FAMILIES` names the config field that chooses each family's entry; `with_component_options` adds
one GRPOConfig field per declared option (default and type from the entry's signature); `build` makes the
chosen entry from a config; `unused_options` names an option a run set but never reads, with what would read
it; `readers` is docs/usage.md's "read by" column and `options_help` the list in `grposcope train --help`.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable

from ..core.advantages import ESTIMATORS
from ..core.losses import POLICY_LOSSES
from ..core.registry import Registry
from ..sampling import SAMPLERS

# the config field that chooses a family's entry -> its registry, and the family's short name in the docs
FAMILIES: dict[str, Registry] = {"advantage_estimator": ESTIMATORS, "sampler": SAMPLERS, "policy_loss": POLICY_LOSSES}
LABELS = {"advantage_estimator": "estimator", "sampler": "sampler", "policy_loss": "loss"}

# run-wide fields that the trainer or the collapse monitor read as well, whatever the components take
ALSO_READ = {"success_threshold": "trainer", "seed": "trainer", "acr_ema_lambda": "monitor"}


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


def with_component_options(cls: type, entries: dict[str, tuple[str, ...] | None] | None = None,
                           shared: tuple[str, ...] = ()) -> type:
    """The dataclass `cls` with one more field per declared component option, so that a component's options
    are set like any other (GRPOConfig(virtual_sample_alpha=0.3), YAML, --virtual_sample_alpha 0.3).
    `entries`: {family: the entries whose options to add, or None for all}, by default every family's all;
    `shared`: fields `cls` already has that mean what the option means (TRL's scale_rewards), which stay as
    they are. Any other clash is an error."""
    entries = {family: None for family in FAMILIES} if entries is None else entries
    own = {f.name for f in dataclasses.fields(cls)}
    fields = []
    for field, option in declared().items():
        if option.family not in entries or field in shared:
            continue
        wanted = entries[option.family]
        if wanted is not None and not set(option.entries) & set(wanted):
            continue
        if field in own:
            raise TypeError(f"component option {field!r} clashes with the run-wide {cls.__name__} field of that name")
        mutable = isinstance(option.default, (list, dict, set))
        spec = dataclasses.field(default_factory=lambda d=option.default: type(d)(d)) if mutable else \
            dataclasses.field(default=option.default)
        fields.append((field, option.hint, spec))
    made = dataclasses.make_dataclass(cls.__name__, fields, bases=(cls,),
                                      namespace={"__doc__": cls.__doc__, "__module__": cls.__module__})
    made.__qualname__ = cls.__qualname__
    return made


def build(args: Any, family: str) -> Any:
    """The entry `args` chooses in `family` (e.g. "sampler"), built with its options from `args`."""
    return FAMILIES[family].build(getattr(args, family), args)


def checked_entries(args: Any) -> list[tuple[str, str]]:
    """(family, entry) pairs a config check builds: the chosen entry of each family, and every other entry
    that declares an option the config sets away from its default, so that a bad value fails even where
    it is not used (unused_options says that it is not)."""
    pairs = {(family, getattr(args, family)) for family in FAMILIES}
    for field, option in declared().items():
        if getattr(args, field) != option.default:
            pairs.update((option.family, name) for name in option.entries)
    return sorted(pairs)


def _has_reference(args: Any) -> bool:
    return args.beta > 0 or args.use_peft  # LoRA's reference is the adapters-off model, free


# run-wide options that only some settings read: field -> (whether this run reads it, what reads it)
CONDITIONAL: dict[str, tuple[Callable[[Any], bool], str]] = {
    "kl_estimator": (_has_reference, "the KL term and kl/mean, which need a reference policy (beta > 0 or use_peft)"),
    "kl_bound": (_has_reference, "the KL-drift alarm, which needs a reference policy (beta > 0 or use_peft)"),
    "overlong_penalty_factor": (lambda a: a.overlong_buffer_len > 0,
                                "the soft overlong penalty (overlong_buffer_len > 0)"),
    "num_completions_to_print": (lambda a: a.log_completions, "the completions log (log_completions=True)"),
    **{name: (lambda a: a.use_peft, "LoRA (use_peft=True)")
       for name in ("lora_r", "lora_alpha", "lora_dropout", "lora_target_modules")},
}


def unused_options(args: Any) -> list[str]:
    """One line per option set away from its default that this run never reads, naming what would."""
    defaults = {f.name: f.default if f.default is not dataclasses.MISSING else f.default_factory()
                for f in dataclasses.fields(args)}
    options = declared()
    notes = []
    for field in (name for name in defaults if getattr(args, name) != defaults[name]):
        note = unread_component_option(args, field, options)
        if note:
            notes.append(note)
        if field in CONDITIONAL and not CONDITIONAL[field][0](args):
            notes.append(f"{field}={getattr(args, field)!r} is not used: it is read by {CONDITIONAL[field][1]}")
    return notes


def unread_component_option(args: Any, field: str, options: dict[str, Declared] | None = None) -> str | None:
    """The note for a component option `field` that `args` sets but whose family's chosen entry does not read
    it; None when it is read, or is no component option (a config with fewer families: only those it has)."""
    option = (options if options is not None else declared()).get(field)
    if option is None or not hasattr(args, option.family):
        return None
    chosen = getattr(args, option.family)
    if chosen in option.entries:
        return None
    return (f"{field}={getattr(args, field)!r} is not used: {option.family}={chosen!r} does not read it (read by "
            f"{option.family} {', '.join(option.entries)})")


def readers(field: str) -> str:
    """Who reads option `field`, for the docs' options table."""
    parts = []
    option = declared().get(field)
    if option is not None:
        parts.append(f"{LABELS[option.family]} " + ", ".join(option.entries))
    for family, registry in FAMILIES.items():
        takers = [name for name in registry.names() if field in registry.reads(name)]
        if takers:
            parts.append(f"{LABELS[family]} " + ", ".join(takers))
    if field in ALSO_READ:
        parts.append(ALSO_READ[field])
    if field in CONDITIONAL:
        parts.append(CONDITIONAL[field][1])
    return "; ".join(parts) or "trainer"


def show(value: Any) -> str:
    """A default as the docs and --help print it: "group", 0.5, None, (0.0, 1.0)."""
    return f'"{value}"' if isinstance(value, str) else repr(value)


def options_help() -> str:
    """Each family's entries and the options each reads, for `grposcope train --help`."""
    options = declared()
    lines = ["Component options (docs/usage.md explains each):"]
    for family, registry in FAMILIES.items():
        for name in registry.names():
            own = [o.field for o in registry.options(name)]
            flags = ", ".join(f"--{f} {show(options[f].default)}" for f in own) or "no options"
            lines.append(f"--{family} {name}: {flags}")
    return "\n\n".join(lines)
