"""The optional C accelerator of the timer hot path: whether it was built, and whether to use it.

``profiler/timing/_timer_core.c`` holds a block's ``__enter__`` and ``__exit__`` in C (see
:mod:`profiler.timing.timer_node`, whose Python methods are the reference it matches). ``pip
install`` builds it where a C compiler is found and goes on without it where none is; setting
``RLPROF_PURE_PYTHON=1`` keeps it unloaded. Either way the pure-Python core runs, and
:func:`profiler.timing.accelerated` says which core blocks run. This module imports nothing of
rlprof.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

__all__ = ["FORCE_PURE_PYTHON", "extension", "unavailable_reason"]

FORCE_PURE_PYTHON = "RLPROF_PURE_PYTHON"
"""The environment variable that, set to 1 (or true, yes, on), keeps the C accelerator unloaded."""


def _load() -> tuple[ModuleType | None, str]:
    if os.environ.get(FORCE_PURE_PYTHON, "").strip().lower() in {"1", "true", "yes", "on"}:
        return None, f"{FORCE_PURE_PYTHON} is set"
    try:
        # By name: a compiled module, absent from the map of Python sources that
        # tests/test_architecture.py checks imports against; it imports nothing of rlprof.
        return importlib.import_module("profiler.timing._timer_core"), ""
    except ImportError as error:
        return None, f"the C accelerator was not built here ({error})"


extension, unavailable_reason = _load()
"""The loaded C module (None when it is not used), and why it is not (empty when it is)."""
