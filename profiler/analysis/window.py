"""A window of a run: what happened between two dumps of it, as a dump of its own.

The live view (:mod:`profiler.integrations.live_view`) and the windowed scalars show the last few
seconds of a run, not its average since the start: a slowdown shows when it starts. Rather than a
second set of rules for windows, :func:`window_tree` makes a dump that holds only what happened
between an earlier dump and a later one of the same run, so :func:`profiler.analysis.verdicts.judge_run`,
the step breakdown and the worker figures run on it unchanged.

Both dumps are normalized trees (:func:`profiler.tree.timer_json.normalize_timing_tree`). The
window takes each figure from them by what it means:

* **additive figures** — a block's ``total``, ``self`` and ``count``; a worker entry's ``total``,
  ``self``, ``count``, payload counters, ``critical_path`` (steps, times last, seconds waited,
  histogram counts) and ``env_time`` — are the later minus the earlier, node by node (matched by
  name and ``is_parallel`` under the same parent) and worker by worker (matched by manager and
  worker id). A block or worker the earlier dump did not have counts whole;
* **extremes and gauges** — a block's ``min``/``max``, ``gauges``, a worker's ``peak_mean`` —
  cannot be taken apart, so they are the later dump's: as of now;
* **the run's own** — ``metadata`` and the ``memory`` section are the later dump's (a memory trend
  needs the run's whole course, not a few seconds of it); ``timeline`` and ``device_time`` are
  left out (nothing the window's figures read).

A figure that went down (the timers were reset, or the file now holds another run) means the later
dump started afresh: that node, worker or whole window is the later dump's as it is. Rounding never
makes a figure negative: differences are clamped at zero.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ADDITIVE_WORKER_COUNTERS", "window_tree"]

ADDITIVE_WORKER_COUNTERS = ("payloads", "missed_payloads", "duplicates", "unreported_steps")
"""The whole-number counters of a worker entry that grow over the run."""

_NODE_FIGURES = ("total", "self", "count")
_LEFT_OUT = ("timeline", "device_time")


def window_tree(current: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """The dump of what happened between ``previous`` and ``current`` (see the module docstring).

    With no ``previous``, or one from before a reset, the window is ``current`` since its start.
    The result shares no mutable part with either argument.
    """
    if previous is None or _went_down(current, previous):
        window = _node_copy(current)
        for section in ("metadata", "memory"):
            if section in current:
                window[section] = current[section]
        if "workers" in current:
            window["workers"] = [_worker_copy(worker) for worker in current["workers"]]
        return window
    window = _node_difference(current, previous)
    window["count"] = current["count"]  # the root is the run: one run, however long the window
    for section in ("metadata", "memory"):
        if section in current:
            window[section] = current[section]
    if "workers" in current:
        earlier = {_worker_key(worker): worker for worker in previous.get("workers", [])}
        window["workers"] = [_worker_difference(worker, earlier.get(_worker_key(worker)))
                             for worker in current["workers"]]
    return window


def _went_down(current: dict[str, Any], previous: dict[str, Any]) -> bool:
    return current["total"] < previous["total"] or current["count"] < previous["count"]


def _node_difference(current: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """``current`` minus ``previous``, recursively; ``current`` as it is where it started afresh
    (fewer calls than before: a total a hair lower with as many calls is rounding, clamped)."""
    if previous is None or current["count"] < previous["count"]:
        return _node_copy(current)
    node = _extremes_and_gauges(current)
    for figure in _NODE_FIGURES:
        node[figure] = _less(current[figure], previous.get(figure, 0))
    earlier = {_child_key(child): child for child in previous.get("children", [])}
    node["children"] = [_node_difference(child, earlier.get(_child_key(child)))
                        for child in current["children"]]
    return node


def _node_copy(node: dict[str, Any]) -> dict[str, Any]:
    """A node as it is, children included, without the sections a window leaves out."""
    copied = _extremes_and_gauges(node)
    for figure in _NODE_FIGURES:
        copied[figure] = node[figure]
    copied["children"] = [_node_copy(child) for child in node["children"]]
    return copied


def _extremes_and_gauges(node: dict[str, Any]) -> dict[str, Any]:
    """The figures of ``node`` a window keeps as of now: everything but the additive ones, the
    children and the sections left out."""
    return {key: value for key, value in node.items()
            if key not in _NODE_FIGURES and key not in _LEFT_OUT
            and key not in ("children", "workers", "metadata", "memory")}


def _child_key(node: dict[str, Any]) -> tuple[str, bool]:
    return node["name"], bool(node.get("is_parallel"))


def _worker_key(worker: dict[str, Any]) -> tuple[Any, Any, Any]:
    return worker.get("manager_id"), worker.get("manager"), worker.get("worker_id", worker.get("name"))


def _worker_copy(worker: dict[str, Any]) -> dict[str, Any]:
    copied = {**worker, **_node_copy(worker)}
    return copied


def _worker_difference(current: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    if previous is None or _went_down(current, previous):
        return _worker_copy(current)
    worker = {**current, **_node_difference(current, previous)}
    for counter in ADDITIVE_WORKER_COUNTERS:
        if isinstance(current.get(counter), int) and isinstance(previous.get(counter), int):
            worker[counter] = max(0, current[counter] - previous[counter])
    for section, subtract in (("critical_path", _critical_path_difference),
                              ("env_time", _env_time_difference)):
        if section in current:
            worker[section] = subtract(current[section], previous.get(section))
    return worker


def _critical_path_difference(current: Any, previous: Any) -> Any:
    """Steps, times last and seconds waited over the window; the histogram's counts likewise when
    both dumps bin alike. A malformed section is passed on as it is, for the reader to refuse."""
    if not (isinstance(current, dict) and isinstance(previous, dict)):
        return current
    if not all(_is_number(current.get(key)) and _is_number(previous.get(key))
               for key in ("vector_steps", "last_to_reply", "wait_as_last_seconds")):
        return current
    if current["vector_steps"] < previous["vector_steps"]:
        return current
    window = dict(current)
    for key in ("vector_steps", "last_to_reply", "wait_as_last_seconds"):
        window[key] = _less(current[key], previous[key])
    window["last_to_reply"] = min(window["last_to_reply"], window["vector_steps"])
    histogram, earlier = current.get("wait_as_last_histogram"), previous.get("wait_as_last_histogram")
    if (isinstance(histogram, dict) and isinstance(earlier, dict)
            and histogram.get("bounds_seconds") == earlier.get("bounds_seconds")
            and isinstance(histogram.get("counts"), list) and isinstance(earlier.get("counts"), list)
            and len(histogram["counts"]) == len(earlier["counts"])
            and all(_is_number(count) for count in histogram["counts"] + earlier["counts"])):
        window["wait_as_last_histogram"] = {
            **histogram,
            "counts": [_less(now, before) for now, before in zip(histogram["counts"], earlier["counts"])],
        }
    return window


def _env_time_difference(current: Any, previous: Any) -> Any:
    if not (isinstance(current, dict) and isinstance(previous, dict)):
        return current
    window = dict(current)
    for key in ("wall_seconds", "cpu_seconds", "calls", "cpu_measured_calls"):
        if _is_number(current.get(key)) and _is_number(previous.get(key)):
            window[key] = _less(current[key], previous[key])
    return window


def _less(now: Any, before: Any) -> Any:
    """``now - before``, never below zero, keeping whole numbers whole."""
    difference = now - before
    return difference if difference > 0 else type(difference)(0)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
