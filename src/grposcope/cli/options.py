"""Config options from a YAML file and from `--name value` arguments, read as the types GRPOConfig declares."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any

from ..files import read_utf8

_BOOL = {"true": True, "yes": True, "1": True, "on": True, "false": False, "no": False, "0": False, "off": False}


MAX_YAML_VALUES = 100_000  # a config holds a few hundred values; aliases may not expand beyond this


class ConfigFileError(ValueError):
    """A config file that is valid YAML but not a plain config: a key given twice, aliases that explode."""


def read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # type: ignore[import-untyped]  # no types-PyYAML

    if path.is_dir():
        raise IsADirectoryError(_config_folder(path))
    if not path.is_file():
        raise FileNotFoundError(f"config file {path} does not exist")
    try:
        data = yaml.load(read_utf8(path), Loader=_config_loader())  # noqa: S506 (a SafeLoader subclass)
    except ConfigFileError as err:
        raise ValueError(f"{path}: {err}") from None
    except RecursionError:
        raise ValueError(f"{path}: nested too deeply to read; write one `option: value` per line") from None
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


def _config_folder(path: Path) -> str:
    """The error for a --config that is a folder (a run's output folder, the folder the configs are in): a
    YAML file in it to name instead."""
    try:
        yamls = sorted(p for p in path.iterdir() if p.suffix in (".yaml", ".yml") and p.is_file())
    except OSError:  # an unreadable folder: no file of it to suggest
        yamls = []
    fix = f"name a YAML file in it, e.g. --config {yamls[0]}" if yamls else \
        "it holds no .yaml file: give the path of a YAML file of options (one `option: value` per line)"
    return f"--config {path} is a folder, not a YAML file; {fix}"


def _config_loader() -> type:
    """yaml.SafeLoader (plain data, no tags that build objects) that also refuses what safe_load lets through
    without a word: a key given twice (the last value would win), and aliases whose expansion explodes
    ("billion laughs": the data stays small, but every later use of it, an error message first, expands it)."""
    import yaml

    class ConfigLoader(yaml.SafeLoader):
        def get_single_node(self):
            node = super().get_single_node()
            if node is not None:
                _check_expansion(node)
            return node

        def construct_mapping(self, node, deep=False):
            _check_unique_keys(node)
            return super().construct_mapping(node, deep=deep)

    return ConfigLoader


def _check_unique_keys(node: Any) -> None:
    seen: dict[Any, int] = {}
    for key, _ in node.value:
        if key.tag == "tag:yaml.org,2002:merge" or not hasattr(key, "value") or not isinstance(key.value, str):
            continue  # `<<: *base` merges, and explicit keys override what it brings: YAML's own rule
        line = key.start_mark.line + 1
        if key.value in seen:
            raise ConfigFileError(f"{key.value} is given twice (lines {seen[key.value]} and {line}), and only the "
                                  "last would count; keep one of them")
        seen[key.value] = line


def _check_expansion(root: Any) -> None:
    """Counts the values the document holds once its aliases are expanded, without expanding them: a node
    shared by aliases is counted once per use, from a memo of its own count."""
    import yaml

    memo: dict[int, int] = {}

    def count(node: Any) -> int:
        if id(node) in memo:
            if memo[id(node)] < 0:
                raise ConfigFileError("an alias (*name) refers to a value that holds it; write the values out")
            return memo[id(node)]
        memo[id(node)] = -1  # being counted: met again below it, the data refers to itself
        if isinstance(node, yaml.MappingNode):
            n = 1 + sum(count(k) + count(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            n = 1 + sum(count(item) for item in node.value)
        else:
            n = 1
        memo[id(node)] = n = min(n, 10 * MAX_YAML_VALUES)  # stays a small int however deep the nesting
        return n

    total = count(root)
    if total > MAX_YAML_VALUES:
        raise ConfigFileError(f"its aliases (*name) expand to more than {MAX_YAML_VALUES:,} values, where a "
                              "config holds a few hundred; write the values out instead of nesting aliases")


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
    from ..components.ranges import quoted
    from ..trainer.config import type_name

    raise ValueError(f"--{name}: cannot read {quoted(raw)} as {type_name(hint)}")


def coerce_mapping(name: str, raw: str) -> dict[str, Any]:
    """A dict option from the command line, as JSON or a YAML flow mapping: `--generation_kwargs
    '{"min_new_tokens": 4}'`. Read with yaml.safe_load, as a config file is: plain data, no tags that build
    objects. What the mapping may hold is the option's own check (GRPOConfig)."""
    from ..components.plugins import parse_mapping

    value = parse_mapping(raw)
    if value is None:
        raise ValueError(f"--{name}: cannot read {raw!r} as a mapping; write it as JSON, e.g. "
                         f"--{name} '{{\"min_new_tokens\": 4}}'")
    return value

