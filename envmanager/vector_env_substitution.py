"""``rlprof run --vector-env``: Gymnasium's vector envs built as ``SubprocessEnvManager`` instead.

A training script that builds ``gymnasium.vector.AsyncVectorEnv(env_fns, ...)`` (directly, through
``from gymnasium.vector import AsyncVectorEnv`` or through ``gymnasium.make_vec(...,
vectorization_mode="async")``) gets a :class:`~envmanager.SubprocessEnvManager` built from the
same arguments, so its workers' timers, stragglers and transport costs are measured without an
edit to the script. With ``"all"``, ``SyncVectorEnv`` is replaced too (its environments then run
in subprocesses, which is the point of measuring them). ``--envs-per-worker`` sets the managers'
``envs_per_worker`` (a whole number or ``"auto"``), which Gymnasium's classes have no argument for.

The replacement is a subclass of Gymnasium's class whose metaclass builds the manager: code that
checks ``isinstance(envs, AsyncVectorEnv)`` still holds, and a class the script derives from
``AsyncVectorEnv`` is built as written, not replaced. ``profiler`` finds this module through the
``rlprof.vector_env`` entry point, so it never imports ``envmanager`` itself.
"""

from __future__ import annotations

import inspect
import weakref
from typing import Any

import gymnasium.vector
import gymnasium.vector.async_vector_env
import gymnasium.vector.sync_vector_env

from profiler.timing import timers

from envmanager.transport.envs_per_worker import EnvsPerWorker, checked_envs_per_worker
from envmanager.subprocess_env_manager import SubprocessEnvManager

__all__ = ["VECTOR_ENV_MODES", "VectorEnvSubstitution", "substitute_vector_envs"]

VECTOR_ENV_MODES = ("async", "all")
"""``async`` replaces ``AsyncVectorEnv``; ``all`` replaces ``SyncVectorEnv`` as well."""

_MANAGER_PARAMETERS = frozenset(inspect.signature(SubprocessEnvManager).parameters)


class VectorEnvSubstitution:
    """Gymnasium's vector env classes replaced until :meth:`restore`; remembers what it built."""

    def __init__(self, mode: str, envs_per_worker: EnvsPerWorker | None = None) -> None:
        """``envs_per_worker``: what every manager built here runs with (None: the manager's
        default). Checked here, so a bad value is refused before the program runs."""
        if mode not in VECTOR_ENV_MODES:
            raise ValueError(f"unknown vector env mode {mode!r}; choose one of: {', '.join(VECTOR_ENV_MODES)}")
        self.manager_options: dict[str, Any] = {}
        if envs_per_worker is not None:
            self.manager_options["envs_per_worker"] = checked_envs_per_worker(envs_per_worker)
        self.managers: weakref.WeakSet[SubprocessEnvManager] = weakref.WeakSet()
        # How many of each Gymnasium class the program asked for and got a manager instead.
        self.replaced: dict[str, int] = {}
        self._originals: list[tuple[Any, str, type]] = []
        self._replace(gymnasium.vector.async_vector_env, "AsyncVectorEnv")
        if mode == "all":
            self._replace(gymnasium.vector.sync_vector_env, "SyncVectorEnv")

    def _replace(self, defining_module: Any, name: str) -> None:
        original = getattr(defining_module, name)
        stand_in = _stand_in_for(original, self.managers, self.manager_options, self.replaced)
        for module in (defining_module, gymnasium.vector):
            self._originals.append((module, name, getattr(module, name)))
            setattr(module, name, stand_in)

    def close_managers(self) -> None:
        """Close every manager built here that the program left open (its workers' timers are
        merged on close, and no worker process outlives the run)."""
        for manager in list(self.managers):
            if not manager.closed:
                manager.close()

    def summary(self) -> list[str]:
        """What was replaced, in one line per class: the user's program did not build these."""
        return [
            f"--vector-env replaced {name} by SubprocessEnvManager ({count} built): its env workers, "
            "pipes and transport are rlprof's substitution, not your program's"
            + (" (a SyncVectorEnv steps its envs in your process, with no pipe)" if name == "SyncVectorEnv" else "")
            for name, count in self.replaced.items()
        ]

    def restore(self) -> None:
        """Put Gymnasium's own classes back."""
        for module, name, original in reversed(self._originals):
            setattr(module, name, original)
        self._originals.clear()


def substitute_vector_envs(mode: str, envs_per_worker: EnvsPerWorker | None = None) -> VectorEnvSubstitution:
    """Replace Gymnasium's vector env classes (``mode`` is one of :data:`VECTOR_ENV_MODES`)."""
    return VectorEnvSubstitution(mode, envs_per_worker)


class _BuildsManager(type):
    """The metaclass of a stand-in: calling the stand-in itself builds a SubprocessEnvManager."""

    replaced: type
    managers: weakref.WeakSet[SubprocessEnvManager]
    manager_options: dict[str, Any]  # options of the manager that the replaced class lacks
    replaced_counts: dict[str, int]  # managers built per replaced class, shared by the stand-ins

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if not cls._is_the_stand_in():
            return super().__call__(*args, **kwargs)  # a subclass the program wrote
        arguments = inspect.signature(cls.replaced).bind(*args, **kwargs).arguments
        unknown = sorted(set(arguments) - _MANAGER_PARAMETERS)
        if unknown:
            raise TypeError(
                f"rlprof run --vector-env: {cls.replaced.__name__} was given "
                f"{', '.join(unknown)}, which SubprocessEnvManager does not take; run without "
                "--vector-env, or build a SubprocessEnvManager in the script"
            )
        manager = SubprocessEnvManager(**arguments, **cls.manager_options)
        # The class the user wrote, so that advice names rlprof run's options (run_settings).
        manager._profiling.keep_metadata("vector_env_substituted_for", cls.replaced.__name__)
        cls.managers.add(manager)
        name = cls.replaced.__name__
        cls.replaced_counts[name] = cls.replaced_counts.get(name, 0) + 1
        # The verdicts read it: the transport of a replaced SyncVectorEnv is the substitution's.
        timers.add_metadata("vector_env_substitution", ", ".join(sorted(cls.replaced_counts)))
        return manager

    def __instancecheck__(cls, instance: Any) -> bool:
        if cls._is_the_stand_in() and isinstance(instance, SubprocessEnvManager):
            return True
        return super().__instancecheck__(instance)

    def _is_the_stand_in(cls) -> bool:
        return cls.__dict__.get("_is_stand_in") is True


def _stand_in_for(
    original: type,
    managers: weakref.WeakSet[SubprocessEnvManager],
    manager_options: dict[str, Any],
    replaced_counts: dict[str, int],
) -> type:
    metaclass = type(original)
    stand_in_metaclass = type(f"BuildsManager_{metaclass.__name__}", (_BuildsManager, metaclass), {})
    stand_in = stand_in_metaclass(
        original.__name__,
        (original,),
        {"__module__": original.__module__, "__qualname__": original.__qualname__,
         "__doc__": original.__doc__, "_is_stand_in": True},
    )
    stand_in.replaced = original
    stand_in.managers = managers
    stand_in.manager_options = manager_options
    stand_in.replaced_counts = replaced_counts
    return stand_in
