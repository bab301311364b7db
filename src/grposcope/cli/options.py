"""Config options from a YAML file and from `--name value` arguments, read as the types GRPOConfig declares."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

from ..files import read_utf8

_BOOL = {"true": True, "yes": True, "1": True, "on": True, "false": False, "no": False, "0": False, "off": False}


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        data = yaml.safe_load(read_utf8(path))
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ValueError(f"{path}: {where}not valid YAML ({problem}); write one `option: value` per line") from None
    if data is None:  # an empty file, or comments only: most likely the wrong file, or one not saved yet
        raise ValueError(f"{path} holds no options (it is empty or only comments); write one `option: value` "
                         "per line, e.g. `learning_rate: 1.0e-5` (`{}` for none)")
    if not isinstance(data, dict):
        raise ValueError(f"{path} must hold a mapping of GRPOConfig options, got {type(data).__name__}")
    return data


def parse_overrides(argv: list[str]) -> dict[str, str]:
    """`--name value`, `--name=value`, and a bare `--flag` (true), as TRL's scripts take them."""
    out: dict[str, str] = {}
    i = 0
    while i < len(argv):
        token = argv[i]
        if not token.startswith("--") or token == "--":
            raise ValueError(f"unexpected argument {token!r}: options are given as --name value")
        name, eq, value = token[2:].partition("=")
        name = name.replace("-", "_")
        if not eq:
            if i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                value, i = argv[i + 1], i + 1
            else:
                value = "true"
        out[name] = value
        i += 1
    return out


def coerce_all(values: dict[str, Any]) -> dict[str, Any]:
    from ..trainer import GRPOConfig

    hints = typing.get_type_hints(GRPOConfig)
    return {k: coerce(k, v, hints[k]) if k in hints and isinstance(v, str) else v for k, v in values.items()}


def coerce(name: str, raw: str, hint: Any) -> Any:
    """Turns a command-line string into the type the config field declares: `--reward_weights 1,0.5` gives
    [1.0, 0.5] for a list[float], `--virtual_reward_range -1,1` (-1.0, 1.0) for a tuple[float, float]."""
    union = typing.get_origin(hint) in (typing.Union, types.UnionType)
    options = typing.get_args(hint) if union else (hint,)
    origins = [typing.get_origin(kind) or kind for kind in options]
    if type(None) in origins and raw.lower() in ("none", "null"):
        return None
    if bool in origins and raw.lower() in _BOOL:
        return _BOOL[raw.lower()]
    if dict in origins:
        return coerce_mapping(name, raw)
    for kind, origin in zip(options, origins):
        if origin in (list, tuple) and ("," in raw or str not in origins):
            item_kind = (typing.get_args(kind) or (str,))[0]
            items = [item.strip() for item in raw.strip("[]()").split(",") if item.strip()]
            return origin(coerce(name, item, item_kind) for item in items)
    for kind in (int, float):
        if kind in origins:
            try:
                return kind(raw)
            except ValueError:
                pass
    if str in origins:
        return raw
    from ..trainer.config import type_name

    raise ValueError(f"--{name}: cannot read {raw!r} as {type_name(hint)}")


def coerce_mapping(name: str, raw: str) -> dict[str, Any]:
    """A dict option from the command line, as JSON or a YAML flow mapping: `--generation_kwargs
    '{"min_new_tokens": 4}'`. Read with yaml.safe_load, as a config file is: plain data, no tags that build
    objects. What the mapping may hold is the option's own check (GRPOConfig)."""
    import yaml

    try:
        value = yaml.safe_load(raw)
    except yaml.YAMLError:
        value = None
    if not isinstance(value, dict):
        raise ValueError(f"--{name}: cannot read {raw!r} as a mapping; write it as JSON, e.g. "
                         f"--{name} '{{\"min_new_tokens\": 4}}'")
    return value

