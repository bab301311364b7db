"""An option's range: an interval of valid values, its rule in words, what the option means and what None
means. Pure Python (the diagnosis, which has no torch, reads it through components/ranges.py, the table of the
run-wide options' ranges).

A component declares the range of one of its options where it declares the option, in its signature:
`advantage_eps: Annotated[float, at_least(0, "...", strict=True)] = 1e-4`. Every host checks it before it builds
the entry from its config (`Registry.check_ranges`), with the message every range gives ("advantage_eps must be
> 0 (...), got 0"); `advantages.make`, the library's call, takes any value.
"""

from __future__ import annotations

import math
import typing
from dataclasses import dataclass
from typing import Any, Callable

QUOTE_CHARS = 200  # what an error message quotes of a value: a YAML alias bomb repr'd in full takes gigabytes


@dataclass(frozen=True)
class Range:
    """An interval of valid values; `hint` says what the option means (the fix), `none` what None means."""

    rule: str  # as the message says it: "a positive integer", ">= 0", "in [0, 1]"
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    hint: str = ""
    none: str = ""  # empty: None is not allowed (the type check refuses it)
    whole: bool = False  # a whole number is asked (an int; never a bool)
    also: tuple[float, ...] = ()  # values outside the interval that mean something (max_steps=-1)

    def holds(self, value: Any) -> bool:
        if value is None:
            return True  # the type check already refused None where it is not allowed
        if value in self.also:
            return True
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below

    def message(self, name: str, value: Any) -> str:
        hint = f" ({self.hint})" if self.hint else ""
        none = f"; or None for {self.none}" if self.none else ""
        return f"{name} must be {self.rule}{hint}, got {quoted(value)}{none}"


def positive_int(hint: str = "", none: str = "", high: int | None = None) -> Range:
    rule = "a positive integer" if high is None else f"a whole number in [1, {high:,}]"
    return Range(rule, low=1, high=high, hint=hint, none=none, whole=True)


def at_least(low: float, hint: str = "", none: str = "", strict: bool = False, unit: str = "") -> Range:
    return Range(f"{'>' if strict else '>='} {low}{unit}", low=low, low_open=strict, hint=hint, none=none)


def within(low: float, high: float, bounds: str = "[]", hint: str = "") -> Range:
    return Range(f"in {bounds[0]}{low}, {high}{bounds[1]}", low, high, bounds[0] == "(", bounds[1] == ")",
                 hint=hint)


def declared_ranges(factory: Callable[..., Any]) -> dict[str, Range]:
    """Each keyword argument of `factory` (a class: its `__init__`) whose annotation carries a Range ->
    that Range; {} where the annotations cannot be resolved (a plug-in's forward reference)."""
    target = getattr(factory, "__init__") if isinstance(factory, type) else factory
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except (NameError, TypeError, AttributeError):
        return {}
    return {name: rule for name, hint in hints.items() for rule in getattr(hint, "__metadata__", ())
            if isinstance(rule, Range)}


def check_value(name: str, value: Any, rule: Range, prefix: str = "") -> None:
    """Raises ValueError in one line when `value` breaks `rule`: a number that is not finite, a bool, a
    fraction where a whole number is asked, or one outside the interval. None and non-numbers pass (the
    type check is the entry's)."""
    if value is None or not isinstance(value, (int, float)):
        return
    shown = prefix + name
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{shown if prefix else 'option ' + name}: got {value}; give a finite number ({rule.rule})")
    if isinstance(value, bool) or (rule.whole and not float(value).is_integer()) or not rule.holds(value):
        raise ValueError(rule.message(shown, value))


def quoted(value: Any, limit: int = QUOTE_CHARS) -> str:
    """repr(value) cut to about `limit` characters, built without the full repr: reprlib stops at a few items
    per level and a few levels deep (a 9-level YAML alias bomb holds 9^9 strings, shared, never expanded)."""
    import reprlib

    short = reprlib.Repr()
    short.maxlevel, short.maxlist, short.maxtuple, short.maxdict, short.maxset = 4, 8, 8, 8, 8
    short.maxstring = short.maxother = limit
    text = short.repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."
