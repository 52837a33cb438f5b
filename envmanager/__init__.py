"""Vectorized environments in subprocesses, profiled: a drop-in for Gymnasium's AsyncVectorEnv."""

from envmanager.gymnasium_version import check_gymnasium_version

# Before anything imports Gymnasium: an unsupported version gets one clear error, not a bare
# ImportError from deep inside.
check_gymnasium_version()

from envmanager.errors import (  # noqa: E402
    EnvManagerError,
    NodeLostError,
    WorkerDiedError,
    WorkerError,
    WorkerPlacementError,
)
from envmanager.ray_env_manager import RayEnvManager  # noqa: E402  (imports Ray only when built)
from envmanager.subprocess_env_manager import SubprocessEnvManager  # noqa: E402

__all__ = [
    "SubprocessEnvManager",
    "RayEnvManager",
    "EnvManagerError",
    "WorkerError",
    "WorkerDiedError",
    "WorkerPlacementError",
    "NodeLostError",
]
