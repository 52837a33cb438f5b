"""Vectorized environments in subprocesses, profiled: a drop-in for Gymnasium's AsyncVectorEnv."""

from envmanager.errors import EnvManagerError, WorkerDiedError, WorkerError
from envmanager.subprocess_env_manager import SubprocessEnvManager

__all__ = ["SubprocessEnvManager", "EnvManagerError", "WorkerError", "WorkerDiedError"]
