"""Reading a decoded timer document into the one shape every reader gets, every field checked.

Every node has ``name``, ``total``, ``count``, ``self`` and a list of ``children``;
``is_parallel`` is present only where true. The layout Unity ML-Agents writes (``name`` only on
the root, ``children`` a mapping keyed by name) is converted, so users can analyse the runs they
already have. Optional sections (``workers``, ``timeline``, ``memory``, ``untimed_samples``,
``operators``, the machine's figures) are validated and kept; anything wrong is a
:class:`~profiler.tree.timer_text.TimerFileError` naming the field, never a traceback from deep
inside an analysis. :mod:`profiler.tree.timer_json` reads files through this.
"""

from __future__ import annotations

import math
from typing import Any

from profiler.timing.timers import MAX_DEPTH
from profiler.tree.operators_json import read_operators
from profiler.tree.strict_json import printable_text, reading_from_json
from profiler.tree.timer_text import MAX_FILE_DEPTH, TimerFileError

__all__ = ["MAX_COUNT", "normalize_timing_tree", "normalize_untimed_samples"]

MAX_COUNT = 2**63 - 1
"""The largest count a file may hold (a 64-bit counter): a 400-digit "count" is refused on load
instead of overflowing in the middle of an analysis."""



def normalize_timing_tree(document: Any) -> dict[str, Any]:
    """Validate a decoded timer tree and return it in the normalized shape.

    The tree's nodes and sections are new dicts; the rows of a ``timeline`` (which can hold
    millions of events) are checked and converted in place and shared with ``document``.
    """
    if not isinstance(document, dict):
        raise TimerFileError(f"not a timer tree: the top level is a {type(document).__name__}")
    if "total" not in document and "children" not in document:
        raise TimerFileError("not a timer tree: the top level has neither 'total' nor 'children'")
    reader = _Reader()
    try:
        return reader.tree(document)
    except RecursionError:
        raise TimerFileError(
            f"nested too deeply to read (a timer tree has at most {MAX_FILE_DEPTH} levels)"
        ) from None


def normalize_untimed_samples(section: Any, where: str = "untimed_samples") -> dict[str, Any]:
    """An ``untimed_samples`` section checked and normalized on its own (a worker's, as the
    trainer receives it); raises :class:`TimerFileError` naming what is wrong."""
    return _Reader().untimed_samples(section, where)


_WORKER_COUNTS = (
    "worker_id", "manager_id", "pid", "payloads", "missed_payloads", "duplicates", "unreported_steps", "paused_payloads"
)


class _Reader:
    """One file's normalization. It keeps one copy of each distinct name: a timeline repeats a few
    block names millions of times, and a name is checked for valid Unicode only once."""

    def __init__(self) -> None:
        self.names: dict[str, str] = {}

    def tree(self, document: dict[str, Any]) -> dict[str, Any]:
        tree = self.node(document, document.get("name", "root"), "root", 0)
        tree["gauges"] = self.gauges(document.get("gauges", {}))
        tree["metadata"] = self.metadata(document.get("metadata", {}))
        workers = document.get("workers")
        if workers is not None:
            if not isinstance(workers, list):
                raise TimerFileError("'workers' must be a list of worker trees")
            tree["workers"] = [
                self.worker(worker, f"workers[{index}]") for index, worker in enumerate(workers)
            ]
        timeline = document.get("timeline")
        if timeline is not None:
            tree["timeline"] = self.timeline(timeline)
        memory = document.get("memory")
        if memory is not None:
            tree["memory"] = self.memory(memory)
        untimed_samples = document.get("untimed_samples")
        if untimed_samples is not None:
            tree["untimed_samples"] = self.untimed_samples(untimed_samples)
        # Checked where they are read (profiler.analysis.machine_figures; device_time by the
        # device-time readers): a damaged one is reported there and ignored, never a reason to
        # refuse the whole file.
        for section in ("scheduling", "machine_load", "device_time", "device_memory"):
            if section in document:
                tree[section] = document[section]
        if "operators" in document:
            try:
                tree["operators"] = read_operators(document["operators"])
            except ValueError as error:
                raise TimerFileError(str(error)) from None
        return tree

    def name(self, value: Any, where: str) -> str:
        """A name: a string of valid Unicode (a lone surrogate cannot be printed or written)."""
        known = self.names.get(value) if type(value) is str else None
        if known is not None:
            return known
        if not isinstance(value, str):
            raise TimerFileError(f"{where}: a name must be a string, got {_short(value)}")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as error:
                raise TimerFileError(
                    f"{where}: name '{printable_text(value)}' is not valid Unicode text "
                    f"({error.reason} at character {error.start})"
                ) from None
        self.names[value] = value
        return value

    def node(self, node: Any, name: Any, where: str, depth: int) -> dict[str, Any]:
        if not isinstance(node, dict):
            raise TimerFileError(f"{where}: a node must be an object, not {type(node).__name__}")
        if depth > MAX_FILE_DEPTH:
            raise TimerFileError(
                f"{where[:60]}...: nested deeper than {MAX_FILE_DEPTH} levels (rlprof folds its "
                f"own trees at {MAX_DEPTH})"
            )
        name = self.name(name, f"{where}.name")
        total = _seconds(node.get("total", 0.0), f"{where}.total")
        count = _whole(node.get("count", 0), f"{where}.count")
        is_parallel = node.get("is_parallel", False)
        if not isinstance(is_parallel, bool):
            raise TimerFileError(f"{where}.is_parallel: must be true or false")
        children = [
            self.node(child, child_name, _place(where, child_name), depth + 1)
            for child_name, child in _children_of(node, where)
        ]
        nested = sum(child["total"] for child in children if is_parallel or not child.get("is_parallel"))
        normalized: dict[str, Any] = {
            "name": name,
            "total": total,
            "count": count,
            "self": _seconds(node["self"], f"{where}.self") if "self" in node else max(0.0, total - nested),
        }
        if "min" in node or "max" in node:
            normalized.update(_per_call_extremes(node, where))
        for label in ("domain", "object_type"):
            if label in node:
                normalized[label] = self.name(node[label], f"{where}.{label}")
        if "scopes" in node:
            scopes = node["scopes"]
            if not isinstance(scopes, list):
                raise TimerFileError(f"{where}.scopes: must be a list of scope names")
            normalized["scopes"] = [self.name(scope, f"{where}.scopes") for scope in scopes]
        errors = node.get("errors", 0)
        if errors:
            normalized["errors"] = _whole(errors, f"{where}.errors")
        if is_parallel:
            normalized["is_parallel"] = True
        normalized["children"] = children
        return normalized

    def worker(self, worker: Any, where: str) -> dict[str, Any]:
        if not isinstance(worker, dict):
            raise TimerFileError(f"{where}: a worker tree must be an object")
        normalized = self.node(worker, worker.get("name", where), where, 0)
        for field in _WORKER_COUNTS:
            if field in worker:
                normalized[field] = _whole(worker[field], f"{where}.{field}")
        if worker.get("manager") is not None:  # workers are grouped by manager: a name (or null)
            normalized["manager"] = self.name(worker["manager"], f"{where}.manager")
        if "worker_id" not in normalized:
            raise TimerFileError(f"{where}: a worker tree needs a 'worker_id'")
        normalized["gauges"] = self.gauges(worker.get("gauges", {}), f"{where}.gauges")
        peaks = worker.get("peak_mean", {})
        if not isinstance(peaks, dict):
            raise TimerFileError(f"{where}.peak_mean: must be an object keyed by block name")
        normalized["peak_mean"] = {
            self.name(name, f"{where}.peak_mean"): _seconds(peak, _place(f"{where}.peak_mean", name))
            for name, peak in peaks.items()
        }
        if "critical_path" in worker:
            normalized["critical_path"] = _critical_path(worker["critical_path"], f"{where}.critical_path")
        if "env_time" in worker:
            normalized["env_time"] = _env_time(worker["env_time"], f"{where}.env_time")
        if "untimed_samples" in worker:
            normalized["untimed_samples"] = self.untimed_samples(worker["untimed_samples"],
                                                                 f"{where}.untimed_samples")
        # Fields a later rlprof may add are kept as they are, so that loading never loses data.
        for key, value in worker.items():
            if key not in normalized and key != "children":
                normalized[key] = value
        return normalized

    def gauges(self, gauges: Any, where: str = "gauges") -> dict[str, dict[str, Any]]:
        """Gauges by name: ``value``, ``min`` and ``max`` are readings (NaN and the infinities are
        written by name, see :mod:`profiler.tree.strict_json`), ``count`` a whole number."""
        if not isinstance(gauges, dict):
            raise TimerFileError(f"'{where}' must be an object keyed by gauge name")
        normalized = {}
        for name, gauge in gauges.items():
            name = self.name(name, where)
            place = _place(where, name)
            if not isinstance(gauge, dict):
                raise TimerFileError(f"{place}: must be an object")
            fields: dict[str, Any] = {
                field: _reading(gauge.get(field), f"{place}.{field}") for field in ("value", "min", "max")
            }
            fields["count"] = _whole(gauge.get("count"), f"{place}.count")
            normalized[name] = fields
        return normalized

    def metadata(self, metadata: Any) -> dict[str, str]:
        if not isinstance(metadata, dict):
            raise TimerFileError("'metadata' must be an object of strings")
        return {
            self.name(key, "metadata"): self.name(str(value), f"metadata.{key}")
            for key, value in metadata.items()
        }

    def timeline(self, timeline: Any) -> dict[str, Any]:
        if not isinstance(timeline, dict):
            raise TimerFileError("'timeline' must be an object")
        clock = timeline.get("clock")
        if not isinstance(clock, str):
            raise TimerFileError("timeline.clock: must be the name of a clock")
        processes = timeline.get("processes")
        if not isinstance(processes, list):
            raise TimerFileError("timeline.processes: must be a list")
        return {
            "clock": self.name(clock, "timeline.clock"),
            "dropped": _whole(timeline.get("dropped", 0), "timeline.dropped"),
            "processes": [
                self.process(process, f"timeline.processes[{index}]")
                for index, process in enumerate(processes)
            ],
        }

    def process(self, process: Any, where: str) -> dict[str, Any]:
        if not isinstance(process, dict):
            raise TimerFileError(f"{where}: must be an object")
        threads = process.get("threads", [])
        if not isinstance(threads, list):
            raise TimerFileError(f"{where}.threads: must be a list")
        loaded = {
            "pid": _whole(process.get("pid"), f"{where}.pid"),
            "name": self.name(process.get("name"), f"{where}.name"),
            "clock_offset": _number(process.get("clock_offset", 0.0), f"{where}.clock_offset"),
            "threads": [
                self.thread(thread, f"{where}.threads[{index}]")
                for index, thread in enumerate(threads)
            ],
            "counters": self.events(
                process.get("counters", []), f"{where}.counters", width=3, last_is_reading=True
            ),
        }
        # Optional: the host it ran on, and how far its clock offset may be off (estimated).
        if "host" in process:
            loaded["host"] = self.name(process["host"], f"{where}.host")
        if "clock_uncertainty" in process:
            loaded["clock_uncertainty"] = _seconds(process["clock_uncertainty"], f"{where}.clock_uncertainty")
        return loaded

    def memory(self, memory: Any) -> dict[str, Any]:
        """The ``memory`` section (see docs/formats.md): samples and block allocations per process."""
        if not isinstance(memory, dict):
            raise TimerFileError("'memory' must be an object")
        processes = memory.get("processes")
        if not isinstance(processes, list):
            raise TimerFileError("memory.processes: must be a list")
        return {
            "unit": "bytes",
            "clock": self.name(memory.get("clock", "perf_counter"), "memory.clock"),
            "processes": [
                self.memory_process(process, f"memory.processes[{index}]")
                for index, process in enumerate(processes)
            ],
        }

    def untimed_samples(self, section: Any, where: str = "untimed_samples") -> dict[str, Any]:
        """The ``untimed_samples`` section (see docs/formats.md): where the trainer's stack (or,
        in a worker's entry, the worker's) was when sampled outside any block."""
        if not isinstance(section, dict) or not isinstance(section.get("places", []), list):
            raise TimerFileError(f"{where}: must be an object whose 'places' is a list")

        def sampled(entry: Any, at: str) -> dict[str, Any]:
            if not isinstance(entry, dict):
                raise TimerFileError(f"{at}: must be an object")
            squared = entry.get("seconds_squared")  # absent from dumps before the looks thinned out
            return {"samples": _whole(entry.get("samples", 0), f"{at}.samples"),
                    "seconds": _seconds(entry.get("seconds", 0.0), f"{at}.seconds"),
                    "seconds_squared": None if squared is None else _seconds(squared, f"{at}.seconds_squared")}

        places = []
        for index, place in enumerate(section.get("places", [])):
            at = f"{where}.places[{index}]"
            read = {"function": self.name(place.get("function") if isinstance(place, dict) else None,
                                          f"{at}.function"),
                    "file": self.name(place.get("file"), f"{at}.file"),
                    "line": _whole(place.get("line"), f"{at}.line"),
                    "calls": self.name(place.get("calls", ""), f"{at}.calls"), **sampled(place, at)}
            if "first_look" in place or "last_look" in place:  # absent from dumps before they were kept
                first = _number(place.get("first_look"), f"{at}.first_look")
                last = _number(place.get("last_look"), f"{at}.last_look")
                if last < first:
                    raise TimerFileError(f"{at}: its last look comes before its first")
                read.update(first_look=first, last_look=last)
            places.append(read)
        interval = _seconds(section.get("interval_seconds", 0.0), f"{where}.interval_seconds")
        return {"thread": self.name(section.get("thread", "MainThread"), f"{where}.thread"),
                "interval_seconds": interval,
                "longest_interval_seconds": _seconds(section.get("longest_interval_seconds", interval),
                                                     f"{where}.longest_interval_seconds"),
                "samples": _whole(section.get("samples", 0), f"{where}.samples"),
                "in_blocks": _whole(section.get("in_blocks", 0), f"{where}.in_blocks"),
                "unnamed": sampled(section.get("unnamed", {}), f"{where}.unnamed"),
                "other_places": sampled(section.get("other_places", {}), f"{where}.other_places"),
                "places": places}

    def memory_process(self, process: Any, where: str) -> dict[str, Any]:
        if not isinstance(process, dict):
            raise TimerFileError(f"{where}: must be an object")
        samples = process.get("samples", [])
        blocks = process.get("blocks", [])
        if not isinstance(samples, list) or not isinstance(blocks, list):
            raise TimerFileError(f"{where}: 'samples' and 'blocks' must be lists")
        return {
            "pid": _whole(process.get("pid"), f"{where}.pid"),
            "name": self.name(process.get("name"), f"{where}.name"),
            "clock_offset": _number(process.get("clock_offset", 0.0), f"{where}.clock_offset"),
            "stride": _whole(process.get("stride", 1), f"{where}.stride"),
            "samples": [_memory_sample(sample, f"{where}.samples[{index}]") for index, sample in enumerate(samples)],
            "blocks": [self.block_allocation(block, f"{where}.blocks[{index}]") for index, block in enumerate(blocks)],
        }

    def block_allocation(self, block: Any, where: str) -> dict[str, Any]:
        if not isinstance(block, dict) or not isinstance(block.get("path"), list) or not block["path"]:
            raise TimerFileError(f"{where}: must be an object with a 'path', a list of block names")
        net = block.get("net_bytes")
        if isinstance(net, bool) or not isinstance(net, int) or not -MAX_COUNT <= net <= MAX_COUNT:
            raise TimerFileError(f"{where}.net_bytes: must be a whole number of bytes, got {_short(net)}")
        return {
            "path": [self.name(name, f"{where}.path") for name in block["path"]],
            "calls": _whole(block.get("calls"), f"{where}.calls"),
            "net_bytes": net,
            "peak_bytes": _whole(block.get("peak_bytes"), f"{where}.peak_bytes"),
        }

    def thread(self, thread: Any, where: str) -> dict[str, Any]:
        if not isinstance(thread, dict):
            raise TimerFileError(f"{where}: must be an object")
        spans = self.events(thread.get("spans", []), f"{where}.spans", width=3)
        # One test per span, and the index only when one fails: unpacking each row, its details
        # included, took longer than reading it.
        if any(span[2] < span[1] for span in spans):
            index = next(index for index, span in enumerate(spans) if span[2] < span[1])
            raise TimerFileError(f"{where}.spans[{index}]: ends before it starts")
        read = {
            "tid": _whole(thread.get("tid"), f"{where}.tid"),
            "name": self.name(thread.get("name"), f"{where}.name"),
            "spans": spans,
            "instants": self.events(thread.get("instants", []), f"{where}.instants", width=2),
        }
        if "device" in thread:  # a GPU track: the kernels PyTorch's profiler saw on that device
            read["device"] = self.name(thread["device"], f"{where}.device")
        if "spans_complete_after" in thread:  # a long run's: its rings dropped the oldest spans
            read["spans_complete_after"] = _number(thread["spans_complete_after"], f"{where}.spans_complete_after")
        return read

    def events(
        self, events: Any, where: str, *, width: int, last_is_reading: bool = False
    ) -> list[list[Any]]:
        """``[name, number, ...]`` rows: spans ``[name, start, end]``, instants ``[name, t]``,
        counters ``[name, t, reading]``, each optionally followed by an object of details
        (``profiler.recording.events``). Rows are checked and converted in place: this is the bulk of a
        large file, and a copy would double the memory it takes."""
        if not isinstance(events, list):
            raise TimerFileError(f"{where}: must be a list")
        names = self.names
        for index, event in enumerate(events):
            if type(event) is not list or len(event) != width:
                if type(event) is not list or len(event) != width + 1 or type(event[width]) is not dict:
                    raise TimerFileError(
                        f"{where}[{index}]: must be [name, {width - 1} numbers] and an optional "
                        "object of details"
                    )
                _check_details(event[width], f"{where}[{index}]")
            name = event[0]
            known = names.get(name) if type(name) is str else None
            event[0] = known if known is not None else self.name(name, f"{where}[{index}]")
            moment = event[1]
            if type(moment) is not float or not -_HUGE < moment < _HUGE:
                event[1] = _number(moment, f"{where}[{index}]")
            if width == 3:
                last = event[2]
                if last_is_reading:
                    event[2] = _reading(last, f"{where}[{index}]")
                elif type(last) is not float or not -_HUGE < last < _HUGE:
                    event[2] = _number(last, f"{where}[{index}]")
        return events


def _check_details(details: dict[str, Any], where: str) -> None:
    """An event's details: keys that are names, values that are strings or finite numbers."""
    for key, value in details.items():
        if not key or not isinstance(value, (str, int, float)) or isinstance(value, bool):
            raise TimerFileError(f"{where}: detail {key!r} must be a string or a number, got {_short(value)}")
        if not isinstance(value, str) and not math.isfinite(value):
            raise TimerFileError(f"{where}: detail {key!r} must be finite, got {_short(value)}")


_HUGE = 1e300
"""Times beyond this are not from any clock; the quick check on event rows uses it as its bound."""


_PLACE_NAME_LENGTH = 40
_PLACE_LENGTH = 240


def _place(where: str, name: Any) -> str:
    """``where/name`` for messages, bounded: a deep tree of megabyte-long names would otherwise
    hold a path string per level, each as long as all the names above it (quadratic memory)."""
    text = printable_text(name if isinstance(name, str) else str(name))
    if len(text) > _PLACE_NAME_LENGTH:
        text = text[: _PLACE_NAME_LENGTH - 3] + "..."
    place = f"{where}/{text}"
    if len(place) > _PLACE_LENGTH:
        place = f"{place[:60]}.../{place[-(_PLACE_LENGTH - 64):]}"
    return place


def _short(value: Any) -> str:
    """``repr`` cut to a readable length: a bad value can be a 400-digit number or a long text."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 64:
        return f"a {value.bit_length()}-bit integer"
    text = printable_text(repr(value))
    return text if len(text) <= 80 else text[:77] + "..."


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not -_HUGE < value < _HUGE:
        raise TimerFileError(f"{where}: must be a finite number, got {_short(value)}")
    return float(value)


def _reading(value: Any, where: str) -> float:
    reading = reading_from_json(value)
    if reading is None:
        raise TimerFileError(
            f"{where}: must be a number (or \"NaN\", \"Infinity\", \"-Infinity\"), got {_short(value)}"
        )
    return reading


def _memory_sample(sample: Any, where: str) -> list[Any]:
    """``[time, rss bytes, uss bytes or null]``."""
    if not isinstance(sample, list) or len(sample) != 3:
        raise TimerFileError(f"{where}: a sample is [time, rss bytes, uss bytes or null]")
    uss = sample[2]
    return [
        _number(sample[0], where),
        _whole(sample[1], f"{where}.rss"),
        None if uss is None else _whole(uss, f"{where}.uss"),
    ]


def _whole(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_COUNT:
        raise TimerFileError(f"{where}: must be a whole number from 0 to 2**63-1, got {_short(value)}")
    return value


def _per_call_extremes(node: dict[str, Any], where: str) -> dict[str, float]:
    """A node's shortest and longest single call: both or neither, the shortest first."""
    if "min" not in node or "max" not in node:
        present, missing = ("min", "max") if "min" in node else ("max", "min")
        raise TimerFileError(f"{where}: has '{present}' but no '{missing}'")
    minimum = _seconds(node["min"], f"{where}.min")
    maximum = _seconds(node["max"], f"{where}.max")
    if minimum > maximum:
        raise TimerFileError(f"{where}: min ({minimum!r}) is greater than max ({maximum!r})")
    return {"min": minimum, "max": maximum}


def _children_of(node: dict[str, Any], where: str) -> list[tuple[Any, Any]]:
    children = node.get("children", [])
    if isinstance(children, dict):  # ML-Agents: children keyed by name, no name inside
        return list(children.items())
    if isinstance(children, list):
        pairs = []
        for index, child in enumerate(children):
            if not isinstance(child, dict) or "name" not in child:
                raise TimerFileError(f"{where}.children[{index}]: a child must be an object with a 'name'")
            pairs.append((child["name"], child))
        return pairs
    raise TimerFileError(f"{where}.children: must be a list or an object")


def _critical_path(section: Any, where: str) -> dict[str, Any]:
    """A worker's ``critical_path`` (see docs/formats.md): counts, seconds, a bucketed histogram."""
    if not isinstance(section, dict):
        raise TimerFileError(f"{where}: must be an object")
    histogram = section.get("wait_as_last_histogram")
    if not isinstance(histogram, dict):
        raise TimerFileError(f"{where}.wait_as_last_histogram: must be an object")
    bounds, counts = histogram.get("bounds_seconds"), histogram.get("counts")
    if not isinstance(bounds, list) or not isinstance(counts, list) or len(counts) != len(bounds) + 1:
        raise TimerFileError(
            f"{where}.wait_as_last_histogram: needs lists 'bounds_seconds' and 'counts', one count more than bounds"
        )
    return {
        "vector_steps": _whole(section.get("vector_steps"), f"{where}.vector_steps"),
        "last_to_reply": _whole(section.get("last_to_reply"), f"{where}.last_to_reply"),
        "wait_as_last_seconds": _seconds(section.get("wait_as_last_seconds"), f"{where}.wait_as_last_seconds"),
        "wait_as_last_histogram": {
            "bounds_seconds": [_seconds(bound, f"{where}.wait_as_last_histogram.bounds_seconds") for bound in bounds],
            "counts": [_whole(count, f"{where}.wait_as_last_histogram.counts") for count in counts],
        },
    }


def _env_time(section: Any, where: str) -> dict[str, Any]:
    """A worker's ``env_time`` (see docs/formats.md): wall and CPU seconds, call counts."""
    if not isinstance(section, dict):
        raise TimerFileError(f"{where}: must be an object")
    normalized = {
        "wall_seconds": _seconds(section.get("wall_seconds"), f"{where}.wall_seconds"),
        "cpu_seconds": _seconds(section.get("cpu_seconds"), f"{where}.cpu_seconds"),
        "calls": _whole(section.get("calls"), f"{where}.calls"),
    }
    if "cpu_measured_calls" in section:
        normalized["cpu_measured_calls"] = _whole(section["cpu_measured_calls"], f"{where}.cpu_measured_calls")
    return normalized


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TimerFileError(f"{where}: must be a number of seconds, got {_short(value)}")
    if not 0 <= value < _HUGE:
        raise TimerFileError(f"{where}: must be a finite time >= 0, got {_short(value)}")
    return float(value)
