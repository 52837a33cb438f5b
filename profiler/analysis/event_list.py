"""A run's blocks and operators as PyTorch's ``EventList``: ``load_nvprof(path).table()`` and
``.key_averages()``, for code written against ``torch.autograd.profiler.load_nvprof``.

PyTorch's ``load_nvprof`` reads nvprof's file into an ``EventList``, one ``FunctionEvent`` per
range; its ``table()`` prints them and ``key_averages()`` adds them up by name. rlprof reads an
Nsight Systems SQLite export (or any rlprof dump: a timer file, a session's ``timers.json``) as a
timer tree, whose blocks are already added up by their path (every call of ``aten::addmm`` under
``policy.forward`` is one block). So an :class:`Event` here is one block of the tree, with its
call count, rather than one call: ``key_averages()`` adds the blocks of a name up, as PyTorch adds
up events of a name, and the averages it prints (``CPU time avg``) are the same.

The names are PyTorch's, and so are the units: times in microseconds. ``cpu_time_total`` is the
block's host time, ``self_cpu_time_total`` that time outside its child blocks, ``device_time_total``
and ``self_device_time_total`` the GPU time of the work launched inside it (and its nested ranges,
for the total) where the run measured it (an Nsight capture with kernels, or PyTorch's profiler
with CUDA), else 0. ``input_shapes`` is the operator's most frequent input shapes (operators
recorded with ``record_shapes``), ``[]`` for a block.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

from profiler.analysis.text_format import format_seconds
from profiler.tree.timer_json import load_timing_tree

__all__ = ["Event", "EventList", "event_list", "load_nvprof"]

_SORT_KEYS = ("cpu_time_total", "self_cpu_time_total", "device_time_total", "self_device_time_total",
              "cpu_time", "device_time", "count")
"""What :meth:`EventList.table` sorts by (PyTorch's ``sort_by`` names; ``cuda_`` for ``device_``
too)."""


class Event:
    """One block of the tree (or, from :meth:`EventList.key_averages`, the blocks of one name)."""

    __slots__ = ("key", "path", "count", "cpu_time_total", "self_cpu_time_total", "device_time_total",
                 "self_device_time_total", "input_shapes", "is_operator", "depth")

    def __init__(self, key: str, path: tuple[str, ...], count: int, cpu_time_total: float,
                 self_cpu_time_total: float, device_time_total: float = 0.0,
                 self_device_time_total: float = 0.0, input_shapes: str = "[]",
                 is_operator: bool = False) -> None:
        self.key = key
        self.path = path
        self.count = count
        self.cpu_time_total = cpu_time_total
        self.self_cpu_time_total = self_cpu_time_total
        self.device_time_total = device_time_total
        self.self_device_time_total = self_device_time_total
        self.input_shapes = input_shapes
        self.is_operator = is_operator
        self.depth = len(path) - 1

    @property
    def name(self) -> str:
        return self.key

    @property
    def cpu_time(self) -> float:
        """Microseconds per call."""
        return self.cpu_time_total / self.count if self.count else 0.0

    @property
    def device_time(self) -> float:
        return self.device_time_total / self.count if self.count else 0.0

    # PyTorch's older names for the device columns.
    cuda_time = device_time

    @property
    def cuda_time_total(self) -> float:
        return self.device_time_total

    @property
    def self_cuda_time_total(self) -> float:
        return self.self_device_time_total

    def __repr__(self) -> str:
        return (f"<Event key={self.key!r} path={'/'.join(self.path)!r} count={self.count} "
                f"cpu_time_total={self.cpu_time_total:.3f}us self_cpu_time_total={self.self_cpu_time_total:.3f}us "
                f"device_time_total={self.device_time_total:.3f}us input_shapes={self.input_shapes}>")


class EventList(list):
    """A list of :class:`Event`, with PyTorch's ``EventList`` methods."""

    @property
    def self_cpu_time_total(self) -> float:
        """Microseconds: the self time of all the events."""
        return sum(event.self_cpu_time_total for event in self)

    def key_averages(self, group_by_input_shapes: bool = False) -> EventList:
        """One event per name (and, with ``group_by_input_shapes``, per input shapes): counts and
        times added up. A block nested in one of its own name keeps its self time but not its
        total, which the outer one already holds."""
        groups: dict[tuple[str, str], Event] = {}
        for event in self:
            shapes = event.input_shapes if group_by_input_shapes else "[]"
            group = groups.get((event.key, shapes))
            if group is None:
                group = groups[(event.key, shapes)] = Event(event.key, (event.key,), 0, 0.0, 0.0,
                                                            input_shapes=shapes, is_operator=event.is_operator)
            nested = event.key in event.path[:-1]
            group.count += event.count
            group.self_cpu_time_total += event.self_cpu_time_total
            group.self_device_time_total += event.self_device_time_total
            if not nested:
                group.cpu_time_total += event.cpu_time_total
                group.device_time_total += event.device_time_total
        return EventList(groups.values())

    def total_average(self) -> Event:
        """All the events added up, as one named ``Total``."""
        total = Event("Total", ("Total",), 0, 0.0, 0.0)
        for event in self:
            total.count += event.count
            total.self_cpu_time_total += event.self_cpu_time_total
            total.self_device_time_total += event.self_device_time_total
            if event.depth == 0:
                total.cpu_time_total += event.cpu_time_total
                total.device_time_total += event.device_time_total
        return total

    def table(self, sort_by: str | None = None, row_limit: int = 100, header: str | None = None,
              top_level_events_only: bool = False, max_name_column_width: int = 55) -> str:
        """The events as text, PyTorch's columns (device ones where any event has device time),
        sorted by ``sort_by`` (largest first; the list's order without it), at most ``row_limit``
        rows (all with a negative one)."""
        events = [event for event in self if not top_level_events_only or event.depth == 0]
        if sort_by is not None:
            key = sort_by.replace("cuda", "device")
            if key not in _SORT_KEYS:
                raise ValueError(f"sort_by must be one of {', '.join(_SORT_KEYS)}, got {sort_by!r}")
            events.sort(key=lambda event: getattr(event, key), reverse=True)
        if row_limit >= 0:
            events = events[:row_limit]
        with_device = any(event.device_time_total for event in self)
        # As PyTorch's: both CPU percentages are of all the events' self time (the run's CPU time).
        self_total = self.self_cpu_time_total
        device_total = sum(event.self_device_time_total for event in self)
        with_shapes = any(event.input_shapes != "[]" for event in events)
        headers = ["Name", "Self CPU %", "Self CPU", "CPU total %", "CPU total", "CPU time avg"]
        if with_device:
            headers += ["Self CUDA", "Self CUDA %", "CUDA total", "CUDA time avg"]
        headers.append("# of Calls")
        if with_shapes:
            headers.append("Input Shapes")
        rows = []
        for event in events:
            name = event.key if len(event.key) <= max_name_column_width else event.key[: max_name_column_width - 3] + "..."
            row = [name, _percent(event.self_cpu_time_total, self_total), _time(event.self_cpu_time_total),
                   _percent(event.cpu_time_total, self_total), _time(event.cpu_time_total), _time(event.cpu_time)]
            if with_device:
                row += [_time(event.self_device_time_total), _percent(event.self_device_time_total, device_total),
                        _time(event.device_time_total), _time(event.device_time)]
            row.append(str(event.count))
            if with_shapes:
                row.append(event.input_shapes)
            rows.append(row)
        widths = [max(len(cell) for cell in column) for column in zip(headers, *rows)]
        rule = "  ".join("-" * width for width in widths)
        lines = [header] if header else []
        lines += [rule, "  ".join(cell.rjust(width) for cell, width in zip(headers, widths)), rule]
        lines += ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)) for row in rows]
        lines += [rule, f"Self CPU time total: {_time(self_total)}"]
        if with_device:
            lines.append(f"Self CUDA time total: {_time(device_total)}")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()


def _percent(part: float, whole: float) -> str:
    return f"{part / whole:.2%}" if whole > 0 else "-"


def _time(microseconds: float) -> str:
    return format_seconds(microseconds / 1e6).replace(" ", "")


def event_list(tree: dict[str, Any]) -> EventList:
    """Every block of a normalized tree (its trainer's, workers left out), outermost first, as
    events; the operators with their device time and input shapes from the tree's sections."""
    operators = {tuple(entry["path"]): entry for entry in (tree.get("operators") or {}).get("operators", [])}
    device = {tuple(entry["path"]): entry["total"] for entry in tree.get("device_time") or []
              if "path" in entry and "total" in entry}
    return EventList(_events(tree, (), operators, device))


def _events(node: dict[str, Any], path: tuple[str, ...], operators: dict[tuple[str, ...], dict[str, Any]],
            device: dict[tuple[str, ...], float]) -> Iterator[Event]:
    for child in node.get("children", []):
        child_path = (*path, child["name"])
        operator = operators.get(child_path)
        if operator is not None and "device_self" in operator:
            device_total = operator.get("device_total", device.get(child_path, operator["device_self"]))
            device_self = operator["device_self"]
        else:
            device_total = device.get(child_path, 0.0)
            device_self = max(0.0, device_total - sum(device.get((*child_path, grandchild["name"]), 0.0)
                                                      for grandchild in child.get("children", [])))
        shapes = (operator or {}).get("input_shapes") or {}
        yield Event(child["name"], child_path, child["count"], child["total"] * 1e6, child["self"] * 1e6,
                    device_total * 1e6, device_self * 1e6,
                    max(shapes.items(), key=lambda item: item[1])[0] if shapes else "[]",
                    child.get("object_type") == "operator")
        yield from _events(child, child_path, operators, device)


def load_nvprof(path: str | os.PathLike[str]) -> EventList:
    """Read a capture back as an :class:`EventList`: an Nsight Systems SQLite export (the role of
    PyTorch's ``load_nvprof`` for nvprof's files), or any file ``rlprof analyze`` reads. Raises
    ``profiler.TimerFileError`` saying what is wrong with the file."""
    return event_list(load_timing_tree(path))
