"""The ``max_concurrency`` permits: at most N envs run at once, and a dead worker's comes back.

Workers take a permit around every env ``reset``/``step``.  A POSIX semaphore (the one
``multiprocessing`` offers) loses the permit of a worker killed while holding it (SIGKILL,
a segfault inside the env): nothing ever releases it, and with one permit every other
worker then waits forever.  A System V semaphore operated with ``SEM_UNDO`` cannot lose
one: the kernel reverts a process's operations when it exits, however it exits.  So the
permits are a System V semaphore, called through ``ctypes`` (the standard library has no
System V IPC; the calls and constants used here are the same on Linux and macOS).

A System V semaphore outlives the processes that use it until it is removed: the trainer
removes it when the manager closes, and the workers of a trainer that was killed remove it
as they end.
"""

from __future__ import annotations

import ctypes
import errno
import numbers
import os
from typing import Any

__all__ = ["ConcurrencyPermits", "checked_max_concurrency"]

_IPC_PRIVATE = 0
_IPC_CREAT = 0o1000
_IPC_RMID = 0
_SEM_UNDO = 0x1000
_OWNER_READ_WRITE = 0o600


class _SemaphoreOperation(ctypes.Structure):
    _fields_ = [("sem_num", ctypes.c_ushort), ("sem_op", ctypes.c_short), ("sem_flg", ctypes.c_short)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.semget.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int)
_libc.semop.argtypes = (ctypes.c_int, ctypes.POINTER(_SemaphoreOperation), ctypes.c_size_t)
_TAKE = ctypes.pointer(_SemaphoreOperation(0, -1, _SEM_UNDO))
_GIVE_BACK = ctypes.pointer(_SemaphoreOperation(0, 1, _SEM_UNDO))


def _operate(semaphore_id: int, operation: Any) -> None:
    """One ``semop``, retried when a signal interrupts the wait.

    After an interruption the interpreter runs the Python signal handler before the retry;
    a handler that raises (the worker's SIGTERM path) ends the wait there.
    """
    semop = _libc.semop
    while semop(semaphore_id, operation, 1) != 0:
        code = ctypes.get_errno()
        if code != errno.EINTR:
            raise OSError(code, f"max_concurrency permits: semop failed: {os.strerror(code)}")


class ConcurrencyPermits:
    """``limit`` permits shared by the trainer's workers; ``with permits:`` holds one.

    It pickles as the semaphore's id, so it reaches workers under every start method.
    """

    __slots__ = ("limit", "semaphore_id")

    def __init__(self, limit: int) -> None:
        semaphore_id = _libc.semget(_IPC_PRIVATE, 1, _IPC_CREAT | _OWNER_READ_WRITE)
        if semaphore_id == -1:
            code = ctypes.get_errno()
            raise OSError(
                code,
                f"max_concurrency needs a System V semaphore and semget failed: {os.strerror(code)} "
                "(`ipcs -s` lists the existing ones, `ipcrm` removes leftovers)",
            )
        self.limit = limit
        self.semaphore_id = semaphore_id
        # The permits themselves: added without SEM_UNDO, so they stay when the trainer exits.
        _operate(semaphore_id, ctypes.pointer(_SemaphoreOperation(0, limit, 0)))

    def __enter__(self) -> None:
        _operate(self.semaphore_id, _TAKE)

    def __exit__(self, *exc_info: Any) -> None:
        _operate(self.semaphore_id, _GIVE_BACK)

    def remove(self) -> None:
        """Remove the semaphore from the system (a process still waiting gets an error)."""
        if _libc.semctl(self.semaphore_id, 0, _IPC_RMID) == -1:
            code = ctypes.get_errno()
            if code not in (errno.EINVAL, errno.EIDRM):  # already removed
                raise OSError(code, f"max_concurrency permits: semctl failed: {os.strerror(code)}")

    def __getstate__(self) -> tuple[int, int]:
        return (self.limit, self.semaphore_id)

    def __setstate__(self, state: tuple[int, int]) -> None:
        self.limit, self.semaphore_id = state


def checked_max_concurrency(value: int | None) -> int | None:
    """``max_concurrency`` as an int (None: no bound), or ``ValueError`` naming what is wrong."""
    if value is None:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool):
        raise ValueError(f"`max_concurrency` must be an integer or None, got {type(value)}.")
    if value < 1:
        raise ValueError(f"`max_concurrency` must be a positive or None, got {value}.")
    return int(value)
