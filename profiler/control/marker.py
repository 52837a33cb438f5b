"""MXNet's ``Marker``: an instant on the timeline, reaching as far as its scope says.

MXNet's marker scopes map to the Chrome trace's instant scopes as MXNet maps them: ``global`` to
``g`` (a line across every process), ``thread`` to ``t`` (the thread's track), and ``process``,
``task`` and ``marker`` to ``p`` (the process's tracks). A mark is a timeline event: it is kept
while the timeline is recorded (``set_state("run")`` records it, as does
``profiler.start_recording()``) and the profiler runs, and left out otherwise.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from profiler.timing import timers
from profiler.recording.events import recording_timeline

if TYPE_CHECKING:
    from profiler.control.domain import Domain

__all__ = ["MARKER_SCOPES", "Marker"]

MARKER_SCOPES = {"global": "g", "process": "p", "thread": "t", "task": "p", "marker": "p"}
"""MXNet's marker scope -> the trace format's instant scope."""


class Marker:
    """A marker of ``domain`` named ``name``."""

    def __init__(self, domain: Domain, name: str) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Marker: the name must be a non-empty string, got {name!r}")
        self.domain = domain
        self.name = name

    def mark(self, scope: str = "process") -> None:
        """Mark this moment on the timeline, reaching ``scope`` (one of :data:`MARKER_SCOPES`)."""
        instant_scope = MARKER_SCOPES.get(scope) if isinstance(scope, str) else None
        if instant_scope is None:
            raise ValueError(
                f"Marker.mark: scope must be one of {', '.join(MARKER_SCOPES)}, got {scope!r}"
            )
        timeline = recording_timeline()
        if timeline is not None and timers.is_enabled():
            details = (("cat", self.domain.name), ("scope", instant_scope))
            timeline.add_instant(self.name, timers.now(), details)

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Marker({self.domain!r}, {self.name!r})"
