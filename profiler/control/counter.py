"""MXNet's ``Counter``: a value that changes over time, as a gauge and a timeline counter track.

Every change is a reading of the gauge ``{domain}.{name}`` (latest value, min, max, how many
changes; in the dump's ``gauges``) and, while the timeline is recorded, a sample on its counter
track, in the domain's trace category. While the profiler is paused or stopped the counter keeps
counting but records nothing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from profiler.timing import timers

if TYPE_CHECKING:
    from profiler.control.domain import Domain

__all__ = ["Counter"]


class Counter:
    """A counter of ``domain`` named ``name``, set to ``value`` if given (MXNet's arguments)."""

    def __init__(self, domain: Domain, name: str, value: Any = None) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"Counter: the name must be a non-empty string, got {name!r}")
        self.domain = domain
        self.name = name
        self.gauge_name = f"{domain.name}.{name}"
        self.value: Any = 0
        if value is not None:
            self.set_value(value)

    def set_value(self, value: Any) -> None:
        """Set the counter to ``value`` (any real number; see ``profiler.set_gauge``)."""
        timers.gauge_value(self.gauge_name, value)  # a bad value is refused before it is kept
        self.value = value
        if timers.is_enabled():
            timers._resolve(None).set_gauge(self.gauge_name, value, (("cat", self.domain.name),))

    def increment(self, delta: Any = 1) -> None:
        self.set_value(self.value + delta)

    def decrement(self, delta: Any = 1) -> None:
        self.set_value(self.value - delta)

    def __iadd__(self, delta: Any) -> Counter:
        self.increment(delta)
        return self

    def __isub__(self, delta: Any) -> Counter:
        self.decrement(delta)
        return self

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"Counter({self.domain!r}, {self.name!r}, value={self.value!r})"
