"""Components from outside the package, named by dotted path: `--advantage_estimator mypkg.estimators:MyEstimator`.

A plug-in declares its options by its signature, as torchtune's components do. Each keyword argument is set
by one name, in one of two places:
- a keyword named like a field of the host's config (`seed`, `success_threshold`, `num_generations`) takes
  that field's value, as the built-in entries' `reads` do: one name per option, in every host;
- any other keyword comes from the family's `*_kwargs` mapping (`advantage_estimator_kwargs`, `sampler_kwargs`,
  `policy_loss_kwargs`; in verl `algorithm.grposcope.advantage_estimator_kwargs`), TRL's convention for the
  keyword arguments of something a config names (`model_init_kwargs`), or from its default.
A key of the mapping that the plug-in does not take, a config field written there too, or a keyword with no
default left unset fails before any model loads, naming the signature. Loading imports the named module and
nothing else (core/registry.py, `Registry.plugin`).
"""

from __future__ import annotations

import inspect
from typing import Any, Mapping

from ..core.registry import Registry, dotted

KWARGS = {"advantage_estimator": "advantage_estimator_kwargs", "sampler": "sampler_kwargs",
          "policy_loss": "policy_loss_kwargs"}  # family -> the field holding its plug-in's keyword arguments


def parse_mapping(text: str) -> dict[str, Any] | None:
    """`text` read as JSON or a YAML flow mapping (`'{"option": 1}'`), or None when it is not a mapping. Read with
    yaml.safe_load, as a config file is: plain data, no tags that build objects."""
    import yaml  # type: ignore[import-untyped]  # no types-PyYAML

    try:
        parsed = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    return parsed if isinstance(parsed, dict) else None


def read_kwargs(field: str, value: Any) -> dict[str, Any] | None:
    """A `*_kwargs` value as a dict: None, a mapping, or (TRL's parser and the command line give strings) JSON
    or a YAML flow mapping."""
    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str) and (parsed := parse_mapping(value)) is not None:
        return parsed
    shown = repr(value) if len(repr(value)) <= 200 else repr(value)[:200] + "..."
    raise ValueError(f"{field} must be a mapping of the plug-in's keyword arguments, e.g. --{field} "
                     f"'{{\"option\": 1}}', got {shown}")


def plugin_params(registry: Registry, name: str, kwargs: Mapping[str, Any] | None,
                  fields: Mapping[str, Any], where: str) -> dict[str, Any]:
    """The keyword arguments of plug-in `name`: each keyword named like a key of `fields` (the host's config
    fields and their values) takes that value, the others come from `kwargs` (the family's `*_kwargs`, called
    `where` in errors) or their defaults."""
    factory = registry.get(name)
    signature = inspect.signature(factory)
    parameters = signature.parameters
    takes_any = any(p.kind is p.VAR_KEYWORD for p in parameters.values())
    kwargs = dict(kwargs or {})
    twice = sorted(key for key in kwargs if key in fields)
    if twice:
        raise ValueError(f"{where}: {', '.join(twice)}: a config field of its own; set it there, not in the "
                         "mapping (a plug-in reads config fields under their own names)")
    unknown = sorted(key for key in kwargs if key not in parameters)
    if unknown and not takes_any:
        raise ValueError(f"{where}: {registry.kind} {name!r} takes no {', '.join(map(repr, unknown))}; it takes "
                         f"{signature}")
    params: dict[str, Any] = {}
    for parameter in parameters.values():
        if parameter.kind in (parameter.VAR_POSITIONAL, parameter.VAR_KEYWORD) or parameter.name in kwargs:
            continue
        if parameter.name in fields:
            params[parameter.name] = fields[parameter.name]
        elif parameter.default is parameter.empty:
            raise ValueError(f"{where}: {registry.kind} {name!r} needs {parameter.name!r}, which has no default "
                             f"and is no config field: set it in {where}; it takes {signature}")
    return {**params, **kwargs}


def config_values(config: Any) -> dict[str, Any]:
    """A dataclass config's fields and their values, the mapping `plugin_params` reads fields from."""
    import dataclasses

    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if hasattr(config, f.name)}


def build_plugin(registry: Registry, family: str, name: str, config: Any) -> Any:
    """Plug-in `name` of `family`, built from a dataclass config (grposcope's GRPOConfig, the TRL subclass's)."""
    field = KWARGS[family]
    kwargs = read_kwargs(field, getattr(config, field, None))
    params = plugin_params(registry, name, kwargs, config_values(config), field)
    registry.check_ranges(name, params)  # a range a plug-in declares in its annotations, as a built-in's
    return registry.make(name, **params)


def unread_kwargs(config: Any, family: str) -> str | None:
    """The note for a `*_kwargs` mapping set while the family's chosen entry is a built-in one."""
    field = KWARGS[family]
    value, chosen = getattr(config, field, None), getattr(config, family, None)
    if not value or chosen is None or dotted(chosen):
        return None
    return (f"{field}={value!r} is not used: it holds a plug-in's keyword arguments, and {family}={chosen!r} is "
            "built in (its options are config fields)")
