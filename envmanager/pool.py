"""The worker processes and their pipes: starting, messaging, waiting, faults, shutdown.

This module knows nothing of Gymnasium semantics; it moves requests and replies and makes
sure no wait is endless.  Every wait watches, besides the reply pipes, each worker's
``process.sentinel`` (readable once the process has exited), so a worker that is killed or
crashes is noticed at once and reported as :class:`~envmanager.errors.WorkerDiedError`, never
as a bare ``EOFError`` nor as a hang.

One ``select.poll`` object is kept for the whole life of the pool, so a wait costs a single
system call instead of re-registering every pipe each time, as ``multiprocessing.connection.wait``
does.
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
    """

    def __init__(self, ctx: Any, configs: list[WorkerConfig], envs: list[range], daemon: bool) -> None:
        self._ctx = ctx
        self._daemon = daemon
        self._fork = ctx.get_start_method() == "fork"
        self.workers = [WorkerHandle(i, r, c) for i, (c, r) in enumerate(zip(configs, envs))]
        self.timers_sink: TimersSink | None = None
        self._sequence = 0
        self._poller = select.poll()
        self._fd_owner: dict[int, tuple[WorkerHandle, bool]] = {}
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
        handle.awaiting, handle.outstanding = _NOTHING_AWAITED, 0
        handle.exitcode, handle.shut_down_after = None, None
        self._watch(parent_end.fileno(), handle, False)
        self._watch(process.sentinel, handle, True)

    def _watch(self, fd: int, handle: WorkerHandle, is_sentinel: bool) -> None:
        self._poller.register(fd, select.POLLIN)
        self._fd_owner[fd] = (handle, is_sentinel)

    def _unwatch(self, handle: WorkerHandle) -> None:
        for fd in (handle.conn.fileno(), handle.process.sentinel):
            if self._fd_owner.pop(fd, None) is not None:
                self._poller.unregister(fd)

    def restart(self, handle: WorkerHandle) -> None:
        """Replace a dead worker by a fresh process running freshly built envs."""
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
        if handle.alive:
            self._unwatch(handle)
            handle.conn.close()
            handle.conn = None
        handle.process.join(TERMINATE_GRACE_SECONDS)  # it exits by itself after CLOSE
        _terminate([handle.process])
        handle.exitcode = handle.process.exitcode
        handle.shut_down_after = reason

    def _mark_dead(self, handle: WorkerHandle) -> None:
        self._unwatch(handle)
        handle.conn.close()
        handle.conn = None
        # The sentinel fired or the pipe hit EOF, so the process is ending: reaping is quick.
        handle.process.join(TERMINATE_GRACE_SECONDS)
        if handle.process.is_alive():  # closed its pipe but lingers: make the death real
            _terminate([handle.process])
        handle.exitcode = handle.process.exitcode
        handle.awaiting = _NOTHING_AWAITED

    # -- requests and replies --------------------------------------------------------------

    def send(self, targets: list[WorkerHandle], command: int, bodies: list[Any] | None) -> None:
        """Send one request per target; ``bodies[i]`` goes to ``targets[i]`` (None: no body)."""
        self._sequence += 1
        sequence = self._sequence
        for i, handle in enumerate(targets):
            body = None if bodies is None else bodies[i]
            try:
                protocol.send(handle.conn, (sequence, command, body))
            except (BrokenPipeError, ConnectionResetError):
                self._mark_dead(handle)
                continue
            handle.awaiting = sequence
            handle.outstanding += 1

    def gather(self, targets: list[WorkerHandle], timeout: float | None, what: str, on_reply: ReplyHandler) -> list[WorkerHandle]:
        """Wait until every target has replied or died; return the targets that died.

        ``on_reply(handle, ok, body)`` is called as each reply arrives, so decoding one
        worker's results overlaps with waiting for the slower ones.

        Raises:
            multiprocessing.TimeoutError: ``timeout`` seconds passed first.  The late replies
                are dropped when they arrive (their timer data is kept).
        """
        waiting = sum(1 for h in targets if h.awaiting != _NOTHING_AWAITED)
        if not waiting:
            return [h for h in targets if not h.alive]
        deadline = None if timeout is None else time.monotonic() + timeout
        poll = self._poller.poll
        fd_owner = self._fd_owner
        while waiting:
            if deadline is None:
                events = poll()
            else:
                events = poll(max(0, math.ceil((deadline - time.monotonic()) * 1000)))
                if not events and time.monotonic() >= deadline:
                    raise multiprocessing.TimeoutError(f"The call to `{what}` has timed out after {timeout} second(s).")
            for fd, _ in events:
                owner = fd_owner.get(fd)
                if owner is None:
                    continue  # its worker died earlier in this batch of events
                handle, is_sentinel = owner
                was_awaited = handle.awaiting != _NOTHING_AWAITED
                if is_sentinel:
                    # The process ended; take whatever it sent before dying, then bury it.
                    while handle.alive and handle.conn.poll(0):
                        self._receive(handle, on_reply)
                    if handle.alive:
                        self._mark_dead(handle)
                else:
                    self._receive(handle, on_reply)
                if was_awaited and handle.awaiting == _NOTHING_AWAITED:
                    waiting -= 1
        return [h for h in targets if not h.alive]

    def _receive(self, handle: WorkerHandle, on_reply: ReplyHandler) -> None:
        try:
            sequence, ok, body, timers = protocol.receive(handle.conn)
        except (EOFError, OSError):
            self._mark_dead(handle)
            return
        handle.outstanding -= 1
        if timers is not None and self.timers_sink is not None:
            self.timers_sink(handle.index, timers)
        if sequence != handle.awaiting:
            return  # the answer to a request the trainer gave up on after a timeout
        handle.awaiting = _NOTHING_AWAITED
        on_reply(handle, ok, body)

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown(self, graceful: bool, timeout: float | None) -> None:
        """Stop every worker; no child process outlives this call.

        Graceful: each idle worker is asked to CLOSE (closing its envs and sending its last
        timer data) and given ``timeout`` seconds (default ``CLOSE_GRACE_SECONDS``).  A
        worker still busy with a request the trainer abandoned is not waited for.  Whatever
        is left is terminated, then killed.
        """
        live = [h for h in self.workers if h.alive]
        if graceful:
            idle = [h for h in live if h.outstanding == 0]
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
        for handle in live:
            if handle.alive:
                self._unwatch(handle)
                handle.conn.close()
                handle.conn = None
                handle.exitcode = handle.process.exitcode


def _ignore_reply(handle: WorkerHandle, ok: bool, body: Any) -> None:
    pass


def _terminate(processes: list[Any]) -> None:
    """SIGTERM every live process, then SIGKILL those still alive after a grace period."""
    for process in processes:
        if process.is_alive():
            process.terminate()
    deadline = time.monotonic() + TERMINATE_GRACE_SECONDS
    for process in processes:
        process.join(max(0.0, deadline - time.monotonic()))
    for process in processes:
        if process.is_alive():
            process.kill()
            process.join(TERMINATE_GRACE_SECONDS)
