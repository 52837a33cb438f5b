"""The timer-tree JSON file: writing it atomically and reading it back, ours or ML-Agents'.

Readers get one normalized shape whatever wrote the file: every node has ``name``, ``total``,
``count``, ``self`` and a list of ``children``; ``is_parallel`` is present only where true. The
layout Unity ML-Agents writes (``name`` only on the root, ``children`` a mapping keyed by name)
is converted on load, so users can analyse the runs they already have.

Two optional sections are validated and kept: ``workers`` (each worker's own tree and figures,
written by ``profiler.merge``) and ``timeline`` (recorded spans, instants and counters per process
and thread, written by ``profiler.events``); docs/multiprocess.md describes both.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from profiler.atomic_file import write_atomically
from profiler.timer_tree import get_timer_tree
from profiler.timers import TimerStack

__all__ = [
    "TimerFileError",
    "load_timing_tree",
    "normalize_timing_tree",
    "timers_json_path",
    "write_timing_tree",
]


class TimerFileError(ValueError):
    """A timer file that cannot be read: missing, not JSON, or JSON of another shape."""


def timers_json_path(summaries_dir: str | os.PathLike[str], run_id: str) -> Path:
    """Where a run's timers go: ``{summaries_dir}/{run_id}_timers.json``."""
    return Path(summaries_dir) / f"{run_id}_timers.json"


def write_timing_tree(
    path: str | os.PathLike[str],
    timer_stack: TimerStack | None = None,
    *,
    include_threads: bool = True,
    layout: str = "rlprof",
) -> Path:
    """Dump a stack's tree (the calling thread's by default) as JSON at ``path``, atomically.

    Other threads' trees are included under ``thread:<name>`` nodes unless ``include_threads`` is
    false. ``layout="mlagents"`` writes the layout of ML-Agents' ``timers.json`` (children keyed
    by name) for tools that read only that; rlprof reads both. Returns the path written.
    """
    tree = get_timer_tree(timer_stack, include_threads=include_threads, layout=layout)
    return write_atomically(path, json.dumps(tree, indent=2))


def load_timing_tree(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a timer JSON file (rlprof's or ML-Agents') into the normalized shape.

    Raises :class:`TimerFileError` with a one-line reason for a missing file, text that is not
    JSON, or JSON that is not a timer tree (including negative or non-finite times).
    """
    source = Path(path)
    try:
        text = source.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TimerFileError(f"{source}: no such file") from None
    except (OSError, UnicodeDecodeError) as error:
        raise TimerFileError(f"{source}: cannot read: {error}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise TimerFileError(
            f"{source}: not JSON ({error.msg} at line {error.lineno})"
        ) from None
    try:
        return normalize_timing_tree(document)
    except TimerFileError as error:
        raise TimerFileError(f"{source}: {error}") from None


def normalize_timing_tree(document: Any) -> dict[str, Any]:
    """Validate a decoded timer tree and return it in the normalized shape (a new dict)."""
    if not isinstance(document, dict):
        raise TimerFileError(f"not a timer tree: the top level is a {type(document).__name__}")
    if "total" not in document and "children" not in document:
        raise TimerFileError("not a timer tree: the top level has neither 'total' nor 'children'")
    tree = _normalize_node(document, document.get("name", "root"), "root")
    tree["gauges"] = _normalize_gauges(document.get("gauges", {}))
    tree["metadata"] = _normalize_metadata(document.get("metadata", {}))
    workers = document.get("workers")
    if workers is not None:
        if not isinstance(workers, list):
            raise TimerFileError("'workers' must be a list of worker trees")
        tree["workers"] = [
            _normalize_worker(worker, f"workers[{index}]") for index, worker in enumerate(workers)
        ]
    timeline = document.get("timeline")
    if timeline is not None:
        tree["timeline"] = _normalize_timeline(timeline)
    return tree


_WORKER_COUNTS = ("worker_id", "pid", "payloads", "missed_payloads", "duplicates")


def _normalize_worker(worker: Any, where: str) -> dict[str, Any]:
    if not isinstance(worker, dict):
        raise TimerFileError(f"{where}: a worker tree must be an object")
    normalized = _normalize_node(worker, worker.get("name", where), where)
    for field in _WORKER_COUNTS:
        if field in worker:
            normalized[field] = _whole(worker[field], f"{where}.{field}")
    if "worker_id" not in normalized:
        raise TimerFileError(f"{where}: a worker tree needs a 'worker_id'")
    normalized["gauges"] = _normalize_gauges(worker.get("gauges", {}), f"{where}.gauges")
    peaks = worker.get("peak_mean", {})
    if not isinstance(peaks, dict):
        raise TimerFileError(f"{where}.peak_mean: must be an object keyed by block name")
    normalized["peak_mean"] = {
        str(name): _seconds(peak, f"{where}.peak_mean/{name}") for name, peak in peaks.items()
    }
    # Fields a later rlprof may add are kept as they are, so that loading never loses data.
    for key, value in worker.items():
        if key not in normalized and key != "children":
            normalized[key] = value
    return normalized


def _normalize_timeline(timeline: Any) -> dict[str, Any]:
    if not isinstance(timeline, dict):
        raise TimerFileError("'timeline' must be an object")
    clock = timeline.get("clock")
    if not isinstance(clock, str):
        raise TimerFileError("timeline.clock: must be the name of a clock")
    processes = timeline.get("processes")
    if not isinstance(processes, list):
        raise TimerFileError("timeline.processes: must be a list")
    return {
        "clock": clock,
        "dropped": _whole(timeline.get("dropped", 0), "timeline.dropped"),
        "processes": [
            _normalize_process(process, f"timeline.processes[{index}]")
            for index, process in enumerate(processes)
        ],
    }


def _normalize_process(process: Any, where: str) -> dict[str, Any]:
    if not isinstance(process, dict):
        raise TimerFileError(f"{where}: must be an object")
    name = process.get("name")
    if not isinstance(name, str):
        raise TimerFileError(f"{where}.name: must be a string")
    threads = process.get("threads", [])
    if not isinstance(threads, list):
        raise TimerFileError(f"{where}.threads: must be a list")
    return {
        "pid": _whole(process.get("pid"), f"{where}.pid"),
        "name": name,
        "clock_offset": _number(process.get("clock_offset", 0.0), f"{where}.clock_offset"),
        "threads": [
            _normalize_thread(thread, f"{where}.threads[{index}]")
            for index, thread in enumerate(threads)
        ],
        "counters": _events(process.get("counters", []), f"{where}.counters", width=3),
    }


def _normalize_thread(thread: Any, where: str) -> dict[str, Any]:
    if not isinstance(thread, dict):
        raise TimerFileError(f"{where}: must be an object")
    name = thread.get("name")
    if not isinstance(name, str):
        raise TimerFileError(f"{where}.name: must be a string")
    spans = _events(thread.get("spans", []), f"{where}.spans", width=3)
    for index, (_, start, end) in enumerate(spans):
        if end < start:
            raise TimerFileError(f"{where}.spans[{index}]: ends before it starts")
    return {
        "tid": _whole(thread.get("tid"), f"{where}.tid"),
        "name": name,
        "spans": spans,
        "instants": _events(thread.get("instants", []), f"{where}.instants", width=2),
    }


def _events(events: Any, where: str, *, width: int) -> list[list[Any]]:
    """``[name, number, ...]`` rows: spans ``[name, start, end]``, instants ``[name, t]``,
    counters ``[name, t, value]``."""
    if not isinstance(events, list):
        raise TimerFileError(f"{where}: must be a list")
    rows = []
    for index, event in enumerate(events):
        if not isinstance(event, list) or len(event) != width or not isinstance(event[0], str):
            raise TimerFileError(f"{where}[{index}]: must be [name, {width - 1} numbers]")
        rows.append([event[0], *(_number(value, f"{where}[{index}]") for value in event[1:])])
    return rows


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TimerFileError(f"{where}: must be a finite number, got {value!r}")
    return float(value)


def _whole(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise TimerFileError(f"{where}: must be a whole number >= 0, got {value!r}")
    return value


def _normalize_node(node: Any, name: Any, where: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise TimerFileError(f"{where}: a node must be an object, not {type(node).__name__}")
    if not isinstance(name, str):
        raise TimerFileError(f"{where}: 'name' must be a string")
    total = _seconds(node.get("total", 0.0), f"{where}.total")
    count = _whole(node.get("count", 0), f"{where}.count")
    is_parallel = node.get("is_parallel", False)
    if not isinstance(is_parallel, bool):
        raise TimerFileError(f"{where}.is_parallel: must be true or false")
    children = [
        _normalize_node(child, child_name, f"{where}/{child_name}")
        for child_name, child in _children_of(node, where)
    ]
    nested = sum(child["total"] for child in children if is_parallel or not child.get("is_parallel"))
    normalized: dict[str, Any] = {
        "name": name,
        "total": total,
        "count": count,
        "self": _seconds(node["self"], f"{where}.self") if "self" in node else max(0.0, total - nested),
    }
    errors = node.get("errors", 0)
    if errors:
        normalized["errors"] = _whole(errors, f"{where}.errors")
    if is_parallel:
        normalized["is_parallel"] = True
    normalized["children"] = children
    return normalized


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


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TimerFileError(f"{where}: must be a number of seconds, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise TimerFileError(f"{where}: must be a finite time >= 0, got {value!r}")
    return float(value)


def _normalize_gauges(gauges: Any, where: str = "gauges") -> dict[str, dict[str, float]]:
    if not isinstance(gauges, dict):
        raise TimerFileError(f"'{where}' must be an object keyed by gauge name")
    normalized = {}
    for name, gauge in gauges.items():
        if not isinstance(gauge, dict):
            raise TimerFileError(f"{where}/{name}: must be an object")
        fields = {}
        for field in ("value", "min", "max", "count"):
            value = gauge.get(field)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise TimerFileError(f"{where}/{name}.{field}: must be a number, got {value!r}")
            fields[field] = value
        normalized[name] = fields
    return normalized


def _normalize_metadata(metadata: Any) -> dict[str, str]:
    if not isinstance(metadata, dict):
        raise TimerFileError("'metadata' must be an object of strings")
    return {str(key): str(value) for key, value in metadata.items()}
