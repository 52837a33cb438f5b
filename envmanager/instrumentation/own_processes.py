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
  marks the process object as it starts it (:class:`OwnProcessMark`, pickled with it): as the
  object is unpickled in the new process, after the program's main module was imported there and
  before the target (or an overridden ``run``) is, the mark patches ``gymnasium.make`` the same way
  (once Gymnasium is imported) and rebinds the names the program's modules bound to the original
  there (``from gymnasium import make``), as they are bound to the patched one in the trainer.

rlprof's own worker processes (a ``SubprocessEnvManager``'s, a known vector env's building its
envs through rlprof's factory wrapper) mark themselves first
(:mod:`envmanager.transport.rlprof_worker`): their envs are timed once, as theirs. Each process
ships its last timers as it ends, whether or not the program's loop closes its env.

This module is imported in such a process as its mark is unpickled: it imports only what the
timing needs there.
"""

from __future__ import annotations

import functools
import sys
import types
from typing import Any, Callable

from envmanager.instrumentation.timed_env import WorkerIdentity, instrument_env, is_timed, ship_at_exit
from envmanager.transport.rlprof_worker import is_rlprof_worker

__all__ = ["OWN_PROCESS_ID", "OWN_PROCESS_MARK", "OwnProcessMark", "mark_own_process", "patch_gymnasium_make",
           "started_in_fresh_interpreter", "time_own_process_env"]

_REGISTRATION = "gymnasium.envs.registration"

OWN_PROCESS_ID = -1
"""The vector env id that a process the program started itself says hello with; its index, -1
too, is the trainer's to give (``VectorEnvRecord.add_worker``)."""


def time_own_process_env(env: Any, identity: WorkerIdentity) -> None:
    """Time ``env``, made in a process the program started itself, as worker ``identity``; the
    process ships its last timers as it ends. An rlprof worker's env, or one timed already, is
    left alone; one that wraps a timed env (made inside another make) is timed in its stead."""
    if is_rlprof_worker() or is_timed(env):
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


OWN_PROCESS_MARK = "_rlprof_own_process"
"""The attribute of a process object that holds its :class:`OwnProcessMark`."""


class OwnProcessMark:
    """Carried by a process the program starts with spawn or forkserver, first among its
    attributes: unpickled in that process, it has ``gymnasium.make`` time the envs made there
    (and, in a ``multiprocessing.Pool``'s worker, the worker ship before its tasks' results).

    Unpickling is the one moment rlprof's code runs in the new interpreter before the program's:
    the main module is imported by then, and the target, its arguments and the process's own
    ``run`` (a ``Process`` subclass may override it) are not yet. Being first, the mark is unpickled
    before a target that holds ``gymnasium.make`` itself, which then unpickles as the timed one."""

    __slots__ = ("identity", "pool_worker")

    def __init__(self, identity: WorkerIdentity, pool_worker: bool = False) -> None:
        self.identity = identity
        self.pool_worker = pool_worker

    def __reduce__(self) -> tuple[Callable[[WorkerIdentity, bool], OwnProcessMark], tuple[WorkerIdentity, bool]]:
        return _time_this_process, (self.identity, self.pool_worker)

    def __repr__(self) -> str:
        return f"OwnProcessMark({self.identity!r}, pool_worker={self.pool_worker})"


def mark_own_process(process: Any, identity: WorkerIdentity, *, pool_worker: bool = False) -> None:
    """Put an :class:`OwnProcessMark` first among the attributes of ``process`` (about to start with
    spawn or forkserver), the order in which they are pickled; ``pool_worker``: its target is
    ``multiprocessing.pool.worker``."""
    attributes = vars(process)
    others = {name: value for name, value in attributes.items() if name != OWN_PROCESS_MARK}
    attributes.clear()
    attributes[OWN_PROCESS_MARK] = OwnProcessMark(identity, pool_worker)
    attributes.update(others)


def _time_this_process(identity: WorkerIdentity, pool_worker: bool) -> OwnProcessMark:
    """In the started process, as its mark is unpickled: ``gymnasium.make`` times the envs made
    here as worker ``identity``'s, under every name the program bound it to. A pool's worker
    unpickles its target, ``multiprocessing.pool.worker``, after this: it then finds the one that
    ships before its tasks' results (:mod:`.pool_tasks`)."""

    def patch(registration: Any) -> None:
        original = registration.make
        patch_gymnasium_make(registration, lambda env: time_own_process_env(env, identity))
        _rebind(original, registration.make)

    registration = sys.modules.get(_REGISTRATION)
    if registration is not None:  # the usual case: the program's main module imported Gymnasium
        patch(registration)
    else:  # an import hook (importlib.abc and all) only where Gymnasium is yet to come
        from profiler.automatic.post_import import when_imported

        when_imported(_REGISTRATION, patch)
    if pool_worker:
        import multiprocessing.pool

        from envmanager.instrumentation.pool_tasks import patch_pool_worker

        patch_pool_worker(multiprocessing.pool)
    return OwnProcessMark(identity, pool_worker)


def _rebind(original: Any, patched: Any) -> None:
    """Every global name bound to ``original`` is bound to ``patched``. In the trainer the
    program's modules are imported after rlprof patched ``make``; in a fresh interpreter they are
    imported before (spawn imports the main module first), and a name they bound by ``from gymnasium
    import make`` would keep the untimed one. One pass over the modules, once per process: about
    13 ms with torch, Gymnasium and SB3 imported (1,548 modules)."""
    for namespace in _global_namespaces():
        for name, value in tuple(namespace.items()):
            if value is original:
                namespace[name] = patched


def _global_namespaces() -> list[dict[str, Any]]:
    """The globals of every module, and those the main module's functions run in.

    Spawn runs the main module with ``runpy.run_path``, in a temporary module, and puts a copy of
    its globals in ``sys.modules``: the functions and classes defined there keep the original."""
    namespaces = {}
    for module in tuple(sys.modules.values()):
        namespace = getattr(module, "__dict__", None)
        if type(namespace) is dict:
            namespaces[id(namespace)] = namespace
    main = sys.modules.get("__main__")
    main_name = getattr(main, "__name__", None)
    for value in tuple(getattr(main, "__dict__", {}).values()):
        for function in (value, *(vars(value).values() if isinstance(value, type) else ())):
            if isinstance(function, types.FunctionType) and function.__module__ == main_name:
                namespaces[id(function.__globals__)] = function.__globals__
                return list(namespaces.values())  # all the main module's functions share them
    return list(namespaces.values())


def started_in_fresh_interpreter(process: Any) -> bool:
    """Whether ``process`` (a ``multiprocessing`` process about to start) starts with spawn or
    forkserver, not fork: its own context's method, or, for ``multiprocessing.Process``, the
    default context's (fixed here as ``start()`` itself fixes it)."""
    import multiprocessing

    method = getattr(process, "_start_method", None) or multiprocessing.get_context().get_start_method()
    return method != "fork"
