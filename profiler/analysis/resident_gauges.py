"""What a run that did not sample its memory still says of it: the resident set the trainer reads
of itself and of each env worker once a second, as it reads their CPU time (the
``resources.<process>.rss_mb`` gauges of a run whose envs run in workers: ``rlprof run``'s vector
envs timed in place, a ``SubprocessEnvManager``).

Gauges keep the last reading, the lowest, the highest and their count, not the course: enough to
see which process is large, not whether it grows, which the memory samples of ``rlprof run
--memory`` tell (:mod:`profiler.analysis.memory_report`).
"""

from __future__ import annotations

import math
import re
from typing import Any

from profiler.analysis.text_format import MEBIBYTE, format_bytes
from profiler.records import Record

__all__ = ["ResidentGauge", "resident_gauges", "resident_gauges_text"]

_GAUGE = re.compile(r"^resources\.(?P<process>trainer|worker_(?P<index>\d+))\.rss_mb$")


class ResidentGauge(Record):
    """One process's resident set as the trainer read it, in bytes."""

    process: str
    """``trainer`` or ``worker <index>``, as the memory section names them."""
    last_bytes: float
    lowest_bytes: float
    highest_bytes: float
    readings: int


def resident_gauges(tree: dict[str, Any]) -> list[ResidentGauge]:
    """The resident-set gauges of ``tree``'s root, the trainer first, then the workers by index."""
    found = []
    for name, gauge in (tree.get("gauges") or {}).items():
        match = _GAUGE.match(name)
        if match is None or not all(math.isfinite(gauge[field]) for field in ("value", "min", "max")):
            continue
        index = match.group("index")
        process = "trainer" if index is None else f"worker {int(index)}"
        found.append(((-1 if index is None else int(index)), ResidentGauge(
            process, gauge["value"] * MEBIBYTE, gauge["min"] * MEBIBYTE, gauge["max"] * MEBIBYTE,
            int(gauge["count"]))))
    return [gauge for _, gauge in sorted(found, key=lambda pair: pair[0])]


def resident_gauges_text(gauges: list[ResidentGauge]) -> str:
    """A row per process: its last reading, and the lowest and highest of the run's readings."""
    lines = ["Resident memory as the trainer read it, once a second:",
             f"{'last':>10} {'lowest':>10} {'highest':>10} {'readings':>8}  process"]
    for gauge in gauges:
        lines.append(f"{format_bytes(gauge.last_bytes):>10} {format_bytes(gauge.lowest_bytes):>10} "
                     f"{format_bytes(gauge.highest_bytes):>10} {gauge.readings:>8}  {gauge.process}")
    return "\n".join(lines)
