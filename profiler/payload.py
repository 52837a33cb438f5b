"""A worker's timers since its last flush, as a small plain-data payload for the trainer.

A worker process never shares memory with the trainer. Every so often it calls
:func:`snapshot_and_flush` (or lets a :class:`WorkerTimers` decide when), sends the payload over
the pipe it already uses, and starts counting afresh. The payload holds only tuples, strings,
ints, floats and None, so it pickles small and fast and the trainer can validate every field
before merging anything (see :func:`validate_payload` and ``profiler.merge``).

Layout, version 3 (a tuple; readers unpack it by position)::

    ("rlprof.timers", 3, pid, stream_id, sequence, window_start, window_end,
     blocks, gauges, timeline, memory)

    blocks   = ((name, total_s, count, errors, extremes, blocks[, labels]), ...)   # nested
    extremes = None | (min_s, max_s)
    labels   = (domain, object_type, (scope, ...))   # only on blocks that have any (durations, scope)
    gauges   = ((name, value, min, max, count), ...)
    timeline = None | (host, clock_origin, thread_name,
                       ((name, start, end[, details]), ...),   # spans, worker clock
                       ((name, at[, details]), ...),           # instants
                       ((name, at, value[, details]), ...),    # counters
                       dropped)
    details  = ((key, value), ...)                             # see profiler.events
    memory   = None | (host, clock_origin,
                       ((at, rss_bytes, uss_bytes_or_None), ...),   # samples, worker clock
                       ((path, calls, net_bytes, peak_bytes), ...)) # allocations per block path

``stream_id`` is random per timer stack and ``sequence`` counts its flushes from 1, so a merger
can refuse a payload it has seen (and notice one that went missing). The window is the interval
of the worker's clock the payload covers; consecutive payloads' windows touch.

**Blocks open at the moment of a flush are split, not deferred.** The part of the open run that
lies inside the window goes into this payload's ``total``; the rest goes into a later payload's
``total``; the run's single ``count`` goes into the payload of the window in which it closes. So
totals over any run of payloads add up to the real time, counts to the real number of calls, and
an outer block around a worker's whole loop still reports its time at every flush. An open
block whose run has not closed yet appears with ``count`` 0.

``extremes`` holds the shortest and longest single call among the ``count`` calls that closed in
the window (a split run counts whole, in the window where it closes, so ``max_s`` may exceed that
window's ``total_s``). It is None when it would say nothing the other fields do not: no call
closed (``count`` 0), or one call that lasted exactly ``total_s``, by far the most common block of
a payload flushed every step. Version 1 had no per-call extremes.

``memory`` holds the worker's memory samples and per-block allocations since the last flush, when
it samples its memory (see :mod:`profiler.memory`); version 2 had none.
"""

from __future__ import annotations

import math
import os
from typing import Any

from profiler import timers
from profiler.events import drain_timeline
from profiler.memory import drain_memory
from profiler.timers import FOLDED_BLOCK_NAME, MAX_DEPTH, TimerNode, TimerStack, gauge_value

__all__ = [
    "DEFAULT_FLUSH_INTERVAL",
    "MAX_COUNT",
    "MAX_SECONDS",
    "PAYLOAD_TAG",
    "PAYLOAD_VERSION",
    "PayloadError",
    "WorkerTimers",
    "snapshot_and_flush",
    "validate_payload",
]

PAYLOAD_TAG = "rlprof.timers"
PAYLOAD_VERSION = 3
DEFAULT_FLUSH_INTERVAL = 1.0
"""Seconds between flushes when a :class:`WorkerTimers` is given neither option."""

_NUMBER_TYPES = (float, int)
MAX_COUNT = 2**63 - 1
"""The largest count or error count a payload may carry (what a 64-bit counter holds): bounded so
that a crafted or corrupt value fails validation instead of overflowing half-way through a merge."""
MAX_SECONDS = 1e15
"""The largest block total a payload may carry (30 million years): any number of merged payloads
then still sums to a finite float, which the strict JSON dump needs."""


class PayloadError(ValueError):
    """A payload that cannot be merged: malformed, from another program, or another version."""


def snapshot_and_flush(timer_stack: TimerStack | None = None) -> tuple[Any, ...]:
    """Return the stack's timers since its last flush as a payload, then reset them.

    Call it from the thread that times into the stack (the calling thread's stack by default).
    Nodes are zeroed in place rather than dropped, so the worker's next blocks reuse them and
    allocate nothing; blocks open now are split at this instant (see the module docstring).
    """
    stack = timers._resolve(timer_stack)
    at = timers.now()
    open_blocks = stack.open_blocks()
    blocks = _flush_children(stack.root, open_blocks, at)
    gauges = tuple(
        (name, gauge.value, gauge.min_value, gauge.max_value, gauge.count)
        for name, gauge in stack.gauges.items()
    )
    stack.gauges = {}
    window_start, stack.flushed_at = stack.flushed_at, at
    stack.flushes += 1
    return (
        PAYLOAD_TAG,
        PAYLOAD_VERSION,
        os.getpid(),
        stack.stream_id,
        stack.flushes,
        window_start,
        at,
        blocks,
        gauges,
        drain_timeline(stack),
        drain_memory(stack),
    )


def _flush_children(
    node: TimerNode, open_blocks: list[TimerNode], at: float, depth: int = 1
) -> tuple[tuple[Any, ...], ...]:
    """Encode and zero ``node``'s children, which sit at ``depth`` (the top-level blocks at 1)."""
    if depth == MAX_DEPTH:
        return _fold_deep_blocks(node, open_blocks, at)
    encoded = []
    for child in node.children.values():
        total = _flush_node(child, open_blocks, at)
        grandchildren = _flush_children(child, open_blocks, at, depth + 1) if child.children else ()
        if child.count or total or grandchildren:
            extremes = _extremes(child, total)
            block = (child.name, total, child.count, child.errors, extremes, grandchildren)
            if child.domain is not None or child.object_type is not None or child.scopes:
                # Labels travel only with the blocks that have them: most have none.
                block += ((child.domain, child.object_type, tuple(sorted(child.scopes or ()))),)
            encoded.append(block)
        _zero(child, open_blocks, at)
    return tuple(encoded)


def _flush_node(node: TimerNode, open_blocks: list[TimerNode], at: float) -> float:
    """The node's total for this payload: closed runs plus the part of an open run until ``at``."""
    if open_blocks and node in open_blocks:
        return node.total + node.running_for(at)
    return node.total


def _extremes(node: TimerNode, total: float) -> tuple[float, float] | None:
    """The node's (min, max) per call for the payload; None where implied, to keep the most
    common payload small (see the module docstring)."""
    count = node.count
    if count == 0 or (count == 1 and node.min == total):
        return None
    return (node.min, node.max)


def _zero(node: TimerNode, open_blocks: list[TimerNode], at: float) -> None:
    # An open block will add its whole run when it closes; starting from minus the part reported
    # now, it ends up with only the part after this flush. Its start time stays untouched, so a
    # recorded span still covers the whole run and nests correctly.
    node.clear_runs()
    if open_blocks and node in open_blocks:
        node.total = -node.running_for(at)


def _fold_deep_blocks(
    node: TimerNode, open_blocks: list[TimerNode], at: float
) -> tuple[tuple[Any, ...], ...]:
    """``node``'s children and everything below them, as one block named :data:`FOLDED_BLOCK_NAME`.

    The trainer refuses payloads nested deeper than :data:`MAX_DEPTH`, so rather than lose the
    whole payload, the levels from the limit down are folded: the fold's total, count and errors
    are those of the blocks at the limit (their time includes everything deeper), so the parent's
    totals and self time stay right. The walk is iterative: a deep recursion in user code must
    not make the flush itself hit the recursion limit.
    """
    total, count, errors = 0.0, 0, 0
    minimum, maximum = math.inf, 0.0
    for child in node.children.values():
        total += _flush_node(child, open_blocks, at)
        count += child.count
        errors += child.errors
        if child.count:
            minimum, maximum = min(minimum, child.min), max(maximum, child.max)
    pending = list(node.children.values())
    while pending:
        deeper = pending.pop()
        pending.extend(deeper.children.values())
        _zero(deeper, open_blocks, at)
    if not (count or total):
        return ()
    extremes = (minimum, maximum) if count > 1 or (count == 1 and minimum != total) else None
    return ((FOLDED_BLOCK_NAME, total, count, errors, extremes, ()),)


class WorkerTimers:
    """Decides, step by step, when a worker loop should ship its timers.

    Call :meth:`step_done` once per step; it returns a payload when one is due (every
    ``flush_every`` steps and/or once ``flush_interval`` seconds have passed since the last
    flush, whichever comes first) and None otherwise, so the caller piggy-backs it on the reply it
    sends anyway. Call :meth:`final_payload` before the worker exits so nothing is left behind.
    A worker that dies loses at most what it timed since its last flush. With neither option
    given it flushes every :data:`DEFAULT_FLUSH_INTERVAL` seconds.

    ``quiet_until``: before this moment on the timers' clock, :meth:`step_done` returns None and
    counts nothing that matters, so a hot loop that has the time at hand may skip the call::

        payload = None if now < worker_timers.quiet_until else worker_timers.step_done(now)

    (with ``flush_every`` every step counts, and ``quiet_until`` is minus infinity).
    """

    __slots__ = (
        "flush_every",
        "flush_interval",
        "timer_stack",
        "quiet_until",
        "_steps_since_flush",
        "_flushed_at",
    )

    def __init__(
        self,
        flush_every: int | None = None,
        flush_interval: float | None = None,
        timer_stack: TimerStack | None = None,
    ) -> None:
        if flush_every is not None and (
            isinstance(flush_every, bool) or not isinstance(flush_every, int) or flush_every < 1
        ):
            raise ValueError(f"flush_every must be a whole number of steps >= 1, got {flush_every!r}")
        if flush_interval is not None and not flush_interval > 0:
            raise ValueError(f"flush_interval must be a number of seconds > 0, got {flush_interval!r}")
        if flush_every is None and flush_interval is None:
            flush_interval = DEFAULT_FLUSH_INTERVAL
        self.flush_every = flush_every
        self.flush_interval = flush_interval
        self.timer_stack = timer_stack
        self._steps_since_flush = 0
        self._flushed_at = timers.now()
        self.quiet_until = self._next_due()

    def step_done(self, now: float | None = None) -> tuple[Any, ...] | None:
        """Count a step; return a payload if a flush is due, else None.

        ``now`` is the timers' clock (:func:`profiler.timers.now`) if the caller read it anyway,
        as a worker does to stamp its reply: per step, a clock read less.
        """
        self._steps_since_flush += 1
        if self.flush_every is not None and self._steps_since_flush >= self.flush_every:
            return self.final_payload()
        if self.flush_interval is not None:
            if now is None:
                now = timers.now()
            if now - self._flushed_at >= self.flush_interval:
                return self.final_payload()
        return None

    def final_payload(self) -> tuple[Any, ...]:
        """Flush now, whatever is due: the payload to send before the worker exits."""
        payload = snapshot_and_flush(self.timer_stack)
        self._steps_since_flush = 0
        self._flushed_at = payload[6]
        self.quiet_until = self._next_due()
        return payload

    def _next_due(self) -> float:
        if self.flush_every is not None:
            return -math.inf
        return self._flushed_at + self.flush_interval  # type: ignore[operator]


# --- validation (the trainer side calls this before merging anything) --------------------------


def validate_payload(payload: Any) -> None:
    """Raise :class:`PayloadError` naming the first field that is wrong; return if all are right."""
    if not isinstance(payload, (tuple, list)):
        raise PayloadError(f"not an rlprof timer payload: a {type(payload).__name__}")
    if len(payload) < 2 or payload[0] != PAYLOAD_TAG:
        raise PayloadError("not an rlprof timer payload: it does not start with the rlprof tag")
    if payload[1] != PAYLOAD_VERSION:
        raise PayloadError(
            f"timer payload version {payload[1]!r} cannot be merged: this rlprof reads version "
            f"{PAYLOAD_VERSION} (are the worker and the trainer running different rlprof versions?)"
        )
    if len(payload) != 11:
        raise PayloadError(
            f"timer payload has {len(payload)} fields, version {PAYLOAD_VERSION} has 11"
        )
    _, _, pid, stream_id, sequence, window_start, window_end, blocks, gauges, timeline, memory = payload
    _whole(pid, "pid", minimum=1)
    _whole(stream_id, "stream_id", minimum=0)
    _whole(sequence, "sequence", minimum=1)
    _time(window_start, "window start", signed=True)
    _time(window_end, "window end", signed=True)
    if window_end < window_start:
        raise PayloadError("timer payload window ends before it starts")
    _validate_blocks(blocks, "blocks", 1)
    _sequence(gauges, "gauges")
    for index, gauge in enumerate(gauges):
        _validate_gauge(gauge, f"gauges[{index}]")
    if timeline is not None:
        _validate_timeline(timeline)
    if memory is not None:
        _validate_memory(memory)


def _validate_gauge(gauge: Any, where: str) -> None:
    """A gauge is (name, value, min, max, count); readings may be any real number, NaN included.

    Anything ``set_gauge`` accepts is accepted here too (the merger converts it to a float), so
    a gauge read from a NumPy scalar never costs the worker its payload.
    """
    if not isinstance(gauge, (tuple, list)) or len(gauge) != 5:
        raise PayloadError(f"{where}: a gauge is (name, value, min, max, count)")
    _name(gauge[0], where)
    for field, value in zip(("value", "min", "max"), gauge[1:4]):
        try:
            gauge_value(gauge[0], value)
        except (TypeError, ValueError) as error:
            raise PayloadError(f"{where}.{field}: {error}") from None
    _whole(gauge[4], f"{where} ({gauge[0]!r}).count", minimum=1)


def _validate_blocks(blocks: Any, where: str, depth: int) -> None:
    # The hot loop of validation: cheap type tests inline, error messages built only on failure.
    if depth > MAX_DEPTH:
        raise PayloadError(
            f"{where}: blocks nested deeper than {MAX_DEPTH} levels (snapshot_and_flush folds "
            "deeper blocks, so this payload was not made by it)"
        )
    if type(blocks) is not tuple and type(blocks) is not list:
        _sequence(blocks, where)
    for block in blocks:
        if (type(block) is not tuple and type(block) is not list) or not 6 <= len(block) <= 7:
            raise PayloadError(
                f"{where}: a block is (name, total, count, errors, extremes, children[, labels]), "
                f"got {block!r:.80}"
            )
        name, total, count, errors, extremes, children = block[:6]
        if len(block) == 7:
            _validate_labels(block[6], f"{where}/{name}")
        if not (
            type(name) is str
            and name
            and type(total) in _NUMBER_TYPES
            and 0 <= total <= MAX_SECONDS
            and type(count) is int
            and 0 <= count <= MAX_COUNT
            and type(errors) is int
            and 0 <= errors <= MAX_COUNT
        ):
            _name(name, where)
            _time(total, f"{where}/{name}.total")
            if total > MAX_SECONDS:
                raise PayloadError(f"{where}/{name}.total: {total!r} s is more than {MAX_SECONDS:g} s")
            _whole(count, f"{where}/{name}.count", minimum=0)
            _whole(errors, f"{where}/{name}.errors", minimum=0)
        if extremes is not None or count > 1:
            _validate_extremes(extremes, f"{where}/{name}")
        if children:
            _validate_blocks(children, f"{where}/{name}", depth + 1)
        elif type(children) is not tuple and type(children) is not list:
            _sequence(children, f"{where}/{name}")


def _validate_labels(labels: Any, where: str) -> None:
    """A block's labels: (domain, object_type, scopes): names or None, and a sequence of names."""
    if not isinstance(labels, (tuple, list)) or len(labels) != 3:
        raise PayloadError(f"{where}.labels: must be (domain, object_type, scopes), got {labels!r:.80}")
    domain, object_type, scopes = labels
    for field, value in (("domain", domain), ("object_type", object_type)):
        if value is not None:
            _name(value, f"{where}.{field}")
    _sequence(scopes, f"{where}.scopes")
    for scope in scopes:
        _name(scope, f"{where}.scopes")


def _validate_extremes(extremes: Any, where: str) -> None:
    if (type(extremes) is not tuple and type(extremes) is not list) or len(extremes) != 2:
        raise PayloadError(
            f"{where}.extremes: must be (min, max), or None for fewer than two calls, "
            f"got {extremes!r:.80}"
        )
    minimum, maximum = extremes
    _time(minimum, f"{where}.min")
    _time(maximum, f"{where}.max")
    if minimum > maximum:
        raise PayloadError(
            f"{where}: the shortest call ({minimum!r} s) is longer than the longest ({maximum!r} s)"
        )


def _validate_timeline(timeline: Any) -> None:
    if not isinstance(timeline, (tuple, list)) or len(timeline) != 7:
        raise PayloadError(
            "timeline: must be (host, clock_origin, thread, spans, instants, counters, dropped)"
        )
    host, origin, thread_name, spans, instants, counters, dropped = timeline
    _name(host, "timeline.host")
    _time(origin, "timeline.clock_origin", signed=True)
    _name(thread_name, "timeline.thread")
    _whole(dropped, "timeline.dropped", minimum=0)
    for kind, events, width in (("spans", spans, 3), ("instants", instants, 2), ("counters", counters, 3)):
        _sequence(events, f"timeline.{kind}")
        for index, event in enumerate(events):
            where = f"timeline.{kind}[{index}]"
            if not isinstance(event, (tuple, list)) or len(event) not in (width, width + 1):
                raise PayloadError(f"{where}: must have {width} fields, and details after them or not")
            _name(event[0], where)
            if len(event) > width:
                _validate_details(event[width], where)
                event = event[:width]
            if kind == "counters":
                # Times must be finite; a counter's reading may be NaN or infinite, as a gauge's.
                _time(event[1], where, signed=True)
                try:
                    gauge_value(event[0], event[2])
                except (TypeError, ValueError) as error:
                    raise PayloadError(f"{where}: {error}") from None
                continue
            for value in event[1:]:
                _time(value, where, signed=True)
            if kind == "spans" and event[2] < event[1]:
                raise PayloadError(f"{where}: a span ends before it starts")


_MAX_DETAILS = 8


def _validate_details(details: Any, where: str) -> None:
    """An event's details: up to :data:`_MAX_DETAILS` (key, value) pairs, keys names, values
    strings or finite numbers (see ``profiler.events``)."""
    if not isinstance(details, (tuple, list)) or len(details) > _MAX_DETAILS:
        raise PayloadError(f"{where}: details must be up to {_MAX_DETAILS} (key, value) pairs")
    for pair in details:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise PayloadError(f"{where}: a detail is a (key, value) pair, got {pair!r:.80}")
        _name(pair[0], f"{where}.details")
        value = pair[1]
        if type(value) is not str:
            _time(value, f"{where}.details.{pair[0]}", signed=True)


def _validate_memory(memory: Any) -> None:
    if not isinstance(memory, (tuple, list)) or len(memory) != 4:
        raise PayloadError("memory: must be (host, clock_origin, samples, allocations)")
    host, origin, samples, allocations = memory
    _name(host, "memory.host")
    _time(origin, "memory.clock_origin", signed=True)
    _sequence(samples, "memory.samples")
    for index, sample in enumerate(samples):
        where = f"memory.samples[{index}]"
        if not isinstance(sample, (tuple, list)) or len(sample) != 3:
            raise PayloadError(f"{where}: a sample is (time, rss bytes, uss bytes or None)")
        _time(sample[0], where, signed=True)
        _whole(sample[1], f"{where}.rss", minimum=0)
        if sample[2] is not None:
            _whole(sample[2], f"{where}.uss", minimum=0)
    _sequence(allocations, "memory.allocations")
    for index, allocation in enumerate(allocations):
        where = f"memory.allocations[{index}]"
        if not isinstance(allocation, (tuple, list)) or len(allocation) != 4:
            raise PayloadError(f"{where}: an allocation is (block path, calls, net bytes, peak bytes)")
        path, calls, net, peak = allocation
        _sequence(path, f"{where}.path")
        if not path:
            raise PayloadError(f"{where}.path: names at least one block")
        for name in path:
            _name(name, f"{where}.path")
        _whole(calls, f"{where}.calls", minimum=0)
        if type(net) is not int or not -MAX_COUNT <= net <= MAX_COUNT:
            raise PayloadError(f"{where}.net_bytes: must be a whole number of bytes, got {_short(net)}")
        _whole(peak, f"{where}.peak_bytes", minimum=0)


def _sequence(value: Any, where: str) -> None:
    if not isinstance(value, (tuple, list)):
        raise PayloadError(f"{where}: must be a tuple or list, not {type(value).__name__}")


def _name(value: Any, where: str) -> None:
    if not isinstance(value, str) or not value:
        raise PayloadError(f"{where}: a name must be a non-empty string, got {value!r}")


def _whole(value: Any, where: str, *, minimum: int) -> None:
    if type(value) is not int or not minimum <= value <= MAX_COUNT:
        raise PayloadError(
            f"{where}: must be a whole number from {minimum} to 2**63-1, got {_short(value)}"
        )


def _short(value: Any) -> str:
    """``repr`` cut to a readable length: a crafted value can be a 400-digit number."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit integer"
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _time(value: Any, where: str, *, signed: bool = False) -> None:
    if type(value) is not float and type(value) is not int:
        raise PayloadError(f"{where}: must be a number, got {_short(value)}")
    if not -MAX_SECONDS <= value <= MAX_SECONDS or (value < 0 and not signed):
        raise PayloadError(
            f"{where}: must be a finite number{'' if signed else ' >= 0'} of at most "
            f"{MAX_SECONDS:g} seconds, got {_short(value)}"
        )
