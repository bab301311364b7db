"""One plain registry per plug-in family: a dict and a decorator.

Every family (advantage estimators, samplers, policy losses, rewards, tasks, loggers) uses this class, so a
name that is not registered fails the same way everywhere: with the list of the names that are.

An entry declares its options where it is registered: `Option(field, doc)` names a config field and the
entry's keyword argument of the same name, whose default and annotation are the option's default and type (one
source, and one name: a grep for the field lands on the parameter that reads it). `reads` names run-wide config
fields it takes, under their own names too (the seed, the success threshold). The trainer's config grows one
field per declared option (trainer/options.py). `hosts` names the trainers an entry runs in (HOSTS): grposcope's
own, TRL's subclass, verl's plugin. It is declared here, at the entry, and read by every host and by the docs'
table; no host keeps its own list.

A family whose entries live in modules of their own finds them itself: its registry is given its package once
(`package=`), and its first lookup imports every module of that package (`entry_modules`), each of which
registers its entries when imported. No list of modules to keep up to date, so no entry can be forgotten in one:
a new module in the package is found. Modules that hold no entry (the base class, the registry, helpers) are
imported too and register nothing; `_private` modules and subpackages are skipped. Where the order of the
entries matters (tables, forecasts), the registry names it (`first=`, `last=`); an entry not named there is
listed between the two, in the order of its module's name, never left out.

A plug-in from outside the package is named by its dotted path, "package.module:Name" (torchtune's way of
naming a component, with the colon of Python's entry points): `get` imports that module, and only it, the first
time the name is looked up, and registers what it names with no declared option. Its options are its keyword
arguments (grposcope.components.plugins).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
import warnings
from dataclasses import dataclass
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

from ..errors import InputTypeError

T = TypeVar("T")
HOSTS = ("grposcope", "trl", "verl")  # grposcope's own trainer, grposcope.integrations.trl, .verl


def dotted(name: object) -> bool:
    """Whether `name` names a plug-in by its dotted path, "package.module:Name"."""
    return isinstance(name, str) and ":" in name


@dataclass(frozen=True)
class Option:
    """A config option of a registered entry: the config field (and CLI flag) that sets it, TRL's flat name
    where TRL has one, and the entry's keyword argument that takes it; what it means, with its paper."""

    field: str
    doc: str


# The keywords entries took before they were spelled as their config fields, accepted by `Registry.make` (so by
# `grposcope simulate` and SimConfig) with a FutureWarning until the next release, which deletes this table:
# (registry kind, entry) -> {old keyword: config field}.
RENAMED: dict[tuple[str, str], dict[str, str]] = {
    ("advantage estimator", "grpo"): {"scale": "scale_rewards", "unbiased": "advantage_std_unbiased",
                                      "eps": "advantage_eps"},
    ("advantage estimator", "pool"): {"unbiased": "advantage_std_unbiased", "eps": "advantage_eps"},
    ("advantage estimator", "avspo"): {
        "tau_init": "acr_threshold_init", "alpha": "virtual_sample_alpha", "strategy": "virtual_sample_strategy",
        "reward_range": "virtual_reward_range", "r_anchor": "virtual_reward_anchor",
        "r_partial": "virtual_reward_partial", "adaptive_threshold": "acr_threshold_adaptive",
        "eta": "acr_threshold_eta", "reward_ema": "acr_threshold_reward_ema", "tau_min": "acr_threshold_min",
        "tau_max": "acr_threshold_max", "ema_lambda": "acr_ema_lambda", "unbiased": "advantage_std_unbiased",
        "eps": "advantage_eps"},
    ("policy loss", "grpo"): {"eps_low": "epsilon", "eps_high": "epsilon_high"},
    ("policy loss", "gspo"): {"eps_low": "gspo_epsilon", "eps_high": "gspo_epsilon_high"},
    ("policy loss", "cispo"): {"eps_low": "cispo_epsilon_low", "eps_high": "cispo_epsilon_high"},
    ("sampler", "budgeted"): {"budget": "sample_budget", "candidates": "budget_candidates",
                              "first_round": "budget_first_round", "decay": "budget_decay",
                              "prior_strength": "budget_prior_strength", "min_p_mixed": "budget_min_p_mixed"},
}


def entry_modules(package: str) -> list[str]:
    """The dotted names of the modules in `package` that may register entries, by name: every module of it but
    its `_private` ones and its subpackages (imports `package`, not its modules)."""
    path = importlib.import_module(package).__path__
    return sorted(f"{package}.{m.name}" for m in pkgutil.iter_modules(path) if not m.ispkg and m.name[0] != "_")


class Registry(Generic[T]):
    """Maps names to factories (classes or functions) of one plug-in family.

    >>> estimators = Registry("advantage estimator")
    >>> @estimators.register("grpo", options=[Option("scale_rewards", "grpo's std")])
    ... class GRPO:
    ...     def __init__(self, scale_rewards: str = "group"): ...
    """

    def __init__(self, kind: str, package: str | None = None, first: Iterable[str] = (), last: Iterable[str] = (),
                 plugins: bool = False, base: type | None = None) -> None:
        """`package`: the package whose modules register the family's own entries (`entry_modules`), all
        imported on the first lookup. The registry's module imports none of them, and they import it: no
        circle, and no entry depends on which module a program happened to import first. `first`, `last`: the
        order tables list the entries in (`ordered`), where it matters; an entry named in neither comes between.
        `plugins`: a dotted path "package.module:Name" names an entry from outside (`plugin`); `base`: the class
        such an entry must derive from (None: a class whose instances are called, as the policy losses are)."""
        self.kind = kind
        self._base = base
        self._entries: dict[str, Callable[..., T]] = {}
        self._options: dict[str, tuple[Option, ...]] = {}
        self._reads: dict[str, tuple[str, ...]] = {}
        self._hosts: dict[str, tuple[str, ...]] = {}
        self.package = package
        self.first, self.last = tuple(first), tuple(last)
        self._modules: tuple[str, ...] = ()  # the package's modules, found on the first lookup
        self._loaded = False
        self._plugins: set[str] = set()  # entries loaded from a dotted path (`plugin`)
        self._takes_plugins = plugins

    def _load(self) -> None:
        """Imports every module of the package once, before the first lookup: each registers its entries."""
        if self._loaded or self.package is None:
            return
        self._loaded = True  # first: an entry module that looks an entry up while it loads does not recurse
        self._modules = tuple(entry_modules(self.package))
        for module in self._modules:
            importlib.import_module(module)

    def register(self, name: str, options: Iterable[Option] = (), reads: Iterable[str] = (),
                 hosts: Iterable[str] = ("grposcope",)) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """`options`: the entry's own config options; `reads`: run-wide config fields it takes. Each is a
        keyword argument of the entry, spelled as the config field. `hosts`: the trainers it runs in (HOSTS)."""
        options, reads, hosts = tuple(options), tuple(reads), tuple(hosts)
        unknown = [h for h in hosts if h not in HOSTS]
        if unknown:
            raise ValueError(f"{self.kind} {name!r}: unknown host(s) {', '.join(unknown)}; known: {', '.join(HOSTS)}")

        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            parameters = inspect.signature(factory).parameters
            for field in [o.field for o in options] + list(reads):
                if field not in parameters:
                    raise TypeError(f"{self.kind} {name!r} declares the config option {field!r}, which is not one "
                                    f"of its keyword arguments; it takes {inspect.signature(factory)}")
            self._entries[name], self._options[name], self._reads[name] = factory, options, reads
            self._hosts[name] = hosts
            return factory

        return decorator

    def get(self, name: str) -> Callable[..., T]:
        self._load()
        if name in self._entries:
            return self._entries[name]
        if self._takes_plugins and dotted(name):
            return self.plugin(name)
        known = ", ".join(self.names())
        yours = (", or your own as module.path:Name (docs/architecture.md, \"Plug-ins from outside the package\")"
                 if self._takes_plugins else "")
        raise ValueError(f"unknown {self.kind} {name!r}; known: {known}{yours}")

    def plugin(self, name: str) -> Callable[..., T]:
        """Loads the plug-in `name` ("package.module:Name", Name may be dotted: Outer.Inner) and registers it,
        runnable in every host, with no declared option: its options are its keyword arguments. Imports that
        module only (and, as Python does, the packages above it)."""
        module_name, _, attribute = name.partition(":")
        if not all(part.isidentifier() for part in [*module_name.split("."), *attribute.split(".")]):
            raise ValueError(f"{self.kind} {name!r}: a plug-in is named by its dotted path, module.path:Name, "
                             "e.g. mypkg.estimators:MyEstimator")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as err:
            if not err.name or not (module_name + ".").startswith(err.name + "."):
                raise  # a module the plug-in imports is missing: its own traceback says which
            raise ValueError(f"{self.kind} {name!r}: no module named {err.name!r} on Python's path; install the "
                             "package that holds it, or add its folder to PYTHONPATH") from None
        factory: Any = module
        for part in attribute.split("."):
            if not hasattr(factory, part):
                raise ValueError(f"{self.kind} {name!r}: {module_name} ({module.__file__}) has no {attribute!r}")
            factory = getattr(factory, part)
        self._check_plugin(name, factory)
        self._entries[name], self._options[name], self._reads[name] = factory, (), ()
        self._hosts[name] = HOSTS
        self._plugins.add(name)
        return factory

    def _check_plugin(self, name: str, factory: Any) -> None:
        """A dotted path names a class of this family, checked before anything of it is called: a path to any
        other object (`os:system`, `subprocess:Popen`) would otherwise be called with the config's options."""
        if not inspect.isclass(factory):
            what = "function" if inspect.isroutine(factory) else type(factory).__name__
            raise ValueError(f"{self.kind} {name!r} is a {what}, not a class: a plug-in path names a class of its "
                             f"family ({self._wanted()}); nothing was called")
        if self._base is not None and not issubclass(factory, self._base):
            raise ValueError(f"{self.kind} {name!r} is the class {factory.__module__}.{factory.__qualname__}, not "
                             f"{self._wanted()}; nothing was called")
        if self._base is None and not any("__call__" in vars(k) for k in factory.__mro__[:-1]):
            raise ValueError(f"{self.kind} {name!r} is the class {factory.__module__}.{factory.__qualname__}, not "
                             f"{self._wanted()}: its instances cannot be called; nothing was called")

    def _wanted(self) -> str:
        if self._base is not None:
            return f"a subclass of {self._base.__module__}.{self._base.__qualname__}"
        return "a class whose instances are called (a __call__ method)"

    def unload(self, name: str) -> None:
        """Forgets plug-in `name`, so that its next lookup imports it again (tests; a reloaded module)."""
        if name not in self._plugins:
            raise ValueError(f"{self.kind} {name!r} is no plug-in loaded from a dotted path")
        self._plugins.discard(name)
        for table in (self._entries, self._options, self._reads, self._hosts):
            table.pop(name)

    def is_plugin(self, name: str) -> bool:
        """Whether entry `name` was loaded from a dotted path (loading it if need be)."""
        if self._takes_plugins and dotted(name):
            self.get(name)
        return name in self._plugins

    def make(self, name: str, **params: Any) -> T:
        """Builds the entry `name` with `params`; a parameter it does not take is named in the error, an old
        spelling (RENAMED) is taken with a FutureWarning."""
        factory = self.get(name)
        params = self.current(name, params)
        try:
            inspect.signature(factory).bind(**params)
        except TypeError as err:
            raise InputTypeError(f"{self.kind} {name!r}: {err}; it takes {inspect.signature(factory)}") from None
        return factory(**params)

    def build(self, name: str, config: Any) -> T:
        """Builds the entry `name` from a config object: each declared option and run-wide field it reads is
        the keyword argument of that name, taken from the config attribute of that name."""
        self.get(name)
        fields = [o.field for o in self._options[name]] + list(self._reads[name])
        return self.make(name, **{field: getattr(config, field) for field in fields})

    def current(self, name: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """`params` with each old keyword of entry `name` (RENAMED) spelled as its config field, with a
        FutureWarning naming the new spelling."""
        renamed = RENAMED.get((self.kind, name), {})
        out = {}
        for key, value in params.items():
            new = renamed.get(key, key)
            if new != key:
                if new in params:
                    raise InputTypeError(f"{self.kind} {name!r}: {key!r} and {new!r} are one option; write "
                                         f"{new!r} only")
                warnings.warn(f"{key!r} is deprecated, write {new!r}; the old name goes in the next release",
                              FutureWarning, stacklevel=2)
            out[new] = value
        return out

    def options(self, name: str) -> tuple[Option, ...]:
        self.get(name)
        return self._options[name]

    def reads(self, name: str) -> tuple[str, ...]:
        """The run-wide config fields entry `name` takes (each a keyword argument of that name)."""
        self.get(name)
        return self._reads[name]

    def hosts(self, name: str) -> tuple[str, ...]:
        """The trainers entry `name` runs in (a subset of HOSTS)."""
        self.get(name)
        return self._hosts[name]

    def names_in(self, host: str) -> list[str]:
        """The entries that run in `host`, in the order they were registered."""
        if host not in HOSTS:
            raise ValueError(f"unknown host {host!r}; known: {', '.join(HOSTS)}")
        return [name for name in self.ordered() if host in self._hosts[name]]

    def ordered(self) -> list[str]:
        """Every entry: the family's own, those named in `first` in that order, then the others by their
        module's name (each module's in the order it registers them), then those named in `last`; then entries
        registered from elsewhere, in the order they were registered. The same order whichever module was
        imported first."""
        self._load()
        rank = {module: i for i, module in enumerate(self._modules)}

        def place(name: str) -> tuple[int, int]:
            if name in self.first:
                return 0, self.first.index(name)
            if name in self.last:
                return 2, self.last.index(name)
            module = getattr(self._entries[name], "__module__", "")
            return (1, rank[module]) if module in rank else (3, 0)

        return sorted((name for name in self._entries if name not in self._plugins), key=place)

    def default(self, name: str, option: Option) -> tuple[Any, Any]:
        """The default and the type of `option` of entry `name`: its keyword's in the entry's signature."""
        factory = self.get(name)
        parameter = inspect.signature(factory).parameters[option.field]
        target = factory.__init__ if inspect.isclass(factory) else factory
        hint = typing.get_type_hints(target).get(option.field, Any)
        return parameter.default, hint

    def takes(self, name: str, keyword: str) -> bool:
        """Whether entry `name` has a keyword argument `keyword`, or took it under that old name (RENAMED):
        the simulator routes options by keyword."""
        return (keyword in inspect.signature(self.get(name)).parameters
                or keyword in RENAMED.get((self.kind, name), {}))

    def names(self) -> list[str]:
        """The registered entries, without the plug-ins a run loaded from dotted paths."""
        self._load()
        return sorted(name for name in self._entries if name not in self._plugins)

    def __contains__(self, name: object) -> bool:
        self._load()
        return name in self._entries

    def __iter__(self):
        return iter(self.names())
