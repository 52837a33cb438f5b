"""The frames of a run: blocks that MXNet-style ``Frame`` objects timed, as a game shows them.

A frame block (``"object_type": "frame"`` in the dump) holds every frame of one ``Frame``:
their count, total, and shortest and longest frame. From these come the mean frame time and the
frame rate, ``count / total``: frames per second of frame time (1 / mean), which is the loop's
rate when frames run back to back, as the frames of a loop do.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.block_stats import PATH_SEPARATOR, walk_nodes
from profiler.analysis.text_format import format_seconds
from profiler.records import Record

__all__ = ["FrameStat", "frame_stats", "frames_as_text"]


class FrameStat(Record):
    """The frames of one frame block."""

    label: str
    domain: str | None
    count: int
    total: float
    min_time: float | None
    max_time: float | None

    @property
    def mean(self) -> float:
        return self.total / self.count if self.count else 0.0

    @property
    def rate(self) -> float | None:
        """Frames per second of frame time; None before any frame took time."""
        return self.count / self.total if self.total > 0 else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "block": self.label,
            "domain": self.domain,
            "frames": self.count,
            "total": self.total,
            "mean": self.mean,
            "min": self.min_time,
            "max": self.max_time,
            "frames_per_second": self.rate,
        }


def frame_stats(tree: dict[str, Any]) -> list[FrameStat]:
    """Every frame block of a normalized tree, in tree order."""
    return [
        FrameStat(
            label=PATH_SEPARATOR.join(path),
            domain=node.get("domain"),
            count=node["count"],
            total=node["total"],
            min_time=node.get("min"),
            max_time=node.get("max"),
        )
        for path, node in walk_nodes(tree)
        if node.get("object_type") == "frame"
    ]


def frames_as_text(frames: list[FrameStat]) -> str:
    """A table of the frames: count, mean, min and max frame time, frame rate."""
    lines = ["Frames", f"{'frames':>10} {'mean':>10} {'min':>10} {'max':>10} {'frames/s':>10}  frame (domain)"]
    for frame in frames:
        rate = f"{frame.rate:.1f}" if frame.rate is not None else "-"
        extremes = [format_seconds(value) if value is not None else "-" for value in (frame.min_time, frame.max_time)]
        domain = f" ({frame.domain})" if frame.domain else ""
        lines.append(f"{frame.count:>10} {format_seconds(frame.mean):>10} {extremes[0]:>10} "
                     f"{extremes[1]:>10} {rate:>10}  {frame.label}{domain}")
    return "\n".join(lines)
