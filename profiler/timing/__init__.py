"""The hot path: timer nodes and stacks, ``hierarchical_timer`` and ``@timed``, gauges, the clock."""
