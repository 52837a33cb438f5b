"""What rlprof's own counters and gauges mean, and their figures in their own units.

A report that prints ``env_manager.wait_as_last: max 0.007081, last 2.2904e-05`` tells a user
nothing; ``7.08 ms`` under a sentence saying what was counted does. Counters rlprof records are
explained here by name; a user's own counters are formatted by the unit their name ends with
(``_seconds``, ``_mb``, ``_bytes``, ``_percent``), and otherwise as plain numbers of 4 significant
digits.
"""

from __future__ import annotations

import math
import re

from profiler.analysis.text_format import format_bytes, format_seconds

__all__ = ["counter_explanation", "format_counter"]

_EXPLANATIONS = {
    "env_manager.wait_as_last": (
        "seconds", "how long a vector step waited for its last worker after every other worker had "
        "replied (sampled on the steps where that wait was recorded)"),
    "env_manager.restarts": ("count", "workers restarted after a failure, so far"),
}
_PATTERNS = (
    (re.compile(r"^resources\.(?P<process>[^.]+)\.cpu_percent$"), "percent",
     "CPU use of {process} between two samples, in percent of one core"),
    (re.compile(r"^resources\.(?P<process>[^.]+)\.rss_mb$"), "megabytes",
     "resident memory of {process}"),
)
_SUFFIX_UNITS = (("_seconds", "seconds"), ("_mb", "megabytes"), ("_bytes", "bytes"),
                 ("_percent", "percent"))


def _unit_and_explanation(name: str) -> tuple[str | None, str | None]:
    if name in _EXPLANATIONS:
        return _EXPLANATIONS[name]
    for pattern, unit, text in _PATTERNS:
        match = pattern.match(name)
        if match:
            return unit, text.format(process=match["process"].replace("_", " "))
    for suffix, unit in _SUFFIX_UNITS:
        if name.endswith(suffix):
            return unit, None
    return None, None


def counter_explanation(name: str) -> str | None:
    """What the counter or gauge ``name`` counts, when it is one of rlprof's own."""
    return _unit_and_explanation(name)[1]


def format_counter(name: str, value: float) -> str:
    """``value`` of counter ``name`` in its unit: 7.08 ms, 512.00 MiB, 43.1 %, or 4 digits."""
    if not math.isfinite(value):
        return str(value)
    unit = _unit_and_explanation(name)[0]
    if unit == "seconds":
        return format_seconds(value)
    if unit == "megabytes":
        return format_bytes(value * 1024 * 1024)
    if unit == "bytes":
        return format_bytes(value)
    if unit == "percent":
        return f"{value:.1f} %"
    if unit == "count" or float(value).is_integer():
        return f"{value:,.0f}"
    return f"{value:.4g}"
