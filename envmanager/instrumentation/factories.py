"""An env factory wrapped so that the env it builds is timed in the process that builds it.

The vector env calls the wrapper as it would the program's factory, in the process that runs the
env: the trainer (``SyncVectorEnv``, ``DummyVecEnv``, and ``AsyncVectorEnv``'s first, throw-away
build of the first env) or a worker process. The wrapper pickles with the factory (cloudpickle
under spawn and forkserver; nothing under fork), carrying only where to ship the timers.
"""

from __future__ import annotations

import os
from typing import Any, Callable

from envmanager.instrumentation.timed_env import WorkerIdentity, instrument_env
from envmanager.transport.rlprof_worker import mark_as_rlprof_worker

__all__ = ["TimedFactory"]


class TimedFactory:
    """Calls ``factory`` and times the env it returns; the env itself is returned unchanged."""

    __slots__ = ("factory", "trainer_pid", "identity")

    def __init__(self, factory: Callable[[], Any], trainer_pid: int, identity: WorkerIdentity | None) -> None:
        self.factory = factory
        self.trainer_pid = trainer_pid
        self.identity = identity  # None: the env always runs in the trainer

    def __call__(self) -> Any:
        in_trainer = self.identity is None or os.getpid() == self.trainer_pid
        if not in_trainer:
            mark_as_rlprof_worker()  # before the factory's own gymnasium.make: timed once, here
        env = self.factory()
        instrument_env(env, None if in_trainer else self.identity)
        return env

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.factory, self.trainer_pid, self.identity)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.factory, self.trainer_pid, self.identity = state

    def __repr__(self) -> str:
        return f"TimedFactory({self.factory!r})"
