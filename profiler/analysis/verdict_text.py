"""Verdicts as terminal text: the opening section of ``rlprof analyze`` and of ``rlprof demo``.

Both print this one rendering of :class:`profiler.analysis.verdicts.RunVerdicts`, wrapped to the
100-column tables of the rest of the report, so a verdict reads the same wherever it appears.
"""

from __future__ import annotations

import json
from typing import Any

from profiler.analysis.text_format import TABLE_WIDTH, format_bytes, format_percent, format_seconds, wrap_text
from profiler.analysis.verdicts import RunVerdicts, Verdict

__all__ = ["format_evidence_value", "verdicts_as_text"]

_INDENT = "    "


def verdicts_as_text(run_verdicts: RunVerdicts, *, width: int = TABLE_WIDTH) -> str:
    """Numbered verdicts, costliest first, each with its cost, evidence and suggestion."""
    lines = [f"Verdicts (what limits this run, costliest first; wall time "
             f"{format_seconds(run_verdicts.wall_seconds)}):"]
    if not run_verdicts.verdicts:
        lines.append(f"{_INDENT}nothing stands out: no part of the run crosses a verdict's threshold")
    for number, verdict in enumerate(run_verdicts.verdicts, start=1):
        lines.extend(_verdict_lines(number, verdict, width))
    if run_verdicts.cannot_tell:
        lines.append("Cannot tell from this file:")
        for unknown in run_verdicts.cannot_tell:
            lines.extend(wrap_text(unknown, width, initial_indent=f"{_INDENT}- ",
                                       subsequent_indent=_INDENT + "  "))
    return "\n".join(lines)


def _verdict_lines(number: int, verdict: Verdict, width: int) -> list[str]:
    head = f"{number:>2}. [{verdict.kind}] "
    lines = wrap_text(verdict.title, width, initial_indent=head,
                          subsequent_indent=" " * len(head))
    if verdict.cost_seconds > 0:
        lines.append(f"{_INDENT}costs {format_seconds(verdict.cost_seconds)} "
                     f"({format_percent(verdict.share)} of the wall time)")
    evidence = "; ".join(f"{key}: {format_evidence_value(key, value)}"
                         for key, value in verdict.evidence.items())
    lines.extend(wrap_text(f"evidence: {evidence}", width, initial_indent=_INDENT,
                               subsequent_indent=_INDENT + "  "))
    lines.extend(wrap_text(f"=> {verdict.suggestion}", width, initial_indent=_INDENT,
                               subsequent_indent=_INDENT + "   "))
    return lines


def format_evidence_value(key: str, value: Any) -> str:
    """One evidence figure as people read it: seconds with a unit, shares as percentages."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float) and "seconds" in key:
        return format_seconds(value)
    if isinstance(value, (int, float)) and "bytes" in key:
        return format_bytes(value)
    if isinstance(value, list) and value and "bytes" in key and all(isinstance(item, int) for item in value):
        return "[" + ", ".join(format_bytes(item) for item in value) + "]"
    if isinstance(value, float) and ("share" in key or key.endswith("_from") or key.startswith("above")):
        return format_percent(value)
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict) and set(value) == {"bounds_seconds", "counts"}:
        return _histogram_text(value["bounds_seconds"], value["counts"])
    if isinstance(value, dict) and all(isinstance(item, float) for item in value.values()):
        return "{" + ", ".join(f"{name}: {format_evidence_value(key, item)}"
                               for name, item in value.items()) + "}"
    if isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        return "[" + "; ".join(", ".join(f"{name} {format_evidence_value(name, item)}"
                                         for name, item in entry.items()) for entry in value) + "]"
    return value if isinstance(value, str) else json.dumps(value)


def _histogram_text(bounds: list[float], counts: list[int]) -> str:
    """The non-empty buckets of a bounded histogram: ``<100.0 us 12, <300.0 us 3, >=3.00 s 1``."""
    labels = [f"<{format_seconds(bound)}" for bound in bounds] + [f">={format_seconds(bounds[-1])}"
                                                                  if bounds else "all"]
    shown = [f"{label} {count}" for label, count in zip(labels, counts) if count]
    return "{" + ", ".join(shown) + "}" if shown else "{}"
