"""The operators of a run, as MegEngine's ``profile_analyze`` ranks them: ``rlprof analyze``'s
operator section, when PyTorch's operators were recorded (:mod:`profiler.gpu.torch_ops`).

One row per operator block (``aten::addmm`` under ``policy.forward``, its path), or, with
``--aggregate-by type``, one per operator type (``aten::addmm`` wherever it ran). Columns, with
MegEngine's names:

``device``      device self time: the GPU work the operator itself launched, where the run
                measured it (an Nsight Systems capture read by ``rlprof analyze capture.sqlite``,
                or PyTorch's profiler with CUDA); the column is left out where none was;
``self``        host time in the operator outside the operators it called;
``cumulative``  the share of all operators' self time the rows so far account for;
``total``       host time, the operators it called included; ``count`` its calls;
``FLOPs``       the computation (PyTorch counts it for matrix multiplications and
                convolutions only) and ``FLOPS`` per second of the operator's device self time
                where measured, else of its host time;
``memory``      the host memory the operator allocated minus what it freed (CPU);
``bandwidth``   with ``record_outputs`` (PyTorch's execution trace): the sizes of the tensors the
                operator took and returned (inputs and outputs, elements times element size)
                per second of its device self time where measured, else of its host time; a
                figure of tensor sizes, not of the memory traffic the operator caused;
``in_shapes``   its most frequent input shapes (and, in ``--format json``, its input dtypes);
``out_shapes``  with ``record_outputs``: its most frequent output shapes.

With MegEngine's ``with_backtrace`` (PyTorch's ``with_stack``), each operator's most frequent
Python call stack is listed under the table.

What the run cannot give is named under the table rather than printed as empty columns:
``bandwidth`` and ``out_shapes`` without ``record_outputs`` (PyTorch's profiler records input
shapes only), device self time where no device time was measured, and FLOPs, memory, bandwidth
and the shapes for an Nsight capture (NVTX ranges carry none).
``--type`` keeps operator types (``aten::addmm`` or ``addmm``), ``--input-dtype`` the operators
that had an input of that dtype (``float32``, as torch names it), ``--filter`` searches names and
paths, ``--min-time``/``--max-time`` bound the self time, ``--order-by`` takes ``self``
(default), ``total``, ``count``, ``flops``, ``memory``, ``device``.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from profiler.analysis.text_format import format_percent, format_seconds

__all__ = ["OPERATOR_ORDER_KEYS", "NOT_RECORDED", "OperatorReport", "OperatorRow", "operator_report",
           "operators_document", "operators_text"]

OPERATOR_ORDER_KEYS = ("self", "total", "count", "flops", "memory", "device")

NOT_RECORDED = ("device self time, bandwidth and out_shapes: not recorded (PyTorch's profiler "
                "ran on the CPU, which gives host time, FLOPs, CPU memory and input shapes only)")
"""What a run of PyTorch's CPU profiler cannot give, as the report words it."""

BANDWIDTH_MEANS = ("bandwidth: the sizes of the tensors each operator took and returned, per second "
                   "(a figure of tensor sizes, not of the memory traffic: a view moves less, a "
                   "kernel that reads twice moves more)")
"""What the bandwidth column counts, said under the table where it is shown."""


def not_recorded(section: dict[str, Any]) -> tuple[list[str], str]:
    """MegEngine's columns this run's operator section cannot fill, and the sentence saying why."""
    has_device = any("device_self" in entry for entry in section["operators"])
    if section.get("source") == "nsys":
        missing = ["computation (FLOPs)", "FLOPS", "memory", "bandwidth", "in_shapes", "out_shapes"]
        if not has_device:
            missing.insert(0, "device self time")
        return missing, (f"{', '.join(missing)}: not recorded (an Nsight Systems capture gives "
                         "ranges and their GPU work; NVTX ranges carry no FLOPs, memory or shapes)")
    if section.get("record_outputs"):
        if has_device:
            return [], ""
        return ["device self time"], ("device self time: not recorded (PyTorch's profiler ran on the CPU; "
                                      "FLOPS and bandwidth are per second of host time)")
    if not has_device:
        return ["device self time", "bandwidth", "out_shapes"], NOT_RECORDED
    return ["bandwidth", "out_shapes"], ("bandwidth and out_shapes: not recorded (PyTorch's profiler "
                                         "records input shapes only: record the operators with "
                                         "record_outputs for them)")


@dataclass
class OperatorRow:
    """One operator block, or one operator type's blocks added up."""

    name: str
    path: tuple[str, ...]
    self_time: float
    total: float
    count: int
    flops: int
    cpu_memory_bytes: int
    input_shapes: dict[str, int] = field(default_factory=dict)
    places: int = 1
    block: str = ""
    """The rlprof block the operator ran in (its operator callers left out); empty at the root."""
    device_seconds: float | None = None
    """Device self time, where the run measured it."""
    input_dtypes: dict[str, int] = field(default_factory=dict)
    """Calls by the dtypes of their inputs, as text: ``{"[float32, int64, Scalar]": 3}``."""
    backtraces: dict[str, int] = field(default_factory=dict)
    """Calls by the Python call stack they came from (recorded with ``with_stack`` only)."""
    output_shapes: dict[str, int] = field(default_factory=dict)
    """Calls by their output shapes (recorded with ``record_outputs`` only)."""
    tensor_bytes: int = 0
    """The sizes of the tensors its calls took and returned (``record_outputs`` only)."""

    @property
    def flops_per_second(self) -> float | None:
        seconds = self.device_seconds if self.device_seconds else self.total
        return self.flops / seconds if self.flops and seconds > 0 else None

    @property
    def bandwidth(self) -> float | None:
        """Tensor bytes per second of device self time where measured, else of host time."""
        seconds = self.device_seconds if self.device_seconds else self.total
        return self.tensor_bytes / seconds if self.tensor_bytes and seconds > 0 else None

    @property
    def common_output_shapes(self) -> str:
        return _most_frequent(self.output_shapes)

    @property
    def common_shapes(self) -> str:
        return _most_frequent(self.input_shapes)

    @property
    def common_backtrace(self) -> str:
        return _most_frequent(self.backtraces)

    def had_input_dtype(self, dtype: str) -> bool:
        """Whether a call had an input of ``dtype`` (``float32``; ``torch.float32`` too)."""
        wanted = dtype.removeprefix("torch.")
        return any(wanted in dtypes.strip("[]").split(", ") for dtypes in self.input_dtypes)


def _most_frequent(counts: dict[str, int]) -> str:
    return max(counts.items(), key=lambda item: item[1])[0] if counts else ""


@dataclass
class OperatorReport:
    """What the operator section prints: the rows asked for, and what they were taken from."""

    rows: list[OperatorRow]
    rows_matched: int
    operators_in_run: int
    self_time: float
    by_type: bool
    order_by: str
    ascending: bool
    not_recorded: str = NOT_RECORDED
    not_recorded_columns: tuple[str, ...] = ("device self time", "bandwidth", "out_shapes")
    has_device_time: bool = False
    has_outputs: bool = False


def operator_report(
    tree: dict[str, Any],
    *,
    by_type: bool = False,
    types: tuple[str, ...] = (),
    pattern: re.Pattern[str] | None = None,
    input_dtype: str | None = None,
    order_by: str | None = None,
    ascending: bool = False,
    min_time: float = 0.0,
    max_time: float | None = None,
    top: int | None = None,
) -> OperatorReport | None:
    """The operator section of a normalized tree; None when it recorded no operators."""
    section = tree.get("operators")
    if not section:
        return None
    figures = {tuple(entry["path"]): entry for entry in section["operators"]}
    rows = list(_operator_rows(tree, (), figures))
    total_self = sum(row.self_time for row in rows)
    if by_type:
        rows = _by_type(rows)
    in_run = len(rows)
    if types:
        rows = [row for row in rows if any(_is_of_type(row.name, wanted) for wanted in types)]
    if pattern is not None:
        rows = [row for row in rows if pattern.search(row.name) or pattern.search("/".join(row.path))]
    if input_dtype is not None:
        rows = [row for row in rows if row.had_input_dtype(input_dtype)]
    rows = [row for row in rows if row.self_time >= min_time and (max_time is None or row.self_time <= max_time)]
    missing, sentence = not_recorded(section)
    order = order_by if order_by in OPERATOR_ORDER_KEYS else "self"
    if order == "device" and "device self time" in missing:
        order = "self (no device time recorded)"
    rows.sort(key=lambda row: _order_value(row, order.split(" ")[0]), reverse=not ascending)
    return OperatorReport(rows=rows if top is None else rows[:top], rows_matched=len(rows),
                          operators_in_run=in_run, self_time=total_self, by_type=by_type,
                          order_by=order, ascending=ascending, not_recorded=sentence,
                          not_recorded_columns=tuple(missing),
                          has_device_time="device self time" not in missing,
                          has_outputs="out_shapes" not in missing)


def _operator_rows(node: dict[str, Any], path: tuple[str, ...],
                   figures: dict[tuple[str, ...], dict[str, Any]], block: str = "") -> Iterator[OperatorRow]:
    for child in node.get("children", []):
        child_path = (*path, child["name"])
        child_block = block
        if child.get("object_type") == "operator":
            entry = figures.get(child_path, {})
            yield OperatorRow(
                name=child["name"], path=child_path, self_time=child["self"], total=child["total"],
                count=child["count"], flops=entry.get("flops", 0),
                cpu_memory_bytes=entry.get("cpu_memory_bytes", 0),
                input_shapes=dict(entry.get("input_shapes", {})), block=block,
                device_seconds=entry.get("device_self"),
                input_dtypes=dict(entry.get("input_dtypes", {})),
                backtraces=dict(entry.get("backtraces", {})),
                output_shapes=dict(entry.get("output_shapes", {})),
                tensor_bytes=entry.get("tensor_bytes", 0),
            )
        else:
            child_block = "/".join(child_path)
        yield from _operator_rows(child, child_path, figures, child_block)


def _by_type(rows: list[OperatorRow]) -> list[OperatorRow]:
    """One row per operator name. An operator nested in one of its own type (a recursive call)
    keeps its self time but not its total, which the outer one already holds."""
    groups: dict[str, OperatorRow] = {}
    for row in rows:
        group = groups.get(row.name)
        nested = row.name in row.path[:-1]
        if group is None:
            group = groups[row.name] = OperatorRow(row.name, (row.name,), 0.0, 0.0, 0, 0, 0, places=0)
        group.self_time += row.self_time
        group.total += 0.0 if nested else row.total
        group.count += row.count
        group.flops += row.flops
        group.cpu_memory_bytes += row.cpu_memory_bytes
        group.tensor_bytes += row.tensor_bytes
        group.places += 1
        if row.device_seconds is not None:
            group.device_seconds = (group.device_seconds or 0.0) + row.device_seconds
        for counts, into in ((row.input_shapes, group.input_shapes), (row.input_dtypes, group.input_dtypes),
                             (row.backtraces, group.backtraces), (row.output_shapes, group.output_shapes)):
            for key, calls in counts.items():
                into[key] = into.get(key, 0) + calls
    return list(groups.values())


def _is_of_type(name: str, wanted: str) -> bool:
    """``aten::addmm`` is of type ``aten::addmm`` and of type ``addmm``."""
    return name == wanted or name.split("::")[-1] == wanted


def _order_value(row: OperatorRow, order: str) -> float:
    return {"self": row.self_time, "total": row.total, "count": row.count, "flops": row.flops,
            "memory": row.cpu_memory_bytes, "device": row.device_seconds or 0.0}[order]


# --- output ----------------------------------------------------------------------------------------


def operators_text(report: OperatorReport | None, width: int) -> str:
    """The operator section for a terminal, ``width`` columns wide."""
    if report is None:
        return ("Operators: none recorded (set_config(profile_all=True) or "
                "Profiler(record_operators=True) records PyTorch's).")
    rows_are = "operator types" if report.by_type else "operators"
    order = f"{report.order_by}, {'smallest' if report.ascending else 'largest'} first"
    device_header = f"{'device':>10} " if report.has_device_time else ""
    bandwidth_header = f" {'bandwidth':>10}" if report.has_outputs else ""
    out_shapes_header = "  out_shapes" if report.has_outputs else ""
    lines = [f"Operators (PyTorch): {len(report.rows)} of {report.rows_matched} {rows_are} "
             f"(of {report.operators_in_run}), by {order}; self time of all: "
             f"{format_seconds(report.self_time)}",
             f"{device_header}{'self':>10} {'cum':>6} {'total':>10} {'count':>7} {'FLOPs':>9} "
             f"{'FLOPS':>9} {'memory':>9}{bandwidth_header}  operator  in_shapes{out_shapes_header}"]
    cumulative = 0.0
    prefix = 65
    for row in report.rows:
        cumulative += row.self_time
        share = cumulative / report.self_time if report.self_time > 0 else None
        flops_per_second = row.flops_per_second
        label = row.name if report.by_type else f"{row.name} in {row.block or '(no block)'}"
        device = ""
        if report.has_device_time:
            device = f"{format_seconds(row.device_seconds) if row.device_seconds is not None else '-':>10} "
        bandwidth = f" {_bandwidth(row.bandwidth):>10}" if report.has_outputs else ""
        out_shapes = f"  {row.common_output_shapes or '-'}" if report.has_outputs else ""
        line = (f"{device}{format_seconds(row.self_time):>10} {format_percent(share):>6} "
                f"{format_seconds(row.total):>10} {row.count:>7} {_quantity(row.flops):>9} "
                f"{_quantity(flops_per_second):>9} {_bytes(row.cpu_memory_bytes):>9}{bandwidth}  {label}  "
                f"{row.common_shapes or ('-' if report.has_outputs else '')}{out_shapes}")
        limit = max(width, prefix + 20)
        # Cut at the end: the figures and the operator's block come first, the shapes last.
        lines.append(line if len(line) <= limit else line[: limit - 3] + "...")
    if not report.rows:
        lines.append("(no operator matches)")
    lines.extend(textwrap.wrap(report.not_recorded, max(width, 40)))
    if report.has_outputs:
        lines.extend(textwrap.wrap(BANDWIDTH_MEANS, max(width, 40)))
    lines.extend(_backtraces_text(report, width))
    return "\n".join(lines)


def _backtraces_text(report: OperatorReport, width: int) -> list[str]:
    """Each shown operator's most frequent Python call stack, where they were recorded."""
    rows = [row for row in report.rows if row.backtraces]
    if not rows:
        return []
    lines = ["Call stacks (with_backtrace), innermost first, the most frequent of each operator:"]
    for row in rows:
        label = row.name if report.by_type else f"{row.name} in {row.block or '(no block)'}"
        calls = row.backtraces[row.common_backtrace]
        lines.extend(textwrap.wrap(f"{label} ({calls} of {sum(row.backtraces.values())} calls): "
                                   f"{row.common_backtrace}", max(width, 40), subsequent_indent="    "))
    return lines


def operators_document(report: OperatorReport | None) -> dict[str, Any] | None:
    """The operator section for ``--format json``."""
    if report is None:
        return None
    return {
        "by_type": report.by_type,
        "order_by": report.order_by,
        "self_time": report.self_time,
        "rows_matched": report.rows_matched,
        "operators_in_run": report.operators_in_run,
        "not_recorded": [column.replace(" (FLOPs)", "").replace(" ", "_") for column in report.not_recorded_columns],
        "rows": [
            {"name": row.name, "path": list(row.path), "block": row.block, "self": row.self_time, "total": row.total,
             "count": row.count, "flops": row.flops, "flops_per_second": row.flops_per_second,
             "cpu_memory_bytes": row.cpu_memory_bytes, "input_shapes": row.input_shapes,
             "places": row.places, "device_self_time": row.device_seconds,
             "input_dtypes": row.input_dtypes, "backtraces": row.backtraces,
             **({"output_shapes": row.output_shapes, "tensor_bytes": row.tensor_bytes, "bandwidth": row.bandwidth}
                if report.has_outputs else {})}
            for row in report.rows
        ],
    }


def _quantity(value: float | None) -> str:
    """1234567 as ``1.23M``; ``-`` when there is none."""
    if not value:
        return "-"
    for factor, suffix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= factor:
            return f"{value / factor:.3g}{suffix}"
    return f"{value:.3g}"


def _bandwidth(bytes_per_second: float | None) -> str:
    if not bytes_per_second:
        return "-"
    for factor, suffix in ((1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
        if bytes_per_second >= factor:
            return f"{bytes_per_second / factor:.3g} {suffix}"
    return f"{bytes_per_second:.3g} B/s"


def _bytes(value: int) -> str:
    if not value:
        return "-"
    for factor, suffix in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if abs(value) >= factor:
            return f"{value / factor:.3g} {suffix}"
    return f"{value} B"
