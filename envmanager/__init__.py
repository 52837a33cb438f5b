"""Vectorized environments in subprocesses, profiled: a drop-in for Gymnasium's AsyncVectorEnv."""

from envmanager.gymnasium_version import check_gymnasium_version

# Before anything imports Gymnasium: an unsupported version gets one clear error, not a bare
# ImportError from deep inside.
check_gymnasium_version()

from envmanager.errors import EnvManagerError, WorkerDiedError, WorkerError  # noqa: E402
from envmanager.subprocess_env_manager import SubprocessEnvManager  # noqa: E402

__all__ = ["SubprocessEnvManager", "EnvManagerError", "WorkerError", "WorkerDiedError"]
