"""The worker processes and their pipes: starting, messaging, waiting, faults, shutdown.

This module knows nothing of Gymnasium semantics; it moves requests and replies and makes
sure no wait is endless.  Every wait watches, besides the reply pipes, each worker's
``process.sentinel`` (readable once the process has exited), so a worker that is killed or
crashes is noticed at once and reported (the caller raises
:class:`~envmanager.errors.WorkerDiedError`), never as a bare ``EOFError`` nor as a hang.

Collecting replies is two phases, :meth:`WorkerPool.wait` then :meth:`WorkerPool.collect`,
so that the time spent waiting for the slowest worker and the time spent reading and
decoding replies can be measured apart.  ``WorkerPool.ready_at`` keeps, per worker, when its
reply to the latest request was ready, so the trainer can tell whom a step waited for last.
"""

from __future__ import annotations

import math
import multiprocessing
import select
import time
from dataclasses import replace
from multiprocessing.connection import Connection
from typing import Any, Callable

from envmanager import protocol
from envmanager.worker import WorkerConfig, run_worker

__all__ = ["WorkerHandle", "WorkerPool", "ReplyHandler", "TimersSink"]

# A healthy worker answers CLOSE within milliseconds; past this it is terminated.
CLOSE_GRACE_SECONDS = 10.0
# Between SIGTERM and SIGKILL for a worker that ignores or blocks SIGTERM.
TERMINATE_GRACE_SECONDS = 1.0

_NOTHING_AWAITED = 0


class WorkerHandle:
    """The trainer's view of one worker: its process, its pipe end and its envs."""

    __slots__ = (
        "index",
        "envs",
        "config",
        "process",
        "conn",
        "fds",
        "awaiting",
        "outstanding",
        "exitcode",
        "shut_down_after",
        "restarts",
    )

    def __init__(self, index: int, envs: range, config: WorkerConfig) -> None:
        self.index = index
        self.envs = envs
        self.config = config
        self.process: Any = None
        self.conn: Connection | None = None
        self.fds = (-1, -1)  # (pipe, process sentinel): what a wait polls, kept past close
        self.awaiting = _NOTHING_AWAITED  # sequence number of the reply we are waiting for
        self.outstanding = 0  # requests sent and not yet answered, including abandoned ones
        self.exitcode: int | None = None
        self.shut_down_after: str | None = None  # the env exception that made us retire it
        self.restarts = 0

    @property
    def alive(self) -> bool:
        return self.conn is not None


ReplyHandler = Callable[[WorkerHandle, bool, Any], None]
TimersSink = Callable[[int, Any], None]


class WorkerPool:
    """Starts the workers and carries requests to them and replies back.

    ``timers_sink`` receives every timer payload that arrives, including those riding on
    replies the trainer had stopped waiting for, so no timer data is dropped.

    ``ready_at[i]`` is when worker ``i``'s reply to its latest request was ready (None until it
    arrives): the worker's own stamp, as every process of a machine reads the same
    ``perf_counter`` clock; or, once ``worker_clock_shared`` is set to False because the
    worker's clock proved to be another, the moment the trainer saw the reply ready.
    """

    def __init__(self, ctx: Any, configs: list[WorkerConfig], envs: list[range], daemon: bool) -> None:
        self._ctx = ctx
        self._daemon = daemon
        self._fork = ctx.get_start_method() == "fork"
        self.workers = [WorkerHandle(i, r, c) for i, (c, r) in enumerate(zip(configs, envs))]
        self.timers_sink: TimersSink | None = None
        self.ready_at: list[float | None] = [None] * len(self.workers)
        self.worker_clock_shared = True
        self._sequence = 0
        for handle in self.workers:
            self._start(handle)

    # -- processes -------------------------------------------------------------------------

    def _start(self, handle: WorkerHandle) -> None:
        parent_end, child_end = self._ctx.Pipe()
        inherited = [h.conn for h in self.workers if h.conn is not None] + [parent_end] if self._fork else []
        config = replace(handle.config, inherited_connections=inherited)
        process = self._ctx.Process(
            target=run_worker,
            name=f"Worker<SubprocessEnvManager>-{handle.index}",
            args=(config, child_end),
            daemon=self._daemon,
        )
        process.start()
        child_end.close()  # only the worker holds it now, so its exit shows up as EOF here
        handle.process, handle.conn = process, parent_end
        handle.fds = (parent_end.fileno(), process.sentinel)
        handle.awaiting, handle.outstanding = _NOTHING_AWAITED, 0
        handle.exitcode, handle.shut_down_after = None, None

    def restart(self, handle: WorkerHandle) -> None:
        """Replace a gone worker by a fresh process running freshly built envs."""
        handle.restarts += 1
        self._start(handle)

    def retire(self, handle: WorkerHandle, reason: str) -> None:
        """Shut down a worker whose env raised: its envs may be left half-stepped.

        It is asked to CLOSE first, so its last timer data still arrives.
        """
        self.send([handle], protocol.CLOSE, None)
        try:
            self.gather([handle], CLOSE_GRACE_SECONDS, "close", _ignore_reply)
        except multiprocessing.TimeoutError:
            pass
        self._bury(handle)
        handle.shut_down_after = reason

    def _bury(self, handle: WorkerHandle) -> None:
        """Forget a worker that has exited or must go; reap its process."""
        if handle.conn is not None:
            handle.conn.close()
            handle.conn = None
        handle.awaiting = _NOTHING_AWAITED
        self.ready_at[handle.index] = None
        # Its pipe hit EOF, its sentinel fired or it answered CLOSE: it is ending by itself.
        handle.process.join(TERMINATE_GRACE_SECONDS)
        _terminate([handle.process])
        handle.exitcode = handle.process.exitcode

    # -- requests and replies --------------------------------------------------------------

    def send(self, targets: list[WorkerHandle], command: int, bodies: list[Any] | None) -> None:
        """Send one request per target; ``bodies[i]`` goes to ``targets[i]`` (None: no body)."""
        self._sequence += 1
        sequence = self._sequence
        ready_at = self.ready_at
        for i, handle in enumerate(targets):
            body = None if bodies is None else bodies[i]
            ready_at[handle.index] = None
            try:
                protocol.send(handle.conn, (sequence, command, body))
            except (BrokenPipeError, ConnectionResetError):
                self._bury(handle)
                continue
            handle.awaiting = sequence
            handle.outstanding += 1

    def wait(self, targets: list[WorkerHandle], timeout: float | None, what: str) -> None:
        """Block until every target's reply can be read or the target has died.

        Late answers to abandoned requests met on the way are read and dropped (their timer
        data goes to ``timers_sink``).

        Raises:
            multiprocessing.TimeoutError: ``timeout`` seconds passed first.
        """
        poller = select.poll()
        owners: dict[int, tuple[WorkerHandle, bool]] = {}
        for handle in targets:
            if handle.awaiting != _NOTHING_AWAITED:
                pipe_fd, sentinel_fd = handle.fds
                poller.register(pipe_fd, select.POLLIN)
                poller.register(sentinel_fd, select.POLLIN)
                owners[pipe_fd] = (handle, False)
                owners[sentinel_fd] = (handle, True)
        waiting = len(owners) // 2
        deadline = None if timeout is None else time.monotonic() + timeout
        while waiting:
            if deadline is None:
                events = poller.poll()
            else:
                events = poller.poll(max(0, math.ceil((deadline - time.monotonic()) * 1000)))
                if not events and time.monotonic() >= deadline:
                    raise multiprocessing.TimeoutError(
                        f"The call to `{what}` has timed out after {timeout} second(s)."
                    )
            for fd, _ in events:
                owner = owners.get(fd)
                if owner is None:
                    continue  # its worker was settled earlier in this batch of events
                handle, is_sentinel = owner
                if not is_sentinel and handle.outstanding > 1:
                    self._receive(handle, _ignore_reply)  # a stale reply: read it, keep waiting
                    if handle.alive:
                        continue
                elif is_sentinel:
                    # It exited; a reply it sent before dying still counts (collect reads it).
                    while handle.alive and handle.outstanding > 1 and handle.conn.poll(0):
                        self._receive(handle, _ignore_reply)
                    if handle.alive and not (handle.outstanding == 1 and handle.conn.poll(0)):
                        self._bury(handle)
                if handle.alive and not self.worker_clock_shared:
                    self.ready_at[handle.index] = time.perf_counter()
                # Settled: its reply is ready, or it is dead.  Stop watching it.
                for settled_fd in handle.fds:
                    del owners[settled_fd]
                    poller.unregister(settled_fd)
                waiting -= 1

    def collect(self, targets: list[WorkerHandle], on_reply: ReplyHandler) -> list[WorkerHandle]:
        """Read the replies :meth:`wait` found ready, in worker order; return the dead targets.

        ``on_reply(handle, ok, body)`` decodes each reply.
        """
        for handle in targets:
            if handle.awaiting != _NOTHING_AWAITED:
                self._receive(handle, on_reply)
        return [h for h in targets if not h.alive]

    def gather(
        self, targets: list[WorkerHandle], timeout: float | None, what: str, on_reply: ReplyHandler
    ) -> list[WorkerHandle]:
        """:meth:`wait` then :meth:`collect`, for the calls off the step path."""
        self.wait(targets, timeout, what)
        return self.collect(targets, on_reply)

    def _receive(self, handle: WorkerHandle, on_reply: ReplyHandler) -> None:
        try:
            sequence, ok, body, timers, finished_at = protocol.receive(handle.conn)
        except (EOFError, OSError):
            self._bury(handle)
            return
        handle.outstanding -= 1
        if timers is not None and self.timers_sink is not None:
            self.timers_sink(handle.index, timers)
        if sequence != handle.awaiting:
            return  # the answer to a request the trainer gave up on after a timeout
        handle.awaiting = _NOTHING_AWAITED
        if self.worker_clock_shared:
            self.ready_at[handle.index] = finished_at
        on_reply(handle, ok, body)

    def flush_stale_replies(self) -> None:
        """Read any late replies already waiting, so their timer data is not lost."""
        for handle in self.workers:
            while handle.alive and handle.outstanding > 0 and handle.conn.poll(0):
                self._receive(handle, _ignore_reply)

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown(self, graceful: bool, timeout: float | None) -> None:
        """Stop every worker; no child process outlives this call.

        Graceful: each idle worker is asked to CLOSE (closing its envs and sending its last
        timer data) and given ``timeout`` seconds (default ``CLOSE_GRACE_SECONDS``).  A
        worker still busy with a request the trainer abandoned is not waited for.  Whatever
        is left is terminated, then killed.
        """
        if graceful:
            self.flush_stale_replies()
            idle = [h for h in self.workers if h.alive and h.outstanding == 0]
            self.send(idle, protocol.CLOSE, None)
            try:
                self.gather(idle, CLOSE_GRACE_SECONDS if timeout is None else timeout, "close", _ignore_reply)
            except multiprocessing.TimeoutError:
                pass
            # Workers that answered CLOSE exit by themselves; give them a moment to do so.
            deadline = time.monotonic() + TERMINATE_GRACE_SECONDS
            for handle in idle:
                handle.process.join(max(0.0, deadline - time.monotonic()))
        _terminate([h.process for h in self.workers if h.process is not None])
        for handle in self.workers:
            if handle.conn is not None:
                handle.conn.close()
                handle.conn = None
            if handle.process is not None:
                handle.exitcode = handle.process.exitcode


def _ignore_reply(handle: WorkerHandle, ok: bool, body: Any) -> None:
    pass


def _terminate(processes: list[Any]) -> None:
    """SIGTERM every live process, then SIGKILL those still alive after a grace period."""
    alive = [p for p in processes if p.is_alive()]
    for process in alive:
        process.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE_SECONDS
    for process in alive:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in alive:
        if process.is_alive():
            process.kill()
            process.join(TERMINATE_GRACE_SECONDS)
