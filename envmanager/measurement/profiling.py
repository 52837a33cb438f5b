"""The trainer side of the manager's profiling: its timer blocks, the merged worker timers.

The manager's ``step`` is one block with the parts a user needs to tell apart::

    env_manager.step
      send_actions        splitting, packing and writing the actions to the pipes
      wait_for_workers    blocked until the slowest worker has answered (straggler wait)
      receive_results     reading and decoding the replies, building obs and infos
      env.step ...        the workers' own blocks, merged (is_parallel: they ran beside)

``env_manager.reset`` is the same with ``send_resets``.  The timers on a reset reply are
merged under the latest reset block; all others under the latest step block (before the first
step, the reset block), whatever call they arrive with, so that a worker's stepping time always
sits under the step block.  For that split to be exact the worker ships its timers on every
reset reply, and the manager asks for the steps' unshipped timers (FLUSH) right before a reset.

Each worker's entry in the dump's ``workers`` section also gets ``critical_path`` (whom the
steps waited for last, :mod:`envmanager.measurement.critical_path`) and ``env_time`` (wall and CPU time of
its env calls, :mod:`envmanager.measurement.env_time`) and ``scheduling`` (its waits for a core,
the kernel's count, :mod:`envmanager.measurement.cpu_waits`); the run's metadata gets ``busy_processes``: the
trainer plus the workers of every manager alive at once, at the most.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections import deque
from pathlib import Path
from typing import Any, Callable

from profiler.recording import events, machine_load, scheduling
from profiler.recording.block_waits import BlockWaits
from profiler.timing import timers
from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.tree.timer_json import check_run_id, timers_json_path, write_timing_tree
from profiler.timing.phased_block import PhasedBlock
from profiler.timing.timers import TimerNode

from envmanager.measurement.cpu_waits import CpuWaits, CpuWaitsError, validate_cpu_waits
from envmanager.measurement.critical_path import CriticalPath
from envmanager.measurement.env_time import EnvTime, EnvTimeError, validate_env_time
from envmanager.measurement.resources import ResourceGauges
from envmanager.measurement.unreported_steps import UnreportedSteps

__all__ = ["ManagerProfiling", "check_flush_options"]

_NO_BLOCK = contextlib.nullcontext()


def _no_block(name: str) -> Any:
    return _NO_BLOCK


def _record_nothing(ready_at: list[float | None], waiting_since: float) -> None:
    return None

# Every manager of this process whose workers are running, profiled or not, by id: they all
# compete for the same cores, so each profiled one reports them all in ``busy_processes``.
# Removal takes no lock: a manager collected as garbage closes itself from ``__del__``, which
# may run inside the locked section of another manager's start.
_live_managers: dict[int, ManagerProfiling] = {}
_live_managers_lock = threading.Lock()
# A forked child's managers are its own; its parent's workers are not its busy processes.
os.register_at_fork(after_in_child=_live_managers.clear)


class ManagerProfiling:
    """Timer blocks, payload merging, resource gauges and dumps for one manager.

    Disabled (``enabled=False``, or profiling switched off globally when the manager was
    built), every method is a no-op and :meth:`block` returns a shared null context.
    """

    __slots__ = (
        "enabled",
        "block",
        "step_block",
        "timer_stack",
        "merger",
        "step_anchor",
        "reset_anchor",
        "reset_sequences",
        "resources",
        "bad_payloads",
        "workers",
        "critical_path",
        "record_step",
        "env_times",
        "cpu_waits",
        "busy_processes",
        "unreported",
        "kept_metadata",
        "before_dump",
        "node_merger",
        "core_waits",
        "_generation",
    )

    def __init__(self, enabled: bool, resource_interval: float | None, name: str) -> None:
        check_run_id(name)  # it names the dump: refused now, not when close() writes it
        self.enabled = enabled and timers.is_enabled()
        # ``with profiling.block(name) as node:`` times a block.  The step path opens four a
        # step, so this is the timers' own function, bound once: no method layer, no test of
        # the switch (``hierarchical_timer`` tests it, and yields a stand-in while
        # ``profiler.disable()`` or ``profiler.pause()`` holds).  ``node`` is the block's
        # TimerNode only while it is timed.
        self.block: Callable[[str], Any] = timers.hierarchical_timer if self.enabled else _no_block
        # ``step`` times itself and its parts from clock stamps with this (None: not profiled),
        # in a third of what a `with` per block costs: the step path's blocks are most of what
        # profiling adds to a step of a cheap env (benchmarks/vector_throughput.py --overhead).
        # Each run also carries the step's critical-path stamps (when the trainer began waiting,
        # each worker's reply), counted in bulk with the run (CriticalPath.count_steps_and_mark).
        self.step_block = (
            PhasedBlock("env_manager.step", ("send_actions", "wait_for_workers", "receive_results"))
            if self.enabled
            else None
        )
        # The constructing thread's stack: the trainer loop's, in every program we know of.
        self.timer_stack = timers.get_timer_stack_for_thread(threading.current_thread())
        # Named after the manager, so its workers' entries say whose they are.
        self.merger = TimerMerger(self.timer_stack, name=name) if self.enabled else None
        self.step_anchor: TimerNode | None = None
        self.reset_anchor: TimerNode | None = None
        # The sequence numbers of the latest reset requests: their replies' timers belong under
        # the reset block. A few suffice: a reply is read within a call or two of its request.
        self.reset_sequences: deque[int] = deque(maxlen=8)
        self.resources = (
            ResourceGauges(resource_interval, self.timer_stack)
            if self.enabled and resource_interval
            else None
        )
        self.bad_payloads = 0
        self.workers = 0
        self.critical_path: CriticalPath | None = None
        # ``record_step(ready_at, waiting_since)`` counts whom a vector step waited for last (see
        # CriticalPath.record_step): the critical path's own method once the workers run, so a
        # step pays no call more for it.
        self.record_step: Callable[[list[float | None], float], None] = _record_nothing
        self.env_times: list[EnvTime] = []
        self.cpu_waits: list[CpuWaits] = []
        self.busy_processes = 0
        self.kept_metadata: dict[str, Any] = {}
        self.unreported = UnreportedSteps(())
        # Called before each dump: a manager whose payloads are merged elsewhere first (per Ray
        # node) brings them home.
        self.before_dump: Callable[[], None] | None = None
        self.node_merger: TimerMerger | None = None  # the per-node payloads' merger, dumped too
        # The trainer's waits for a core and time on one inside its steps (scheduling.in_blocks).
        self.core_waits = BlockWaits("env_manager.step", self.timer_stack) if self.enabled else None
        self._generation = self.timer_stack.generation
        if self.enabled:
            # The trainer's waits for a core and the machine's load, counted from here (and
            # from each reset of the timers).
            scheduling.follow_stack(self.timer_stack)
            machine_load.follow_stack(self.timer_stack)

    def workers_started(self, workers: int) -> None:
        """The manager's ``workers`` processes run from now on: count them and their figures."""
        self.workers = workers
        if self.merger is not None:
            self.critical_path = CriticalPath(workers, self.timer_stack, self._follow_stack_resets)
            self.record_step = self.critical_path.record_step
            if self.step_block is not None:
                # A profiled step keeps its critical-path stamps with its own (see step_block).
                self.step_block.on_fold = self._count_folded_steps
            self.env_times = [EnvTime() for _ in range(workers)]
            self.cpu_waits = [CpuWaits() for _ in range(workers)]
            self.merger.add_worker_section("critical_path", self._critical_path_section)
            self.merger.add_worker_section("env_time", self._env_time_section)
            self.merger.add_worker_section("scheduling", self._scheduling_section)
        with _live_managers_lock:
            _live_managers[id(self)] = self
            live = list(_live_managers.values())
            busy = 1 + sum(manager.workers for manager in live)
            for manager in live:
                manager._note_busy_processes(busy)

    def account_for(self, handles: list[Any]) -> UnreportedSteps:
        """Count, for each of these workers, the steps no payload has reported (the manager
        adds one per step reply to ``pending``); the dump says how many and why."""
        self.unreported = UnreportedSteps(handles)
        if self.merger is not None:
            for handle in handles:
                self.merger.expect_worker(handle.index)
            self.merger.add_worker_section("unreported_steps", self.unreported.steps_section)
            self.merger.add_worker_section("unreported_reason", self.unreported.reason_section)
        return self.unreported

    def note_unanswered(self, handles: list[Any], request: str) -> None:
        """These workers left ``request`` for their timers unanswered: mark them in the dump and
        say so, since the dump lacks their time since their last payload."""
        if not handles:
            return
        for handle in handles:
            self.unreported.did_not_answer(handle.index, request)
        names = ", ".join(f"worker {handle.index}" for handle in handles)
        steps = sum(self.unreported.steps(handle.index) for handle in handles)
        verb = "did" if len(handles) == 1 else "each did"
        warnings.warn(
            f"rlprof: {names} {verb} not answer {request} (hung, or busy with a long call); the "
            f"dump lacks their timers since their last payload ({steps} steps)",
            RuntimeWarning,
            stacklevel=3,
        )

    def workers_stopped(self) -> None:
        """The workers are gone: they no longer compete for cores with later managers, and a
        later manager of the same name replaces them in the stack's dumps."""
        _live_managers.pop(id(self), None)
        if self.merger is not None:
            self.merger.retire()

    def _note_busy_processes(self, busy: int) -> None:
        self.busy_processes = max(self.busy_processes, busy)
        if self.enabled:
            timers.add_metadata("busy_processes", self.busy_processes, self.timer_stack)

    def _count_folded_steps(self, runs: Any) -> None:
        """The step block's ``on_fold``: each run's critical-path stamps (its columns after the
        step's four stamps: when the trainer began waiting, each worker's reply) to the critical path."""
        self.critical_path.count_steps_and_mark(runs[:, 4:])  # type: ignore[union-attr]

    def _follow_stack_resets(self) -> None:
        """After the timer stack was reset: forget the figures counted before, as the tree did."""
        if self._generation == self.timer_stack.generation:
            return
        self._generation = self.timer_stack.generation
        if self.critical_path is not None:
            self.critical_path.clear()
        for env_time in self.env_times:
            env_time.clear()
        for waits in self.cpu_waits:
            waits.clear()
        if self.enabled and self.busy_processes:
            timers.add_metadata("busy_processes", self.busy_processes, self.timer_stack)
        for key, value in self.kept_metadata.items():
            timers.add_metadata(key, value, self.timer_stack)

    def keep_metadata(self, key: str, value: Any) -> None:
        """Set ``key`` in the run's metadata, now and again after each reset of the timer stack
        (a fact about the manager's workers, true for as long as they run)."""
        self.kept_metadata[key] = value
        timers.add_metadata(key, value, self.timer_stack)

    def _critical_path_section(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        if self.critical_path is None:
            return None
        if self.step_block is not None:
            self.step_block.fold()  # the steps it holds count on the critical path too
        return self.critical_path.section(entry["worker_id"])

    def _env_time_section(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        worker = entry["worker_id"]
        if not 0 <= worker < len(self.env_times):
            return None
        return self.env_times[worker].section(entry["children"])

    def _scheduling_section(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        worker = entry["worker_id"]
        if not 0 <= worker < len(self.cpu_waits):
            return None
        return self.cpu_waits[worker].section()

    def reset_sent(self, sequence: int) -> None:
        """The reset requests numbered ``sequence`` went out: time their replies under the reset."""
        self.reset_sequences.append(sequence)

    def merge(self, worker_index: int, sequence: int, timers_field: Any) -> None:
        """Fold one reply's ``timers`` field into the trainer's tree (the pool's ``timers_sink``):
        a worker payload and the env time measured with it. A payload of None was merged on the
        worker's node (``RayEnvManager(merge_per_node=True)``): only its figures come here."""
        if self.merger is None:
            return
        self._follow_stack_resets()
        if sequence in self.reset_sequences or self.step_anchor is None:
            anchor = self.reset_anchor
        else:
            anchor = self.step_anchor
        try:
            if not isinstance(timers_field, tuple) or len(timers_field) != 5:
                raise PayloadError("a reply's timers are a payload, three env time figures and "
                                   "the scheduling figures")
            payload, *env_time, cpu_waits = timers_field
            validate_env_time(*env_time)
            validate_cpu_waits(cpu_waits)
            if payload is not None:  # None: the worker sent it to its node's aggregator instead
                self.merger.merge_payload(worker_index, payload, anchor)
            self.unreported.reported(worker_index)
            if 0 <= worker_index < len(self.env_times):
                self.env_times[worker_index].add(*env_time)
                self.cpu_waits[worker_index].add(cpu_waits)
        except (PayloadError, EnvTimeError, CpuWaitsError) as exc:
            # Timing data must never break training: count it, say it once (and in the dump), go on.
            self.unreported.refused(worker_index, str(exc))
            self.bad_payloads += 1
            if self.bad_payloads == 1:
                warnings.warn(
                    f"rlprof: dropped a malformed timer payload from worker {worker_index}: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )

    def record_restart(self, worker_index: int, restarts: int) -> None:
        self.unreported.replaced(worker_index)
        if self.enabled:
            timers.set_gauge("env_manager.restarts", restarts, self.timer_stack)
            events.mark(f"env_manager.restart worker {worker_index}", self.timer_stack)

    def sample_resources(self, workers: list[Any]) -> None:
        if self.resources is not None:
            self.resources.maybe_sample((h.index, h.process.pid if h.alive else None) for h in workers)

    def dump(self, summaries_dir: str | os.PathLike[str], run_id: str) -> Path:
        """Write the trainer's tree, merged worker blocks included, as ``{run_id}_timers.json``."""
        path = timers_json_path(summaries_dir, run_id)
        if self.before_dump is not None:
            self.before_dump()
        path.parent.mkdir(parents=True, exist_ok=True)
        mergers = [merger for merger in (self.merger, self.node_merger) if merger is not None]
        return write_timing_tree(path, self.timer_stack, mergers=mergers)


def check_flush_options(flush_every: int | None, flush_interval: float | None) -> None:
    """Refuse a ``flush_every`` or ``flush_interval`` that no worker could keep to."""
    if flush_every is not None and (
        isinstance(flush_every, bool) or not isinstance(flush_every, int) or flush_every < 1
    ):
        raise ValueError(f"`flush_every` must be a whole number of steps >= 1 or None, got {flush_every!r}.")
    if flush_interval is not None and not flush_interval > 0:
        raise ValueError(f"`flush_interval` must be a number of seconds > 0 or None, got {flush_interval!r}.")
