"""Merging per machine: one node's worker payloads pre-merged into one payload per interval.

A driver merges every payload its workers send; at thousands of workers flushing often that is
most of a driver core (see ``docs/ray.md``). Merged per machine first, the driver merges one
payload per node per interval whatever the number of workers: a :class:`NodeMerger` on each node
takes that node's workers' payloads (:meth:`NodeMerger.add`), merges them into a tree of its own
— and into each worker's own tree, which stays available on the node
(:meth:`NodeMerger.worker_entries`) — and hands the blocks merged since its last call over as one
ordinary payload (:meth:`NodeMerger.take`), which any :class:`~profiler.multiprocess.merge.TimerMerger`
merges as it merges a worker's.

The node payload is what the worker payloads add up to: for every block path, the calls and time
of all the node's workers, and the shortest and longest single call among them. Gauges are
merged as the driver merges them (latest, min, max, summed counts). Timeline events and memory
samples are not carried: they belong to each worker's own track, which a node payload would
blur into one; record a timeline with per-worker payloads.

The merger is plain Python and needs no Ray: ``profiler.integrations.ray_nodes`` runs one in an
actor on each node, and ``benchmarks/node_merge_cost.py`` measures the driver's cost with and
without it on payloads built in-process.
"""

from __future__ import annotations

import threading
from typing import Any

from profiler.multiprocess.merge import TimerMerger
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing.timers import TimerStack

__all__ = ["NodeMerger"]


class NodeMerger:
    """The payloads of one node's workers, merged into one payload per :meth:`take`.

    ``name`` names the node (its address, say) in its tree's stack. Thread-safe: workers' payloads
    may arrive on one thread while another takes.
    """

    def __init__(self, name: str = "node") -> None:
        self.name = name
        self.stack = TimerStack(f"{name} merger")
        self.merger = TimerMerger(self.stack, name=name)
        self.payloads_merged = 0  # worker payloads added, over the merger's life
        self.payloads_taken = 0  # node payloads handed over
        self._added_since_take = 0
        self._lock = threading.Lock()

    def add(self, worker_id: int, payload: Any) -> None:
        """Merge one worker payload, in its stream's order (as a driver merges it).

        Raises :class:`~profiler.multiprocess.merge.PayloadError` for a payload it cannot merge,
        merging nothing of it.
        """
        with self._lock:
            self.merger.merge_payload(worker_id, payload, self.stack.root)
            self.payloads_merged += 1
            self._added_since_take += 1

    def take(self) -> tuple[Any, ...] | None:
        """The blocks merged since the previous take, as one payload; None when no worker payload
        arrived since (nothing to send). Its block names are declared once, in the first payload
        that uses them: the node payloads must reach their merger in order, as a worker's do."""
        with self._lock:
            if not self._added_since_take:
                return None
            self._added_since_take = 0
            self.payloads_taken += 1
            return snapshot_and_flush(self.stack)

    def worker_entries(self) -> list[dict[str, Any]]:
        """Each worker's own tree, as the ``workers`` section of a dump lists them."""
        with self._lock:
            return self.merger.worker_entries()
