"""Merging per Ray node: an aggregator actor on each node, one payload per node per interval.

A driver that merges every worker's payload spends its time in proportion to the workers; past a
few thousand payloads a second that is a real share of a core (``docs/ray.md`` has the figures).
With :class:`NodeAggregators` the workers of each node send their payloads to an aggregator actor
on their own node — through that node's shared-memory object store, no network — which merges
them (:class:`~profiler.multiprocess.node_merge.NodeMerger`), and the driver collects one payload
per node whenever it likes (:meth:`NodeAggregators.collect`, once a second say), merging it into
its own tree: its cost grows with the nodes, not the workers. Each worker's own tree stays on its
node, fetched when asked (:meth:`NodeAggregators.worker_entries`).

    aggregators = NodeAggregators()                      # on the driver, after ray.init
    workers = [Rollout.remote(aggregators.handles) for _ in range(1000)]
    ...                                                  # in a worker, after timing its blocks:
    send_payload(handles, worker_id)                     # its blocks since its last payload
    ...
    with hierarchical_timer("collect"):
        aggregators.collect()                            # one payload per node merged here
    aggregators.close()

The node payloads merge into the driver's tree under the block open when :meth:`collect` runs (or
``anchor``), each node one entry of the dump's ``workers`` section (``manager``: ``"ray nodes"``,
with ``host`` and a ``ray`` section naming the node): the per-node figures. Nodes that join the
cluster later get an aggregator from :meth:`NodeAggregators.add_new_nodes`. An aggregator on a
node that is lost goes with it, and with it the payloads of that node not yet collected.

Ray is imported when an aggregator is made, never by ``import profiler``.
"""

from __future__ import annotations

import warnings
from typing import Any

from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.multiprocess.node_merge import NodeMerger
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing import timers
from profiler.timing.timers import TimerNode, TimerStack

__all__ = ["NodeAggregator", "NodeAggregators", "send_payload"]

COLLECT_TIMEOUT_SECONDS = 30.0
"""How long :meth:`NodeAggregators.collect` waits for the aggregators' payloads."""


class NodeAggregator:
    """The actor on one node: merges its workers' payloads, hands over one per :meth:`take`.

    A bad payload is counted and dropped (timing data never breaks the workers' program).
    """

    def __init__(self, name: str) -> None:
        self.node = NodeMerger(name)
        self.refused_payloads = 0

    def add(self, worker_id: int, payload: Any) -> None:
        try:
            self.node.add(worker_id, payload)
        except PayloadError:
            self.refused_payloads += 1

    def take(self) -> tuple[Any, ...] | None:
        return self.node.take()

    def worker_entries(self) -> list[dict[str, Any]]:
        return self.node.worker_entries()

    def counts(self) -> tuple[int, int, int]:
        """``(worker payloads merged, node payloads handed over, payloads refused)``."""
        return (self.node.payloads_merged, self.node.payloads_taken, self.refused_payloads)


def send_payload(handles: dict[str, Any], worker_id: int, payload: tuple[Any, ...] | None = None) -> Any:
    """In a Ray worker: send its timers since its previous payload (or ``payload``) to the
    aggregator of the node it runs on. ``handles`` is :attr:`NodeAggregators.handles`.

    Returns the reference of the aggregator's call, for a caller that must know it arrived;
    nothing needs to wait for it: calls from one worker reach the aggregator in order, as a
    stream's payloads must. Raises ``KeyError`` on a node that has no aggregator.
    """
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    aggregator = handles[node_id]
    return aggregator.add.remote(worker_id, snapshot_and_flush() if payload is None else payload)


class NodeAggregators:
    """The driver's side: one :class:`NodeAggregator` actor on every live node of the cluster,
    and the merger of their payloads into the driver's timer stack (the calling thread's by
    default)."""

    def __init__(self, timer_stack: TimerStack | None = None, *, name: str = "ray nodes") -> None:
        self.merger = TimerMerger(timers._resolve(timer_stack), name=name)
        self.merger.add_worker_section("host", self._host_section)
        self.merger.add_worker_section("ray", self._ray_section)
        self.handles: dict[str, Any] = {}  # node id -> its aggregator's actor handle
        self._nodes: list[tuple[str, str]] = []  # (node id, address), by the driver's node index
        self.payloads_collected = 0
        self.add_new_nodes()

    def add_new_nodes(self) -> int:
        """Start an aggregator on every live node that has none yet; returns how many started."""
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor_class = ray.remote(NodeAggregator)
        started = 0
        for node in ray.nodes():
            node_id = node.get("NodeID")
            if not node.get("Alive") or node_id in self.handles:
                continue
            address = str(node.get("NodeManagerAddress") or node_id[:12])
            strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
            # No CPU reserved: it merges a few payloads a second, and must not take a worker's core.
            self.handles[node_id] = actor_class.options(num_cpus=0, scheduling_strategy=strategy).remote(address)
            self._nodes.append((node_id, address))
            self.merger.expect_worker(len(self._nodes) - 1)
            started += 1
        return started

    def collect(self, anchor: TimerNode | None = None) -> int:
        """Merge each node's payload since the previous collect under ``anchor`` (default: the
        block open now); returns how many node payloads were merged. A node found lost is
        skipped, with a warning naming it."""
        import ray
        from ray.exceptions import RayError

        asked = [(index, node_id, self.handles[node_id].take.remote()) for index, (node_id, _) in
                 enumerate(self._nodes) if node_id in self.handles]
        merged = 0
        for index, node_id, ref in asked:
            try:
                payload = ray.get(ref, timeout=COLLECT_TIMEOUT_SECONDS)
            except RayError as error:
                del self.handles[node_id]
                warnings.warn(f"rlprof: the aggregator of Ray node {self._nodes[index][1]} is gone "
                              f"({type(error).__name__}): that node's payloads not yet collected are lost",
                              RuntimeWarning, stacklevel=2)
                continue
            if payload is not None:
                self.merger.merge_payload(index, payload, anchor)
                merged += 1
        self.payloads_collected += merged
        return merged

    def worker_entries(self) -> dict[str, list[dict[str, Any]]]:
        """Each live node's workers' own trees, by node address."""
        import ray

        addresses = dict(self._nodes)
        refs = {addresses[node_id]: handle.worker_entries.remote() for node_id, handle in self.handles.items()}
        return {address: ray.get(ref, timeout=COLLECT_TIMEOUT_SECONDS) for address, ref in refs.items()}

    def counts(self) -> dict[str, tuple[int, int, int]]:
        """Each live node's ``(worker payloads merged, node payloads handed over, refused)``."""
        import ray

        addresses = dict(self._nodes)
        return {addresses[node_id]: ray.get(handle.counts.remote(), timeout=COLLECT_TIMEOUT_SECONDS)
                for node_id, handle in self.handles.items()}

    def close(self) -> None:
        """End the aggregators (collect first: what they hold goes with them)."""
        import ray

        for handle in self.handles.values():
            ray.kill(handle, no_restart=True)
        self.handles.clear()
        self.merger.retire()

    def _host_section(self, entry: dict[str, Any]) -> str | None:
        index = entry["worker_id"]
        return self._nodes[index][1] if 0 <= index < len(self._nodes) else None

    def _ray_section(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        index = entry["worker_id"]
        if not 0 <= index < len(self._nodes):
            return None
        node_id, address = self._nodes[index]
        return {"kind": "node", "node_id": node_id, "node_address": address}
