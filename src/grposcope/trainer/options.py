"""Which component reads each GRPOConfig option.

Components declare their options by their signatures (core/registry.py); grposcope.components gathers
them for every host. This module adds what only the one-machine trainer has: `unused_options` names an option a
run set but never reads (a component's, or a run-wide one only some settings read), with what would read it;
`readers` is docs/usage.md's "read by" column and `options_help` the list in `grposcope train --help`.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from ..components.families import FAMILIES, LABELS
from ..components.options import declared, unread_component_option

# run-wide fields that the trainer or the collapse monitor read as well, whatever the components take
ALSO_READ = {"success_threshold": "trainer", "seed": "trainer", "acr_ema_lambda": "monitor"}


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


def _default(field: dataclasses.Field) -> Any:
    """A field's default; a field without one (none of grposcope's) counts as always changed."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def unused_options(args: Any) -> list[str]:
    """One line per option set away from its default that this run never reads, naming what would."""
    defaults = {f.name: _default(f) for f in dataclasses.fields(args)}
    options = declared()
    notes = []
    changed = [name for name in defaults if getattr(args, name) != defaults[name]]
    for field in sorted(changed, key=lambda name: name in options):  # run-wide ones first, then components'
        note = unread_component_option(args, field, options)
        if note:
            notes.append(note)
        if field in CONDITIONAL and not CONDITIONAL[field][0](args):
            notes.append(f"{field}={getattr(args, field)!r} is not used: it is read by {CONDITIONAL[field][1]}")
    return notes


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
            own = registry.options(name)
            flags = ", ".join(f"--{f} {show(options[f].default)}" for f in own) or "no options"
            lines.append(f"--{family} {name}: {flags}")
    return "\n\n".join(lines)
