"""The optional C accelerator of the timer hot path: whether it was built, and whether to use it.

``profiler/timing/_timer_core.c`` holds a block's ``__enter__`` and ``__exit__`` in C (see
:mod:`profiler.timing.timer_node`, whose Python methods are the reference it matches). ``pip
install`` builds it where a C compiler is found and goes on without it where none is; setting
``RLPROF_PURE_PYTHON=1`` keeps it unloaded. Either way the pure-Python core runs, and
:func:`profiler.timing.accelerated` says which core blocks run. This module imports nothing of
rlprof.

A build is used only if it says the interface version this Python code expects
(:data:`TIMER_CORE_VERSION`, compiled into the module as ``VERSION``): an in-place build left from
older C sources would otherwise be loaded and fail on a function it lacks, taking ``import
profiler`` down with it. :func:`load_extension` turns that into one warning line naming the stale
file and how to rebuild it, and the pure-Python core runs; the step path's helper
(:mod:`envmanager.transport.timed_calls`) loads through it too.
"""

from __future__ import annotations

import importlib
import os
import warnings
from types import ModuleType

__all__ = ["FORCE_PURE_PYTHON", "TIMER_CORE_VERSION", "extension", "load_extension", "unavailable_reason"]

FORCE_PURE_PYTHON = "RLPROF_PURE_PYTHON"
"""The environment variable that, set to 1 (or true, yes, on), keeps the C accelerator unloaded."""

TIMER_CORE_VERSION = 5
"""The interface version ``_timer_core.c`` must say (its ``TIMER_CORE_VERSION``): raised with it."""

REBUILD_COMMAND = "python setup.py build_ext --inplace"
"""What rebuilds a stale in-place build (``pip install`` rebuilds an installed one)."""


def forced_pure_python() -> bool:
    """Whether :data:`FORCE_PURE_PYTHON` keeps the C helpers unloaded."""
    return os.environ.get(FORCE_PURE_PYTHON, "").strip().lower() in {"1", "true", "yes", "on"}


def load_extension(module_name: str, version: int, what: str) -> tuple[ModuleType | None, str]:
    """The compiled module ``module_name`` and ``""``, or None and why it is not used: forced off,
    not built, or built from other sources than this code's (its ``VERSION`` is not ``version``;
    that one is also said on stderr, as one warning line naming the file, since only a rebuild
    mends it). ``what`` names the module in the reasons."""
    if forced_pure_python():
        return None, f"{FORCE_PURE_PYTHON} is set"
    try:
        # By name: a compiled module, absent from the map of Python sources that
        # tests/test_architecture.py checks imports against; it imports nothing of rlprof.
        module = importlib.import_module(module_name)
    except ImportError as error:
        return None, f"{what} was not built here ({error})"
    built = getattr(module, "VERSION", None)
    if built == version:
        return module, ""
    location = getattr(module, "__file__", None) or module_name
    reason = (f"{what} {location} is a stale build (interface version {built}, this rlprof needs {version}): "
              f"the pure-Python core runs; rebuild it with `{REBUILD_COMMAND}`")
    # Reported at the file itself, line 0: the warning is one line (no source line under it),
    # and is shown once per process.
    warnings.warn_explicit(reason, RuntimeWarning, filename=location, lineno=0)
    return None, reason


extension, unavailable_reason = load_extension("profiler.timing._timer_core", TIMER_CORE_VERSION, "the C accelerator")
"""The loaded C module (None when it is not used), and why it is not (empty when it is)."""
