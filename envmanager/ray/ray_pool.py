"""The Ray actors of a :class:`~envmanager.ray_env_manager.RayEnvManager`: starting them, carrying
requests and replies, waiting, faults, clocks and shutdown.

It offers what :class:`~envmanager.transport.pool.WorkerPool` offers the manager's front (``workers``,
``send``, ``wait``, ``collect``, ``gather``, ``receive_outstanding``, ``restart``, ``retire``,
``shutdown``, ``ready_at``, ``timers_sink``, ``worker_clock_shared``), so the front drives actors
exactly as it drives subprocesses. The differences are the transport's:

* **A request is a method call**, ``actor.request.remote((sequence, command, body))``, and its reply
  the call's result, fetched through Ray's object store. An actor runs its calls one at a time in
  submission order, so a request abandoned after a timeout is answered before the next one, as on
  a pipe; its late reply is read and dropped, its timer data merged.
* **Waiting** is ``ray.wait`` on the latest requests. A dead actor's call is "ready" too, holding
  the error, so a killed actor or a lost node is noticed at the next wait, never as a hang
  (:class:`~envmanager.errors.WorkerDiedError` names the worker, its host and Ray's cause).
* **Clocks.** An actor on the driver's machine reads the driver's clock. Any other actor's clock
  offset is estimated from round trips when it starts and every ``clock_sync_interval`` seconds
  after (:mod:`profiler.multiprocess.clock_offset`), and handed to ``clock_sink`` (the timer merger), which
  shifts its timeline events. A reply's finishing moment is put on the driver's clock with it,
  then bounded by what the driver saw: not before the request was sent, not after it was ready.
* **Placement** waits at most ``start_timeout`` seconds for the cluster to find room for the
  actors, then says what they asked for and what the cluster has.

This module imports Ray; the manager imports it only when it starts actors.
"""

from __future__ import annotations

import multiprocessing
import re
import time
from collections import deque
from typing import Any, Callable, Iterator

import psutil
import ray
from ray.exceptions import GetTimeoutError, RayActorError, RayError

from profiler.multiprocess.clock_offset import ClockOffset, RoundTrip, monotonic_clock_id

from envmanager.transport import protocol
from envmanager.errors import WorkerDiedError, WorkerPlacementError
from envmanager.transport.pool import CLOSE_GRACE_SECONDS, KILLED_EXIT_SECONDS, REPLY_GRACE_SECONDS, ReplyHandler, TimersSink
from envmanager.transport.protocol import RemoteFailure
from envmanager.ray.ray_worker import EnvWorkerActor
from envmanager.transport.worker import WorkerConfig

__all__ = [
    "CLOCK_ROUND_TRIPS_AT_START",
    "CLOCK_ROUND_TRIPS_PERIODIC",
    "ClockSink",
    "RayWorkerHandle",
    "RayWorkerPool",
    "end_processes",
]

CLOCK_ROUND_TRIPS_AT_START = 5
"""Round trips per actor when it starts: the shortest one sets the first clock estimate."""

CLOCK_ROUND_TRIPS_PERIODIC = 3
"""Round trips per actor at each later synchronisation."""

EXIT_GRACE_SECONDS = 5.0
"""How long closing waits for Ray to end a killed actor's process on the driver's machine; then
the driver kills the process itself."""

_NOTHING_AWAITED = 0

ClockSink = Callable[[int, ClockOffset], None]
"""Receives ``(worker index, its clock estimate)`` whenever a worker's actor (re)starts."""


class RayWorkerHandle:
    """The driver's view of one worker: its actor, where it runs, its requests in flight."""

    __slots__ = (
        "index",
        "envs",
        "config",
        "actor",
        "pending",
        "awaiting",
        "sent_at",
        "exitcode",
        "shut_down_after",
        "cut_off",
        "death_cause",
        "host",
        "node_id",
        "node_address",
        "node_cpus",
        "on_driver_node",
        "pid",
        "actor_id",
        "clock",
        "on_this_machine",
        "restarts",
    )

    def __init__(self, index: int, envs: range, config: WorkerConfig) -> None:
        self.index = index
        self.envs = envs
        self.config = config
        self.actor: Any = None
        # Requests sent and not yet read, oldest first: (sequence number, result reference).
        self.pending: deque[tuple[int, Any]] = deque()
        self.awaiting = _NOTHING_AWAITED  # sequence number of the reply we are waiting for
        self.sent_at = 0.0  # the driver's clock when the awaited request was submitted
        # What the front's error reports: an actor has no exit code the driver can read, and no
        # pipe an interrupt could cut.
        self.exitcode: int | None = None
        self.cut_off: str | None = None
        self.shut_down_after: str | None = None  # the env exception that made us retire it
        self.death_cause: str | None = None  # what Ray said of the actor's end
        self.host: str | None = None
        self.node_id: str | None = None
        self.node_address: str | None = None  # the Ray node's IP address
        self.node_cpus: float | None = None  # the CPUs Ray counts on that node
        self.on_driver_node = False  # the trainer's own Ray node: its cores are shared with it
        self.pid: int | None = None
        self.actor_id: str | None = None
        self.clock = ClockOffset()
        self.on_this_machine = False  # its process is the driver's to wait for at the end
        self.restarts = 0

    @property
    def alive(self) -> bool:
        return self.actor is not None

    def section(self) -> dict[str, Any]:
        """Where this worker ran and how its clock compares: its ``ray`` entry in the dump."""
        return {
            "node_id": self.node_id,
            "node_address": self.node_address,
            "node_cpus": self.node_cpus,
            "driver_node": self.on_driver_node,
            "actor_id": self.actor_id,
            "pid": self.pid,
            "restarts": self.restarts,
            "clock": self.clock.section(),
        }


class RayWorkerPool:
    """Starts one actor per worker and carries requests to them and replies back.

    ``actor_options[i]`` are the ``.options()`` of worker ``i``'s actor (resources, scheduling
    strategy, runtime env, ...). ``timers_sink`` receives every timer payload that arrives,
    late replies' included; ``clock_sink`` every clock estimate, when an actor (re)starts.
    ``ready_at[i]`` is when worker ``i``'s reply to its latest request was ready, on the driver's
    clock (None until it arrives).
    """

    def __init__(
        self,
        configs: list[WorkerConfig],
        envs: list[range],
        actor_options: list[dict[str, Any]],
        *,
        start_timeout: float,
        clock_sync_interval: float | None,
        clock_sink: ClockSink | None,
    ) -> None:
        self.workers = [RayWorkerHandle(i, r, c) for i, (c, r) in enumerate(zip(configs, envs))]
        self.timers_sink: TimersSink | None = None
        self.clock_sink = clock_sink
        # Told of actors (re)started, before their first request, and called before the actors
        # are ended at shutdown: the per-node merging's hooks (envmanager.ray.node_merging).
        self.on_started: Callable[[list[RayWorkerHandle]], None] | None = None
        self.before_end: Callable[[], None] | None = None
        self.ready_at: list[float | None] = [None] * len(self.workers)
        self.worker_clock_shared = True  # the front clears it if the stamps prove wrong
        self._actor_options = actor_options
        self._start_timeout = start_timeout
        self._clock_sync_interval = clock_sync_interval
        self._next_clock_sync = 0.0
        self._driver_clock = monotonic_clock_id()
        self._seen_at = 0.0  # when the latest wait found every reply ready
        self._sequence = 0
        self._actor_class = ray.remote(EnvWorkerActor)
        self._start(self.workers)
        if clock_sync_interval is not None:
            self._next_clock_sync = time.monotonic() + clock_sync_interval

    # -- actors ----------------------------------------------------------------------------

    def _start(self, handles: list[RayWorkerHandle]) -> None:
        """Create the actors, wait until each is placed and built, then learn its clock.

        On failure every actor started here is killed before the error is raised.
        """
        for handle in handles:
            options = {**self._actor_options[handle.index], "max_restarts": 0, "max_task_retries": 0}
            handle.actor = self._actor_class.options(**options).remote(handle.config)
        identities = {handle.actor.identity.remote(): handle for handle in handles}
        ready, not_ready = ray.wait(
            list(identities), num_returns=len(identities), timeout=self._start_timeout
        )
        node_cpus = {node["NodeID"]: node.get("Resources", {}).get("CPU", 0.0) for node in ray.nodes()}
        driver_node = ray.get_runtime_context().get_node_id()
        try:
            if not_ready:
                unplaced = [identities[ref] for ref in not_ready]
                raise WorkerPlacementError(
                    [handle.index for handle in unplaced],
                    self._start_timeout,
                    self._actor_options[unplaced[0].index],
                    ray.cluster_resources(),
                    ray.available_resources(),
                )
            for ref in ready:
                handle = identities[ref]
                try:
                    identity = ray.get(ref)
                except RayError as error:
                    # Its constructor failed (an env module the node cannot import, ...): no
                    # identity came back, so where it ran is what Ray's message says.
                    address, handle.pid = _where(error)
                    handle.on_this_machine = address == ray.util.get_node_ip_address()
                    raise WorkerDiedError(
                        handle.index, handle.envs, None, "start", host=address, pid=handle.pid, cause=_cause(error)
                    ) from None
                handle.host, handle.node_id, handle.pid, handle.actor_id, clock_id, handle.node_address = identity
                handle.node_cpus = node_cpus.get(handle.node_id)
                handle.on_driver_node = handle.node_id == driver_node
                handle.clock = ClockOffset()
                handle.on_this_machine = clock_id == self._driver_clock
                if handle.on_this_machine:
                    handle.clock.share_clock()
        except BaseException:
            self._end(handles)
            raise
        self._synchronize_clocks(handles, CLOCK_ROUND_TRIPS_AT_START)
        for handle in handles:
            handle.pending.clear()
            handle.awaiting = _NOTHING_AWAITED
            handle.exitcode = handle.shut_down_after = handle.death_cause = None
            if self.clock_sink is not None:
                self.clock_sink(handle.index, handle.clock)
        if self.on_started is not None:
            self.on_started(handles)

    def restart(self, handle: RayWorkerHandle) -> None:
        """Replace a gone worker by a fresh actor running freshly built envs."""
        self._end([handle])
        handle.restarts += 1
        self._start([handle])

    def retire(self, handle: RayWorkerHandle, reason: str) -> None:
        """Shut down a worker whose env raised: its envs may be left half-stepped.

        It is asked to CLOSE first, so its last timer data still arrives.
        """
        self.send([handle], protocol.CLOSE, None)
        try:
            self.gather([handle], CLOSE_GRACE_SECONDS, "close", _ignore_reply)
        except multiprocessing.TimeoutError:
            pass
        self._end([handle])
        handle.shut_down_after = reason

    def node_is_lost(self, node_id: str | None) -> bool:
        """Whether Ray has declared this node dead (its raylet gone: the machine down, cut off,
        or removed), which ends every actor on it."""
        if node_id is None:
            return False
        try:
            nodes = ray.nodes()
        except RayError:
            return False  # the cluster cannot say: the worker's own death is reported alone
        return any(node.get("NodeID") == node_id and not node.get("Alive", True) for node in nodes)

    def _bury(self, handle: RayWorkerHandle, cause: str) -> None:
        """Forget a worker whose actor died; make sure it stays dead."""
        self._end([handle])
        handle.death_cause = cause

    def _end(self, handles: list[RayWorkerHandle]) -> None:
        """Kill the handles' actors and, on this machine, make sure their processes are gone."""
        local_processes = []
        for handle in handles:
            if handle.actor is None:
                continue
            if handle.on_this_machine and handle.pid is not None:
                # Taken before the kill: psutil then recognises the process by its start time
                # too, so a pid the system reuses later is never mistaken for it.
                try:
                    local_processes.append(psutil.Process(handle.pid))
                except psutil.Error:
                    pass  # gone already
            try:
                ray.kill(handle.actor, no_restart=True)
            except (RayError, ValueError):
                pass  # it is gone already
            handle.actor = None
            handle.pending.clear()
            handle.awaiting = _NOTHING_AWAITED
            self.ready_at[handle.index] = None
        end_processes(local_processes)

    # -- requests and replies --------------------------------------------------------------

    def send(self, targets: list[RayWorkerHandle], command: int, bodies: list[Any] | None) -> int:
        """Submit one request per live target; ``bodies[i]`` goes to ``targets[i]``.

        Returns the requests' sequence number, which their replies carry. Before a request, the
        clocks of idle actors on other machines are re-estimated when that is due.
        """
        if self._clock_sync_interval is not None and time.monotonic() >= self._next_clock_sync:
            self._next_clock_sync = time.monotonic() + self._clock_sync_interval
            self._synchronize_clocks([h for h in targets if not h.pending], CLOCK_ROUND_TRIPS_PERIODIC)
        self._sequence += 1
        sequence = self._sequence
        for i, handle in enumerate(targets):
            if handle.actor is None:
                continue
            body = None if bodies is None else bodies[i]
            self.ready_at[handle.index] = None
            handle.sent_at = time.perf_counter()
            handle.pending.append((sequence, handle.actor.request.remote((sequence, command, body))))
            handle.awaiting = sequence
        return sequence

    def wait(self, targets: list[RayWorkerHandle], timeout: float | None, what: str) -> None:
        """Block until every target's latest reply is ready (a dead actor's is ready too).

        Raises:
            multiprocessing.TimeoutError: ``timeout`` seconds passed first.
        """
        awaited = [h.pending[-1][1] for h in targets if h.awaiting != _NOTHING_AWAITED and h.pending]
        if awaited:
            _, not_ready = ray.wait(awaited, num_returns=len(awaited), timeout=timeout)
            if not_ready:
                raise multiprocessing.TimeoutError(
                    f"The call to `{what}` has timed out after {timeout} second(s)."
                )
        self._seen_at = time.perf_counter()

    def collect(self, targets: list[RayWorkerHandle], on_reply: ReplyHandler) -> list[RayWorkerHandle]:
        """Read the replies :meth:`wait` found ready, in worker order; return the dead targets.

        Replies to requests given up on earlier come first; they are read and dropped, their
        timer data merged. ``on_reply(handle, ok, body)`` decodes each awaited reply.
        """
        owing = [h for h in targets if h.awaiting != _NOTHING_AWAITED and h.pending]
        replies = _fetch_all([ref for handle in owing for _, ref in handle.pending])
        for handle in owing:
            while handle.awaiting != _NOTHING_AWAITED and handle.pending:
                self._receive(handle, on_reply, CLOSE_GRACE_SECONDS, next(replies, None))
        return [h for h in targets if not h.alive]

    def gather(
        self, targets: list[RayWorkerHandle], timeout: float | None, what: str, on_reply: ReplyHandler
    ) -> list[RayWorkerHandle]:
        """:meth:`wait` then :meth:`collect`, for the calls off the step path."""
        self.wait(targets, timeout, what)
        return self.collect(targets, on_reply)

    def _receive(
        self, handle: RayWorkerHandle, on_reply: ReplyHandler, timeout: float, reply: Any = None
    ) -> None:
        """Read the oldest pending reply of ``handle``, unless it was fetched already (``reply``);
        its actor's death ends the worker."""
        sequence, ref = handle.pending.popleft()
        awaited = sequence == handle.awaiting
        if awaited:
            handle.awaiting = _NOTHING_AWAITED
        try:
            if reply is None:
                reply = ray.get(ref, timeout=timeout)
        except RayActorError as error:
            self._bury(handle, _cause(error))
            return
        except GetTimeoutError:
            # Only a reply older than the one found ready can be missing, and an actor answers
            # in order: it can only be lost with the actor.
            self._bury(handle, f"its reply to request {sequence} never arrived")
            return
        except RayError as error:
            # The call itself failed (its result could not be stored or sent back): report it as
            # the worker's failure, as a pipe worker reports a reply that does not pickle.
            reply = (sequence, False, RemoteFailure(_original(error), None), None, None)
        _, ok, body, timers, finished_at = reply
        if awaited:
            self.ready_at[handle.index] = self._ready_moment(handle, finished_at)
            on_reply(handle, ok, body)
        # After on_reply, so that a step reply is counted before the payload that reports it.
        if timers is not None and self.timers_sink is not None:
            self.timers_sink(handle.index, sequence, timers)

    def _ready_moment(self, handle: RayWorkerHandle, finished_at: float | None) -> float:
        """When the reply was ready, on the driver's clock: the actor's stamp moved by its clock
        offset, bounded by the moments the driver sent the request and saw the reply ready."""
        if finished_at is None or not self.worker_clock_shared:
            return self._seen_at
        return min(max(handle.clock.to_ours(finished_at), handle.sent_at), self._seen_at)

    def receive_outstanding(self, targets: list[RayWorkerHandle], timeout: float) -> list[RayWorkerHandle]:
        """Read every reply ``targets`` still owe, for at most ``timeout`` seconds.

        Their timer data goes to ``timers_sink``; the replies themselves are dropped. Returns
        the live targets that still owe a reply then (hung, or busy for longer).
        """
        owing = [h for h in targets if h.alive and h.pending]
        refs = [ref for handle in owing for _, ref in handle.pending]
        if refs:
            ready, _ = ray.wait(refs, num_returns=len(refs), timeout=max(0.0, timeout))
            ready_refs = set(ready)
            self._seen_at = time.perf_counter()
            for handle in owing:
                while handle.alive and handle.pending and handle.pending[0][1] in ready_refs:
                    self._receive(handle, _ignore_reply, CLOSE_GRACE_SECONDS)
        return [h for h in owing if h.alive and h.pending]

    # -- clocks ----------------------------------------------------------------------------

    def _synchronize_clocks(self, handles: list[RayWorkerHandle], round_trips: int) -> None:
        """Estimate afresh the clock offset of each idle live actor on another machine.

        All actors are asked at once, ``round_trips`` times; each answer is stamped as it
        arrives. An actor that does not answer within ``CLOSE_GRACE_SECONDS`` keeps its previous
        estimate; one found dead is buried (the next request reports it).
        """
        remote = [h for h in handles if h.alive and not h.clock.shared]
        trips: dict[int, list[RoundTrip]] = {h.index: [] for h in remote}
        deadline = time.monotonic() + CLOSE_GRACE_SECONDS
        for _ in range(round_trips):
            asked: dict[Any, tuple[RayWorkerHandle, float]] = {}
            for handle in remote:
                if handle.alive:
                    sent_at = time.perf_counter()
                    asked[handle.actor.clock.remote()] = (handle, sent_at)
            pending = list(asked)
            while pending:
                ready, pending = ray.wait(
                    pending, num_returns=1, timeout=max(0.0, deadline - time.monotonic())
                )
                received_at = time.perf_counter()
                if not ready:
                    break
                handle, sent_at = asked[ready[0]]
                try:
                    trips[handle.index].append((sent_at, ray.get(ready[0]), received_at))
                except RayActorError as error:
                    self._bury(handle, _cause(error))
        for handle in remote:
            if trips[handle.index]:
                handle.clock.update(trips[handle.index])

    def measure_round_trips(self, handle: RayWorkerHandle, count: int) -> list[RoundTrip]:
        """``count`` round trips to one idle worker's clock, one after another: what a clock
        estimate is made of (the manager's own synchronisation asks every actor at once)."""
        trips = []
        for _ in range(count):
            sent_at = time.perf_counter()
            remote_at = ray.get(handle.actor.clock.remote(), timeout=CLOSE_GRACE_SECONDS)
            trips.append((sent_at, remote_at, time.perf_counter()))
        return trips

    # -- shutdown ---------------------------------------------------------------------------

    def shutdown(self, graceful: bool, timeout: float | None) -> None:
        """Stop every worker: no actor outlives this call.

        Graceful: a worker still busy with a request gets ``REPLY_GRACE_SECONDS`` (or
        ``timeout``, if shorter) to answer it, since its timer data rides on the answer; then
        each idle worker is asked to CLOSE (closing its envs and sending its last timer data)
        within ``timeout`` seconds (default ``CLOSE_GRACE_SECONDS``). Then every actor is killed,
        and the driver waits for those on its machine to be gone.
        """
        if not ray.is_initialized():
            # Ray was shut down first: the driver's actors went with it (Ray ends an owner's
            # actors), and nothing can be asked of them any more.
            for handle in self.workers:
                handle.actor = None
                handle.pending.clear()
            if self.before_end is not None:
                self.before_end()  # it finds Ray gone too, and keeps what it has
            return
        if graceful:
            reply_grace = REPLY_GRACE_SECONDS if timeout is None else min(timeout, REPLY_GRACE_SECONDS)
            self.receive_outstanding(self.workers, reply_grace)
            idle = [h for h in self.workers if h.alive and not h.pending]
            self._clock_sync_interval = None  # no clock to learn from actors about to go
            self.send(idle, protocol.CLOSE, None)
            try:
                self.gather(idle, CLOSE_GRACE_SECONDS if timeout is None else timeout, "close", _ignore_reply)
            except multiprocessing.TimeoutError:
                pass
        try:
            if self.before_end is not None:
                self.before_end()
        finally:
            self._end(self.workers)


def _ignore_reply(handle: RayWorkerHandle, ok: bool, body: Any) -> None:
    pass


def _fetch_all(refs: list[Any]) -> Iterator[Any]:
    """The results of ``refs``, which a wait found ready, fetched in one call (one call for all
    is much cheaper than one each); nothing when any of them failed: those are then read one by
    one, to tell which."""
    if not refs:
        return iter(())
    try:
        return iter(ray.get(refs, timeout=CLOSE_GRACE_SECONDS))
    except RayError:
        return iter(())


def _cause(error: RayError) -> str:
    """What Ray says of an actor's end, in one line.

    Ray's message spreads over lines: a summary (up to where it names the actor's task), details
    (``class_name: ...``), the reason (``The actor is dead because ...``) and, when the actor's
    constructor failed, a remote traceback whose last ``SomeError: ...`` line is the root cause.
    Colour codes and the traceback's ``^^^^`` markers are left out.
    """
    lines = [line.strip() for line in _COLOUR_CODES.sub("", str(error)).splitlines()]
    lines = [line for line in lines if line and set(line) - set("^~ ")]
    if not lines:
        return type(error).__name__
    said = [lines[0].split(", ray::")[0]]
    said += [line for line in lines[1:] if line.startswith("The actor is dead because")]
    raised = [line for line in lines[1:] if _EXCEPTION_LINE.match(line)]
    cause = " ".join(said)
    return f"{cause} ({raised[-1]})" if raised else cause


def _where(error: RayError) -> tuple[str | None, int | None]:
    """The address of the machine and the pid Ray's message says the actor had, where it says."""
    address, pid = _ADDRESS.search(str(error)), _PID.search(str(error))
    return (None if address is None else address.group(1), None if pid is None else int(pid.group(1)))


_COLOUR_CODES = re.compile(r"\x1b\[[0-9;]*m")
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt): ")
_ADDRESS = re.compile(r"\bip=([^,)\s]+)")
_PID = re.compile(r"\bpid=(\d+)")


def _original(error: RayError) -> BaseException:
    """The exception behind a failed call, with its own type where Ray kept it."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


def end_processes(processes: list[psutil.Process]) -> None:
    """Make sure these actor processes of this machine end: Ray's kill travels through its GCS and
    the raylet, which a loaded machine (or a stopped actor) can delay past any grace, and no
    actor may outlive ``close()``. So those still running after ``EXIT_GRACE_SECONDS`` are sent
    SIGKILL."""
    running = _running_after(processes, EXIT_GRACE_SECONDS)
    for process in running:
        try:
            process.kill()  # psutil checks it is still the same process first
        except psutil.Error:
            pass  # it ended meanwhile
    _running_after(running, KILLED_EXIT_SECONDS)


def _running_after(processes: list[psutil.Process], grace: float) -> list[psutil.Process]:
    """Those of ``processes`` still running after up to ``grace`` seconds of waiting for them."""
    deadline = time.monotonic() + grace
    running = list(processes)
    while running:
        running = [process for process in running if _is_running(process)]
        if not running or time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    return running


def _is_running(process: psutil.Process) -> bool:
    """Whether it has not ended yet: a zombie has (its parent, Ray's raylet, reaps it)."""
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False
