"""A Ray worker for the tests of profiler.integrations.ray_nodes (Ray's workers import this module
by name: the multi-node cluster puts this folder on their path)."""

from __future__ import annotations

from typing import Any

from profiler import hierarchical_timer
from profiler.integrations.ray_nodes import send_payload


class SteppingWorker:
    """Times ``env.step`` blocks and sends its payloads to its node's aggregator."""

    def __init__(self, worker_id: int, handles: dict[str, Any]) -> None:
        self.worker_id = worker_id
        self.handles = handles

    def work(self, steps: int) -> None:
        """``steps`` env steps, then its payload, delivered before this call returns."""
        import ray

        for _ in range(steps):
            with hierarchical_timer("env.step"):
                pass
        ray.get(send_payload(self.handles, self.worker_id))
