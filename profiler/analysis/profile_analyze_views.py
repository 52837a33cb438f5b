"""MegEngine's ``profile_analyze`` layout of a run's operators: ``rlprof analyze`` with
``--print-only``, ``--show-host``, ``--copy-time``, ``--dump-only-opr`` or ``--confluence``.

Without these options ``rlprof analyze`` prints its own sections (the verdicts, the blocks, ...,
the operators ranked by host self time with device self time beside it). With any of them it
prints what ``profile_analyze`` prints, from the operator section of the run
(:mod:`profiler.analysis.operator_report`), and nothing else:

* a **summary**: the total device self time of the operators (or why the run has none), their
  total host self time and, with ``--copy-time``, the time spent copying tensors;
* the **device** table: the operators ranked by device self time, where the run measured it;
* the **host** table: the operators ranked by host self time, with ``--show-host`` (MegEngine's
  meaning), or in place of the device table on a run that measured no device time (saying so:
  MegEngine would print an empty table).

``--print-only summary|device|host`` prints that part alone. ``--order-by`` orders both tables
when given. ``--dump-only-opr`` prints each table as plain lines, one operator per line (its name
and the block it ran in), for a ``diff`` of two filtered runs; ``--confluence`` (``--wiki``) prints
the summary and the tables as Markdown pipe tables, which Confluence and wikis paste as tables.

**Copies.** PyTorch copies a tensor (host to device, device to host, a dtype or layout change) in
``aten::copy_``, which ``aten::to``, ``aten::_to_copy`` and ``aten::_copy_from`` call around it;
on a GPU the ``Memcpy`` work is ``aten::copy_``'s device self time. The copy time is the self time
of those operators (device self time where measured, else host), the calls those of
``aten::copy_``. MegEngine's "copy wait time" (``--top-end-key kern``) has no counterpart:
PyTorch's profiler does not time a copy's wait apart from its work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiler.analysis.operator_report import OperatorReport, OperatorRow, operator_report, operators_text
from profiler.analysis.text_format import format_seconds

__all__ = ["COPY_OPERATORS", "PRINT_ONLY_PARTS", "ProfileAnalyzeView", "profile_analyze_text"]

PRINT_ONLY_PARTS = ("summary", "device", "host")

COPY_OPERATORS = frozenset({"aten::copy_", "aten::to", "aten::_to_copy", "aten::_copy_from",
                            "aten::_copy_from_and_resize"})
"""The operators whose self time is copying tensors (see the module docstring)."""

_COPY_CALLS_OPERATOR = "aten::copy_"

NO_OPERATORS = ("this run recorded no operators: profile with Profiler(record_operators=True) or "
                "set_config(profile_all=True), or read an Nsight capture")


@dataclass(frozen=True)
class ProfileAnalyzeView:
    """The ``profile_analyze`` options asked for."""

    print_only: str | None = None
    show_host: bool = False
    copy_time: bool = False
    dump_only_operators: bool = False
    confluence: bool = False

    @property
    def asked(self) -> bool:
        """Whether any option asks for ``profile_analyze``'s layout."""
        return bool(self.print_only or self.show_host or self.copy_time or self.dump_only_operators
                    or self.confluence)


def profile_analyze_text(tree: dict[str, Any], view: ProfileAnalyzeView, *, width: int,
                         **report_options: Any) -> str:
    """The run's operators in ``profile_analyze``'s layout. ``report_options`` are
    :func:`~profiler.analysis.operator_report.operator_report`'s (``order_by=None`` ranks each
    table by its own time). Raises ``ValueError`` for a run that recorded no operators."""
    if view.print_only is not None and view.print_only not in PRINT_ONLY_PARTS:
        raise ValueError(f"--print-only takes {', '.join(PRINT_ONLY_PARTS)}, not {view.print_only!r}")
    order_by = report_options.pop("order_by", None)
    top = report_options.pop("top", None)
    everything = operator_report(tree, order_by=order_by or "self", **report_options)
    if everything is None:
        raise ValueError(NO_OPERATORS)
    parts = []
    if view.print_only in (None, "summary"):
        parts.append(_summary(tree, everything, view))
    has_device = everything.has_device_time
    if view.print_only in (None, "device"):
        if has_device:
            parts.append(_table(tree, view, "device", order_by or "device", top, report_options, width))
        else:
            parts.append(f"device: {everything.not_recorded}")
    if view.print_only == "host" or (view.print_only is None and (view.show_host or not has_device)):
        parts.append(_table(tree, view, "host", order_by or "self", top, report_options, width))
    return "\n\n".join(parts)


# --- the summary -----------------------------------------------------------------------------------


def _summary(tree: dict[str, Any], report: OperatorReport, view: ProfileAnalyzeView) -> str:
    """Total device and host self time of all the operators (as MegEngine's summary, whatever
    the filters), and the copies among those that match when asked."""
    device = sum(entry.get("device_self", 0.0) for entry in tree["operators"]["operators"])
    entries = [
        ("total device time", format_seconds(device) if report.has_device_time else "not recorded"),
        ("total host time", format_seconds(report.self_time)),
    ]
    if view.copy_time:
        entries.extend(_copy_entries(report.rows, report.has_device_time))
    if view.confluence:
        return _pipe_table(["name", "value"], entries)
    name_width = max(len(name) for name, _ in entries)
    return "\n".join(f"{name:<{name_width}}  {value}" for name, value in entries)


def _copy_entries(rows: list[OperatorRow], has_device: bool) -> list[tuple[str, str]]:
    copies = [row for row in rows if row.name in COPY_OPERATORS]
    seconds = sum((row.device_seconds or 0.0) if has_device else row.self_time for row in copies)
    calls = sum(row.count for row in copies if row.name == _COPY_CALLS_OPERATOR)
    kind = "device" if has_device else "host"
    mean = format_seconds(seconds / calls) if calls else "-"
    names = ", ".join(sorted({row.name for row in copies})) or "none ran"
    return [
        ("copy time", f"tot={format_seconds(seconds)} avg={mean} over {calls} copies "
                      f"({kind} self time of {names})"),
        ("copy wait time", "not recorded (PyTorch's profiler does not time a copy's wait apart)"),
    ]


# --- the tables ------------------------------------------------------------------------------------


def _table(tree: dict[str, Any], view: ProfileAnalyzeView, kind: str, order_by: str, top: int | None,
           report_options: dict[str, Any], width: int) -> str:
    report = operator_report(tree, order_by=order_by, top=top, **report_options)
    assert report is not None  # the caller checked the run has operators
    if view.dump_only_operators:
        return "\n".join(_operator_label(row, report.by_type) for row in report.rows)
    if view.confluence:
        return _confluence_operators(report)
    return f"{kind}:\n{operators_text(report, width)}"


def _operator_label(row: OperatorRow, by_type: bool) -> str:
    """An operator as one plain line: its name, and the block it ran in (MegEngine's name and
    type); a type's row is its name."""
    return row.name if by_type else f"{row.name} {row.block or '(no block)'}"


def _confluence_operators(report: OperatorReport) -> str:
    headers = ["#"]
    if report.has_device_time:
        headers.append("device self time")
    headers += ["self time", "ratio", "cumulative", "total", "count", "computation (FLOPs)", "FLOPS",
                "memory (bytes)", "operator", "block", "in_shapes"]
    if report.has_outputs:
        headers += ["bandwidth (tensor bytes/s)", "out_shapes"]
    rows = []
    cumulative = 0.0
    for index, row in enumerate(report.rows):
        cumulative += row.self_time
        cells = [str(index)]
        if report.has_device_time:
            cells.append("-" if row.device_seconds is None else format_seconds(row.device_seconds))
        ratio = row.self_time / report.self_time if report.self_time > 0 else 0.0
        share = cumulative / report.self_time if report.self_time > 0 else 0.0
        flops_per_second = row.flops_per_second
        cells += [format_seconds(row.self_time), f"{ratio:.1%}", f"{share:.1%}", format_seconds(row.total),
                  str(row.count), str(row.flops), "-" if flops_per_second is None else f"{flops_per_second:.4g}",
                  str(row.cpu_memory_bytes), row.name, "" if report.by_type else row.block, row.common_shapes]
        if report.has_outputs:
            cells += ["-" if row.bandwidth is None else f"{row.bandwidth:.4g}", row.common_output_shapes]
        rows.append(cells)
    return _pipe_table(headers, rows)


def _pipe_table(headers: list[str], rows: list[Any]) -> str:
    """A Markdown pipe table (``| a | b |`` under ``|---|---|``), as MegEngine's ``--confluence``
    writes one; a bar inside a cell is escaped."""
    def line(cells: Any) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"
    return "\n".join([line(headers), "|" + "|".join("---" for _ in headers) + "|", *map(line, rows)])
