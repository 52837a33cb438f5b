"""``rlprof run`` with no flags: every environment the program builds, timed where it runs.

:mod:`.environments` installs it (``instrument_environments``, reached through the
``rlprof.environments`` entry point); :mod:`.factories` and :mod:`.timed_env` time each env where
it runs, :mod:`.channel` brings the workers' timers home, :mod:`.vector_env_record` turns them into
the dump's ``workers`` section and critical path, :mod:`.known_classes` times the vector step of
the classes it knows, :mod:`.own_processes` the envs of processes the program starts itself, and
:mod:`.pool_tasks` has a ``multiprocessing.Pool`` worker ship before its tasks' results.
"""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # for type checkers and readers: where each name comes from
    from envmanager.instrumentation.environments import (
        FINAL_TIMERS_WAIT_SECONDS,
        EnvironmentInstrumentation,
        instrument_environments,
    )

# Imported when first asked for (PEP 562): an env worker unpickling its factory
# (:mod:`.factories`) needs the timed env, not what the trainer installs and reads back.
_NAMES = ("FINAL_TIMERS_WAIT_SECONDS", "EnvironmentInstrumentation", "instrument_environments")


def __getattr__(name: str) -> object:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module("envmanager.instrumentation.environments"), name)
    globals()[name] = value  # asked once: later lookups find it without coming here
    return value


__all__ = ["FINAL_TIMERS_WAIT_SECONDS", "EnvironmentInstrumentation", "instrument_environments"]
