"""Config options from a YAML file and from `--name value` arguments, read as the types GRPOConfig declares."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

_BOOL = {"true": True, "yes": True, "1": True, "on": True, "false": False, "no": False, "0": False, "off": False}


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml

    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    data = yaml.safe_load(path.read_text()) or {}
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
    raise ValueError(f"--{name}: cannot read {raw!r} as {hint}")

