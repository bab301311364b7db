"""One plain registry per plug-in family: a dict and a decorator.

Every family (advantage estimators, samplers, policy losses, rewards, tasks, loggers) uses this class, so a
name that is not registered fails the same way everywhere: with the list of the names that are.

An entry declares its options where it is registered: `Option(field, doc, keyword)` names the config field
that sets one of its keyword arguments, and the keyword's default and annotation in the entry's signature are
the option's default and type (one source). `reads` names run-wide config fields it takes as they are (the
seed, the success threshold). The trainer's config grows one field per declared option (trainer/options.py).
"""

from __future__ import annotations

import inspect
import typing
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

from ..errors import InputTypeError

T = TypeVar("T")


@dataclass(frozen=True)
class Option:
    """A config option of a registered entry: the config field (and CLI flag) that sets it, TRL's flat name
    where TRL has one; what it means, with its paper; and the entry's keyword for it (default: the field)."""

    field: str
    doc: str
    keyword: str = ""

    @property
    def param(self) -> str:
        return self.keyword or self.field


class Registry(Generic[T]):
    """Maps names to factories (classes or functions) of one plug-in family.

    >>> estimators = Registry("advantage estimator")
    >>> @estimators.register("grpo", options=[Option("scale_rewards", "grpo's std", keyword="scale")])
    ... class GRPO:
    ...     def __init__(self, scale: str = "group"): ...
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., T]] = {}
        self._options: dict[str, tuple[Option, ...]] = {}
        self._reads: dict[str, dict[str, str]] = {}

    def register(self, name: str, options: Iterable[Option] = (), reads: Mapping[str, str] | Iterable[str] = ()
                 ) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """`options`: the entry's own config options; `reads`: run-wide config fields it takes, as
        {field: keyword} or field names taken under the same keyword."""
        options = tuple(options)
        reads = dict(reads) if isinstance(reads, Mapping) else {field: field for field in reads}

        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            parameters = inspect.signature(factory).parameters
            for keyword in [o.param for o in options] + list(reads.values()):
                if keyword not in parameters:
                    raise TypeError(f"{self.kind} {name!r} declares an option for keyword {keyword!r}, which it "
                                    f"does not take; it takes {inspect.signature(factory)}")
            self._entries[name], self._options[name], self._reads[name] = factory, options, reads
            return factory

        return decorator

    def get(self, name: str) -> Callable[..., T]:
        try:
            return self._entries[name]
        except KeyError:
            known = ", ".join(sorted(self._entries))
            raise ValueError(f"unknown {self.kind} {name!r}; known: {known}") from None

    def make(self, name: str, **params: Any) -> T:
        """Builds the entry `name` with `params`; a parameter it does not take is named in the error."""
        factory = self.get(name)
        try:
            inspect.signature(factory).bind(**params)
        except TypeError as err:
            raise InputTypeError(f"{self.kind} {name!r}: {err}; it takes {inspect.signature(factory)}") from None
        return factory(**params)

    def build(self, name: str, config: Any) -> T:
        """Builds the entry `name` from a config object: each declared option and run-wide field it reads is
        taken from the config attribute of that name."""
        self.get(name)
        params = {o.param: getattr(config, o.field) for o in self._options[name]}
        params.update({keyword: getattr(config, field) for field, keyword in self._reads[name].items()})
        return self.make(name, **params)

    def options(self, name: str) -> tuple[Option, ...]:
        self.get(name)
        return self._options[name]

    def reads(self, name: str) -> dict[str, str]:
        """The run-wide config fields entry `name` takes: {field: keyword}."""
        self.get(name)
        return dict(self._reads[name])

    def default(self, name: str, option: Option) -> tuple[Any, Any]:
        """The default and the type of `option` of entry `name`: its keyword's in the entry's signature."""
        factory = self.get(name)
        parameter = inspect.signature(factory).parameters[option.param]
        target = factory.__init__ if inspect.isclass(factory) else factory
        hint = typing.get_type_hints(target).get(option.param, Any)
        return parameter.default, hint

    def takes(self, name: str, keyword: str) -> bool:
        """Whether entry `name` has a keyword argument `keyword` (the simulator routes options by keyword)."""
        return keyword in inspect.signature(self.get(name)).parameters

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self.names())
