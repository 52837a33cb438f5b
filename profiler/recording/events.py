"""Optional timeline recording: when each block ran, not only how long in total.

While recording is on, every timer block also appends ``(name, start, end)`` to its thread's
:class:`ThreadTimeline`; :func:`mark` adds instant events and :func:`record_counter` (and every
``set_gauge``) adds counter samples. The buffers are rings of a fixed ``capacity`` per thread, so a
multi-hour run keeps the most recent events and counts what fell out (``dropped``) instead of
growing without bound.

Recording off costs the hot path nothing: :func:`start_recording` swaps ``TimerNode.__exit__`` for
a recording variant and :func:`stop_recording` swaps it back (through
:func:`profiler.timing.block_hooks.set_span_recording`), so the plain exit never tests a flag.

An event may carry **details** after its fields — a span ``(name, start, end, details)``, an
instant ``(name, at, details)``, a counter sample ``(name, at, value, details)`` — a tuple of
``(key, value)`` pairs, kept as plain data so that it travels in payloads; in the dump it is an
object. The MXNet-style objects use it: ``cat`` (the domain, a trace category), ``kind``,
``frame`` (a frame's number) and ``scope`` (an instant's reach: ``g``, ``p`` or ``t``).

Times are readings of the timers' clock (``time.perf_counter``: CLOCK_MONOTONIC on Linux, one
clock for every process of a machine). A worker's events travel in its payloads; the merger shifts
them by the worker's clock offset (0.0 on one machine) onto the trainer's clock. The dumped
``timeline`` section is described in docs/multiprocess.md.
"""

from __future__ import annotations

import os
import socket
import time
from collections import deque
from collections.abc import Sequence
from typing import Any

from profiler.recording.packed_spans import PackedSpans, with_packed
from profiler.timing import accelerator, block_hooks, timer_stack, timers
from profiler.timing.timers import TimerStack

__all__ = [
    "DEFAULT_CAPACITY",
    "ThreadTimeline",
    "clear_recording",
    "clock_origin",
    "drain_timeline",
    "is_recording",
    "mark",
    "record_counter",
    "recording_timeline",
    "span_rows",
    "start_recording",
    "stop_recording",
    "timeline_row",
    "timeline_section",
]

Details = tuple[tuple[str, Any], ...]
"""What an event may carry after its fields: ``(key, value)`` pairs, values strings or numbers."""

DEFAULT_CAPACITY = 100_000
"""Events kept per thread and kind (spans, instants, counters): about 10 MB of spans a thread."""

CLOCK_NAME = "perf_counter"
HOST = socket.gethostname()

_recording = False
_capacity = DEFAULT_CAPACITY


class ThreadTimeline:
    """One thread's recorded events, in bounded rings that drop their oldest entries when full.

    Spans are appended when a block closes, so a parent follows its children and dropping the
    oldest entries never leaves a child whose parent overlaps it wrongly: what is kept still nests.
    """

    __slots__ = ("spans", "packed_spans", "instants", "counters", "spans_recorded", "dropped", "recording")

    def __init__(self, capacity: int) -> None:
        self.spans: deque[tuple[str, float, float]] = deque(maxlen=capacity)
        # Env steps' and phased vector steps' spans, as float64 pairs (see profiler.recording.packed_spans).
        self.packed_spans = PackedSpans(capacity)
        self.instants: deque[tuple[str, float]] = deque(maxlen=capacity)
        self.counters: deque[tuple[str, float, float]] = deque(maxlen=capacity)
        # Spans are counted rather than checked for a full ring on the hot path; the difference
        # to what the ring holds is what it dropped.
        self.spans_recorded = 0
        self.dropped = 0
        self.recording = True

    def add_span(self, name: str, start: float, end: float, details: Details) -> None:
        """A span with details (plain blocks append theirs on the hot path, without any)."""
        self.spans.append((name, start, end, details))
        self.spans_recorded += 1

    def add_spans(self, spans: list[tuple[str, float, float]]) -> None:
        """Many spans ``(name, start, end)`` without details at once (a phased block's runs, as
        they fold), as plain blocks' exits add each."""
        self.spans.extend(spans)
        self.spans_recorded += len(spans)

    def add_packed_spans(self, name: str, runs: Any) -> None:
        """Many spans of ``name`` at once, as a bytes-like of native float64 ``start, end`` pairs
        (an env step's held runs, a phased block's stamp columns, as they fold)."""
        self.packed_spans.add(name, runs)

    def holds_events(self) -> bool:
        return bool(self.spans or self.packed_spans.by_name or self.instants or self.counters)

    def span_rows(self) -> list[Any]:
        """Every span held, as the dump writes them (see :func:`span_rows`)."""
        return span_rows(self.spans, self.packed_spans)

    def add_instant(self, name: str, at: float, details: Details | None = None) -> None:
        if len(self.instants) == self.instants.maxlen:
            self.dropped += 1
        self.instants.append((name, at) if details is None else (name, at, details))

    def add_counter(self, name: str, at: float, value: float, details: Details | None = None) -> None:
        if len(self.counters) == self.counters.maxlen:
            self.dropped += 1
        sample = (name, at, float(value))
        self.counters.append(sample if details is None else (*sample, details))

    def add_instants(self, instants: list[tuple[str, float]]) -> None:
        """Many instants ``(name, at)`` without details at once, as :meth:`add_instant` adds each."""
        self.dropped += _pushed_out(self.instants, len(instants))
        self.instants.extend(instants)

    def add_counters(self, samples: list[tuple[str, float, float]]) -> None:
        """Many counter samples ``(name, at, value)`` (a float) without details at once, as
        :meth:`add_counter` adds each."""
        self.dropped += _pushed_out(self.counters, len(samples))
        self.counters.extend(samples)

    def dropped_so_far(self) -> int:
        return self.dropped + self.spans_recorded - len(self.spans) + self.packed_spans.dropped

    def spans_complete_after(self) -> float | None:
        """The moment after which this thread's spans are all held, where its rings dropped
        some (None where they dropped none): the end of the oldest span the ring keeps (spans are
        appended as they end, so those it dropped ended earlier), or of the latest packed span
        dropped, whichever is later. An analysis that reads the spans of a long run reads what
        ended after it, and scales that to the blocks' totals."""
        held = len(self.spans)  # a ring that dropped spans is full: its oldest stays at [0] meanwhile
        after = self.spans[0][2] if held and self.spans_recorded > held else None
        packed_after = self.packed_spans.complete_after
        if packed_after is not None and (after is None or packed_after > after):
            after = packed_after
        return after

    def drain(self) -> tuple[tuple[Any, ...], tuple[Any, ...], tuple[Any, ...], int, tuple[Any, ...]]:
        """Hand over and forget every event held: (spans, instants, counters, dropped, packed
        spans as ``(name, little-endian pairs)``)."""
        packed, packed_dropped = self.packed_spans.drain()
        drained = (
            tuple(self.spans),
            tuple(self.instants),
            tuple(self.counters),
            self.dropped_so_far() + packed_dropped,
            packed,
        )
        self.spans.clear()
        self.instants.clear()
        self.counters.clear()
        self.spans_recorded = 0
        self.dropped = 0
        return drained


if accelerator.extension is not None:
    # The C accelerator appends a recorded block's span through these slots (see _timer_core.c).
    accelerator.extension.use_timeline_type(ThreadTimeline)


def _pushed_out(ring: deque, added: int) -> int:
    """How many events ``added`` more push out of the full ``ring``, one each past its capacity."""
    return max(0, min(added, len(ring) + added - ring.maxlen))  # type: ignore[operator]


def start_recording(capacity: int = DEFAULT_CAPACITY) -> None:
    """Record every timer block, marker and gauge of this process from now on.

    ``capacity`` bounds each thread's buffers (per kind of event). Processes forked afterwards
    record too; a process started with ``spawn`` calls this itself. Calling it again while
    recording changes the capacity of threads that start afterwards only.
    """
    global _recording, _capacity
    if capacity < 1:
        raise ValueError(f"capacity must be at least 1 event, got {capacity}")
    _capacity = capacity
    _recording = True
    timer_stack.set_timeline_factory(_new_timeline)
    for stack in timers.all_timer_stacks():
        if stack.timeline is None:
            stack.timeline = ThreadTimeline(capacity)
        stack.timeline.recording = True
    block_hooks.set_span_recording(True)


def stop_recording() -> None:
    """Stop recording; what was recorded stays until dumped, flushed or reset."""
    global _recording
    _recording = False
    block_hooks.set_span_recording(False)
    timer_stack.set_timeline_factory(None)
    for stack in timers.all_timer_stacks():
        if stack.timeline is not None:
            stack.timeline.recording = False


def is_recording() -> bool:
    return _recording


def clear_recording() -> None:
    """Forget every thread's recorded events (buffers are made afresh if recording is on)."""
    for stack in timers.all_timer_stacks():
        stack.settle()  # a phased block's held runs record their spans as they fold: those go too
        stack.timeline = ThreadTimeline(_capacity) if _recording else None


def _new_timeline() -> ThreadTimeline:
    return ThreadTimeline(_capacity)


def recording_timeline(timer_stack: TimerStack | None = None) -> ThreadTimeline | None:
    """The stack's timeline (the calling thread's by default) if it records now, else None."""
    timeline = timers._resolve(timer_stack).timeline
    return timeline if timeline is not None and timeline.recording else None


def mark(name: str, timer_stack: TimerStack | None = None) -> None:
    """Record an instant event (e.g. ``"restart worker 2"``) on this thread's track, if recording
    (and profiling is on: a paused profiler records nothing)."""
    timeline = recording_timeline(timer_stack)
    if timeline is not None and timers.is_enabled():
        timeline.add_instant(name, timers.now())


def record_counter(name: str, value: float, timer_stack: TimerStack | None = None) -> None:
    """Record a counter sample (a resource reading, a queue length) at this moment, if recording.

    ``set_gauge`` records one too, so gauges need no second call. ``value`` may be any real
    number type ``set_gauge`` accepts.
    """
    timeline = recording_timeline(timer_stack)
    if timeline is not None and timers.is_enabled():
        timeline.add_counter(name, timers.now(), timers.gauge_value(name, value))


def timeline_row(event: tuple[Any, ...]) -> list[Any]:
    """An event as the dump writes it: a list, its details (if any) as an object."""
    row = list(event)
    if row and isinstance(row[-1], tuple):
        row[-1] = dict(row[-1])
    return row


def span_rows(spans: deque[Any], packed: PackedSpans) -> list[Any]:
    """A thread's ring of ``spans`` and its ``packed`` spans as the dump writes them (lists,
    details as objects), by their end where some were packed."""
    # tuple() copies a ring in one C call, so a thread appending meanwhile cannot break it.
    # A span without details (nearly all) needs only list(), not a call of timeline_row.
    rows = [timeline_row(span) if isinstance(span[-1], tuple) else list(span) for span in tuple(spans)]
    return with_packed(rows, packed)


def clock_origin() -> float:
    """Wall-clock seconds at which this process's timer clock read zero.

    Two machines' monotonic clocks share nothing, but their wall clocks roughly agree, so the
    difference of origins aligns them (to NTP precision). Within one machine it is not needed.
    """
    return time.time() - timers.now()


def drain_timeline(stack: TimerStack) -> tuple[Any, ...] | None:
    """The events a stack recorded since the last drain, as the plain-data timeline of a payload:
    ``(host, clock_origin, thread_name, spans, instants, counters, dropped, packed_spans)``; None when the
    stack has recorded nothing and is not recording."""
    timeline = stack.timeline
    if timeline is None:
        return None
    spans, instants, counters, dropped, packed = timeline.drain()
    return (HOST, clock_origin(), stack.thread_name, spans, instants, counters, dropped, packed)


def timeline_section(stack: TimerStack, mergers: Sequence[Any] | None = None) -> dict[str, Any] | None:
    """The ``timeline`` section of a dumped tree: this process's threads, then the processes of
    ``mergers`` (default: every merger attached to ``stack``); None when nothing was recorded."""
    stacks = [stack] + [other for other in timers.all_timer_stacks() if other is not stack]
    for other in stacks:
        other.settle()  # a phased block's held runs add their spans as they fold
    # The stacks holding ended threads' folded trees record nothing (see profiler.timing.thread_registry.StackRegistry).
    recorded = [other for other in stacks if other.timeline is not None and not other.holds_ended_threads]
    # Each merger gives (process entry, events it dropped) per worker it heard from.
    worker_processes = [
        entry
        for merger in list(stack.mergers if mergers is None else mergers)
        for entry in merger.timeline_processes()
    ]
    if not recorded and not worker_processes:
        return None
    threads = []
    counters: list[list[Any]] = []
    dropped = 0
    for tid, other in enumerate(recorded, start=1):
        timeline = other.timeline
        assert timeline is not None
        thread: dict[str, Any] = {
            "tid": tid,
            "name": other.thread_name,
            "spans": timeline.span_rows(),
            "instants": [timeline_row(instant) for instant in tuple(timeline.instants)],
        }
        complete_after = timeline.spans_complete_after()
        if complete_after is not None:
            thread["spans_complete_after"] = complete_after
        threads.append(thread)
        counters.extend(timeline_row(counter) for counter in tuple(timeline.counters))
        dropped += timeline.dropped_so_far()
    counters.sort(key=lambda counter: counter[1])
    trainer = {
        "pid": os.getpid(),
        "name": "trainer",
        "host": HOST,
        "clock_offset": 0.0,
        "threads": threads,
        "counters": counters,
    }
    dropped += sum(worker_dropped for _, worker_dropped in worker_processes)
    processes = [trainer, *(process for process, _ in worker_processes)]
    return {"clock": CLOCK_NAME, "dropped": dropped, "processes": processes}
