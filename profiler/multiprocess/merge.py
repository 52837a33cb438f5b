"""The trainer side of multiprocess timing: folding worker payloads into the trainer's tree.

A :class:`TimerMerger` takes each payload a worker sends (see ``profiler.multiprocess.payload``) and

* adds its blocks under the block open in the trainer at that moment, or under an explicit
  ``anchor``, with ``is_parallel`` set on every merged node: the worker's time ran *beside* the
  trainer's, so a parent's self time does not subtract it, and merged totals can exceed the
  parent's wall time (8 workers stepping for 1 s under a 1 s ``vector.step`` add up to 8 s, as
  ``user`` exceeds ``real`` in ``time``);
* adds them again into that worker's own tree, dumped in the ``workers`` section, where each
  worker's figures can be compared (:meth:`TimerMerger.slowest_worker` gives the highest mean);
* merges its gauges into the worker's entry, and into the trainer's gauges under
  ``workers.<name>`` (one gauge over all workers: latest value, min, max, summed count; the
  prefix keeps them apart from the trainer's own gauge of the same name);
* files its timeline events, shifted onto the trainer's clock, on that worker's own track: by
  nothing on the trainer's machine (one clock), by the clock offset its driver estimates from round
  trips (:meth:`TimerMerger.set_clock`), or else by the difference of the machines' wall clocks.
* keeps its memory samples and allocations per worker process (:class:`profiler.recording.memory.ProcessMemory`),
  shifted onto the trainer's clock the same way, for the dump's ``memory`` section.

The code that drives the workers may know more about them than their payloads say (whom a step
waited for, how much CPU their envs used); it adds that to each worker's entry in the dump with
:meth:`TimerMerger.add_worker_section`, so ``profiler`` stays ignorant of what a worker does.

A payload is validated completely before anything is touched, so a bad one raises
:class:`PayloadError` and merges nothing. Each payload carries its stack's stream id and a
sequence number, so one merged before is ignored (and counted as a duplicate); a gap in the
sequence is counted as missed payloads, until a payload of the gap arrives after all (Ray results
fetched in another order) and is merged.

A payload's block figures are not added as it arrives. Its rows are held by its stream
(:class:`profiler.multiprocess.worker_stream.WorkerStream`) and added in bulk: once the stream holds
:data:`~profiler.multiprocess.worker_stream.FOLD_AT_ROWS` rows, once the merger holds
:data:`FOLD_AT_HELD_ROWS` over all its streams, and before anything reads the figures (the
merger is one of its stack's deferred recorders, which :meth:`TimerStack.settle` folds: every
dump and :func:`~profiler.get_timer_root` call it; :meth:`TimerMerger.worker_entries` and
:meth:`TimerMerger.worker_block_times` fold first too). Code that holds a merged node and reads
its figures directly calls :meth:`TimerMerger.fold` first. Folding adds the rows into figure
tables (:mod:`profiler.multiprocess.figure_table`) and the tables into the nodes.

Merging may run on a receiver thread while the trainer keeps timing. The merger's own state is
behind its lock, which the trainer's hot path never takes; the only shared structures are child
dicts of the trainer's tree, where :meth:`TimerNode.get_child` creates a node atomically.

Why this module is long: it is one class, the merger, with the records it keeps per worker. What
could be cut out of it already is: streams and block ids (:mod:`profiler.multiprocess.worker_stream`),
bulk adding (:mod:`profiler.multiprocess.held_rows`, :mod:`profiler.multiprocess.figure_table`),
payload checks (:mod:`profiler.multiprocess.payload`) and clock offsets.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import threading
import warnings
from collections import deque
from typing import Any, Callable

from profiler.recording import events
from profiler.timing import timers
from profiler.multiprocess.clock_offset import ClockOffset
from profiler.multiprocess.figure_table import FigureTable, Figures
from profiler.multiprocess.held_rows import add_held_rows
from profiler.gpu.operator_figures import PathFigures, add_payload_field
from profiler.recording.memory import ProcessMemory
from profiler.recording.packed_spans import PackedSpans
from profiler.records import Record
from profiler.multiprocess.payload import (
    PayloadError,
    check_declarations,
    check_header,
    check_payload,
)
from profiler.timing.timers import GaugeNode, TimerNode, TimerStack, gauge_value
from profiler.multiprocess.worker_stream import FOLD_AT_ROWS, MAX_NAME_LENGTH, WorkerStream

__all__ = [
    "FOLD_AT_HELD_ROWS",
    "PayloadError",
    "SlowestWorker",
    "TimerMerger",
    "WorkerBlockTime",
    "WorkerSection",
    "is_merging",
    "set_merging",
]

FOLD_AT_HELD_ROWS = 2**19
"""A merger adds every row its streams hold once they hold this many together (18 MiB): a fleet of
thousands of workers, each holding fewer than a stream's fold, holds no more than that."""

WorkerSection = Callable[["dict[str, Any]"], Any]
"""Gives a worker's extra section in the dump (any JSON value) from its entry so far, which has
its ``worker_id`` and tree (None: no section for it)."""


# Records, not dataclasses: Python 3.11 compiles a dataclass's generated methods with exec as the
# class is made, and every rlprof run imports this module before the program starts
# (profiler.records says more).
class WorkerBlockTime(Record):
    """One worker's figures for one block name (summed over every place it appears in the tree).

    ``peak_mean`` is the highest mean time per call within a single payload (over every node of
    that name): with a flush every step it is the slowest single call; with longer intervals, the
    slowest interval's average.
    """

    worker_id: int
    count: int
    total: float
    mean: float
    peak_mean: float


class SlowestWorker(Record):
    """Which worker has the highest mean time per call of one block, and by how much.

    A figure, not a verdict: the worker with the highest mean is often not the one a step waits
    for, and a few percent above the others costs nothing. Whether a worker is a straggler is
    decided by :mod:`profiler.analysis.verdicts`, from the critical path of the steps.
    """

    block: str
    workers: tuple[WorkerBlockTime, ...]
    mean: float  # mean over workers of their mean time per call
    max: float  # the slowest worker's mean time per call
    gap: float  # max - mean
    worker_id: int


class _WorkerTrack:
    """One worker process's recorded events, bounded like a thread's own timeline.

    ``clock_offset`` is the shift applied to its latest events (``clock_uncertainty`` how far off
    it may be, when it was estimated from round trips).
    """

    __slots__ = ("pid", "host", "clock_offset", "clock_uncertainty", "threads", "counters", "dropped")

    def __init__(self, pid: int, host: str, clock_offset: float) -> None:
        self.pid = pid
        self.host = host
        self.clock_offset = clock_offset
        self.clock_uncertainty: float | None = None
        # By thread name: its spans, instants and packed spans (env steps', phased vector steps').
        self.threads: dict[str, tuple[deque[Any], deque[Any], PackedSpans]] = {}
        self.counters: deque[tuple[str, float, float]] = deque()
        self.dropped = 0


class _WorkerRecord:
    """Everything merged so far from one worker index (across restarts of its process)."""

    __slots__ = (
        "worker_id",
        "pid",
        "root",
        "gauges",
        "payloads",
        "missed_payloads",
        "duplicates",
        "paused_payloads",
        "refused_payloads",
        "shortened_names",
        "covered",
        "tracks",
        "memory",
        "device_times",
        "operators",
    )

    def __init__(self, worker_id: int) -> None:
        self.worker_id = worker_id
        self.pid = 0
        self.root = TimerStack(f"worker {worker_id}").root
        self.gauges: dict[str, GaugeNode] = {}
        self.payloads = 0
        self.missed_payloads = 0
        self.duplicates = 0
        self.paused_payloads = 0
        self.refused_payloads = 0
        self.shortened_names = 0
        self.covered = 0.0
        self.tracks: dict[int, _WorkerTrack] = {}
        self.memory: dict[int, ProcessMemory] = {}
        # Device time of the worker's device blocks, by path: [device, mode, total, count, min, max].
        self.device_times: dict[tuple[str, ...], list[Any]] = {}
        # The figures of the worker's PyTorch operators, by their path in the trainer's tree.
        self.operators = PathFigures()

    def nodes_named(self, block: str) -> list[TimerNode]:
        return [node for node in self.root.walk() if node.name == block and node is not self.root]

    def block_time(self, block: str) -> WorkerBlockTime | None:
        nodes = self.nodes_named(block)
        count = sum(node.count for node in nodes)
        if not count:
            return None
        total = sum(node.total for node in nodes)
        peak = max(node.peak_mean for node in nodes)
        return WorkerBlockTime(self.worker_id, count, total, total / count, peak)

    def peak_means(self) -> dict[str, float]:
        """Block name -> highest mean per call in one payload, over every node of that name."""
        peaks: dict[str, float] = {}
        for node in self.root.walk():
            if node is not self.root and node.peak_mean > peaks.get(node.name, 0.0):
                peaks[node.name] = node.peak_mean
        return peaks

    def to_entry(self) -> dict[str, Any]:
        entry = {
            "name": f"worker {self.worker_id}",
            "worker_id": self.worker_id,
            "pid": self.pid,
            "total": self.covered,
            "count": 1,
            "self": self.root.self_time_within(self.covered),
            "min": self.covered,
            "max": self.covered,
            "children": [child.to_dict(1) for child in self.root.children.values()],
            "gauges": {name: gauge.to_dict() for name, gauge in self.gauges.items()},
            "payloads": self.payloads,
            "missed_payloads": self.missed_payloads,
            "duplicates": self.duplicates,
            "peak_mean": self.peak_means(),
        }
        if self.paused_payloads:
            entry["paused_payloads"] = self.paused_payloads
        if self.refused_payloads:
            entry["refused_payloads"] = self.refused_payloads
        if self.shortened_names:
            entry["shortened_names"] = self.shortened_names
        return entry


_merging = True


def set_merging(enabled: bool) -> None:
    """Merge the payloads that arrive from now on (the default), or set them aside.

    ``profiler.pause("server")`` and ``set_state("stop", "server")`` switch this off: a paused
    profiler records nothing, its env workers included. A payload set aside is checked and its
    sequence number noted as usual (so resuming reports no gap), then counted in the worker's
    ``paused_payloads`` instead of merged.
    """
    global _merging
    _merging = bool(enabled)


def is_merging() -> bool:
    return _merging


class TimerMerger:
    """Merges worker payloads into a trainer's timer stack (the constructing thread's by default).

    The merger attaches itself to the stack, so ``get_timer_tree`` / ``write_timing_tree`` of that
    stack dump every worker's tree (``workers``) and track (``timeline``). Resetting the stack
    empties the worker trees too; the merger re-attaches on its next merge, still remembering
    which payloads it has merged.

    Several mergers may share a stack (a training and an evaluation vector env in one thread):
    each worker entry names its merger (``manager``: ``name``; ``manager_id``: a number unique in
    the process), since worker ids repeat from one merger to the next. A merger whose workers are
    gone (:meth:`retire`) stays in the stack's dumps, so that closing the workers before dumping
    loses nothing, until a new merger of the same name attaches to the stack: an evaluation env
    rebuilt every round then lists the latest round's workers, not every round's.
    """

    def __init__(
        self,
        timer_stack: TimerStack | None = None,
        *,
        name: str | None = None,
        timeline_capacity: int = events.DEFAULT_CAPACITY,
    ) -> None:
        self.timer_stack = timers._resolve(timer_stack)
        self.name = name
        self.manager_id = next(_merger_ids)
        self.timeline_capacity = timeline_capacity
        self._retired = False
        self._detached = False
        self._lock = threading.Lock()
        self._workers: dict[int, _WorkerRecord] = {}
        # Per (worker id, stream id): its declared names, last sequence and resolved nodes.
        self._streams: dict[tuple[int, int], WorkerStream] = {}
        self._warned_long_names = False
        self._sections: dict[str, WorkerSection] = {}
        self._trees_kept_elsewhere: Callable[[], dict[int, dict[str, Any]]] | None = None
        self._expected: set[int] = set()
        self._clocks: dict[int, ClockOffset] = {}
        self._generation = -1
        self._held_rows = 0  # rows the streams hold, over all of them
        # Figures added from held rows, not yet in the nodes: the trainer's, and the workers' own.
        self._trainer_figures = FigureTable()
        self._worker_figures = FigureTable()
        with self._lock:
            self._follow_stack_resets()
        self.timer_stack.deferred.add(self)  # its settle() folds the rows held
        for other in list(self.timer_stack.mergers):
            if other is not self and other._retired and other.name == name:
                other.detach()

    def merge_payload(self, worker_id: int, payload: Any, anchor: TimerNode | None = None) -> None:
        """Add a worker's payload to the trainer's tree and to that worker's own tree.

        The blocks land under ``anchor``, or the block open in the trainer at this moment. Raises
        :class:`PayloadError` (merging nothing) for a malformed, foreign or other-version payload,
        or one whose stream's names do not add up (ids never declared, names declared anew
        differently), and counts it in the worker's ``refused_payloads``. A payload merged
        before is ignored.

        A payload refused for its figures still declares its names, if they are right: the
        worker sends each name once, so its next payloads can still be merged.
        """
        if type(worker_id) is not int or worker_id < 0:
            raise PayloadError(f"worker_id must be a whole number >= 0, got {worker_id!r}")
        try:
            self._merge(worker_id, payload, anchor)
        except PayloadError:
            with self._lock:
                worker = self._workers.get(worker_id)
                if worker is None:
                    worker = self._workers[worker_id] = _WorkerRecord(worker_id)
                worker.refused_payloads += 1
            raise

    def _merge(self, worker_id: int, payload: Any, anchor: TimerNode | None) -> None:
        check_header(payload)
        declared = check_declarations(payload[7])
        # Read without the lock: any ids a stream ever kept passed the check (see WorkerStream.add_rows).
        known_stream = self._streams.get((worker_id, payload[3]))
        try:
            row_ids = check_payload(payload, declared, known_stream.row_ids if known_stream is not None else ())
        except PayloadError:
            with self._lock, contextlib.suppress(PayloadError):  # the first error is the one to tell
                stream = self._streams.get((worker_id, payload[3]))
                if stream is None or payload[4] > stream.last_sequence:
                    self._stream_declaring(worker_id, payload)
            raise
        (_, _, pid, stream_id, sequence, window_start, window_end, _, _, error_counts, labels, gauges, timeline,
         memory, device_time, operators) = payload
        if anchor is None:
            anchor = self.timer_stack.current  # one read: the trainer thread may move it meanwhile
        with self._lock:
            self._follow_stack_resets()
            # A deferred recorder of the anchor's stack before reading whether that stack was
            # folded away: a fold that this read misses settles this merger, and waits for this lock.
            self._defer_to(anchor.stack)
            anchor = _live_anchor(anchor)
            self._defer_to(anchor.stack)
            worker = self._workers.get(worker_id)
            if worker is None:
                worker = self._workers[worker_id] = _WorkerRecord(worker_id)
            stream = self._streams.get((worker_id, stream_id))
            if stream is not None and sequence <= stream.last_sequence and sequence not in stream.missing:
                worker.duplicates += 1
                return
            if stream is None or payload[7][1] or payload[7][0] != len(stream.names):
                stream = self._stream_declaring(worker_id, payload)
            if sequence > stream.last_sequence:
                if sequence != stream.last_sequence + 1:
                    stream.skipped(sequence)
                    worker.missed_payloads += sequence - stream.last_sequence - 1
                stream.last_sequence = sequence
            else:  # it arrives after a later one (Ray results fetched in another order)
                stream.missing.discard(sequence)
                worker.missed_payloads -= 1
            worker.pid = pid
            if not _merging:
                worker.paused_payloads += 1
                return
            worker.payloads += 1
            worker.covered += window_end - window_start

            if row_ids:
                held_before = stream.held_rows
                held = stream.add_rows(anchor, worker.root, row_ids, payload[8])
                self._held_rows += held - held_before
                if held >= FOLD_AT_ROWS:
                    self._held_rows -= held
                    add_held_rows(stream.take_held(), self._figures())
                if self._held_rows >= FOLD_AT_HELD_ROWS:
                    self._add_held()
            for node_id, errors in error_counts:
                merged, own = stream.nodes(anchor, worker.root, node_id)
                merged.errors += errors
                own.errors += errors
            for node_id, domain, object_type, scopes in labels:
                merged, own = stream.nodes(anchor, worker.root, node_id)
                merged.add_labels(domain, object_type, scopes)
                own.add_labels(domain, object_type, scopes)

            trainer_gauges = self.timer_stack.gauges
            for name, value, minimum, maximum, count in gauges:
                _merge_gauge(worker.gauges, name, value, minimum, maximum, count)
                _merge_gauge(trainer_gauges, f"workers.{name}", value, minimum, maximum, count)

            if timeline is not None:
                self._add_timeline(worker, pid, timeline)
            if memory is not None:
                self._add_memory(worker, pid, memory)
            if device_time is not None:
                _add_device_times(worker.device_times, device_time)
            if operators is not None:
                add_payload_field(worker.operators, _path_from_root(anchor), operators)

    def _defer_to(self, stack: Any) -> None:
        """Have whatever reads ``stack``'s tree fold this merger's rows first: it holds rows for
        that tree's nodes (a payload anchored there, in another thread's tree)."""
        if stack is not self.timer_stack and isinstance(stack, TimerStack):
            stack.deferred.add(self)

    def _stream_declaring(self, worker_id: int, payload: tuple[Any, ...]) -> WorkerStream:
        """The payload's stream, with the names the payload declares added (called locked).

        Raises :class:`PayloadError` if they do not continue what the stream declared before.
        """
        key = (worker_id, payload[3])
        stream = self._streams.get(key)
        first_id, names = payload[7]
        if stream is None:
            stream = WorkerStream(self._figures())
        shortened = stream.declare(first_id, names, worker_id)
        self._streams[key] = stream
        if shortened:
            worker = self._workers.get(worker_id)
            if worker is None:
                worker = self._workers[worker_id] = _WorkerRecord(worker_id)
            worker.shortened_names += shortened
            if not self._warned_long_names:
                self._warned_long_names = True
                warnings.warn(
                    f"rlprof: worker {worker_id} named a block with more than {MAX_NAME_LENGTH} "
                    f"characters; the dump keeps its first {MAX_NAME_LENGTH} (its entry counts "
                    "shortened_names)",
                    RuntimeWarning,
                    stacklevel=3,
                )
        return stream

    def _follow_stack_resets(self) -> None:
        """After the stack was reset: forget the worker trees and attach to it again."""
        stack = self.timer_stack
        if self._generation != stack.generation:
            self._generation = stack.generation
            self._workers = {worker_id: _WorkerRecord(worker_id) for worker_id in self._expected}
            self._forget_trees()
        if self not in stack.mergers and not self._detached:
            stack.mergers.append(self)

    @property
    def held_rows(self) -> int:
        """Payload rows merged but not yet added into the trees, over all streams: at most
        :data:`FOLD_AT_HELD_ROWS` (and :data:`~profiler.multiprocess.worker_stream.FOLD_AT_ROWS` per stream)."""
        return self._held_rows

    def fold(self) -> None:
        """Add the payload rows held so far into the trainer's tree and the workers' own trees
        (see the module docstring)."""
        with self._lock:
            self._fold_held()

    def discard(self, stack: TimerStack) -> None:
        """Drop the rows held if they were for ``stack``: it was reset, and its tree with them."""
        with self._lock:
            if stack is self.timer_stack:
                self._forget_trees()

    def _forget_trees(self) -> None:
        """The trees were reset: drop the rows held and the figures not yet written for them,
        and the streams' nodes in them (with their layouts' slots in the cleared tables)."""
        for stream in self._streams.values():
            stream.forget_nodes()
        self._held_rows = 0
        self._trainer_figures.clear()
        self._worker_figures.clear()

    def _add_held(self) -> None:
        """Add the rows every stream holds into the figure tables."""
        if self._held_rows:
            tables = [table for stream in self._streams.values() for table in stream.take_held()]
            add_held_rows(tables, self._figures())
            self._held_rows = 0

    def _fold_held(self) -> None:
        """Add the rows held into the figure tables, and the tables' figures into the trees."""
        self._add_held()
        self._trainer_figures.write_back()
        self._worker_figures.write_back()

    def _figures(self) -> Figures:
        return self._trainer_figures, self._worker_figures

    def retire(self) -> None:
        """The workers are gone: a new merger of the same name on this stack replaces this one
        in the stack's dumps (until then they still list its workers)."""
        self._retired = True

    def detach(self) -> None:
        """Leave the stack's dumps from now on.

        What was merged into the tree stays there; only the ``workers`` entries and timeline
        tracks leave the stack's dumps. The merger keeps them for its own use.
        """
        with self._lock:
            self._fold_held()  # the rows held go into the trees, which may outlive this merger
            self._detached = True
            if self in self.timer_stack.mergers:
                self.timer_stack.mergers.remove(self)

    def set_clock(self, worker_id: int, clock: ClockOffset) -> None:
        """Shift worker ``worker_id``'s timeline events by ``clock``'s offset from now on.

        ``clock`` is the estimate its driver keeps up to date from round trips (see
        :mod:`profiler.multiprocess.clock_offset`); each payload's events are shifted by the offset estimated
        when it arrives, so a drifting clock is followed. A restarted worker process gets its own.
        """
        with self._lock:
            self._clocks[worker_id] = clock

    def _add_timeline(self, worker: _WorkerRecord, pid: int, timeline: tuple[Any, ...]) -> None:
        host, origin, thread_name, spans, instants, counters, dropped, packed = timeline
        track = worker.tracks.get(pid)
        if track is None:
            # One machine shares one monotonic clock; across machines, align by wall clock
            # unless the driver estimates the offset from round trips (below).
            offset = 0.0 if host == events.HOST else origin - events.clock_origin()
            track = worker.tracks[pid] = _WorkerTrack(pid, host, offset)
            track.counters = deque(maxlen=self.timeline_capacity)
        clock = self._clocks.get(worker.worker_id)
        if clock is not None and math.isfinite(clock.uncertainty):  # an estimate exists
            track.clock_offset, track.clock_uncertainty = clock.offset, clock.uncertainty
        thread = track.threads.get(thread_name)
        if thread is None:
            thread = track.threads[thread_name] = (
                deque(maxlen=self.timeline_capacity),
                deque(maxlen=self.timeline_capacity),
                PackedSpans(self.timeline_capacity),
            )
        offset = track.clock_offset
        packed_spans = thread[2]
        dropped_before = packed_spans.dropped
        for name, pairs in packed:
            packed_spans.add_shifted(name, pairs, offset)
        track.dropped += packed_spans.dropped - dropped_before
        # Details, when an event has them, follow its fields unchanged (see profiler.recording.events).
        if offset:
            spans = [(name, start + offset, end + offset, *details) for name, start, end, *details in spans]
            instants = [(name, at + offset, *details) for name, at, *details in instants]
        # Readings may arrive as any real number type the payload check accepts; store floats.
        counters = [
            (name, at + offset, gauge_value(name, value), *details) for name, at, value, *details in counters
        ]
        for ring, new_events in ((thread[0], spans), (thread[1], instants), (track.counters, counters)):
            track.dropped += max(0, len(ring) + len(new_events) - self.timeline_capacity)
            ring.extend(new_events)
        track.dropped += dropped

    def _add_memory(self, worker: _WorkerRecord, pid: int, memory: tuple[Any, ...]) -> None:
        process = worker.memory.get(pid)
        if process is None:
            # Shifted onto the trainer's clock as its timeline events are (see _add_timeline).
            process = worker.memory[pid] = ProcessMemory.from_payload(pid, f"worker {worker.worker_id}", memory)
        clock = self._clocks.get(worker.worker_id)
        if clock is not None and math.isfinite(clock.uncertainty):
            process.clock_offset = clock.offset
        process.add_payload(memory)

    def expect_worker(self, worker_id: int) -> None:
        """Give ``worker_id`` an entry in the dump from now on, payload or not.

        The code that starts the workers knows they exist before any payload arrives; a worker
        that dies before its first flush then still has an entry, where the sections added with
        :meth:`add_worker_section` can say what became of it.
        """
        with self._lock:
            self._expected.add(worker_id)
            if worker_id not in self._workers:
                self._workers[worker_id] = _WorkerRecord(worker_id)

    def add_worker_section(self, name: str, section: WorkerSection) -> None:
        """Dump ``name: section(entry)`` in every worker's entry (left out where it gives None).

        ``entry`` is the worker's entry as dumped so far (``worker_id``, its tree's ``children``,
        ...), so a section may also summarize the worker's blocks.

        Raises ``ValueError`` for a name the entry already uses for its own fields.
        """
        if name in _ENTRY_FIELDS:
            raise ValueError(f"worker section {name!r} would replace the worker entry's own field")
        with self._lock:
            self._sections[name] = section

    def take_worker_trees_from(self, trees: Callable[[], dict[int, dict[str, Any]]]) -> None:
        """The own trees of some workers are merged elsewhere (by an aggregator on their node, whose
        payloads this merger never sees): ``trees()`` gives their entries, as
        :meth:`worker_entries` makes them, by worker id; they replace this merger's entries of those
        workers in :meth:`worker_entries`, which then adds this merger's name and sections."""
        self._trees_kept_elsewhere = trees

    # --- what the dump and the user read --------------------------------------------------------

    def worker_entries(self) -> list[dict[str, Any]]:
        """The ``workers`` section: one node-like entry per worker, by worker id."""
        # Asked before the lock: they may come from other processes.
        elsewhere = self._trees_kept_elsewhere() if self._trees_kept_elsewhere is not None else {}
        with self._lock:
            self._follow_stack_resets()
            self._fold_held()
            entries = [dict(elsewhere.get(worker_id) or self._workers[worker_id].to_entry())
                       for worker_id in sorted(self._workers)]
            for entry in entries:
                entry["manager"], entry["manager_id"] = self.name, self.manager_id
                for name, section in self._sections.items():
                    value = section(entry)
                    if value is not None:
                        entry[name] = value
            return entries

    def timeline_processes(self) -> list[tuple[dict[str, Any], int]]:
        """Each worker process's ``timeline`` entry, with the number of events it dropped."""
        processes = []
        with self._lock:
            for worker_id in sorted(self._workers):
                for track in self._workers[worker_id].tracks.values():
                    threads = [
                        {
                            "tid": tid,
                            "name": thread_name,
                            "spans": events.span_rows(spans, packed),
                            "instants": [events.timeline_row(instant) for instant in instants],
                        }
                        for tid, (thread_name, (spans, instants, packed)) in enumerate(
                            track.threads.items(), start=1
                        )
                    ]
                    process = {
                        "pid": track.pid,
                        "name": f"worker {worker_id}",
                        "host": track.host,
                        "clock_offset": track.clock_offset,
                        "threads": threads,
                        "counters": [events.timeline_row(counter) for counter in track.counters],
                    }
                    if track.clock_uncertainty is not None:
                        process["clock_uncertainty"] = track.clock_uncertainty
                    processes.append((process, track.dropped))
        return processes

    def device_time_entries(self) -> list[dict[str, Any]]:
        """Each worker's device-timed blocks as entries of the dump's ``device_time`` section,
        by their path in the worker's own tree, labelled with the worker (``process``) and with
        the block's host total there (``host_total``) beside its device time."""
        with self._lock:
            self._fold_held()
            entries = []
            for worker_id in sorted(self._workers):
                worker = self._workers[worker_id]
                for path, (device, mode, total, count, minimum, maximum) in worker.device_times.items():
                    node = worker.root
                    for name in path:
                        node = node.children.get(name) if node is not None else None
                    entries.append({"path": list(path), "process": f"worker {worker_id}", "device": device,
                                    "mode": mode, "total": total, "count": count, "min": minimum,
                                    "max": maximum, "host_total": node.total if node is not None else None})
            return entries

    def operator_figures(self) -> list[PathFigures]:
        """Each worker's PyTorch operator figures, by the operators' paths in the trainer's tree
        (the dump's ``operators`` section adds them to the trainer's own)."""
        with self._lock:
            self._follow_stack_resets()
            return [self._workers[worker_id].operators for worker_id in sorted(self._workers)]

    def memory_processes(self) -> list[dict[str, Any]]:
        """Each worker process's entry in the ``memory`` section (see :mod:`profiler.recording.memory`)."""
        with self._lock:
            return [
                process.to_entry()
                for worker_id in sorted(self._workers)
                for process in self._workers[worker_id].memory.values()
            ]

    def worker_block_times(self, block: str) -> list[WorkerBlockTime]:
        """Each worker's count, total, mean and peak mean for ``block``, by worker id."""
        with self._lock:
            self._follow_stack_resets()  # after a reset, the workers' trees start afresh
            self._fold_held()
            times = [self._workers[worker_id].block_time(block) for worker_id in sorted(self._workers)]
        return [time for time in times if time is not None]

    def slowest_worker(self, block: str) -> SlowestWorker | None:
        """Mean and max over workers of their mean time per ``block`` call, the gap between them,
        and the worker with that max; None if no worker ran ``block``."""
        times = self.worker_block_times(block)
        if not times:
            return None
        slowest = max(times, key=lambda time: time.mean)
        mean = sum(time.mean for time in times) / len(times)
        return SlowestWorker(
            block=block,
            workers=tuple(times),
            mean=mean,
            max=slowest.mean,
            gap=slowest.mean - mean,
            worker_id=slowest.worker_id,
        )


_ENTRY_FIELDS = frozenset(_WorkerRecord(0).to_entry()) | {
    "manager",
    "manager_id",
    "paused_payloads",
    "refused_payloads",
    "shortened_names",
}
_merger_ids = itertools.count(1)


def _merge_gauge(
    gauges: dict[str, GaugeNode], name: str, value: float, minimum: float, maximum: float, count: int
) -> None:
    # The payload check accepted any real number type; the trees hold plain floats.
    value, minimum, maximum = (gauge_value(name, reading) for reading in (value, minimum, maximum))
    gauge = gauges.get(name)
    if gauge is None:
        gauge = gauges[name] = GaugeNode(value)
        gauge.count = 0
    gauge.merge_summary(value, minimum, maximum, count)


def _live_anchor(anchor: TimerNode) -> TimerNode:
    """``anchor``; or, once the thread that timed it has ended and its tree was added into its
    group's (see :class:`~profiler.timing.thread_registry.StackRegistry`), the group's node of the
    same path: what is added under the ended thread's own nodes is in no dump."""
    stack = anchor.stack
    group = stack.folded_into if isinstance(stack, TimerStack) else None
    if group is None:
        return anchor
    node = group.root
    for name in _path_from_root(anchor):
        node = node.get_child(name)
    return node


def _path_from_root(node: TimerNode) -> tuple[str, ...]:
    """The names from the root's child down to ``node`` (the root's own path is empty)."""
    names = []
    while node.parent is not None:
        names.append(node.name)
        node = node.parent
    return tuple(reversed(names))


def _add_device_times(times: dict[tuple[str, ...], list[Any]], device_time: Any) -> None:
    """Add a payload's ``device_time`` field (checked) to a worker's figures."""
    for path, device, mode, total, count, minimum, maximum in device_time:
        figures = times.get(tuple(path))
        if figures is None:
            times[tuple(path)] = [device, mode, float(total), count, float(minimum), float(maximum)]
        else:
            figures[2] += total
            figures[3] += count
            figures[4] = min(figures[4], minimum)
            figures[5] = max(figures[5], maximum)
