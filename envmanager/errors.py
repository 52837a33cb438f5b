"""The errors a user of :class:`~envmanager.SubprocessEnvManager` can catch.

An exception raised by an env inside a worker is re-raised in the trainer with its *own*
type and message, so ``except ValueError`` keeps working exactly as with Gymnasium's
``AsyncVectorEnv``.  What the trainer could not otherwise know (which worker, which env, the
traceback printed over there) travels as the re-raised exception's ``__cause__``, a
:class:`WorkerError`, and as a note that shows up in the printed traceback.
"""

from __future__ import annotations

import signal
from typing import Any

from envmanager.transport.protocol import RemoteFailure

__all__ = [
    "EnvManagerError",
    "NodeLostError",
    "WorkerError",
    "WorkerDiedError",
    "WorkerPlacementError",
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

    A worker on another machine (a Ray actor) has no exit code the trainer can read: ``host``
    and ``pid`` say where it ran and ``cause`` is what its runtime said of its end (killed, its
    node lost, ...).
    """

    def __init__(
        self,
        worker_index: int,
        env_indices: range,
        exitcode: int | None,
        during: str,
        shut_down_after: str | None = None,
        cut_off: str | None = None,
        *,
        host: str | None = None,
        pid: int | None = None,
        cause: str | None = None,
    ) -> None:
        self.worker_index = worker_index
        self.env_indices = env_indices
        self.exitcode = exitcode
        self.signal_name = _signal_name(exitcode)
        self.shut_down_after = shut_down_after
        self.cut_off = cut_off
        self.host = host
        self.pid = pid
        self.cause = cause
        if cut_off is not None:
            how = f"was cut off by an interrupt {cut_off}"
        elif shut_down_after is not None:
            how = f"was shut down after its env raised {shut_down_after}"
        elif self.signal_name is not None:
            how = f"was killed by signal {self.signal_name} (exit code {exitcode})"
        elif cause is not None:
            how = f"died: {cause}"
        else:
            how = f"exited with code {exitcode}"
        envs = f"envs {env_indices.start}..{env_indices.stop - 1}"
        where = "" if host is None else f" on host {host}" + ("" if pid is None else f" (pid {pid})")
        super().__init__(f"worker {worker_index} ({envs}){where} {how}; it was needed for `{during}`")


class NodeLostError(WorkerDiedError):
    """A worker died because its whole machine left the cluster (a Ray node lost: its raylet
    killed, the machine down or cut off), taking every worker that ran there with it.

    A :class:`WorkerDiedError` (``except WorkerDiedError`` catches it) naming, beyond the worker
    the trainer needed first, the lost node — ``node_address`` and ``node_id`` — and
    ``lost_workers``, the indices of every worker that ran on it.
    """

    def __init__(
        self,
        worker_index: int,
        env_indices: range,
        during: str,
        *,
        host: str | None,
        pid: int | None,
        cause: str | None,
        node_address: str | None,
        node_id: str,
        lost_workers: list[int],
    ) -> None:
        self.node_address = node_address
        self.node_id = node_id
        self.lost_workers = list(lost_workers)
        super().__init__(worker_index, env_indices, None, during, host=host, pid=pid, cause=cause)
        node = f"node {node_address} (id {node_id[:12]})" if node_address else f"node {node_id[:12]}"
        workers = ", ".join(str(index) for index in self.lost_workers)
        plural = "s" if len(self.lost_workers) > 1 else ""
        self.args = (f"{self.args[0]}: its Ray {node} was lost, with worker{plural} {workers} on it",)


class WorkerPlacementError(EnvManagerError):
    """Workers that a cluster could not find room for within ``timeout`` seconds (Ray actors wait
    for resources: too few free CPUs, a custom resource no node has, a full placement group).

    ``asked`` is what each of them asked for, ``cluster`` and ``available`` the cluster's
    resources in all and free when the wait ended.
    """

    def __init__(
        self,
        worker_indices: list[int],
        timeout: float,
        asked: dict[str, Any],
        cluster: dict[str, float],
        available: dict[str, float],
    ) -> None:
        self.worker_indices = worker_indices
        self.asked = asked
        self.cluster = cluster
        self.available = available
        names = ", ".join(str(index) for index in worker_indices)
        wanted = {key: value for key, value in asked.items() if key in _PLACEMENT_OPTIONS}
        super().__init__(
            f"worker(s) {names} could not be placed within {timeout} s: each asks for {wanted}; "
            f"the cluster has {_resources(cluster)}, of which {_resources(available)} are free. "
            "Ask for less (num_cpus, resources), add nodes, or raise start_timeout."
        )


# The actor options that decide where an actor may go, named in a placement error.
_PLACEMENT_OPTIONS = ("num_cpus", "num_gpus", "memory", "resources", "scheduling_strategy")


def _resources(resources: dict[str, float]) -> str:
    """The resources a user asks for by name (CPU, GPU, memory and custom ones), not Ray's
    per-node bookkeeping entries."""
    shown = {key: value for key, value in sorted(resources.items()) if not key.startswith("node:")}
    return "{" + ", ".join(f"{key}: {value:g}" for key, value in shown.items()) + "}"


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
