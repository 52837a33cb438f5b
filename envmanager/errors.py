"""The errors a user of :class:`~envmanager.SubprocessEnvManager` can catch.

An exception raised by an env inside a worker is re-raised in the trainer with its *own*
type and message, so ``except ValueError`` keeps working exactly as with Gymnasium's
``AsyncVectorEnv``.  What the trainer could not otherwise know (which worker, which env, the
traceback printed over there) travels as the re-raised exception's ``__cause__``, a
:class:`WorkerError`, and as a note that shows up in the printed traceback.
"""

from __future__ import annotations

import signal

from envmanager.protocol import RemoteFailure

__all__ = [
    "EnvManagerError",
    "WorkerError",
    "WorkerDiedError",
    "exception_from_failure",
]


class EnvManagerError(RuntimeError):
    """Base class of the errors raised by the env manager itself."""


class WorkerError(EnvManagerError):
    """An env raised inside worker ``worker_index``; the remote traceback is attached.

    Found as the ``__cause__`` of the exception the trainer sees.
    """

    def __init__(self, worker_index: int, env_index: int | None, remote_traceback: str) -> None:
        where = f"worker {worker_index}" + ("" if env_index is None else f" (env {env_index})")
        super().__init__(f"raised in {where}; remote traceback:\n{remote_traceback}")
        self.worker_index = worker_index
        self.env_index = env_index
        self.remote_traceback = remote_traceback


class WorkerDiedError(EnvManagerError):
    """Worker ``worker_index`` is gone while the trainer needs it.

    Either its process ended (killed, crashed, ``os._exit``): ``exitcode`` is then the exit
    code, a negative value ``-N`` meaning signal ``N``, whose name is in ``signal_name``.  Or
    the manager shut it down earlier because one of its envs raised in ``step``/``reset``
    (as Gymnasium does): ``shut_down_after`` then names that exception.  Or an interrupt
    (Ctrl-C) landed while a message to or from it was crossing the pipe, which may now hold
    half a message, so the manager never uses that pipe again: ``cut_off`` then says when.
    """

    def __init__(
        self,
        worker_index: int,
        env_indices: range,
        exitcode: int | None,
        during: str,
        shut_down_after: str | None = None,
        cut_off: str | None = None,
    ) -> None:
        self.worker_index = worker_index
        self.env_indices = env_indices
        self.exitcode = exitcode
        self.signal_name = _signal_name(exitcode)
        self.shut_down_after = shut_down_after
        self.cut_off = cut_off
        if cut_off is not None:
            how = f"was cut off by an interrupt {cut_off}"
        elif shut_down_after is not None:
            how = f"was shut down after its env raised {shut_down_after}"
        elif self.signal_name is not None:
            how = f"was killed by signal {self.signal_name} (exit code {exitcode})"
        else:
            how = f"exited with code {exitcode}"
        envs = f"envs {env_indices.start}..{env_indices.stop - 1}"
        super().__init__(f"worker {worker_index} ({envs}) {how}; it was needed for `{during}`")


def _signal_name(exitcode: int | None) -> str | None:
    if exitcode is None or exitcode >= 0:
        return None
    try:
        return signal.Signals(-exitcode).name
    except ValueError:
        return str(-exitcode)


def exception_from_failure(failure: RemoteFailure, worker_index: int) -> BaseException:
    """Rebuild the exception a worker reported, ready to ``raise ... from exc.__cause__``.

    The returned exception has the original type and arguments when they survived pickling,
    a ``RuntimeError`` naming the original type otherwise.  Its ``__cause__`` is a
    :class:`WorkerError` with the worker index and the remote traceback.
    """
    cause = WorkerError(worker_index, failure.env_index, failure.traceback)
    exc = failure.exception
    if exc is None:
        exc = RuntimeError(f"{failure.type_name}: {failure.message}")
    exc.__cause__ = cause
    if hasattr(exc, "add_note"):  # Python >= 3.11
        exc.add_note(f"(raised in worker {worker_index}; the remote traceback is in __cause__)")
    return exc
