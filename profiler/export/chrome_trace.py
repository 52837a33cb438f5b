"""The run as a Chrome Trace Event Format document: open it in Perfetto or chrome://tracing.

Each process gets one ``pid`` (named ``trainer``, ``worker 3``… with ``M`` metadata events) and
each of its threads one ``tid``. Recorded spans become ``X`` complete events, markers ``i``
instant events, counters and gauges ``C`` counter events (a NaN or infinite reading, which a
counter cannot draw, becomes an instant event named ``"loss = NaN"``), and each process's memory
samples (the dump's ``memory`` section) ``C`` events on its tracks ``RSS (MiB)`` and ``USS (MiB)``. Timestamps are microseconds on one
clock, counted from the earliest moment in the run.

When the run recorded no timeline, one is laid out from the aggregate totals instead (see
:mod:`profiler.export.aggregate_timeline`) and ``otherData.timeline`` says so.

Perfetto drops ``X`` events that overlap partially on a thread, so spans are put in nesting order
(parents before children) on integer nanoseconds and a child that pokes out of its parent, as float
rounding or a clipped recording can make it, is trimmed to end with the parent.

Format reference:
https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU
"""

from __future__ import annotations

import math
from itertools import islice
from operator import itemgetter
from typing import Any, BinaryIO, Iterable, Iterator

from profiler.export.aggregate_timeline import synthesize_timeline
from profiler.tree import strict_json
from profiler.export.process_trees import split_into_process_trees
from profiler.timing import accelerator
from profiler.tree.strict_json import named_reading

__all__ = ["EVENTS_PER_WRITE", "TRACE_SPANS_VERSION", "TraceTooLongError", "to_chrome_trace", "write_chrome_trace"]

TRACE_SPANS_VERSION = 1
"""The interface version ``_trace_spans.c`` must say (its ``TRACE_SPANS_VERSION``)."""

# A thread's spans' nesting order and texts in C (_span_events' Python is the reference it
# matches): None with RLPROF_PURE_PYTHON=1 or where no compiler built it.
_trace_spans, _ = accelerator.load_extension("profiler.export._trace_spans", TRACE_SPANS_VERSION,
                                             "the trace's C helper")


class TraceTooLongError(ValueError):
    """A run whose times lie too far apart for a trace's nanoseconds (a float's range ends at
    about 1.8e308: times from ~1.8e299 s apart, which a loaded file may hold, overflow it)."""

Event = dict[str, Any]
NANOSECONDS_PER_SECOND = 1_000_000_000


def to_chrome_trace(tree: dict[str, Any]) -> dict[str, Any]:
    """The trace document (JSON object format) for a normalized timer tree.

    Uses ``tree["timeline"]`` when the run recorded one, else a timeline synthesized from totals.
    For a long run, :func:`write_chrome_trace` writes the same document without building it.
    """
    timeline, other_data = _timeline_and_other_data(tree)
    events = [event for chunk in _trace_events(tree, timeline) for event in chunk]
    return {"traceEvents": events, "displayTimeUnit": "ms", "otherData": other_data}


EVENTS_PER_WRITE = 10_000
"""Events encoded at once by :func:`write_chrome_trace`: few enough to stay small in memory, many
enough that the encoding runs at the JSON encoder's speed rather than a call per event."""


def write_chrome_trace(tree: dict[str, Any], output: BinaryIO) -> None:
    """Write :func:`to_chrome_trace`'s document to ``output`` as compact strict JSON, in pieces.

    A long recorded run has millions of spans; built whole, as event dicts and then as one string,
    its trace took four times the memory of the loaded file. Written in batches of about
    :data:`EVENTS_PER_WRITE` events, the trace never exists whole in memory. The bytes are those
    of ``strict_json.dumps(to_chrome_trace(tree), separators=(",", ":"))``.

    A plain span (no details, no device time) is formatted as text directly rather than built as a
    dict for the JSON encoder: spans are nearly all of a trace, and this was most of the time
    ``rlprof run`` spends writing its files after the program ends (``benchmarks/exit_span_cost.py``).
    """
    timeline, other_data = _timeline_and_other_data(tree)
    output.write(b'{"traceEvents":[')
    batch: list[str] = []
    first_batch = True
    for chunk in _trace_events(tree, timeline, as_text=True):
        batch.extend(chunk)
        if len(batch) >= EVENTS_PER_WRITE:
            _write_batch(output, batch, first_batch)
            batch.clear()
            first_batch = False
    if batch:
        _write_batch(output, batch, first_batch)
    output.write(b'],"displayTimeUnit":"ms","otherData":')
    output.write(strict_json.dumps(other_data, separators=(",", ":")).encode("utf-8"))
    output.write(b"}")


def _write_batch(output: BinaryIO, batch: list[str], first_batch: bool) -> None:
    text = ",".join(batch)
    output.write((text if first_batch else "," + text).encode("utf-8"))


def _timeline_and_other_data(tree: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    recorded = tree.get("timeline")
    timeline = _with_distinct_pids(recorded) if recorded is not None else synthesize_timeline(tree)
    other_data = dict(tree.get("metadata") or {})
    if recorded is not None:
        other_data["timeline"] = f"recorded on clock {timeline.get('clock', 'unknown')}"
        other_data["dropped_spans"] = str(timeline.get("dropped", 0))
    else:
        other_data["timeline"] = (
            "synthesized from aggregate totals: no spans were recorded, so each block is one span "
            "sized by its total time, children packed one after another inside their parent"
        )
    return timeline, other_data


def _trace_events(tree: dict[str, Any], timeline: dict[str, Any], as_text: bool = False) -> Iterator[list[Any]]:
    """The trace's events in order, in lists of at most :data:`EVENTS_PER_WRITE`: as dicts, or
    with ``as_text`` as their compact JSON texts (lists, not one event at a time: a generator's
    step per span was a good part of the trace's time)."""
    memory = _memory_on_timeline_clock(tree, timeline)
    clock = _TraceClock(timeline, memory)
    several_hosts = len({process.get("host") for process in timeline["processes"]}) > 1
    device_means = _device_means(tree)
    other_events = _event_texts if as_text else _in_chunks
    for sort_index, process in enumerate(timeline["processes"]):
        means = {name: mean for (process_name, name), mean in device_means.items()
                 if process_name == process.get("name")}
        yield from other_events(_process_header_events(process, sort_index, several_hosts))
        for thread in process.get("threads", []):
            yield from other_events([_thread_name_event(process, thread)])
            yield from _span_events(process["pid"], thread, clock, means, as_text)
            yield from other_events(_instant_events(process["pid"], thread, clock))
        yield from other_events(_counter_events(process, clock))
    yield from other_events(_gauge_events(tree, timeline, clock))
    yield from other_events(_memory_events(memory, timeline, clock))


def _in_chunks(events: Iterable[Any]) -> Iterator[list[Any]]:
    iterator = iter(events)
    while chunk := list(islice(iterator, EVENTS_PER_WRITE)):
        yield chunk


def _event_texts(events: Iterable[Event]) -> Iterator[list[str]]:
    for chunk in _in_chunks(events):
        yield [strict_json.dumps(event, separators=(",", ":")) for event in chunk]


def _device_means(tree: dict[str, Any]) -> dict[tuple[str, str], float]:
    """(process name, block name) -> mean device time per call, from the dump's ``device_time``
    section, for the args of that block's spans (a span's own device time is not recorded: the
    device reads a block's pair of events later, summed per block)."""
    means = {}
    for entry in tree.get("device_time") or []:
        if isinstance(entry, dict) and entry.get("path") and entry.get("count"):
            key = (entry.get("process", "trainer"), entry["path"][-1])
            means[key] = entry["total"] / entry["count"]
    return means


def _with_distinct_pids(timeline: dict[str, Any]) -> dict[str, Any]:
    """The timeline with a fresh pid for any process whose pid an earlier one already has.

    Workers run in threads (or a test's in-process pool) share the trainer's pid; on one pid
    their threads would land on the trainer's tracks and their spans overlap the trainer's.
    """
    used: set[int] = set()
    highest = 0  # kept as it grows: max(used) at every repeat made n shared pids cost n squared
    processes = []
    for process in timeline["processes"]:
        pid = process["pid"]
        if pid in used:
            pid = highest + 1
            process = dict(process, pid=pid, original_pid=process["pid"])
        used.add(pid)
        highest = max(highest, pid)
        processes.append(process)
    return dict(timeline, processes=processes)


class _TraceClock:
    """Turns seconds into trace nanoseconds from the run's earliest moment.

    Every process's times are on the trainer's clock already: the merger shifted a worker's
    events when they arrived, and its ``clock_offset`` records that shift, not one still to make.
    """

    def __init__(self, timeline: dict[str, Any], memory: list[dict[str, Any]]) -> None:
        moments = [
            moment
            for process in timeline["processes"]
            for moment in _moments(process)
        ]
        moments.extend(sample[0] for process in memory for sample in process["samples"])
        self.origin = min(moments, default=0.0)
        self.end = max(moments, default=0.0)
        if not math.isfinite((self.end - self.origin) * NANOSECONDS_PER_SECOND):
            raise TraceTooLongError(
                f"its times lie {self.end - self.origin:.3g} seconds apart, too far for a trace "
                "to count in nanoseconds"
            )

    def nanoseconds(self, seconds: float) -> int:
        return round((seconds - self.origin) * NANOSECONDS_PER_SECOND)


def _moments(process: dict[str, Any]) -> Iterable[float]:
    """The moments that bound the process's events (a thread's spans by their earliest start and
    latest end, since none ends before it starts (the reader refuses one that does): min and max
    over a list run in C, a yield per span did not)."""
    for thread in process.get("threads", []):
        spans = thread.get("spans", [])
        if spans:
            yield min([span[1] for span in spans])
            yield max([span[2] for span in spans])
        for instant in thread.get("instants", []):
            yield instant[1]
    for counter in process.get("counters", []):
        yield counter[1]


def _microseconds(nanoseconds: int) -> float:
    return nanoseconds / 1000


def _process_header_events(process: dict[str, Any], sort_index: int, several_hosts: bool) -> list[Event]:
    pid = process["pid"]
    name = process.get("name") or f"process {pid}"
    if several_hosts and process.get("host"):
        name = f"{name} @ {process['host']}"  # pids repeat across machines; hosts tell them apart
    return [_metadata_event("process_name", pid, 0, name),
            _metadata_event("process_sort_index", pid, 0, sort_index, key="sort_index")]


def _thread_name_event(process: dict[str, Any], thread: dict[str, Any]) -> Event:
    tid = thread["tid"]
    return _metadata_event("thread_name", process["pid"], tid, thread.get("name") or f"thread {tid}")


def _span_events(
    pid: int, thread: dict[str, Any], clock: _TraceClock, device_means: dict[str, float], as_text: bool
) -> Iterator[list[Any]]:
    """A thread's spans as ``X`` events, in nesting order, in lists of at most
    :data:`EVENTS_PER_WRITE`; with ``as_text``, as their JSON texts, a plain span's formatted here
    (the same text the JSON encoder gives its dict: the name by the strict encoder, once per name;
    the microseconds as ``repr`` of ``nanoseconds / 1000`` writes them, from the integer, see
    :data:`MICROSECOND_FRACTIONS`)."""
    tid = thread["tid"]
    spans = thread.get("spans", [])
    if not as_text:
        nested = _nested_in_order(spans, clock)
        for first in range(0, len(nested), EVENTS_PER_WRITE):
            yield [_span_event(pid, tid, start, end, span, device_means.get(span[0]))
                   for start, end, span in nested[first:first + EVENTS_PER_WRITE]]
        return
    names = {name: strict_json.dumps(name) for name in set(map(itemgetter(0), spans))}
    # The same text as the dict's keys in this order would get from the encoder.
    place = f'"pid":{strict_json.dumps(pid)},"tid":{strict_json.dumps(tid)}}}'
    texts = (_trace_spans.nested_span_texts(spans, clock.origin, names, place, device_means)
             if _trace_spans is not None and type(spans) is list else None)
    if texts is not None:  # the C helper's: a span it leaves to the encoder is (start, end, span)
        for first in range(0, len(texts), EVENTS_PER_WRITE):
            yield [
                text if type(text) is str else _span_event_text(pid, tid, *text, device_means)
                for text in texts[first:first + EVENTS_PER_WRITE]
            ]
        return
    nested = _nested_in_order(spans, clock)
    fractions = MICROSECOND_FRACTIONS
    for first in range(0, len(nested), EVENTS_PER_WRITE):
        yield [
            f'{{"name":{names[span[0]]},"ph":"X","ts":{start // 1000}{fractions[start % 1000]},'
            f'"dur":{(duration := end - start) // 1000}{fractions[duration % 1000]},{place}'
            if len(span) == 3 and end < EXACT_MICROSECONDS_BELOW and span[0] not in device_means
            else _span_event_text(pid, tid, start, end, span, device_means)
            for start, end, span in nested[first:first + EVENTS_PER_WRITE]
        ]


def _span_event_text(pid: int, tid: int, start: int, end: int, span: list[Any], device_means: dict[str, float]) -> str:
    """The compact JSON of a span the fast text leaves to the encoder (details, a device block,
    times beyond the exact microseconds)."""
    return strict_json.dumps(_span_event(pid, tid, start, end, span, device_means.get(span[0])), separators=(",", ":"))


MICROSECOND_FRACTIONS = tuple(".0" if count == 0 else f".{count:03d}".rstrip("0") for count in range(1000))
"""How ``repr(nanoseconds / 1000)`` ends, by ``nanoseconds % 1000``: ``.0``, ``.001``, ``.01``...

Below :data:`EXACT_MICROSECONDS_BELOW` a float's spacing is under a thousandth, so the decimal
``nanoseconds / 1000`` written out exactly is the shortest text that reads back as that float, the
one ``repr`` writes: ``f"{n // 1000}{MICROSECOND_FRACTIONS[n % 1000]}"`` equals it. Two integer
operations and a look-up cost half of ``repr``'s float-to-decimal conversion, twice per span."""

EXACT_MICROSECONDS_BELOW = 10**15
"""Nanoseconds (11.6 days from the run's start) below which :data:`MICROSECOND_FRACTIONS` holds:
a float's spacing stays under a thousandth up to 2**43 (8.8e12) microseconds."""


def _span_event(pid: int, tid: int, start: int, end: int, span: list[Any], mean: float | None) -> Event:
    event: Event = {
        "name": span[0],
        "ph": "X",
        "ts": _microseconds(start),
        "dur": _microseconds(end - start),
        "pid": pid,
        "tid": tid,
    }
    if len(span) > 3:
        _add_details(event, span[3])
    if mean is not None:
        event.setdefault("args", {})["device time per call (mean, ms)"] = round(mean * 1000, 6)
    return event


def _instant_events(pid: int, thread: dict[str, Any], clock: _TraceClock) -> Iterator[Event]:
    for name, moment, *details in thread.get("instants", []):
        instant: Event = {
            "name": name,
            "ph": "i",
            "s": "t",
            "ts": _microseconds(clock.nanoseconds(moment)),
            "pid": pid,
            "tid": thread["tid"],
        }
        if details:
            _add_details(instant, details[0])
        yield instant


def _counter_events(process: dict[str, Any], clock: _TraceClock) -> Iterator[Event]:
    for name, moment, value, *details in process.get("counters", []):
        counter = _counter_event(name, clock.nanoseconds(moment), value, process["pid"])
        if details:
            _add_details(counter, details[0])
        yield counter


_INSTANT_SCOPES = ("g", "p", "t")


def _add_details(event: Event, details: dict[str, Any]) -> None:
    """An event's recorded details (``profiler.recording.events``): ``cat`` is the trace category, an
    instant's ``scope`` its reach (global, process or thread), the rest its ``args``."""
    arguments = dict(details)
    category = arguments.pop("cat", None)
    if category is not None:
        event["cat"] = str(category)
    scope = arguments.pop("scope", None)
    if event["ph"] == "i" and scope in _INSTANT_SCOPES:
        event["s"] = scope
    if arguments:
        event["args"] = {**event.get("args", {}), **arguments}


def _nested_in_order(spans: list[list[Any]], clock: _TraceClock) -> list[tuple[int, int, Any]]:
    """``(start, end, span)`` in nanoseconds, parents first, each child trimmed to end within its
    parent.

    Sorting by start, then by *descending* end, puts an enclosing span before the spans it
    encloses; a stack of the open spans' ends then finds each span's parent. The sort runs on
    plain tuples ``(start, -end, position, span)`` rather than with a key function, which would
    build a second tuple per span: a thread can hold millions. The result takes their places.
    """
    origin = clock.origin
    # clock.nanoseconds, inline: this runs once per span of the run.
    ordered: list[Any] = [
        ((start := round((span[1] - origin) * NANOSECONDS_PER_SECOND)),
         -(end if (end := round((span[2] - origin) * NANOSECONDS_PER_SECOND)) > start else start),
         position, span)
        for position, span in enumerate(spans)
    ]
    ordered.sort()
    open_ends: list[int] = []
    for index, (start, negative_end, _, span) in enumerate(ordered):
        end = -negative_end
        while open_ends and open_ends[-1] <= start:
            open_ends.pop()
        if open_ends and end > open_ends[-1]:
            end = open_ends[-1]
        open_ends.append(end)
        ordered[index] = (start, end, span)
    return ordered


def _gauge_events(tree: dict[str, Any], timeline: dict[str, Any], clock: _TraceClock) -> list[Event]:
    """One ``C`` event per gauge at the end of the run, on its process's track.

    A gauge keeps only its last value (and min/max), so there is no series to draw; the final
    value still shows next to the spans. Gauges of a worker with no track of its own go on the
    trainer's track, prefixed with the worker's name.
    """
    pids_in_trace = {process["pid"] for process in timeline["processes"]}
    if not pids_in_trace:
        return []
    trainer_pid = timeline["processes"][0]["pid"]
    end = round((clock.end - clock.origin) * NANOSECONDS_PER_SECOND)
    events = []
    for process_tree in split_into_process_trees(tree):
        for name, gauge in (process_tree.gauges or {}).items():
            if process_tree.pid in pids_in_trace:
                events.append(_counter_event(name, end, gauge["value"], process_tree.pid))
            else:
                events.append(
                    _counter_event(f"{process_tree.name}: {name}", end, gauge["value"], trainer_pid)
                )
    return events


MEBIBYTE = 1024 * 1024
MEMORY_COUNTERS = (("RSS (MiB)", 1), ("USS (MiB)", 2))
"""The counter tracks of a process's memory samples, and where each reading sits in a sample."""


def _memory_on_timeline_clock(tree: dict[str, Any], timeline: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``memory`` section's processes, their samples on the timeline's clock.

    A recorded timeline shares the samples' clock. A timeline laid out from totals starts at 0,
    so the samples are moved to start there too: the run's first sample at its start.
    """
    processes = (tree.get("memory") or {}).get("processes", [])
    if timeline.get("clock") != "aggregate":
        return processes
    first = min((sample[0] for process in processes for sample in process["samples"]), default=0.0)
    return [dict(process, samples=[[sample[0] - first, *sample[1:]] for sample in process["samples"]])
            for process in processes]


def _memory_events(
    memory: list[dict[str, Any]], timeline: dict[str, Any], clock: _TraceClock
) -> Iterator[Event]:
    """Each process's memory samples as counter tracks on its own process: the trace's process
    of that name and pid, or a process of its own when the timeline has none for it."""
    pids = {(process.get("name"), process.get("original_pid", process["pid"])): process["pid"]
            for process in timeline["processes"]}
    used = {process["pid"] for process in timeline["processes"]}
    for sort_index, process in enumerate(memory, start=len(timeline["processes"])):
        pid = pids.get((process["name"], process["pid"]))
        if pid is None:
            pid = process["pid"] if process["pid"] not in used else max(used, default=0) + 1
            used.add(pid)
            yield _metadata_event("process_name", pid, 0, process["name"])
            yield _metadata_event("process_sort_index", pid, 0, sort_index, key="sort_index")
        for sample in process["samples"]:
            for counter, field in MEMORY_COUNTERS:
                if sample[field] is not None:
                    yield _counter_event(counter, clock.nanoseconds(sample[0]),
                                         round(sample[field] / MEBIBYTE, 3), pid)


def _counter_event(name: str, nanoseconds: int, value: float, pid: int) -> Event:
    """A ``C`` sample; for a NaN or infinite reading, which a counter track cannot draw (and
    strict JSON cannot hold), a process-wide instant event ``"loss = NaN"`` at that moment."""
    if not math.isfinite(value):
        return {
            "name": f"{name} = {named_reading(value)}",
            "ph": "i",
            "s": "p",
            "ts": _microseconds(nanoseconds),
            "pid": pid,
            "tid": 0,
        }
    return {
        "name": name,
        "ph": "C",
        "ts": _microseconds(nanoseconds),
        "pid": pid,
        "tid": 0,
        "args": {"value": value},
    }


def _metadata_event(kind: str, pid: int, tid: int, value: Any, key: str = "name") -> Event:
    return {"name": kind, "ph": "M", "ts": 0, "pid": pid, "tid": tid, "args": {key: value}}
