"""What PyTorch gives of one operator block beyond its time, and how those figures travel: as an
entry of the dump's ``operators`` section (see docs/formats.md), and, from an env worker, as the
``operators`` field of its timer payloads (see :mod:`profiler.multiprocess.payload`).

A worker that records operators (:mod:`profiler.gpu.torch_ops`) folds them under its own blocks;
the blocks reach the trainer's tree in its payloads like any block, under the trainer's block that
was open when the payload was merged. Their figures (FLOPs, memory, device time, shapes, dtypes,
call stacks) travel beside them, by the operator's path in the worker's tree, drained at each
flush as the block figures are; the trainer adds them up by the path the operator has in its own
tree, so that the dump's ``operators`` section, ``rlprof analyze`` and the report show a worker's
operators as they show the trainer's.

The payload field::

    operators = None | (device_time_unavailable, with_stack, (entry, ...))
    entry     = (path, flops, cpu_memory_bytes, device_self, device_total,
                 shapes, dtypes, backtraces, (other_shapes, other_dtypes, other_backtraces))
    shapes, dtypes, backtraces = ((text, calls), ...)

``device_time_unavailable`` is None where the worker's operators have device time, else the one
line saying why; ``device_self`` and ``device_total`` are then 0.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

from profiler.records import Record

__all__ = ["MAX_SHAPES_PER_OPERATOR", "OperatorFigures", "PathFigures", "add_payload_field",
           "check_payload_field", "figures_of", "payload_field", "section_entry"]

MAX_SHAPES_PER_OPERATOR = 8
"""Distinct input shapes (and dtypes, and backtraces) kept per operator block; further ones are
counted in ``other_shapes`` (``other_dtypes``, ``other_backtraces``)."""

_COUNTED = ("input_shapes", "input_dtypes", "backtraces", "output_shapes")
_OTHERS = ("other_shapes", "other_dtypes", "other_backtraces", "other_output_shapes")


# Records, not dataclasses: no generated method to compile as each class is made, since every
# rlprof run's trainer imports this module (for its workers' figures).
class OperatorFigures(Record):
    """What PyTorch gives of one operator block beyond its time."""

    flops: int = 0
    device_self: float = 0.0  # seconds of the kernels the operator itself launched
    device_total: float = 0.0  # those and its child operators' kernels
    cpu_memory_bytes: int = 0  # allocated minus freed by the operator itself, summed over its calls
    input_shapes: dict[str, int] = field(default_factory=dict)
    other_shapes: int = 0
    input_dtypes: dict[str, int] = field(default_factory=dict)
    other_dtypes: int = 0
    backtraces: dict[str, int] = field(default_factory=dict)
    other_backtraces: int = 0
    # From PyTorch's execution trace, with record_outputs (see profiler.gpu.execution_trace).
    output_shapes: dict[str, int] = field(default_factory=dict)
    other_output_shapes: int = 0
    tensor_bytes: int = 0  # the sizes of the tensors its calls took and returned, summed

    def add_shapes(self, shapes: str, calls: int = 1) -> None:
        self.other_shapes += _count_in(self.input_shapes, shapes, calls)

    def add_dtypes(self, dtypes: str, calls: int = 1) -> None:
        self.other_dtypes += _count_in(self.input_dtypes, dtypes, calls)

    def add_backtrace(self, backtrace: str, calls: int = 1) -> None:
        self.other_backtraces += _count_in(self.backtraces, backtrace, calls)

    def add_output_shapes(self, shapes: str, calls: int = 1) -> None:
        self.other_output_shapes += _count_in(self.output_shapes, shapes, calls)

    def add(self, other: OperatorFigures) -> None:
        """Add another block's (or another worker's) figures of the same operator block."""
        self.flops += other.flops
        self.cpu_memory_bytes += other.cpu_memory_bytes
        self.device_self += other.device_self
        self.device_total += other.device_total
        for text, calls in other.input_shapes.items():
            self.add_shapes(text, calls)
        for text, calls in other.input_dtypes.items():
            self.add_dtypes(text, calls)
        for text, calls in other.backtraces.items():
            self.add_backtrace(text, calls)
        for text, calls in other.output_shapes.items():
            self.add_output_shapes(text, calls)
        self.tensor_bytes += other.tensor_bytes
        self.other_output_shapes += other.other_output_shapes
        self.other_shapes += other.other_shapes
        self.other_dtypes += other.other_dtypes
        self.other_backtraces += other.other_backtraces


def figures_of(figures: dict[Any, OperatorFigures], key: Any) -> OperatorFigures:
    """``key``'s figures in ``figures``, made at its first use: ``setdefault`` would make a record
    (some microseconds) at every event or row, to drop it but for the first."""
    operator = figures.get(key)
    if operator is None:
        operator = figures[key] = OperatorFigures()
    return operator

def _count_in(counts: dict[str, int], key: str, calls: int) -> int:
    """Count ``calls`` under ``key`` if it is kept (known, or room for one more); return the
    calls that were not."""
    if key in counts or len(counts) < MAX_SHAPES_PER_OPERATOR:
        counts[key] = counts.get(key, 0) + calls
        return 0
    return calls


class PathFigures(Record):
    """Operator figures by their block's path from the root, with what the recording said of
    itself: the merged figures of a worker's operators, as the dump's section takes them."""

    figures: dict[tuple[str, ...], OperatorFigures] = field(default_factory=dict)
    device_time_unavailable: str | None = None
    with_stack: bool = False


def section_entry(path: list[str], operator: OperatorFigures, device_time: bool) -> dict[str, Any]:
    """The operator's entry in the dump's ``operators`` section: empty counts left out."""
    entry: dict[str, Any] = {"path": path, "flops": operator.flops,
                             "cpu_memory_bytes": operator.cpu_memory_bytes}
    if device_time:
        entry["device_self"] = operator.device_self
        entry["device_total"] = operator.device_total
    for counted, others in zip(_COUNTED, _OTHERS):
        if getattr(operator, counted):
            entry[counted] = dict(getattr(operator, counted))
        if getattr(operator, others):
            entry[others] = getattr(operator, others)
    if operator.output_shapes or operator.other_output_shapes:
        entry["tensor_bytes"] = operator.tensor_bytes
    return entry


# --- the payload field ---------------------------------------------------------------------------


def payload_field(by_path: list[tuple[tuple[str, ...], OperatorFigures]], device_time_unavailable: str | None,
                  with_stack: bool) -> tuple[Any, ...] | None:
    """The payload's ``operators`` field for these figures; None when there are none."""
    if not by_path:
        return None
    return (device_time_unavailable, with_stack, tuple(
        (path, operator.flops, operator.cpu_memory_bytes, operator.device_self, operator.device_total,
         tuple(operator.input_shapes.items()), tuple(operator.input_dtypes.items()),
         tuple(operator.backtraces.items()),
         (operator.other_shapes, operator.other_dtypes, operator.other_backtraces))
        for path, operator in by_path))


def check_payload_field(operators: Any) -> None:
    """Raise ``ValueError`` naming the first part of an ``operators`` field that is wrong."""
    if not isinstance(operators, (tuple, list)) or len(operators) != 3:
        raise ValueError("operators: must be (device_time_unavailable, with_stack, entries)")
    unavailable, with_stack, entries = operators
    if unavailable is not None and type(unavailable) is not str:
        raise ValueError("operators.device_time_unavailable: must be None or a string")
    if type(with_stack) is not bool:
        raise ValueError("operators.with_stack: must be true or false")
    if not isinstance(entries, (tuple, list)):
        raise ValueError("operators.entries: must be a sequence")
    for index, entry in enumerate(entries):
        _check_entry(entry, f"operators[{index}]")


def _check_entry(entry: Any, where: str) -> None:
    if not isinstance(entry, (tuple, list)) or len(entry) != 9:
        raise ValueError(f"{where}: must be (path, flops, cpu_memory_bytes, device_self, device_total, "
                         "shapes, dtypes, backtraces, others)")
    path, flops, memory, device_self, device_total, shapes, dtypes, backtraces, others = entry
    if not isinstance(path, (tuple, list)) or not path or not all(type(name) is str and name for name in path):
        raise ValueError(f"{where}.path: must be a non-empty sequence of block names")
    _whole(flops, f"{where}.flops", signed=False)
    _whole(memory, f"{where}.cpu_memory_bytes", signed=True)
    for seconds, name in ((device_self, "device_self"), (device_total, "device_total")):
        if type(seconds) is not float or not 0.0 <= seconds < math.inf:
            raise ValueError(f"{where}.{name}: must be a number of seconds >= 0")
    for counts, name in ((shapes, "shapes"), (dtypes, "dtypes"), (backtraces, "backtraces")):
        if not isinstance(counts, (tuple, list)) or len(counts) > MAX_SHAPES_PER_OPERATOR:
            raise ValueError(f"{where}.{name}: must be at most {MAX_SHAPES_PER_OPERATOR} (text, calls) pairs")
        for pair in counts:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2 or type(pair[0]) is not str:
                raise ValueError(f"{where}.{name}: must be (text, calls) pairs")
            _whole(pair[1], f"{where}.{name}", signed=False)
    if not isinstance(others, (tuple, list)) or len(others) != 3:
        raise ValueError(f"{where}.others: must be (other_shapes, other_dtypes, other_backtraces)")
    for count in others:
        _whole(count, f"{where}.others", signed=False)


_MAX_WHOLE = 2**63 - 1


def _whole(value: Any, where: str, *, signed: bool) -> None:
    low = -_MAX_WHOLE if signed else 0
    if type(value) is not int or not low <= value <= _MAX_WHOLE:
        raise ValueError(f"{where}: must be a whole number{'' if signed else ' >= 0'}")


def add_payload_field(into: PathFigures, prefix: tuple[str, ...], operators: Any) -> None:
    """Add a checked ``operators`` field to ``into``, each operator's path after ``prefix`` (the
    path of the trainer's block its blocks were merged under)."""
    unavailable, with_stack, entries = operators
    if unavailable is not None:
        into.device_time_unavailable = unavailable
    into.with_stack = into.with_stack or with_stack
    for path, flops, memory, device_self, device_total, shapes, dtypes, backtraces, others in entries:
        other_shapes, other_dtypes, other_backtraces = others
        figures_of(into.figures, (*prefix, *path)).add(OperatorFigures(
            flops, device_self, device_total, memory, dict(shapes), other_shapes, dict(dtypes), other_dtypes,
            dict(backtraces), other_backtraces))
