"""Whether this process is one of rlprof's env workers, whose envs rlprof times already.

``rlprof run`` also times the envs that ``gymnasium.make`` builds in processes the program starts
itself (a hand-written worker pool: :mod:`envmanager.instrumentation.own_processes`). A worker of
a ``SubprocessEnvManager``, or a worker of the program's vector env that builds its envs through
rlprof's factory wrapper, is started by the trainer too and gets the same ``gymnasium.make``: it
marks itself here first, so that its envs are timed once, as that worker's.

A process forked from a marked one inherits the mark.
"""

from __future__ import annotations

__all__ = ["is_rlprof_worker", "mark_as_rlprof_worker"]

_marked = False


def mark_as_rlprof_worker() -> None:
    """Say that this process is an env worker whose envs rlprof times itself."""
    global _marked
    _marked = True


def is_rlprof_worker() -> bool:
    return _marked
