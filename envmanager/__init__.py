"""Vectorized environments in subprocesses, profiled: a drop-in for Gymnasium's AsyncVectorEnv."""

import importlib

from envmanager.gymnasium_version import check_gymnasium_version

# Before anything imports Gymnasium: an unsupported version gets one clear error, not a bare
# ImportError from deep inside.
check_gymnasium_version()

from typing import TYPE_CHECKING  # noqa: E402

if TYPE_CHECKING:  # for type checkers and readers: where each name comes from
    from envmanager.errors import (
        EnvManagerError,
        NodeLostError,
        WorkerDiedError,
        WorkerError,
        WorkerPlacementError,
    )
    from envmanager.ray_env_manager import RayEnvManager
    from envmanager.subprocess_env_manager import SubprocessEnvManager

# Each name is imported when first asked for (PEP 562): an env worker of ``rlprof run`` started by
# forkserver or spawn imports ``envmanager.instrumentation`` to unpickle its env factory, and needs
# neither manager nor the transport behind them.
_HOMES = {
    "EnvManagerError": "envmanager.errors",
    "NodeLostError": "envmanager.errors",
    "WorkerDiedError": "envmanager.errors",
    "WorkerError": "envmanager.errors",
    "WorkerPlacementError": "envmanager.errors",
    "RayEnvManager": "envmanager.ray_env_manager",
    "SubprocessEnvManager": "envmanager.subprocess_env_manager",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_HOMES[name]), name)
    globals()[name] = value  # asked once: later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "SubprocessEnvManager",
    "RayEnvManager",
    "EnvManagerError",
    "WorkerError",
    "WorkerDiedError",
    "WorkerPlacementError",
    "NodeLostError",
]
