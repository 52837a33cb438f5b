"""The hot path: timer nodes and stacks, ``hierarchical_timer`` and ``@timed``, gauges, the clock."""

from profiler.timing.timer_node import accelerated

__all__ = ["accelerated"]
