"""One plain registry per plug-in family: a dict and a decorator.

Every family (advantage estimators, samplers, rewards, tasks, loggers) uses this class, so a name that is
not registered fails the same way everywhere: with the list of the names that are.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Generic, TypeVar

T = TypeVar("T")


class Registry(Generic[T]):
    """Maps names to factories (classes or functions) of one plug-in family.

    >>> estimators = Registry("advantage estimator")
    >>> @estimators.register("grpo")
    ... class GRPO: ...
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, Callable[..., T]] = {}

    def register(self, name: str) -> Callable[[Callable[..., T]], Callable[..., T]]:
        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            self._entries[name] = factory
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
            raise TypeError(f"{self.kind} {name!r}: {err}; it takes {inspect.signature(factory)}") from None
        return factory(**params)

    def accepted(self, name: str, options: dict[str, Any]) -> dict[str, Any]:
        """The part of `options` that entry `name` takes: a config holds the options of every entry, and each
        entry gets its own (e.g. `exit_rule` goes to reinforce_ada only)."""
        parameters = inspect.signature(self.get(name)).parameters
        return {k: v for k, v in options.items() if k in parameters}

    def names(self) -> list[str]:
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self):
        return iter(self.names())
