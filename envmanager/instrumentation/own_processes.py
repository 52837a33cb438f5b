"""The envs that ``gymnasium.make`` builds in processes the program starts itself, timed there.

Older training code often has a worker pool of its own: ``multiprocessing.Process`` workers, each
building its env with ``gymnasium.make`` and stepping it on command over its own pipe (a copy of
Baselines' ``SubprocVecEnv``). ``rlprof run`` times those envs where they run, each such process a
worker of the trainer's ``Process`` record, shipping over rlprof's channel as a vector env's
worker does (:mod:`.timed_env`):

* a process **forked** from the trainer inherits the trainer's ``gymnasium.make`` (patched with
  :func:`patch_gymnasium_make`, as the trainer patches ``make_vec``), which, outside the trainer's
  process, times the envs made there as that process's;
* a process **started with spawn or forkserver** begins in a fresh interpreter, so the trainer
  wraps its target (:class:`OwnProcessTarget`, pickled with the process object as the program's
  target is): in the process, before the program's target runs, ``gymnasium.make`` is patched
  the same way (once Gymnasium is imported; a name the program bound to the original
  ``make`` before, ``from gymnasium import make`` in the program's main module, stays the original).

rlprof's own worker processes (a ``SubprocessEnvManager``'s, a known vector env's building its
envs through rlprof's factory wrapper) mark themselves first
(:mod:`envmanager.transport.rlprof_worker`): their envs are timed once, as theirs. Each process
ships its last timers as it ends, whether or not the program's loop closes its env.

This module is imported in such a process as its target is unpickled: it imports only what the
timing needs there.
"""

from __future__ import annotations

import functools
import sys
from typing import Any, Callable

from envmanager.instrumentation.timed_env import WorkerIdentity, instrument_env, is_instrumented, ship_at_exit
from envmanager.transport.rlprof_worker import is_rlprof_worker

__all__ = ["OWN_PROCESS_ID", "OwnProcessTarget", "patch_gymnasium_make", "started_in_fresh_interpreter",
           "time_own_process_env"]

_REGISTRATION = "gymnasium.envs.registration"

OWN_PROCESS_ID = -1
"""The vector env id that a process the program started itself says hello with; its index, -1
too, is the trainer's to give (``VectorEnvRecord.add_worker``)."""


def time_own_process_env(env: Any, identity: WorkerIdentity) -> None:
    """Time ``env``, made in a process the program started itself, as worker ``identity``; the
    process ships its last timers as it ends. An rlprof worker's env, or one timed already, is
    left alone."""
    if is_rlprof_worker() or is_instrumented(env):
        return
    if instrument_env(env, identity) is not None:
        ship_at_exit()


def patch_gymnasium_make(registration: Any, on_made: Callable[[Any], None],
                         function: str = "make") -> Callable[[], None]:
    """Have ``gymnasium.make`` (or ``function``: ``make_vec``) hand each env it returns to
    ``on_made``; returns what puts the original back. ``registration`` is
    ``gymnasium.envs.registration``, imported (the package itself may still be importing it: its
    own ``make`` is then bound to the patched one)."""
    original = getattr(registration, function)

    def patched(*args: Any, **kwargs: Any) -> Any:
        env = original(*args, **kwargs)
        on_made(env)
        return env

    # The function's own name, module, doc and signature: pickle (a spawn-started vector env's factory
    # ``partial(gymnasium.make, ...)``) finds it as ``gymnasium.envs.registration.make``, as it
    # finds the original without rlprof, rather than failing on a local function.
    functools.update_wrapper(patched, original)
    modules = (sys.modules.get("gymnasium"), registration)
    owners = [module for module in modules if module is not None and getattr(module, function, None) is original]
    for module in owners:
        setattr(module, function, patched)

    def restore() -> None:
        for module in owners:
            if getattr(module, function) is patched:
                setattr(module, function, original)

    return restore


class OwnProcessTarget:
    """The target of a process the program starts with spawn or forkserver: in that process, it
    has ``gymnasium.make`` time the envs it builds, then calls the program's target as it was
    given. It pickles with the process object (as its ``target`` does) and carries only who the
    process is to the trainer."""

    __slots__ = ("target", "identity")

    def __init__(self, target: Callable[..., Any], identity: WorkerIdentity) -> None:
        self.target = target
        self.identity = identity

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        identity = self.identity

        def patch(registration: Any) -> None:
            patch_gymnasium_make(registration, lambda env: time_own_process_env(env, identity))

        registration = sys.modules.get(_REGISTRATION)
        if registration is not None:  # the usual case: the program's main module imported Gymnasium
            patch(registration)
        else:  # an import hook (importlib.abc and all) only where Gymnasium is yet to come
            from profiler.automatic.post_import import when_imported

            when_imported(_REGISTRATION, patch)
        return self.target(*args, **kwargs)

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.target, self.identity)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        self.target, self.identity = state

    def __repr__(self) -> str:
        return f"OwnProcessTarget({self.target!r})"


def started_in_fresh_interpreter(process: Any) -> bool:
    """Whether ``process`` (a ``multiprocessing`` process about to start) starts with spawn or
    forkserver, not fork: its own context's method, or, for ``multiprocessing.Process``, the
    default context's (fixed here as ``start()`` itself fixes it)."""
    import multiprocessing

    method = getattr(process, "_start_method", None) or multiprocessing.get_context().get_start_method()
    return method != "fork"
