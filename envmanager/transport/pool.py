"""The worker processes and their pipes: starting, messaging, waiting, faults, shutdown.

This module knows nothing of Gymnasium semantics; it moves requests and replies and makes
sure no wait is endless.  Every wait watches, besides the reply pipes, each worker's exit
descriptor (its pidfd, readable once the process has exited, whatever processes it forked
hold; see :mod:`envmanager.lifetime.exit_descriptor`), so a worker that is killed or crashes
is noticed at once and reported (the caller raises :class:`~envmanager.errors.WorkerDiedError`),
never as a bare ``EOFError`` nor as a hang.

Collecting replies is two phases, :meth:`WorkerPool.wait` then :meth:`WorkerPool.collect`,
so that the time spent waiting for the slowest worker and the time spent reading and
decoding replies can be measured apart.  ``WorkerPool.ready_at`` keeps, per worker, when its
reply to the latest request was ready, so the trainer can tell whom a step waited for last.

A pipe is a byte stream: an interrupt (Ctrl-C's ``KeyboardInterrupt``) that lands while a
message is half read or half written leaves the rest of that message where the next read
expects a header.  Such a worker is *cut off*: no request is written to it again, and the
trainer's end of its requests pipe is closed so that it exits once it has answered.  If the
interrupt cut a request (the replies are intact), its replies and last timers are still read at
shutdown or restart; if it cut a reply, the rest of the stream is drained unread.  The request bookkeeping is
updated before a write and right after a read, so an interrupt anywhere else leaves it sound.

The pool also owns what ties the workers' lives to the trainer's: the lifeline through which
they learn of its death (:mod:`envmanager.lifetime.lifeline`) and the ``max_concurrency`` permits
(:mod:`envmanager.lifetime.permits`).  Stopping a worker ends its process group too
(:mod:`envmanager.lifetime.process_group`), so no helper process its envs started outlives it;
so does a worker's death however it comes, at once (:mod:`envmanager.lifetime.death_watch`).

Ctrl-C is the trainer's alone: a worker is started with SIGINT blocked, so that a Ctrl-C at
the terminal while it starts (before it leaves the trainer's process group and ignores SIGINT)
cannot print its traceback; the trainer receives the same Ctrl-C as soon as the start returns.

Why this module is long: starting, messaging, waiting, faults and shutdown share one piece of
bookkeeping per worker (its pipes, the requests it owes replies to, whether it is cut off), and
each fault path changes it in step with the others; split apart, every part would reach into the
same handles' state.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import select
import threading
import time
from dataclasses import replace
from multiprocessing.connection import Connection, wait as wait_for_ready
from typing import Any, Callable

from envmanager.transport import protocol
from envmanager.lifetime.death_watch import DeathWatch
from envmanager.lifetime.exit_descriptor import ExitDescriptor
from envmanager.lifetime.interrupts import interrupts_held, starting_without_interrupts
from envmanager.lifetime.lifeline import Lifeline
from envmanager.lifetime.one_way_pipe import one_way_pipe
from envmanager.lifetime.permits import ConcurrencyPermits
from envmanager.lifetime.process_group import kill_process_group
from envmanager.transport.protocol import RemoteFailure
from envmanager.transport.wakeup_replies import NOTHING_AWAITED, take_wakeups_function
from envmanager.transport.worker import WorkerConfig, run_worker
from profiler.multiprocess.payload import MAX_SECONDS

__all__ = [
    "WorkerHandle",
    "WorkerPool",
    "ReplyHandler",
    "TimersSink",
    "CLOSE_GRACE_SECONDS",
    "TERMINATE_GRACE_SECONDS",
    "REPLY_GRACE_SECONDS",
    "KILLED_EXIT_SECONDS",
]

# A healthy worker answers CLOSE within milliseconds; past this it is terminated.
CLOSE_GRACE_SECONDS = 10.0
# Between SIGTERM and SIGKILL for a worker that ignores or blocks SIGTERM.
TERMINATE_GRACE_SECONDS = 1.0
# How long closing or dumping waits for a reply a worker still owes (a step that Ctrl-C cut
# short, a request abandoned after a timeout, a flush request): its timer data rides on it.
REPLY_GRACE_SECONDS = 1.0
# How long closing waits for a process it sent SIGKILL to be gone. SIGKILL cannot be blocked, so
# this is only ever waited on a machine so loaded that the dying process is not scheduled; a
# shorter wait would let the worker outlive close() (or the trainer's exit) there.
KILLED_EXIT_SECONDS = 60.0

_NOTHING_AWAITED = NOTHING_AWAITED


class WorkerHandle:
    """The trainer's view of one worker: its process, its two pipe ends and its envs.

    Two one-way pipes, not one two-way ``Pipe()``: a two-way one is a Unix socket pair, and a
    pipe wakes the other side up markedly sooner (``benchmarks/step_floor.py`` shows both).
    """

    __slots__ = (
        "index",
        "envs",
        "config",
        "process",
        "conn",
        "requests",
        "request_fd",
        "fds",
        "exit_descriptor",
        "awaiting",
        "outstanding",
        "exitcode",
        "shut_down_after",
        "cut_off",
        "cut_conn",
        "cut_mid_reply",
        "restarts",
        "read_ahead",
    )

    def __init__(self, index: int, envs: range, config: WorkerConfig) -> None:
        self.index = index
        self.envs = envs
        self.config = config
        self.process: Any = None
        self.conn: Connection | None = None  # the end its replies are read from
        self.requests: Connection | None = None  # the end requests are written to
        self.request_fd = -1  # its file descriptor, read once: valid while ``requests`` is set
        self.fds = (-1, -1)  # (pipe, exit descriptor): what a wait polls, kept past close
        self.exit_descriptor: ExitDescriptor | None = None  # open until the process is reaped
        self.awaiting = _NOTHING_AWAITED  # sequence number of the reply we are waiting for
        self.outstanding = 0  # requests sent and not yet answered, including abandoned ones
        self.exitcode: int | None = None
        self.shut_down_after: str | None = None  # the env exception that made us retire it
        self.cut_off: str | None = None  # when an interrupt left its pipe unusable
        self.cut_conn: Connection | None = None  # that pipe, kept only to drain it at the end
        self.cut_mid_reply = False  # the interrupt cut a reply, so what follows is unreadable
        self.restarts = 0
        self.read_ahead: bytes | None = None  # its reply's first read, taken by a blocking wait

    @property
    def alive(self) -> bool:
        return self.conn is not None


ReplyHandler = Callable[[WorkerHandle, bool, Any], None]
TimersSink = Callable[[int, int, Any], None]
"""Receives ``(worker index, sequence number of the reply, the reply's timers field)``."""


class WorkerPool:
    """Starts the workers and carries requests to them and replies back.

    ``timers_sink`` receives every timer payload that arrives, including those riding on
    replies the trainer had stopped waiting for, so no timer data is dropped.

    ``ready_at[i]`` is when worker ``i``'s reply to its latest request was ready (None until it
    arrives): the worker's own stamp, as every process of a machine reads the same
    ``perf_counter`` clock; or, once ``worker_clock_shared`` is set to False because the
    worker's clock proved to be another, the moment the trainer saw the reply ready.

    ``max_concurrency``: at most this many envs run ``reset``/``step`` at once.  A worker runs
    one env at a time, so no permits are made when it is at least the number of workers.

    If starting a worker fails, the workers already started are stopped before the error
    propagates.
    """

    def __init__(
        self,
        ctx: Any,
        configs: list[WorkerConfig],
        envs: list[range],
        daemon: bool,
        max_concurrency: int | None = None,
    ) -> None:
        self._ctx = ctx
        self._daemon = daemon
        self._start_method = ctx.get_start_method()
        self.workers = [WorkerHandle(i, r, c) for i, (c, r) in enumerate(zip(configs, envs))]
        self.timers_sink: TimersSink | None = None
        self.ready_at: list[float | None] = [None] * len(self.workers)
        self.worker_clock_shared = True
        self._sequence = 0
        # The latest wait's poller, its key and its descriptors' owners (see wait).
        self._kept_poll_key: list[tuple[WorkerHandle, tuple[int, int]]] = []
        self._kept_poller: Any = None
        self._kept_owners: dict[int, tuple[WorkerHandle, bool]] = {}
        # How a step's wake-up replies are taken: in C where the step path's helper is in force.
        self._take_wakeups = take_wakeups_function()
        self._lifeline = Lifeline()
        self._death_watch = DeathWatch()
        self.permits: ConcurrencyPermits | None = None
        try:
            if max_concurrency is not None and max_concurrency < len(self.workers):
                self.permits = ConcurrencyPermits(max_concurrency)
            for handle in self.workers:
                self._start(handle)
        except BaseException:
            self.shutdown(graceful=False, timeout=None)
            raise

    # -- processes -------------------------------------------------------------------------

    def _start(self, handle: WorkerHandle) -> None:
        # Ends that close once, also when a collected manager closes them after their finalisers.
        requests_reader, requests_writer = one_way_pipe()
        replies_reader, replies_writer = one_way_pipe()
        fork = self._start_method == "fork"
        inherited = (
            [end for h in self.workers for end in (h.conn, h.requests) if end is not None]
            + [replies_reader, requests_writer]
            if fork
            else []
        )
        config = replace(
            handle.config,
            permits=self.permits,
            inherited_connections=inherited,
            lifeline=self._lifeline.reader,
            # The kernel's parent-death signal follows the thread that forks the worker: only
            # the main thread (or the forkserver's) is sure to live as long as the trainer.
            signal_at_parent_death=(
                self._start_method == "forkserver" or threading.current_thread() is threading.main_thread()
            ),
        )
        process = self._ctx.Process(
            target=run_worker,
            name=f"Worker<SubprocessEnvManager>-{handle.index}",
            args=(config, requests_reader, replies_writer),
            daemon=self._daemon,
        )
        with starting_without_interrupts(self._start_method):
            try:
                process.start()
            except Exception as exc:
                replies_reader.close()
                requests_writer.close()
                _add_note(exc, self._start_note(handle))
                raise
            finally:
                # Only the worker holds them now, so its exit shows up as EOF here.
                requests_reader.close()
                replies_writer.close()
            self._lifeline.bind(process)
            exit_descriptor = ExitDescriptor(process)
            self._death_watch.watch(process, exit_descriptor.fileno)
            handle.process, handle.conn, handle.requests = process, replies_reader, requests_writer
            handle.exit_descriptor = exit_descriptor
            handle.request_fd = requests_writer.fileno()
            handle.fds = (replies_reader.fileno(), exit_descriptor.fileno)
            handle.awaiting, handle.outstanding = _NOTHING_AWAITED, 0
            handle.exitcode, handle.shut_down_after, handle.cut_off = None, None, None

    def _start_note(self, handle: WorkerHandle) -> str:
        where = f"while starting worker {handle.index} (envs {handle.envs.start}..{handle.envs.stop - 1})"
        if self._start_method == "fork":
            return f"({where})"
        return f"({where} with start method {self._start_method!r}, which sends its env factories with cloudpickle)"

    def restart(self, handle: WorkerHandle) -> None:
        """Replace a gone worker by a fresh process running freshly built envs."""
        if handle.cut_conn is not None:
            self._end_cut_off([handle], REPLY_GRACE_SECONDS)
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
        """Forget a worker that has exited or must go; end its process group and reap it."""
        _close_ends(handle)
        handle.awaiting = _NOTHING_AWAITED
        self.ready_at[handle.index] = None
        # Its pipe hit EOF, it exited or it answered CLOSE: it is ending by itself.
        _wait_for_exit([handle], TERMINATE_GRACE_SECONDS)
        self._stop([handle])
        handle.exitcode = handle.process.exitcode

    # -- requests and replies --------------------------------------------------------------

    def send(self, targets: list[WorkerHandle], command: int, bodies: list[Any] | None) -> int:
        """Send one request per target; ``bodies[i]`` goes to ``targets[i]`` (None: no body).

        Targets that are gone are skipped (a wait reports them).  Returns the requests'
        sequence number, which their replies carry.
        """
        self._sequence += 1
        sequence = self._sequence
        ready_at = self.ready_at
        for i, handle in enumerate(targets):
            if handle.requests is None:
                continue
            # Pickled before the write, so a body that does not pickle leaves the pipe untouched.
            data = protocol.encode((sequence, command, None if bodies is None else bodies[i]))
            ready_at[handle.index] = None
            try:
                # Counted before it is written: once a byte is out, the worker may answer.
                handle.awaiting = sequence
                handle.outstanding += 1
                protocol.write_message(handle.request_fd, data)
            except (BrokenPipeError, ConnectionResetError):
                self._bury(handle)
            except BaseException as exc:
                self._cut_off(handle, exc, mid_reply=False)
                raise
        return sequence

    def send_step_wakeups(self) -> bool:
        """A step whose actions all went into shared memory (``StepBatch.split_actions``): each
        worker woken with a step request ``IN_SHARED_MEMORY``, as :meth:`send` sends it (the same
        bytes, bookkeeping and faults) without a body list and an encoding per worker: the
        trainer's step path, every step. (Each request is still written by
        :func:`~envmanager.transport.protocol.write_message`, where the tests' Ctrl-C lands.)

        False, having sent nothing, unless every worker runs: :meth:`send`, after the manager
        restarts the gone ones, sends then.
        """
        workers = self.workers
        for handle in workers:
            if handle.requests is None:
                return False
        self._sequence += 1
        sequence = self._sequence
        request, write_message, ready_at = protocol.step_wakeup(sequence), protocol.write_message, self.ready_at
        for handle in workers:
            ready_at[handle.index] = None
            try:
                # Counted before it is written: once a byte is out, the worker may answer.
                handle.awaiting = sequence
                handle.outstanding += 1
                write_message(handle.request_fd, request)
            except (BrokenPipeError, ConnectionResetError):
                self._bury(handle)
            except BaseException as exc:
                self._cut_off(handle, exc, mid_reply=False)
                raise
        return True

    def wait(self, targets: list[WorkerHandle], timeout: float | None, what: str) -> None:
        """Block until every target's reply can be read or the target has died.

        Late answers to abandoned requests met on the way are read and dropped (their timer
        data goes to ``timers_sink``).

        Raises:
            multiprocessing.TimeoutError: ``timeout`` seconds passed first.
        """
        if timeout is None and self.worker_clock_shared and self._wait_by_reading(targets):
            return
        # Each step waits for the same workers through the same descriptors, so the previous
        # wait's poller serves its first poll at least (a poller made per step was a third of the
        # trainer's own work on a cheap step). Keyed by handle and descriptors: restarts rebuild it.
        key = [(handle, handle.fds) for handle in targets if handle.awaiting != _NOTHING_AWAITED]
        if key != self._kept_poll_key:
            self._kept_poll_key = key
            self._kept_poller, self._kept_owners = _poller_of(handle for handle, _ in key)
        poller, owners = self._kept_poller, dict(self._kept_owners)
        kept = True  # the kept poller is never changed: a settled worker moves the rest to their own
        waiting = len(owners) // 2
        deadline = None if timeout is None else time.monotonic() + timeout
        while waiting:
            if deadline is None:
                events = poller.poll()
            else:
                events = poller.poll(max(0, math.ceil((deadline - time.monotonic()) * 1000)))
                if not events and time.monotonic() >= deadline:
                    late = sorted({handle.index: handle for handle, _ in owners.values()}.items())
                    names = ", ".join(f"worker {i} (envs {h.envs.start}..{h.envs.stop - 1})" for i, h in late)
                    raise multiprocessing.TimeoutError(
                        f"The call to `{what}` has timed out after {timeout} second(s); no reply from {names}."
                    )
            for fd, _ in events:
                owner = owners.get(fd)
                if owner is None:
                    continue  # its worker was settled earlier in this batch of events
                handle, is_exit = owner
                if not is_exit and handle.outstanding > 1:
                    self._receive(handle, _ignore_reply)  # a stale reply: read it, keep waiting
                    if handle.alive:
                        continue
                elif is_exit:
                    # It exited; a reply it sent before dying still counts (collect reads it).
                    while handle.alive and handle.outstanding > 1 and handle.conn.poll(0):
                        self._receive(handle, _ignore_reply)
                    if handle.alive and not (handle.outstanding == 1 and handle.conn.poll(0)):
                        self._bury(handle)
                if not self.worker_clock_shared and handle.alive:
                    self.ready_at[handle.index] = time.perf_counter()
                # Settled: its reply is ready, or it is dead.  Stop watching it.
                for settled_fd in handle.fds:
                    del owners[settled_fd]
                    if not kept:
                        poller.unregister(settled_fd)
                waiting -= 1
            if kept and waiting and len(owners) < len(self._kept_owners):
                # The workers still awaited, watched by a poller of their own.
                poller, kept = _poller_of({handle for handle, _ in owners.values()})[0], False

    def _wait_by_reading(self, targets: list[WorkerHandle]) -> bool:
        """Wait without a timeout by reading each awaited reply's first bytes (kept in
        ``read_ahead`` for :meth:`_receive`): one system call per worker where a poll then a
        read took two (the raw pipe round trip's count). False, having read nothing, unless
        every awaited target owes this one reply only (a stale reply must be read and dropped
        first: the poll loop does it, and reads a stale reply's start kept here, too).

        The read learns what the poll did. The writing end of a reply pipe is held by the
        worker and whatever it forks (the pool closes its copy at start; later workers never
        inherit it). A worker that dies alone closes it: the read returns end-of-file, and a
        reply sent before dying is read as the poll loop reads it. A worker that dies leaving
        a process it forked holding it has its process group killed at once by the death
        watch, which watches its pidfd (:mod:`envmanager.lifetime.death_watch`): that ends the
        forked process too, and the read returns end-of-file then (a forked process that left
        the group, ``os.setsid``, is out of reach: the read waits for its end). An interrupt
        in a read has read nothing, so the pipe stays sound, as after an interrupted poll; the
        replies already read are read to the end and dropped, as the next wait would drop them.
        """
        for handle in targets:
            if handle.awaiting != _NOTHING_AWAITED and handle.outstanding != 1:
                return False
        read, size = os.read, protocol.READ_SIZE
        try:
            for handle in targets:
                if handle.awaiting != _NOTHING_AWAITED and handle.read_ahead is None:
                    handle.read_ahead = read(handle.fds[0], size)
        except BaseException:
            for handle in targets:
                if handle.read_ahead is not None:
                    self._receive(handle, _ignore_reply)
            raise
        return True

    def collect(
        self,
        targets: list[WorkerHandle],
        on_reply: ReplyHandler,
        wakeups_counted: list[int] | None = None,
        wakeups_cleared: list[Any] | None = None,
    ) -> list[WorkerHandle]:
        """Read the replies :meth:`wait` found ready, in worker order; return the dead targets.

        ``on_reply(handle, ok, body)`` decodes each reply. A step's wake-up replies (its results
        in shared memory, no timers) that the wait read whole are taken first, without a call,
        when ``wakeups_counted`` is given: each one's worker gains one in ``wakeups_counted`` and
        has its entry in ``wakeups_cleared`` set to None, what ``on_reply`` does for one (the
        manager's steps not yet reported, the step's infos); see
        :mod:`envmanager.transport.wakeup_replies`.
        """
        if wakeups_counted is not None and self.worker_clock_shared:
            targets_left = self._take_wakeups(targets, self.ready_at, wakeups_counted, wakeups_cleared)
        else:
            targets_left = targets
        for handle in targets_left:
            if handle.awaiting != _NOTHING_AWAITED:
                self._receive(handle, on_reply)
        for handle in targets:
            if handle.conn is None:  # a gone one (``alive`` without a call)
                return [h for h in targets if h.conn is None]
        return []

    def gather(
        self, targets: list[WorkerHandle], timeout: float | None, what: str, on_reply: ReplyHandler
    ) -> list[WorkerHandle]:
        """:meth:`wait` then :meth:`collect`, for the calls off the step path."""
        self.wait(targets, timeout, what)
        return self.collect(targets, on_reply)

    def _receive(self, handle: WorkerHandle, on_reply: ReplyHandler) -> None:
        try:
            # The reply pipe's descriptor, read when it was opened: every caller reads a live
            # worker's (``conn`` set), and a closed end sets ``conn`` to None.
            fd = handle.fds[0]
            # Owing one reply, the worker writes nothing more until it gets a request: the
            # whole reply can be read at once.
            if handle.read_ahead is not None:  # the wait read its start (see _wait_by_reading)
                start, handle.read_ahead = handle.read_ahead, None
                data = protocol.read_only_message(fd, start)
            else:
                data = protocol.read_only_message(fd) if handle.outstanding == 1 else protocol.read_message(fd)
            handle.outstanding -= 1
            # Replies come in request order and only the latest request is awaited, so the
            # reply that settles the last one owed is the awaited one; the others answer
            # requests the trainer gave up on (after a timeout or an interrupt).
            awaited = handle.outstanding == 0
            if awaited:
                handle.awaiting = _NOTHING_AWAITED
        except (EOFError, OSError):
            self._bury(handle)
            return
        except BaseException as exc:
            self._cut_off(handle, exc, mid_reply=True)
            raise
        # An interrupt from here on loses this reply, but the pipe and the bookkeeping are sound.
        try:
            sequence, ok, body, timers, finished_at = protocol.decode(data)
        except Exception as exc:
            sequence, ok, body, timers, finished_at = self._unreadable_reply(handle, data, exc)
        if awaited:
            if self.worker_clock_shared:
                # A stamp beyond any payload's times (NaN, infinite, 1e300: a worker's clock gone
                # wrong) is no reading of our clock: the trainer's own moments are used from now on.
                if 0.0 <= finished_at < MAX_SECONDS:
                    self.ready_at[handle.index] = finished_at
                else:
                    self.worker_clock_shared = False
                    self.ready_at[handle.index] = time.perf_counter()
            elif self.ready_at[handle.index] is None:  # waited for while stamps were trusted
                self.ready_at[handle.index] = time.perf_counter()
            on_reply(handle, ok, body)
        # After on_reply, so that a step reply is counted before the payload that reports it.
        if timers is not None and self.timers_sink is not None:
            self.timers_sink(handle.index, sequence, timers)

    def _unreadable_reply(self, handle: WorkerHandle, data: bytes, error: Exception) -> tuple:
        """A reply that does not unpickle here: a failure naming the worker in its place, and
        its sequence number, timers and stamp when they can still be read."""
        failure = RemoteFailure(
            error,
            None,
            f"raised in the trainer reading worker {handle.index}'s reply: an info, observation or "
            "result holds an object the trainer cannot rebuild, such as an instance of a class "
            "only the worker can import",
        )
        try:
            sequence, _, _, timers, finished_at = protocol.decode_salvaging(data)
        except Exception:
            return handle.awaiting, False, failure, None, time.perf_counter()
        return sequence, False, failure, timers, finished_at

    def receive_outstanding(self, targets: list[WorkerHandle], timeout: float) -> list[WorkerHandle]:
        """Read every reply ``targets`` still owe, for at most ``timeout`` seconds.

        Their timer data goes to ``timers_sink``; the replies themselves are dropped.  Returns
        the live targets that still owe a reply then (hung, or busy for longer).
        """
        deadline = time.monotonic() + timeout
        for handle in targets:
            if handle.read_ahead is not None:  # a reply whose start a wait read: read it whole
                self._receive(handle, _ignore_reply)
        owing = [h for h in targets if h.alive and h.outstanding > 0]
        while owing:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            ready = set(wait_for_ready([h.conn for h in owing] + [h.fds[1] for h in owing], remaining))
            for handle in owing:
                if handle.conn in ready:
                    self._receive(handle, _ignore_reply)
                elif handle.fds[1] in ready:
                    # It exited: read what it sent before dying, then let it go.
                    while handle.alive and handle.outstanding > 0 and handle.conn.poll(0):
                        self._receive(handle, _ignore_reply)
                    if handle.alive:
                        self._bury(handle)
            owing = [h for h in owing if h.alive and h.outstanding > 0]
        return owing

    def _cut_off(self, handle: WorkerHandle, interrupt: BaseException, mid_reply: bool) -> None:
        """Never send this worker a request again: ``interrupt`` may have left half a message in
        its pipe.  Our end of its requests pipe is closed at once, so the worker reads
        end-of-file and exits by itself once it has answered what it holds (see
        :meth:`_end_cut_off`)."""
        when = "while its reply was being read" if mid_reply else "while a request to it was being written"
        handle.cut_off = f"({type(interrupt).__name__}) {when}, so its pipe may hold half a message"
        handle.cut_conn, handle.conn = handle.conn, None
        handle.cut_mid_reply = mid_reply
        handle.awaiting = _NOTHING_AWAITED
        self.ready_at[handle.index] = None
        if handle.requests is not None:
            handle.requests.close()
            handle.requests = None

    def _end_cut_off(self, handles: list[WorkerHandle], grace: float) -> None:
        """Read cut-off workers' pipes to the end, for up to ``grace`` seconds, then end them.

        Reading lets each finish writing, see end-of-file and exit on its own, closing its envs.
        Replies behind a cut request are intact and their timer data is merged; what follows a
        cut reply is drained unread.
        """
        deadline = time.monotonic() + grace
        open_ends = {h.cut_conn.fileno(): h for h in handles if h.cut_conn is not None}
        while open_ends:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            for fd in wait_for_ready(list(open_ends), remaining):
                if not self._read_cut_off(open_ends[fd]):
                    del open_ends[fd]
        for handle in handles:
            if handle.cut_conn is not None:
                handle.cut_conn.close()
                handle.cut_conn = None
        _wait_for_exit(handles, max(0.0, deadline - time.monotonic()))
        self._stop(handles)
        for handle in handles:
            handle.exitcode = handle.process.exitcode

    def _read_cut_off(self, handle: WorkerHandle) -> bool:
        """Read what a cut-off worker sent (False once its pipe is at its end)."""
        conn = handle.cut_conn
        try:
            if handle.cut_mid_reply:
                return bool(os.read(conn.fileno(), 1 << 20))
            sequence, _, _, timers, _ = protocol.receive(conn)
        except Exception:  # its end (EOFError, OSError) or a reply that does not unpickle
            return False
        if timers is not None and self.timers_sink is not None:
            self.timers_sink(handle.index, sequence, timers)
        return True

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown(self, graceful: bool, timeout: float | None) -> None:
        """Stop every worker; no child process outlives this call.

        Graceful: a worker still busy with a request (one that an interrupt or a timeout made
        the trainer stop waiting for) gets ``REPLY_GRACE_SECONDS`` (or ``timeout``, if shorter)
        to answer it, since its timer data rides on the answer.  Then each idle worker is asked
        to CLOSE (closing its envs and sending its last timer data) and given ``timeout``
        seconds (default ``CLOSE_GRACE_SECONDS``); a cut-off worker gets the short grace to
        exit by itself.  Whatever is left is terminated, then killed with its process group.
        """
        cut_off = [h for h in self.workers if h.cut_conn is not None]
        reply_grace = REPLY_GRACE_SECONDS if timeout is None else min(timeout, REPLY_GRACE_SECONDS)
        try:
            if graceful:
                self.receive_outstanding(self.workers, reply_grace)
                idle = [h for h in self.workers if h.alive and h.outstanding == 0]
                self.send(idle, protocol.CLOSE, None)
                try:
                    self.gather(idle, CLOSE_GRACE_SECONDS if timeout is None else timeout, "close", _ignore_reply)
                except multiprocessing.TimeoutError:
                    pass
                # Workers that answered CLOSE exit by themselves; give them a moment to do so.
                _wait_for_exit(idle, TERMINATE_GRACE_SECONDS)
        finally:
            # Also when Ctrl-C cut the graceful part short: then at once, and a second Ctrl-C
            # waits until every worker is gone (a second or so).
            with interrupts_held():
                self._end_cut_off(cut_off, reply_grace if graceful else 0.0)
                # Not yet reaped (a reaped worker's number may belong to another process by now).
                self._stop([h for h in self.workers if h.process is not None and h.exitcode is None])
                for handle in self.workers:
                    _close_ends(handle)
                    if handle.process is not None:
                        handle.exitcode = handle.process.exitcode
                # Every worker is gone: the lifeline, the watch and the permits have no one left to serve.
                self._death_watch.stop()
                self._lifeline.close()
                if self.permits is not None:
                    self.permits.remove()

    def _stop(self, handles: list[WorkerHandle]) -> None:
        """End workers' processes with every helper process their envs left behind, and reap them.

        A worker still running gets SIGTERM, on which it closes its envs (which stops their
        helpers) and exits.  Then each worker's process group is killed: the worker itself if it
        ignored SIGTERM or took longer than ``TERMINATE_GRACE_SECONDS``, and whatever its envs
        left running.  Reaping comes last, so a group's number cannot have been reused; the death
        watch forgets each worker first, under its lock, for the same reason.  The join waits
        on the exit descriptor first: ``join(timeout)`` would wait on the sentinel, which a
        process the worker forked may hold open long after the worker exited.
        """
        running = [h for h in handles if not _has_exited(h)]
        for handle in running:
            handle.process.terminate()
        _wait_for_exit(running, TERMINATE_GRACE_SECONDS)
        for handle in handles:
            if not kill_process_group(handle.process.pid) and not _has_exited(handle):
                handle.process.kill()  # it had not made its group yet
        for handle in handles:
            exited = _has_exited(handle) or _wait_for_exit([handle], KILLED_EXIT_SECONDS)
            with self._death_watch.lock:
                self._death_watch.forget(handle.fds[1])
                if exited:
                    handle.process.join()
                else:
                    handle.process.join(0)
            if handle.process.exitcode is not None and handle.exit_descriptor is not None:
                handle.exit_descriptor.close()
                handle.exit_descriptor = None


def _poller_of(handles: Any) -> tuple[Any, dict[int, tuple[WorkerHandle, bool]]]:
    """A poller watching each worker's reply pipe and exit descriptor, and whose each
    descriptor is (and whether it is the exit descriptor)."""
    poller = select.poll()
    owners: dict[int, tuple[WorkerHandle, bool]] = {}
    for handle in handles:
        pipe_fd, exit_fd = handle.fds
        poller.register(pipe_fd, select.POLLIN)
        poller.register(exit_fd, select.POLLIN)
        owners[pipe_fd] = (handle, False)
        owners[exit_fd] = (handle, True)
    return poller, owners


def _ignore_reply(handle: WorkerHandle, ok: bool, body: Any) -> None:
    pass


def _close_ends(handle: WorkerHandle) -> None:
    """Close the trainer's ends of a worker's pipes (those still open)."""
    for end in (handle.conn, handle.requests):
        if end is not None:
            end.close()
    handle.conn = handle.requests = None
    handle.read_ahead = None


def _add_note(exc: BaseException, note: str) -> None:
    if hasattr(exc, "add_note"):  # Python >= 3.11
        exc.add_note(note)


def _has_exited(handle: WorkerHandle) -> bool:
    """Whether the worker's process ended, without reaping it (its process group stays reserved)."""
    return bool(wait_for_ready([handle.fds[1]], 0))


def _wait_for_exit(handles: list[WorkerHandle], timeout: float) -> bool:
    """Wait up to ``timeout`` seconds for every worker's process to end (none is reaped);
    whether they all did."""
    deadline = time.monotonic() + timeout
    running = [h.fds[1] for h in handles if not _has_exited(h)]
    while running:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return False
        for ended in wait_for_ready(running, remaining):
            running.remove(ended)
    return True
