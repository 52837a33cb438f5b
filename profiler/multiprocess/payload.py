"""A worker's timers since its last flush, as a small plain-data payload for the trainer.

A worker process never shares memory with the trainer. Every so often it calls
:func:`snapshot_and_flush` (or lets a :class:`WorkerTimers` decide when), sends the payload over
the channel it already uses, and starts counting afresh. The payload holds only tuples, strings,
ints, floats, bytes and None, so it pickles small and fast and the trainer can validate every
field before merging anything (see :func:`validate_payload` and ``profiler.multiprocess.merge``).

Block names travel once. Each block path has an id (:mod:`profiler.multiprocess.block_ids`): a stream's
first payload declares every block as ``(parent id, name)``, a later one only the blocks that
appeared since, and the figures travel as rows of numbers keyed by id, packed in one bytes
object. So a payload costs the worker one pass over its blocks, and the trainer one unpacking
and a few passes of builtins to validate it, whatever the names.

Layout, version 7 (a tuple; readers unpack it by position)::

    ("rlprof.timers", 7, pid, stream_id, sequence, window_start, window_end,
     names, blocks, errors, labels, gauges, timeline, memory, device_time, operators)

    names    = (first_id, ((parent_id, name), ...))   # declares ids first_id, first_id + 1, ...
    blocks   = bytes: rows of (id, count, total, minimum, maximum), little-endian
               uint32, int64, float64, float64, float64: 36 bytes a row
    errors   = ((block_id, error_count), ...)          # blocks whose calls raised, if any
    labels   = ((block_id, domain, object_type, (scope, ...)), ...)   # blocks that have any
    gauges   = ((name, value, min, max, count), ...)
    timeline = None | (host, clock_origin, thread_name,
                       ((name, start, end[, details]), ...),   # spans, worker clock
                       ((name, at[, details]), ...),           # instants
                       ((name, at, value[, details]), ...),    # counters
                       dropped,
                       ((name, pairs), ...))                   # packed spans, worker clock
    pairs    = bytes: little-endian float64 (start, end) pairs: an env step's spans
               (see profiler.recording.packed_spans)
    details  = ((key, value), ...)                             # see profiler.recording.events
    memory   = None | (host, clock_origin,
                       ((at, rss_bytes, uss_bytes_or_None), ...),   # samples, worker clock
                       ((path, calls, net_bytes, peak_bytes), ...)) # allocations per block path
    device_time = None | ((path, device, mode, total, count, min, max), ...)   # device blocks
    operators = None | (device_time_unavailable, with_stack, (entry, ...))   # operator figures

``parent_id`` is -1 for a top-level block; a parent's id is smaller than its children's. A row's
ids ascend, each at most once, and each was declared by this payload or an earlier one of its
stream (``first_id`` says how many the stream had declared before). A block appears in ``blocks``
when it has something to add: a call closed, or time spent in a run still open.

``stream_id`` is random per timer stack and ``sequence`` counts its flushes from 1, so a merger
can refuse a payload it has seen (and notice one that went missing). The window is the interval
of the worker's clock the payload covers; consecutive payloads' windows touch. A stream's
payloads must reach its merger in order and all of them (as on a pipe, or an actor's replies):
a payload lost on the way takes its declarations with it, and its stream's later payloads that
use them are refused, naming the ids. Where payloads may be lost, reordered or reach several
mergers (Ray task results), ``snapshot_and_flush(declare_all=True)`` declares every name in
every payload.

**Blocks open at the moment of a flush are split, not deferred.** The part of the open run that
lies inside the window goes into this payload's ``total``; the rest goes into a later payload's
``total``; the run's single ``count`` goes into the payload of the window in which it closes. So
totals over any run of payloads add up to the real time, counts to the real number of calls, and
an outer block around a worker's whole loop still reports its time at every flush. An open
block whose run has not closed yet appears with ``count`` 0 (and minimum and maximum 0).

A row's minimum and maximum are the shortest and longest single call among the ``count`` calls
that closed in the window (a split run counts whole, in the window where it closes, so a maximum
may exceed that window's total). Error counts, rare, travel apart in ``errors``, so that the
common row carries none.

``memory`` holds the worker's memory samples and per-block allocations since the last flush, when
it samples its memory (see :mod:`profiler.recording.memory`). ``device_time`` holds the device
time of the worker's blocks timed on a GPU since the last flush (see :mod:`profiler.gpu.device_time`),
by path of block names. ``operators`` holds the figures (FLOPs, memory, device time, shapes,
dtypes, call stacks) of the PyTorch operators the worker recorded since the last flush, by path
(the entry's layout is in :mod:`profiler.gpu.operator_figures`). Version 6 had no packed spans,
version 5 no operators,
version 4 no device time, version 3 named every block in every payload, as a tree of tuples; version 2 had no memory, version 1 no per-call extremes.

Why this module is long: it holds both sides. the layout, the worker's writing of it and the trainer's checks
of every field are one concept, the payload format. Writer and checks share the layout's
constants and change together; split, a field could be written that nothing checks.
"""

from __future__ import annotations

import math
import operator
import os
import struct
import sys
from functools import lru_cache
from typing import Any

from profiler.timing import timers
from profiler.timing.accelerator import extension as _accelerator
from profiler.multiprocess.block_ids import NO_PARENT, block_ids_of
from profiler.recording.events import drain_timeline
from profiler.recording.packed_spans import check_packed_spans
from profiler.gpu.device_time import drain_device_times, resolve_device_times
from profiler.recording.memory import drain_memory
from profiler.timing.timer_node import accelerated
from profiler.timing.timers import MAX_DEPTH, TimerNode, TimerStack, gauge_value

__all__ = [
    "DEFAULT_FLUSH_INTERVAL",
    "MAX_COUNT",
    "MAX_ROW_COUNT",
    "MAX_SECONDS",
    "PAYLOAD_TAG",
    "PAYLOAD_VERSION",
    "ROW_FIELDS",
    "ROW_FIELD_NAMES",
    "PayloadError",
    "WorkerTimers",
    "check_declarations",
    "check_header",
    "check_payload",
    "row_dtype",
    "row_ids",
    "row_ids_in_python",
    "snapshot_and_flush",
    "unchecked_rows",
    "validate_payload",
]

PAYLOAD_TAG = "rlprof.timers"
PAYLOAD_VERSION = 7
PAYLOAD_FIELDS = 16
DEFAULT_FLUSH_INTERVAL = 1.0
"""Seconds between flushes when a :class:`WorkerTimers` is given neither option."""

MAX_COUNT = 2**63 - 1
"""The largest count or error count a payload may carry (what a 64-bit counter holds): bounded so
that a crafted or corrupt value fails validation instead of overflowing half-way through a merge."""
MAX_SECONDS = 2.0**49
"""Every time a payload carries is below this (2**49 s, 17.8 million years): any number of merged
payloads then still sums to a finite float, which the strict JSON dump needs. A power of two, so
that one look at the top byte of each number of a row checks it."""
MAX_ROW_COUNT = 0x43 << 56
"""Counts in a payload's rows are below this (about 4.8e18): bounded for the same top-byte check."""
_SMALL_TOP_BYTES = bytes(range(0x43))  # the top bytes of numbers >= 0 and below the bounds

_ROW_FORMAT = "Iqddd"  # id (uint32), count (int64); total, minimum, maximum (float64)
# _timer_core.c's take_rows and check_rows write and read this layout too (its ROW_BYTES).
ROW_FIELDS = len(_ROW_FORMAT)
"""Numbers in a row: id, count, total, minimum, maximum."""
ROW_FIELD_NAMES = ("id", "count", "total", "min", "max")
"""The fields of a row in :func:`row_dtype`, in row order."""
_ROW_BYTES = struct.calcsize("<" + _ROW_FORMAT)
# Where the last (little-endian) byte of each number after the id sits in a row: its sign and its
# highest bits. An id needs no such look: it is unsigned, and below the ids declared.
_TOP_BYTE_OFFSETS = tuple(struct.calcsize("<" + _ROW_FORMAT[: field + 1]) - 1 for field in range(1, ROW_FIELDS))
_ID_BYTES = struct.calcsize("<" + _ROW_FORMAT[0])
_EXTREMES_OFFSET = struct.calcsize("<" + _ROW_FORMAT[:3])  # where a row's minimum starts


_pid = os.getpid()  # read once, not by a system call per flush; again in a forked child


def _note_pid() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_note_pid)


class PayloadError(ValueError):
    """A payload that cannot be merged: malformed, from another program, or another version."""


def snapshot_and_flush(timer_stack: TimerStack | None = None, *, declare_all: bool = False) -> tuple[Any, ...]:
    """Return the stack's timers since its last flush as a payload, then reset them.

    Call it from the thread that times into the stack (the calling thread's stack by default).
    Nodes are zeroed in place rather than dropped, so the worker's next blocks reuse them and
    allocate nothing; blocks open now are split at this instant (see the module docstring).
    The payload declares the names of the blocks no earlier payload of the stack declared, or,
    with ``declare_all``, of every block.
    """
    stack = timers._resolve(timer_stack)
    stack.settle()
    at = timers.now()
    block_ids = block_ids_of(stack)
    open_blocks = stack.open_blocks() if stack.current is not stack.root else []
    # The blocks open now count their run so far, then start the next window at minus that part:
    # when the run closes it adds its whole length, leaving only the part after this flush. Their
    # start time stays untouched, so a recorded span still covers the whole run.
    shallow_open = open_blocks[: MAX_DEPTH - 1]
    for node in shallow_open:
        node.total += node.running_for(at)
    labels = (
        tuple(
            (node_id, node.domain, node.object_type, tuple(sorted(node.scopes or ())))
            for node_id, node in block_ids.labelled
            if node.count or node.total
        )
        if block_ids.labelled
        else ()
    )
    take_rows = _compiled_take_rows if _compiled_take_rows is not None and accelerated() else take_rows_in_python
    blocks, error_counts = take_rows(block_ids.present_ids, block_ids.present_nodes)
    for node in shallow_open:
        node.total = -node.running_for(at)
    if block_ids.folds:
        blocks = _with_folded_rows(blocks, error_counts, block_ids.folds, open_blocks[MAX_DEPTH - 1 :], at)
    gauges = ()
    if stack.gauges:
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
        _pid,
        stack.stream_id,
        stack.flushes,
        window_start,
        at,
        block_ids.declarations(declare_all),
        blocks,
        tuple(error_counts),
        labels,
        gauges,
        drain_timeline(stack),
        drain_memory(stack),
        drain_device_times(stack),
        _drain_operators(stack),
    )


def _drain_operators(stack: TimerStack) -> tuple[Any, ...] | None:
    """``stack``'s operators since the last drain (:func:`profiler.gpu.torch_ops.drain_operators`).

    Only :mod:`profiler.gpu.torch_ops` records operators: a process that never imported it has
    none, and an env worker (most never record operators) need not import it, nor the operator
    figures and execution traces behind it, to say so.
    """
    torch_ops = sys.modules.get("profiler.gpu.torch_ops")
    return None if torch_ops is None else torch_ops.drain_operators(stack)


@lru_cache(maxsize=1)
def row_dtype() -> Any:
    """The numpy dtype of one row of ``blocks``, with fields ``id``, ``count``, ``total``,
    ``min`` and ``max``: a merger reads the rows of many payloads at once through it. Made on
    first use, so that a worker that only sends payloads never builds it."""
    import numpy  # a core dependency, but the worker side of payloads does without it

    codes = [numpy.dtype("<" + code) for code in _ROW_FORMAT]
    dtype = numpy.dtype(list(zip(ROW_FIELD_NAMES, codes)))
    assert dtype.itemsize == _ROW_BYTES  # packed like the struct: no padding between fields
    return dtype


def take_rows_in_python(
    ids: list[int], nodes: list[TimerNode]
) -> tuple[bytes, list[tuple[int, int]]]:
    """The rows of a payload, taken from ``nodes`` (with ``ids``) and packed as ``blocks``, the
    nodes zeroed for the next.

    The rows (id, count, total, minimum, maximum), packed in one call, and the rare error counts
    apart, so that the common row carries none. A node with no run closed but some time (a run
    open across the flush) gives a row of count 0. The reference of the C accelerator's
    ``take_rows``, which snapshot_and_flush uses while blocks run the C core.
    """
    rows: list[float] = []
    add_row = rows.extend
    error_counts: list[tuple[int, int]] = []
    infinity = math.inf
    for node_id, node in zip(ids, nodes):
        count = node.count
        if count:
            add_row((node_id, count, node.total, node.min, node.max))
            errors = node.errors
            if errors:
                error_counts.append((node_id, errors))
                node.errors = 0
            node.total = 0.0
            node.count = 0
            node.min = infinity
            node.max = 0.0
        elif node.total:  # a run open now, none closed in this window
            add_row((node_id, 0, node.total, 0.0, 0.0))
            node.total = 0.0
    return _rows_struct(len(rows) // ROW_FIELDS).pack(*rows), error_counts


_compiled_take_rows = None if _accelerator is None else _accelerator.take_rows
_compiled_check_rows = None if _accelerator is None else _accelerator.check_rows
_compiled_plain_spans = None if _accelerator is None else _accelerator.plain_spans
"""The C accelerator's ``take_rows``, ``check_rows`` and ``plain_spans`` (None where it is not loaded). A snapshot
takes its rows, and a merger checks them, on the core blocks run on
(:func:`profiler.timing.timer_node.accelerated`), so the one switch that compares the cores,
``block_hooks.use_compiled_core``, covers payloads too."""


@lru_cache(maxsize=256)
def _rows_struct(rows: int) -> struct.Struct:
    """The packing of ``rows`` rows into a payload's ``blocks``."""
    return struct.Struct("<" + _ROW_FORMAT * rows)


def _with_folded_rows(
    blocks: bytes,
    error_counts: list[tuple[int, int]],
    folds: list[tuple[int, TimerNode]],
    deep_open: list[TimerNode],
    at: float,
) -> bytes:
    """``blocks`` with the rows of the folded blocks (see :func:`_fold_deep_blocks`) added in id
    order, their error counts added to ``error_counts`` (in id order too). Only trees deeper than
    :data:`MAX_DEPTH` take this path, so it unpacks and packs again rather than slow the common one."""
    rows = list(unchecked_rows(blocks))
    for fold_id, node in folds:
        row = _fold_deep_blocks(node, deep_open, at)
        if row is not None:
            count, errors, total, minimum, maximum = row
            rows.extend((fold_id, count, total, minimum, maximum))
            if errors:
                error_counts.append((fold_id, errors))
    error_counts.sort()
    grouped = sorted(zip(*[iter(rows)] * ROW_FIELDS), key=lambda row: row[0])
    return _rows_struct(len(grouped)).pack(*[value for row in grouped for value in row])


def _fold_deep_blocks(
    node: TimerNode, open_blocks: list[TimerNode], at: float
) -> tuple[int, int, float, float, float] | None:
    """``node``'s children and everything below them, as the row of one block (count, errors,
    total, minimum, maximum) named :data:`~profiler.timing.timers.FOLDED_BLOCK_NAME`; None when it has nothing to add.

    The trainer refuses payloads nested deeper than :data:`MAX_DEPTH`, so rather than lose the
    whole payload, the levels from the limit down are folded: the fold's total, count and errors
    are those of the blocks at the limit (their time includes everything deeper), so the parent's
    totals and self time stay right. The walk is iterative: a deep recursion in user code must
    not make the flush itself hit the recursion limit.
    """
    total, count, errors = 0.0, 0, 0
    minimum, maximum = math.inf, 0.0
    for child in node.children.values():
        total += child.total + child.running_for(at) if child in open_blocks else child.total
        count += child.count
        errors += child.errors
        if child.count:
            minimum, maximum = min(minimum, child.min), max(maximum, child.max)
    pending = list(node.children.values())
    while pending:
        deeper = pending.pop()
        pending.extend(deeper.children.values())
        deeper.clear_runs()
        if deeper in open_blocks:
            deeper.total = -deeper.running_for(at)
    if not (count or total):
        return None
    if not count:
        minimum = 0.0
    return (count, errors, total, minimum, maximum)


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

        ``now`` is the timers' clock (:func:`profiler.timing.timers.now`) if the caller read it anyway,
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
        """Flush now, whatever is due: the payload to send before the worker exits. Its device
        blocks' pairs are waited for first: nothing later would carry them."""
        resolve_device_times()
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
    """Raise :class:`PayloadError` naming the first field that is wrong; return if all are right.

    Checks the payload on its own: that each block id it uses was declared by it or, by what its
    ``first_id`` says, by an earlier payload of its stream. Whether the earlier ones did is the
    merger's part (see :meth:`profiler.multiprocess.merge.TimerMerger.merge_payload`).
    """
    check_header(payload)
    check_payload(payload, check_declarations(payload[7]))


def check_header(payload: Any) -> None:
    """The fields that say what the payload is and where it comes from: tag, version, pid,
    stream, sequence and window."""
    if type(payload) is not tuple and type(payload) is not list:
        raise PayloadError(f"not an rlprof timer payload: a {type(payload).__name__}")
    # Types first: comparing a NumPy array with ``==`` gives an array, not a truth value.
    if len(payload) < 2 or type(payload[0]) is not str or payload[0] != PAYLOAD_TAG:
        raise PayloadError("not an rlprof timer payload: it does not start with the rlprof tag")
    if type(payload[1]) is not int or payload[1] != PAYLOAD_VERSION:
        raise PayloadError(
            f"timer payload version {_short(payload[1])} cannot be merged: this rlprof reads version "
            f"{PAYLOAD_VERSION} (are the worker and the trainer running different rlprof versions?)"
        )
    if len(payload) != PAYLOAD_FIELDS:
        raise PayloadError(
            f"timer payload has {len(payload)} fields, version {PAYLOAD_VERSION} has {PAYLOAD_FIELDS}"
        )
    _, _, pid, stream_id, sequence, window_start, window_end = payload[:7]
    if (
        type(pid) is int
        and type(stream_id) is int
        and type(sequence) is int
        and type(window_start) is float
        and type(window_end) is float
        and 0 < pid <= MAX_COUNT
        and 0 <= stream_id <= MAX_COUNT
        and 0 < sequence <= MAX_COUNT
        and -MAX_SECONDS <= window_start <= window_end <= MAX_SECONDS
    ):
        return  # the common case in one test; the checks below name what is wrong
    _whole(pid, "pid", minimum=1)
    _whole(stream_id, "stream_id", minimum=0)
    _whole(sequence, "sequence", minimum=1)
    _time(window_start, "window start", signed=True)
    _time(window_end, "window end", signed=True)
    if window_end < window_start:
        raise PayloadError("timer payload window ends before it starts")


def check_declarations(names: Any) -> int:
    """Check the ``names`` field, ``(first_id, ((parent_id, name), ...))``; return how many ids
    the stream has declared with this payload (the ids its rows may use)."""
    if type(names) is tuple and len(names) == 2 and type(names[1]) is tuple and not names[1] and type(names[0]) is int and names[0] >= 0:
        return names[0]  # the common case: nothing new declared
    if (type(names) is not tuple and type(names) is not list) or len(names) != 2:
        raise PayloadError(f"names: must be (first_id, ((parent_id, name), ...)), got {_short(names)}")
    first_id, declared = names
    _whole(first_id, "names.first_id", minimum=0)
    _sequence(declared, "names")
    for node_id, declaration in enumerate(declared, start=first_id):
        if (type(declaration) is not tuple and type(declaration) is not list) or len(declaration) != 2:
            raise PayloadError(f"names: block {node_id} must be declared as (parent_id, name), got {_short(declaration)}")
        parent_id, name = declaration
        if type(parent_id) is not int or not NO_PARENT <= parent_id < node_id:
            raise PayloadError(
                f"names: block {node_id} ({_short(name)}) has parent id {_short(parent_id)}; a parent "
                f"is -1 (none) or a block declared before it"
            )
        _name(name, f"names: block {node_id}")
    return first_id + len(declared)  # type: ignore[no-any-return]


_NO_ROWS: tuple[int, ...] = ()


def row_ids(blocks: Any, declared: int, ascending_ids: tuple[int, ...] = ()) -> tuple[int, ...]:
    """Check a payload's ``blocks`` and return the ids of its rows: ids ascending, each declared
    (below ``declared``); counts >= 0 and below :data:`MAX_ROW_COUNT`; every time finite, >= 0
    and below :data:`MAX_SECONDS` (a negative zero, -0.0, is refused: its sign bit is set); each
    minimum at most its maximum.

    One look at every number's top byte, and of the rows' numbers only the ids and the extremes
    unpacked, whatever the blocks are called: this is the trainer's validation cost per
    payload, linear in the number of rows with a small constant (the merger reads the figures
    later, many payloads at once). ``ascending_ids`` are ids known to ascend (the rows of the
    stream's previous payload, which passed this check): rows with exactly these ids skip the
    pass over the ids, as a worker's payloads mostly have rows for the same blocks.

    While the C core runs (:func:`~profiler.timing.timer_node.accelerated`), its ``check_rows``
    makes the same checks in one pass over the bytes and returns the ids; only what it does not
    accept goes to :func:`row_ids_in_python`, the reference, to be accepted after all or named.
    """
    if _compiled_check_rows is not None and accelerated():
        ids = _compiled_check_rows(blocks, declared, ascending_ids)
        if ids is not None:
            return ids  # type: ignore[no-any-return]
    return row_ids_in_python(blocks, declared, ascending_ids)


def row_ids_in_python(blocks: Any, declared: int, ascending_ids: tuple[int, ...] = ()) -> tuple[int, ...]:
    """:func:`row_ids` in Python: the reference of the C accelerator's ``check_rows``, and the
    check that names what is wrong."""
    if type(blocks) is not bytes:
        raise PayloadError(f"blocks: must be bytes (rows of five numbers), not {type(blocks).__name__}")
    size = len(blocks)
    if size % _ROW_BYTES:
        raise PayloadError(
            f"blocks: {size} bytes is not a whole number of {_ROW_BYTES}-byte rows (a truncated payload?)"
        )
    if not size:
        return _NO_ROWS
    rows = size // _ROW_BYTES
    # A number's last byte holds its sign and its highest bits: at most 0x42 means >= 0 and below
    # the bounds, and for a float also not NaN or infinite.
    for offset in _TOP_BYTE_OFFSETS:
        if blocks[offset::_ROW_BYTES].translate(None, _SMALL_TOP_BYTES):
            raise PayloadError(_bad_row(unchecked_rows(blocks), _out_of_bounds, "a number out of bounds"))
    ids = _ids_struct(rows).unpack(blocks)
    if not (ids[-1] < declared and (ids == ascending_ids or all(map(operator.lt, ids, ids[1:])))):
        raise PayloadError(_bad_ids(ids, declared))
    extremes = _extremes_struct(rows).unpack(blocks)
    if not all(map(operator.le, extremes[0::2], extremes[1::2])):
        raise PayloadError(
            _bad_row(unchecked_rows(blocks), lambda row: row[3] > row[4], "a shortest call longer than its longest")
        )
    return ids  # type: ignore[no-any-return]


def unchecked_rows(blocks: bytes | bytearray) -> tuple[float, ...]:
    """The rows of ``blocks`` as one flat tuple ``(id, count, total, minimum, maximum, id,
    ...)``, unchecked: for the bytes of a payload :func:`row_ids` accepted, or to name what it
    refused."""
    return _rows_struct(len(blocks) // _ROW_BYTES).unpack(blocks)  # type: ignore[no-any-return]


@lru_cache(maxsize=256)
def _ids_struct(rows: int) -> struct.Struct:
    """Reads only the ids of ``rows`` rows (the other numbers are skipped as padding)."""
    return struct.Struct("<" + ("I" + "x" * (_ROW_BYTES - _ID_BYTES)) * rows)


@lru_cache(maxsize=256)
def _extremes_struct(rows: int) -> struct.Struct:
    """Reads only the minimum and maximum of ``rows`` rows."""
    return struct.Struct("<" + ("x" * _EXTREMES_OFFSET + "dd") * rows)


def _out_of_bounds(row: tuple[float, ...]) -> bool:
    """What the top-byte check refuses, number by number, to name the row: a sign bit set counts,
    so -0.0 is out of bounds here as there (no worker measures a negative zero)."""
    return not (
        0 <= row[1] < MAX_ROW_COUNT
        and all(math.copysign(1.0, value) > 0.0 and value < MAX_SECONDS for value in row[2:])
    )


def _first_bad_row(values: tuple[float, ...], is_bad: Any) -> tuple[float, ...] | None:
    """The first row ``is_bad`` picks (the slow path, once a fast check failed)."""
    for row in zip(*[iter(values)] * ROW_FIELDS):
        if is_bad(row):
            return row
    return None


def _bad_ids(ids: Any, declared: int) -> str:
    for index, node_id in enumerate(ids):
        if not 0 <= node_id < declared:
            return (
                f"blocks: block id {node_id} was never declared (the stream has declared ids 0 to "
                f"{declared - 1})"
            )
        if index and node_id <= ids[index - 1]:
            return f"blocks: block ids must ascend, each at most once; {node_id} follows {ids[index - 1]}"
    raise AssertionError("the ids were valid")  # pragma: no cover


def _bad_row(values: tuple[float, ...], is_bad: Any, what: str) -> str:
    """The message for the first row ``is_bad`` picks: its id and every figure."""
    node_id, count, total, minimum, maximum = _first_bad_row(values, is_bad)  # type: ignore[misc]
    return f"blocks: block {node_id} has {what} (count {count}, total {total!r}, min {minimum!r}, max {maximum!r})"


def check_payload(payload: Any, declared: int, ascending_ids: tuple[int, ...] = ()) -> tuple[int, ...]:
    """Check every field after the names (blocks, labels, gauges, timeline, memory) of a payload
    whose header was checked; return the ids of its block rows (see :func:`row_ids`, which
    ``ascending_ids`` goes to)."""
    ids = row_ids(payload[8], declared, ascending_ids)
    error_counts, labels, gauges, timeline, memory, device_time, operators = payload[9:]
    # ``type(...) is not tuple or ...`` rather than ``!= ()``: a NumPy array compares elementwise.
    if type(error_counts) is not tuple or error_counts:
        _validate_error_counts(error_counts, declared)
    if type(labels) is not tuple or labels:
        _sequence(labels, "labels")
        for label in labels:
            _validate_labels(label, declared)
    if type(gauges) is not tuple or gauges:
        _sequence(gauges, "gauges")
        for index, gauge in enumerate(gauges):
            _validate_gauge(gauge, f"gauges[{index}]")
    if timeline is not None:
        _validate_timeline(timeline)
    if memory is not None:
        _validate_memory(memory)
    if device_time is not None:
        _validate_device_time(device_time)
    if operators is not None:
        from profiler.gpu.operator_figures import check_payload_field as check_operators_field

        try:
            check_operators_field(operators)
        except ValueError as error:
            raise PayloadError(str(error)) from None
    return ids


def _validate_device_time(device_time: Any) -> None:
    _sequence(device_time, "device_time")
    for index, entry in enumerate(device_time):
        where = f"device_time[{index}]"
        if not isinstance(entry, (tuple, list)) or len(entry) != 7:
            raise PayloadError(f"{where}: must be (path, device, mode, total, count, min, max)")
        path, device, mode, total, count, minimum, maximum = entry
        _sequence(path, f"{where}.path")
        if not path:
            raise PayloadError(f"{where}.path: must name a block")
        for name in path:
            _name(name, f"{where}.path")
        _name(device, f"{where}.device")
        if mode not in ("events", "sync"):
            raise PayloadError(f"{where}.mode: must be 'events' or 'sync'")
        _time(total, f"{where}.total")
        _whole(count, f"{where}.count", minimum=1)
        _time(minimum, f"{where}.min")
        _time(maximum, f"{where}.max")


def _validate_error_counts(error_counts: Any, declared: int) -> None:
    """``errors``: ((block id, error count), ...), ids declared and ascending, counts >= 1."""
    _sequence(error_counts, "errors")
    previous = -1
    for pair in error_counts:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise PayloadError(f"errors: must be ((block_id, error_count), ...), got {_short(pair)}")
        node_id, errors = pair
        if type(node_id) is not int or not previous < node_id < declared:
            raise PayloadError(f"errors: block id {_short(node_id)} was never declared, or comes twice or out of order")
        _whole(errors, f"errors of block {node_id}", minimum=1)
        previous = node_id


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


def _validate_labels(label: Any, declared: int) -> None:
    """A block's labels: (block id, domain, object_type, scopes): names or None, and a sequence
    of names."""
    if not isinstance(label, (tuple, list)) or len(label) != 4:
        raise PayloadError(f"labels: must be (block_id, domain, object_type, scopes), got {_short(label)}")
    node_id, domain, object_type, scopes = label
    if type(node_id) is not int or not 0 <= node_id < declared:
        raise PayloadError(f"labels: block id {_short(node_id)} was never declared")
    where = f"labels of block {node_id}"
    for field, value in (("domain", domain), ("object_type", object_type)):
        if value is not None:
            _name(value, f"{where}.{field}")
    _sequence(scopes, f"{where}.scopes")
    for scope in scopes:
        _name(scope, f"{where}.scopes")


def _validate_timeline(timeline: Any) -> None:
    if not isinstance(timeline, (tuple, list)) or len(timeline) != 8:
        raise PayloadError(
            "timeline: must be (host, clock_origin, thread, spans, instants, counters, dropped, packed_spans)"
        )
    host, origin, thread_name, spans, instants, counters, dropped, packed = timeline
    _name(host, "timeline.host")
    _time(origin, "timeline.clock_origin", signed=True)
    _name(thread_name, "timeline.thread")
    _whole(dropped, "timeline.dropped", minimum=0)
    wrong = check_packed_spans(packed, MAX_SECONDS)
    if wrong is not None:
        raise PayloadError(f"timeline.packed_spans{wrong}")
    for kind, events, width in (("spans", spans, 3), ("instants", instants, 2), ("counters", counters, 3)):
        _sequence(events, f"timeline.{kind}")
        if kind == "spans" and _plain_spans(events):
            continue
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


def _plain_spans(spans: Any) -> bool:
    """Whether every span is a plain ``(name, start, end)``: a non-empty ``str`` and two floats,
    finite and ascending. Such spans (every one a worker's env calls record) pass the check
    below; this says so without the message the check prepares for each event, which cost the
    trainer's channel thread more than the rest of a shipment. Anything else is checked event by
    event, so what is refused and the words refusing it stay the same.

    While the C core runs, its ``plain_spans`` says it in one pass (the Python loop was about
    700 instructions a span, some 3,000 a vector step of 4 workers); :func:`_plain_spans_in_python`
    is the reference, and decides what the C one leaves to it."""
    if _compiled_plain_spans is not None and accelerated():
        plain = _compiled_plain_spans(spans, MAX_SECONDS)
        if plain is not None:
            return plain  # type: ignore[no-any-return]
    return _plain_spans_in_python(spans)


def _plain_spans_in_python(spans: Any) -> bool:
    """:func:`_plain_spans` in Python: the reference of the C accelerator's."""
    for span in spans:
        if type(span) is not tuple or len(span) != 3:
            return False
        name, start, end = span
        if type(name) is not str or not name or type(start) is not float or type(end) is not float:
            return False
        if not -MAX_SECONDS <= start <= end <= MAX_SECONDS:
            return False
    return True


_MAX_DETAILS = 8


def _validate_details(details: Any, where: str) -> None:
    """An event's details: up to :data:`_MAX_DETAILS` (key, value) pairs, keys names, values
    strings or finite numbers (see ``profiler.recording.events``)."""
    if not isinstance(details, (tuple, list)) or len(details) > _MAX_DETAILS:
        raise PayloadError(f"{where}: details must be up to {_MAX_DETAILS} (key, value) pairs")
    for pair in details:
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise PayloadError(f"{where}: a detail is a (key, value) pair, got {_short(pair)}")
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
        raise PayloadError(f"{where}: a name must be a non-empty string, got {_short(value)}")


def _whole(value: Any, where: str, *, minimum: int) -> None:
    if type(value) is not int or not minimum <= value <= MAX_COUNT:
        raise PayloadError(
            f"{where}: must be a whole number from {minimum} to 2**63-1, got {_short(value)}"
        )


def _short(value: Any) -> str:
    """``repr`` cut to a readable length: a crafted value can be a 400-digit number, or hold one
    too long for ``repr`` to write at all (Python refuses ints of more than 4,300 digits)."""
    if isinstance(value, int) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit integer"
    try:
        text = repr(value)
    except ValueError:
        return f"a {type(value).__name__} too large to show"
    return text if len(text) <= 80 else text[:77] + "..."


def _time(value: Any, where: str, *, signed: bool = False) -> None:
    if type(value) is not float and type(value) is not int:
        raise PayloadError(f"{where}: must be a number, got {_short(value)}")
    if not -MAX_SECONDS <= value <= MAX_SECONDS or (value < 0 and not signed):
        raise PayloadError(
            f"{where}: must be a finite number{'' if signed else ' >= 0'} of at most "
            f"{MAX_SECONDS:g} seconds, got {_short(value)}"
        )
