"""MXNet's ``Domain``: a name that groups tasks, frames, counters and markers.

The domain is the category (``cat``) of their events in the Chrome trace, labels the blocks its
tasks and frames time (``"domain"`` in the dump), and ``rlprof analyze --domain NAME`` keeps only
those blocks.
"""

from __future__ import annotations

from typing import Any

from profiler.control.counter import Counter
from profiler.control.durations import Frame, Task
from profiler.control.marker import Marker

__all__ = ["Domain"]


class Domain:
    """A profiling domain named ``name``, as MXNet's."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Domain: the name must be a non-empty string, got {name!r}")
        self.name = name

    def new_task(self, name: str) -> Task:
        return Task(self, name)

    def new_frame(self, name: str) -> Frame:
        return Frame(self, name)

    def new_counter(self, name: str, value: Any = None) -> Counter:
        return Counter(self, name, value)

    def new_marker(self, name: str) -> Marker:
        return Marker(self, name)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Domain({self.name!r})"
