"""Run a function once a package is imported, without importing it.

``rlprof run`` times the phases of PyTorch and Stable-Baselines3 programs through hooks those
packages offer, but must not import them: a program that does not use torch must not pay for
importing it, or run differently because it is there. And most programs import torch after
rlprof starts, at their first line. So :func:`when_imported` installs the hooks at once when the
package is already in ``sys.modules``, and otherwise puts a finder on ``sys.meta_path`` that
lets the package import as usual and calls the function right after its ``__init__`` has run.
A submodule is watched the same way, by its dotted name (``envmanager.instrumentation`` patches
Stable-Baselines3's vector env classes as their modules are imported).
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from importlib.abc import Loader, MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

__all__ = ["PostImportWatch", "when_imported"]


class _AfterLoading(Loader):
    """The package's own loader, then each watch's function on the module."""

    def __init__(self, loader: Loader, watches: list[PostImportWatch]) -> None:
        self._loader = loader
        self._watches = watches

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # The package's __loader__ stays its own loader: only its spec's loader is this one.
        self._loader.exec_module(module)
        for watch in self._watches:  # in the order they were set
            watch._fire(module)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...: the package's own
        return getattr(self._loader, name)


class _Watches(MetaPathFinder):
    """The one finder on ``sys.meta_path`` for every watch, by the watched module's name.

    Every import the program makes asks each finder ahead of Python's own: one finder with a
    dict lookup, rather than one finder a watch, costs ``import torch`` (about 1,000 modules)
    25 M instructions less with the five watches of an ``rlprof run`` (callgrind).
    """

    def __init__(self) -> None:
        self.by_name: dict[str, list[PostImportWatch]] = {}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        watches = self.by_name.get(fullname)
        if watches is None:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _AfterLoading(spec.loader, list(watches))
                return spec
        return None

    def add(self, watch: PostImportWatch) -> None:
        """Watch for ``watch.package`` from now on, ahead of every finder on ``sys.meta_path``
        (as a finder inserted first would be)."""
        self.by_name.setdefault(watch.package, []).append(watch)
        if not sys.meta_path or sys.meta_path[0] is not self:
            self._leave_meta_path()
            sys.meta_path.insert(0, self)

    def remove(self, watch: PostImportWatch) -> None:
        watches = self.by_name.get(watch.package, [])
        if watch in watches:
            watches.remove(watch)
        if not watches:
            self.by_name.pop(watch.package, None)
        if not self.by_name:
            self._leave_meta_path()

    def _leave_meta_path(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


_watches = _Watches()


class PostImportWatch:
    """Watches for one module's import (a package or a submodule, by its full name); removed by
    :meth:`cancel` (or once fired)."""

    def __init__(self, package: str, then: Callable[[ModuleType], None]) -> None:
        self.package = package
        self._then = then
        self.fired = False

    def _fire(self, module: ModuleType) -> None:
        if self.fired:
            return
        self.fired = True
        self.cancel()
        self._then(module)

    def cancel(self) -> None:
        """Stop watching (nothing happens if the package was never imported)."""
        _watches.remove(self)


def when_imported(package: str, then: Callable[[ModuleType], None]) -> PostImportWatch | None:
    """Call ``then(module)`` now if ``package`` is imported, else right after it is.

    Returns the watch to cancel, or None when ``then`` ran at once.
    """
    module = sys.modules.get(package)
    if module is not None:
        then(module)
        return None
    watch = PostImportWatch(package, then)
    _watches.add(watch)
    return watch
