"""The simulator's component options on the command line, spelled as `grposcope train` takes them.

- Each keyword argument that a sampler or advantage estimator takes under a config field's name (the options it
  declares, such as `exit_rule`, and the run-wide fields it reads, such as `success_threshold`) is a flag of its
  own: `--exit_rule pos`, read as the type the entry declares.
- A plug-in's other keyword arguments are a JSON mapping, `--sampler_kwargs '{"rounds": 2}'` and
  `--advantage_estimator_kwargs`, train's fields (components/plugins.py); a key that is a flag of its own is
  refused there, as train refuses a config field in the mapping.
- A simulation lists several entries (`--sampler fixed,reinforce_ada`): a flag or key goes to every listed entry
  that takes it, and must fit at least one; `name.key` in the mapping goes to that entry only.
- `--sampler_options k=v,...` and `--estimator_options`, the simulator's spellings before, still work
  (key=value pairs, JSON values, any keyword an entry takes); app.RENAMED prints the note.
"""

from __future__ import annotations

import difflib
import json
from typing import Any

from .options import coerce, parse_overrides

SIM_FAMILIES = ("sampler", "advantage_estimator")  # no policy loss: the simulator's update is REINFORCE on w
OLD_FLAGS = {"sampler": "--sampler_options", "advantage_estimator": "--estimator_options"}
KWARGS_FLAGS = {"sampler": "--sampler_kwargs", "advantage_estimator": "--advantage_estimator_kwargs"}
RUN_FIELDS = ("seed",)  # read by entries, but the simulation's own option (--seed seeds every entry)

Routed = dict[str, dict[str, dict[str, Any]]]  # family -> entry name -> its keyword arguments


def component_flags() -> dict[str, Any]:
    """Every flag the simulator takes for its components -> the type its entries declare: the options they
    declare, then the run-wide fields they read."""
    from ..components.families import FAMILIES
    from ..components.options import declared

    flags = {field: option.hint for field, option in declared().items() if option.family in SIM_FAMILIES}
    for family in SIM_FAMILIES:
        registry = FAMILIES[family]
        for name in registry.names():
            for field in registry.reads(name):
                if field not in flags and field not in RUN_FIELDS:
                    flags[field] = registry.default(name, field)[1]
    return flags


def component_help() -> str:
    """`grposcope simulate --help`'s list of component flags: train's list (trainer/options.py), for the
    families the simulator runs, and the run-wide fields the entries read."""
    from ..trainer.options import options_help

    keep = tuple(f"--{family} " for family in SIM_FAMILIES)
    parts = [p for p in options_help().split("\n\n") if not p.startswith("--") or p.startswith(keep)]
    parts[0] = "Component options, as grposcope train takes them (docs/usage.md explains each); a flag goes to " \
               "every listed sampler or estimator that takes it:"
    declared_here = {f for p in parts for f in p.split() if f.startswith("--")}
    reads = [f"--{f}" for f in component_flags() if f"--{f}" not in declared_here]
    return "\n\n".join(parts + ([f"Read by some entries as well: {', '.join(reads)}"] if reads else []))


def route_all(extra: list[str], chosen: dict[str, list[str]], kwargs: dict[str, str | None],
              old: dict[str, str | None], ctx: Any = None) -> Routed:
    """Each listed entry's keyword arguments, from the flags in `extra` (what the command did not declare),
    the `*_kwargs` mappings and the old key=value spellings, by family. Raises ValueError naming the flag, and
    click's NoSuchOption (the command's context `ctx`) for a flag the simulator does not take."""
    from ..components.families import FAMILIES

    routed: Routed = {family: {name: {} for name in chosen[family]} for family in SIM_FAMILIES}
    given: dict[tuple[str, str, str], str] = {}  # (family, entry, key) -> the flag that set it

    def put(family: str, name: str, key: str, value: Any, flag: str) -> None:
        if (family, name, key) in given and given[family, name, key] != flag:
            raise ValueError(f"{flag}: {key} is set by {given[family, name, key]} too; set it once")
        given[family, name, key] = flag
        routed[family][name][key] = value

    for family in SIM_FAMILIES:  # the old spelling: any keyword, as it always took them
        for scope, key, value in _pairs(old[family], OLD_FLAGS[family]):
            for name in _targets(FAMILIES[family], chosen[family], scope, key, OLD_FLAGS[family], plugins=False):
                put(family, name, key, value, OLD_FLAGS[family])
    flags = component_flags()
    for key, raw in parse_overrides(extra).items():
        if key not in flags:
            _check_not_a_loss_option(key)
            raise _no_such_option(key, flags, ctx)
        value = coerce(key, raw, flags[key])
        targets = [(f, n) for f in SIM_FAMILIES for n in chosen[f] if FAMILIES[f].takes(n, key)]
        if not targets:
            listed = ", ".join(n for f in SIM_FAMILIES for n in chosen[f])
            raise ValueError(f"--{key}: none of the simulation's samplers and estimators ({listed}) takes it; "
                             f"{_readers(key)}")
        for family, name in targets:
            put(family, name, key, value, f"--{key}")
    for family in SIM_FAMILIES:  # a plug-in's other keyword arguments, as train's *_kwargs
        flag = KWARGS_FLAGS[family]
        for scope, key, value in _mapping(kwargs[family], flag):
            if key in flags or key in RUN_FIELDS:
                shown = value if isinstance(value, str) else json.dumps(value)
                raise ValueError(f"{flag}: {key} is an option of its own; write --{key} {shown}, as "
                                 "grposcope train takes it (the mapping holds a plug-in's other keyword arguments)")
            for name in _targets(FAMILIES[family], chosen[family], scope, key, flag, plugins=True):
                put(family, name, key, value, flag)
    return routed


def _pairs(text: str | None, flag: str) -> list[tuple[str, str, Any]]:
    """`key=value,name.key=value` -> (scope, key, value); values are read as JSON (5, true, null), else as text."""
    out = []
    for item in (part.strip() for part in (text or "").split(",")):
        if not item:
            continue
        key, eq, raw = item.partition("=")
        if not eq or not key.strip():
            raise ValueError(f"{flag}: cannot read {item!r}; write key=value, e.g. exit_rule=pos")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw.strip()
        scope, _, key = key.strip().rpartition(".")
        out.append((scope, key, value))
    return out


def _mapping(text: str | None, flag: str) -> list[tuple[str, str, Any]]:
    """A `*_kwargs` JSON mapping (read as train reads it) -> (scope, key, value); `name.key` scopes a key."""
    from ..components.plugins import read_kwargs

    if text is None:
        return []
    mapping = read_kwargs(flag[2:], text) or {}
    return [(*str(key).rpartition(".")[::2], value) for key, value in mapping.items()]


def _targets(registry: Any, names: list[str], scope: str, key: str, flag: str, plugins: bool) -> list[str]:
    """The listed entries `key` goes to: `scope` if given, else every one that takes it (`plugins`: plug-ins
    only, as train's *_kwargs reach a plug-in only); at least one."""
    if scope and scope not in names:
        raise ValueError(f"{flag}: {scope!r} is not one of the runs' names ({', '.join(names)})")
    candidates = [scope] if scope else names
    targets = [n for n in candidates if registry.takes(n, key) and (not plugins or registry.is_plugin(n))]
    if not targets:
        why = " (the mapping holds a plug-in's keyword arguments, as in grposcope train; a built-in entry's " \
              "options are flags of their own: grposcope simulate --help lists them)" if plugins else ""
        raise ValueError(f"{flag}: none of {', '.join(candidates)} takes an option {key!r}{why}")
    return targets


def _readers(key: str) -> str:
    """Which entries read flag `key`, for the error of a flag no listed entry takes."""
    from ..components.families import FAMILIES, LABELS

    readers = [f"{LABELS[f]} {n}" for f in SIM_FAMILIES for n in FAMILIES[f].names() if FAMILIES[f].takes(n, key)]
    return f"it is read by {', '.join(readers)}"


def _check_not_a_loss_option(key: str) -> None:
    """A policy loss's option (train's --epsilon) has no meaning here: said as such, not as a typo."""
    from ..components.options import declared

    option = declared().get(key)
    if option is not None and option.family not in SIM_FAMILIES:
        raise ValueError(f"--{key} is an option of the policy loss ({', '.join(option.entries)}), which the "
                         "simulator has none of: its update is REINFORCE on w (docs/simulator.md)")


def _no_such_option(key: str, flags: dict[str, Any], ctx: Any) -> Exception:
    """click's own error for an unknown option (one `error:` line, as every usage error: app.py), with the near
    spellings among the command's options and the simulator's flags."""
    try:
        from typer._click.exceptions import NoSuchOption
    except ImportError:  # pragma: no cover - typer's older releases use click itself
        from click.exceptions import NoSuchOption  # type: ignore[assignment]  # typer's vendored click

    known = [f"--{f}" for f in flags] + [o for p in (ctx.command.params if ctx else ()) for o in p.opts
                                         if not getattr(p, "hidden", False) and o.startswith("--")]
    near = difflib.get_close_matches(f"--{key}", known, n=3, cutoff=0.75)
    return NoSuchOption(f"--{key}", possibilities=near or None, ctx=ctx)
