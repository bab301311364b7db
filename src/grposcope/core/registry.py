"""One plain registry per plug-in family: a dict and a decorator.

Every family (advantage estimators, samplers, policy losses, rewards, tasks, loggers) uses this class, so a
name that is not registered fails the same way everywhere: with the list of the names that are.

An entry's signature is the whole declaration of its options, as in verl's `core_algos.py`: each keyword
argument is a config field of the same name (and a CLI flag), its default and annotation are the option's
default and type, and its doc is the entry's line in the `Args:` section (Google style: `name: text`,
continuation lines indented) of its class's docstring, or its `__init__`'s, or the function's (`arg_docs`).
One source, and one name: a grep for the field lands on the parameter that reads it. `reads` names the
run-wide config fields among those keyword arguments (the seed, the success threshold): they are the run's,
not the entry's options. Entries of a family may share an option (grpo, avspo and pool take advantage_eps):
one of them documents it, and they all give it the same default (components/options.py checks both).
grposcope's config and the TRL subclass's have one field per option (components/fields.py, rendered from
these declarations by `python -m grposcope.cli.render`). `hosts` names the trainers an entry runs in (HOSTS):
grposcope's own, TRL's subclass, verl's plugin. It is declared here, at the entry, and read by every host and by
the docs' table; no host keeps its own list.

A family whose entries live in modules of their own finds them itself: its registry is given its package once
(`package=`), and its first lookup imports every module of that package (`entry_modules`), each of which
registers its entries when imported. No list of modules to keep up to date, so no entry can be forgotten in one:
a new module in the package is found. Modules that hold no entry (the base class, the registry, helpers) are
imported too and register nothing; `_private` modules and subpackages are skipped. Where the order of the
entries matters (tables, forecasts), the registry names it (`first=`, `last=`); an entry not named there is
listed between the two, in the order of its module's name, never left out.

A plug-in from outside the package is named by its dotted path, "package.module:Name" (torchtune's way of
naming a component, with the colon of Python's entry points): `get` imports that module, and only it, the first
time the name is looked up, and registers it under the same rule: its options are its keyword arguments
(grposcope.components.plugins says where each takes its value from).
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import typing
import warnings
from typing import Any, Callable, Generic, Iterable, Mapping, TypeVar

from ..errors import InputTypeError
from .ranges import Range, check_value, declared_ranges

T = TypeVar("T")
HOSTS = ("grposcope", "trl", "verl")  # grposcope's own trainer, grposcope.integrations.trl, .verl


def dotted(name: object) -> bool:
    """Whether `name` names a plug-in by its dotted path, "package.module:Name"."""
    return isinstance(name, str) and ":" in name


def arg_docs(factory: Callable[..., Any]) -> dict[str, str]:
    """Each keyword argument documented in the `Args:` section of `factory`'s docstring (a class's own, then its
    `__init__`'s; a function's) -> its text on one line. Google style: an entry is `name: text` or
    `name (type): text`, its continuation lines indented deeper; the section ends at a line indented no deeper
    than `Args:`. A class inherits no docs: each entry documents its own options."""
    docs: dict[str, str] = {}
    sources = [vars(factory).get("__doc__"), vars(factory).get("__init__", None)] if inspect.isclass(factory) \
        else [factory.__doc__]
    for source in sources:
        text = source if isinstance(source, str) or source is None else getattr(source, "__doc__", None)
        docs.update(_args_section(inspect.cleandoc(text or "")))
    return docs


_SECTIONS = ("Returns:", "Raises:", "Yields:", "Example:", "Examples:", "Note:", "Notes:")  # Args: ends there


def _args_section(doc: str) -> dict[str, str]:
    out: dict[str, str] = {}
    lines = doc.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Args:"), None)
    if start is None:
        return out
    # cleandoc dedents every line but the first: an `Args:` that opens the docstring has its entries at 0
    base = len(lines[start]) - len(lines[start].lstrip()) if start else -1
    entry_indent, name = None, None
    for line in lines[start + 1:]:
        indent = len(line) - len(line.lstrip())
        if not line.strip():
            continue
        if indent <= base or line.strip() in _SECTIONS:
            break
        entry_indent = indent if entry_indent is None else entry_indent
        head = re.match(r"(\w+)\s*(\([^)]*\))?:\s*(.*)", line.strip()) if indent == entry_indent else None
        if head:
            name = head.group(1)
            out[name] = head.group(3)
        elif name is not None:
            out[name] += " " + line.strip()
    return {key: " ".join(text.split()) for key, text in out.items()}


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


def keywords(factory: Callable[..., Any]) -> list[str]:
    """The names `factory` takes as keyword arguments, in its signature's order (a class: its `__init__`'s)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [p.name for p in inspect.signature(factory).parameters.values() if p.kind in kinds]


class Registry(Generic[T]):
    """Maps names to factories (classes or functions) of one plug-in family.

    >>> estimators = Registry("advantage estimator")
    >>> @estimators.register("grpo", reads=["seed"])  # one option, scale_rewards; seed is the run's
    ... class GRPO:
    ...     def __init__(self, scale_rewards: str = "group", seed: int = 0): ...
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
        self._docs: dict[str, dict[str, str]] = {}
        self._ranges: dict[str, dict[str, Range]] = {}
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

    def register(self, name: str, reads: Iterable[str] = (),
                 hosts: Iterable[str] = ("grposcope",)) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """The entry's options are its keyword arguments (`options`), documented in its docstring's `Args:`;
        `reads`: those of them that are run-wide config fields, not its own. `hosts`: the trainers it runs in
        (HOSTS)."""
        reads, hosts = tuple(reads), tuple(hosts)
        unknown = [h for h in hosts if h not in HOSTS]
        if unknown:
            raise ValueError(f"{self.kind} {name!r}: unknown host(s) {', '.join(unknown)}; known: {', '.join(HOSTS)}")

        def decorator(factory: Callable[..., T]) -> Callable[..., T]:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is already registered")
            parameters, docs = keywords(factory), arg_docs(factory)
            for field in [*reads, *docs]:
                if field not in parameters:
                    what = "reads the config field" if field in reads else "documents (Args:) the option"
                    raise TypeError(f"{self.kind} {name!r} {what} {field!r}, which is not one of its keyword "
                                    f"arguments; it takes {inspect.signature(factory)}")
            self._entries[name], self._docs[name], self._reads[name] = factory, docs, reads
            self._ranges[name] = declared_ranges(factory)
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
        runnable in every host; its options are its keyword arguments, as every entry's. Imports that
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
        self._entries[name], self._docs[name], self._reads[name] = factory, arg_docs(factory), ()
        self._ranges[name] = declared_ranges(factory)
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
        for table in (self._entries, self._docs, self._ranges, self._reads, self._hosts):
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

    def check_ranges(self, name: str, params: Mapping[str, Any]) -> None:
        """Raises in one line when a value of `params` breaks the range its option declares (`range`). Every
        host checks a config's options so before building (`build`, components.build); `make`, the library's
        own call, does not: the AVSPO paper's worked example divides by a std with advantage_eps 0."""
        self.get(name)
        for key, value in self.current(name, params).items():
            rule = self.range(name, key)
            if rule is not None:
                check_value(key, value, rule)

    def build(self, name: str, config: Any) -> T:
        """Builds the entry `name` from a config object: each of its keyword arguments (its options and the
        run-wide fields it reads) taken from the config attribute of that name."""
        params = {field: getattr(config, field) for field in [*self.options(name), *self.reads(name)]}
        self.check_ranges(name, params)
        return self.make(name, **params)

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

    def options(self, name: str) -> tuple[str, ...]:
        """Entry `name`'s options: its keyword arguments but the run-wide fields it reads, in its signature's
        order (a config field each)."""
        reads = self.reads(name)
        return tuple(k for k in keywords(self.get(name)) if k not in reads)

    def ranges(self, name: str) -> dict[str, Range]:
        """The ranges entry `name` declares in its own annotations (`core.ranges.declared_ranges`)."""
        self.get(name)
        return self._ranges[name]

    def range(self, name: str, field: str) -> Range | None:
        """The range of option `field` of entry `name`: declared in its annotation, by this entry or, for an
        option entries share (advantage_eps), by another of the family's own (documented once, ranged once)."""
        own = self._ranges.get(name, {})
        if field in own or name in self._plugins:
            return own.get(field)
        return next((r[field] for entry, r in self._ranges.items() if field in r and entry not in self._plugins),
                    None)

    def docs(self, name: str) -> dict[str, str]:
        """Entry `name`'s options documented in its docstring's `Args:` -> their text (`arg_docs`)."""
        self.get(name)
        return self._docs[name]

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

    def default(self, name: str, field: str) -> tuple[Any, Any]:
        """The default and the type of keyword argument `field` of entry `name`, from its signature
        (`inspect.Parameter.empty` where it has no default)."""
        factory = self.get(name)
        parameter = inspect.signature(factory).parameters[field]
        target = factory.__init__ if inspect.isclass(factory) else factory
        hint = typing.get_type_hints(target).get(field, Any)
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
