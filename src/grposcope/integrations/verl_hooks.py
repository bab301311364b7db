"""Patching a module of verl right after verl first imports it, without importing it ourselves.

grposcope.integrations.verl is imported by `import verl` itself (its verl.plugins entry point), in every process
that imports verl, the workers included. verl's trainers live in modules that cost seconds to import, and only
the TaskRunner imports them; so their methods are wrapped when that import happens: a finder on sys.meta_path
lets the others find the module and wraps the loader they return, whose exec_module then applies the patch.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import logging
import sys
from types import ModuleType
from typing import Any, Callable

logger = logging.getLogger("grposcope")


def when_imported(name: str, patch: Callable[[ModuleType], None]) -> None:
    """Calls patch(module) on the module `name`: now if it is imported, else right after its code first runs."""
    module = sys.modules.get(name)
    if module is not None:
        patch(module)
    elif not any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path):
        sys.meta_path.insert(0, _AfterImport(name, patch))


class _AfterImport(importlib.abc.MetaPathFinder):
    """A finder that lets the others find module `name` and wraps the loader they return (see when_imported)."""

    def __init__(self, name: str, patch: Callable[[ModuleType], None]) -> None:
        self.name, self.patch = name, patch

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name:
            return None
        sys.meta_path.remove(self)  # once; and the search below must not find this finder again
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None:
            spec.loader = _PatchingLoader(spec.loader, self.patch)
        return spec


class _PatchingLoader(importlib.abc.Loader):
    """The found loader, whose exec_module then applies the patch (a failing patch is logged, not raised: it
    must not stop verl from importing its own trainer)."""

    def __init__(self, loader: Any, patch: Callable[[ModuleType], None]) -> None:
        self.loader, self.patch = loader, patch

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self.loader.exec_module(module)
        try:
            self.patch(module)
        except Exception:  # noqa: BLE001
            logger.exception("grposcope: could not patch %s; grposcope's samplers and state are off", module.__name__)

    def __getattr__(self, name: str) -> Any:  # get_source, get_filename, ... of the found loader
        return getattr(self.loader, name)


__all__ = ["when_imported"]
