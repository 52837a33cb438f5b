"""Merging a :class:`~envmanager.ray_env_manager.RayEnvManager`'s payloads per Ray node
(``merge_per_node=True``): one aggregator actor on each node that runs several of its workers.

Without it the driver merges every payload of every worker (they ride on the replies it reads
anyway). With it, the workers of a node that runs two or more of them send their payloads to an
aggregator on that node (:class:`EnvNodeAggregator`: through the node's own object store, no
network), which merges them, and the driver merges one payload per node:

* **when**: a second after the first payload of the node since the driver's previous take
  (:data:`COLLECT_INTERVAL_SECONDS`), and before each dump and at close. A worker does not wait
  for a step's or a reset's payload to be merged on its node (a take may find it there or leave it
  to the next), but does on a FLUSH and a CLOSE, which the driver asks before each dump and at
  close: so every payload a worker sent is merged on its node before the driver's last take.
* **where**: a node's payload is two, its workers' reset time and the rest, merged under the
  manager's ``env_manager.reset`` and ``env_manager.step`` blocks as the workers' own payloads
  would have been; into the trainer's tree once (the workers' payloads never reach it), and into
  one entry per node in the dump's ``workers`` section (``manager``: ``"ray nodes"``): the per-node
  figures.
* **each worker's own tree** is kept by its aggregator and fetched when the manager's
  ``workers`` entries are read (a dump, ``timer_merger.worker_entries()``); the last ones fetched
  are kept after the aggregators end.
* A worker alone on its node sends its payloads on its replies, as without this option: an
  aggregator would merge one payload into one, and cost a message and a process.

A payload stream declares its block names once, so a worker sends all its payloads to one
place: the aggregator of its node when its actor starts, if that node has one (a worker
restarted onto another node follows the new node's choice, and keeps its own tree there).

A lost node takes its aggregator with it: the trainer's tree and the node's entry keep what was
taken from it, its workers' own trees what was last fetched (the steps since, at most a second of
them, are lost with their workers, as without this option). An aggregator that ends alone is
named in a warning, and its node's payloads not yet taken are lost.

This module imports Ray (the manager imports it only when ``merge_per_node`` is set); Ray makes
:class:`EnvNodeAggregator` an actor on each node, which imports it by name there. As for the
workers, the driver makes sure an aggregator on its own machine has ended when it closes.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Callable

import psutil

from profiler.multiprocess.clock_offset import monotonic_clock_id
from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing.timers import TimerStack

from envmanager.measurement.profiling import ManagerProfiling
from envmanager.ray.ray_pool import end_processes

__all__ = ["COLLECT_INTERVAL_SECONDS", "NODES_MERGER_NAME", "EnvNodeAggregator", "NodeMerging"]

COLLECT_INTERVAL_SECONDS = 1.0
"""At most this long after a node's first payload since its previous take, the driver takes it."""

NODES_MERGER_NAME = "ray nodes"
"""The ``manager`` of the nodes' entries in the dump's ``workers`` section."""

_TAKE_TIMEOUT_SECONDS = 30.0


class EnvNodeAggregator:
    """The actor on one node: merges its workers' payloads into two node trees (the resets' and the
    rest) and into each worker's own tree; hands the node trees over as two payloads per take.

    One merger merges every payload of a worker (its stream must reach one merger whole), under
    the root of the resets' stack or of the steps' stack. A payload it cannot merge is counted and
    dropped (timing data never breaks the workers).
    """

    def __init__(self, name: str) -> None:
        self.steps = TimerStack(f"{name} steps")
        self.resets = TimerStack(f"{name} resets")
        self.merger = TimerMerger(TimerStack(f"{name} workers"), name=name)
        self.payloads_merged = 0
        self.refused_payloads = 0
        self._added = [False, False]  # since the last take: steps, resets

    def add(self, worker_id: int, payload: Any, reset: bool) -> None:
        try:
            self.merger.merge_payload(worker_id, payload, (self.resets if reset else self.steps).root)
        except PayloadError:
            self.refused_payloads += 1
            return
        self.payloads_merged += 1
        self._added[reset] = True

    def take(self) -> tuple[Any, Any]:
        """``(steps payload, resets payload)`` since the previous take, None where nothing came."""
        self.merger.fold()  # the rows it holds go into the node trees first
        taken = tuple(snapshot_and_flush(stack) if added else None
                      for stack, added in ((self.steps, self._added[0]), (self.resets, self._added[1])))
        self._added = [False, False]
        return taken  # type: ignore[return-value]

    def worker_entries(self) -> list[dict[str, Any]]:
        return self.merger.worker_entries()

    def counts(self) -> tuple[int, int]:
        """``(worker payloads merged, payloads refused)``."""
        return self.payloads_merged, self.refused_payloads

    def process(self) -> tuple[int, str]:
        """Its pid and its machine's clock id: the driver makes sure it ends when it is on its own
        machine, as it does for its workers."""
        return os.getpid(), monotonic_clock_id()


class _Node:
    """The driver's view of one node that has an aggregator."""

    __slots__ = ("index", "node_id", "address", "aggregator", "workers", "shipped", "first_shipped_at", "lost")

    def __init__(self, index: int, node_id: str, address: str, aggregator: Any) -> None:
        self.index = index
        self.node_id = node_id
        self.address = address
        self.aggregator = aggregator
        self.workers: set[int] = set()  # the workers that send their payloads to it
        self.shipped = 0  # payloads merged there since the driver's last take
        self.first_shipped_at = 0.0
        self.lost = False


class NodeMerging:
    """The driver's side: starts the aggregators, tells the workers, takes the node payloads.

    ``node_is_lost(node_id)`` tells a lost node (its aggregator's end is then no news).
    """

    def __init__(self, profiling: ManagerProfiling, node_is_lost: Callable[[str], bool]) -> None:
        assert profiling.merger is not None, "merging per node needs profiling"
        self.profiling = profiling
        self.node_is_lost = node_is_lost
        self.merger = TimerMerger(profiling.timer_stack, name=NODES_MERGER_NAME)
        self.merger.add_worker_section("host", lambda entry: self._section_of(entry, "address"))
        self.merger.add_worker_section("ray", lambda entry: self._section_of(entry, "ray"))
        self.nodes: dict[str, _Node] = {}
        self.node_of_worker: dict[int, _Node] = {}
        self.worker_trees: dict[int, dict[str, Any]] = {}  # the latest fetched, by worker
        self._nodes_by_index: list[_Node] = []
        self._local_processes: list[psutil.Process] = []  # the aggregators on the driver's machine
        profiling.merger.take_worker_trees_from(self._worker_trees)
        profiling.before_dump = self.collect_all
        profiling.node_merger = self.merger

    # -- placing ----------------------------------------------------------------------------

    def start(self, handles: list[Any]) -> None:
        """At the manager's start: an aggregator on each node that runs two or more of these
        workers, and its workers told to send their payloads there."""
        by_node: dict[str, list[Any]] = {}
        for handle in handles:
            by_node.setdefault(handle.node_id, []).append(handle)
        for node_id, on_node in by_node.items():
            if len(on_node) >= 2:
                self._aggregator_of(node_id, on_node[0].node_address)
        self.started(handles)
        self._note_local_processes()

    def _note_local_processes(self) -> None:
        import ray

        this_machine = monotonic_clock_id()
        asked = [node.aggregator.process.remote() for node in self._nodes_by_index]
        for pid, clock_id in ray.get(asked, timeout=_TAKE_TIMEOUT_SECONDS):
            if clock_id == this_machine:
                try:
                    self._local_processes.append(psutil.Process(pid))
                except psutil.Error:
                    pass  # gone already

    def started(self, handles: list[Any]) -> None:
        """These workers' actors (re)started: each sends its payloads to its node's aggregator, if
        its node has one, from its first payload on."""
        import ray

        told = []
        for handle in handles:
            node = self.nodes.get(handle.node_id)
            previous = self.node_of_worker.pop(handle.index, None)
            if previous is not None:
                previous.workers.discard(handle.index)
            if node is None or node.lost or handle.actor is None:
                continue
            node.workers.add(handle.index)
            self.node_of_worker[handle.index] = node
            told.append(handle.actor.merge_on_node.remote(node.aggregator, handle.index))
        ray.get(told)

    def _aggregator_of(self, node_id: str, address: str | None) -> _Node:
        import ray
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        node = self.nodes.get(node_id)
        if node is None:
            # No CPU reserved: it merges a few payloads a second, and must not take a worker's core.
            strategy = NodeAffinitySchedulingStrategy(node_id, soft=False)
            aggregator = ray.remote(EnvNodeAggregator).options(
                num_cpus=0, scheduling_strategy=strategy, max_restarts=0).remote(address or node_id[:12])
            node = self.nodes[node_id] = _Node(len(self._nodes_by_index), node_id, address or node_id[:12], aggregator)
            self._nodes_by_index.append(node)
            self.merger.expect_worker(node.index)
        return node

    # -- collecting -------------------------------------------------------------------------

    def shipped(self, worker_index: int) -> None:
        """A reply said its worker's payload went to its node: take that node's payload if the
        first since the last take went a second ago."""
        node = self.node_of_worker.get(worker_index)
        if node is None or node.lost:
            return
        now = time.monotonic()
        if not node.shipped:
            node.first_shipped_at = now
        node.shipped += 1
        if now - node.first_shipped_at >= COLLECT_INTERVAL_SECONDS:
            self._take([node])

    def collect_all(self) -> None:
        """Take every node's payload now (before a dump, at close)."""
        self._take([node for node in self._nodes_by_index if node.shipped and not node.lost])

    def _take(self, nodes: list[_Node]) -> None:
        import ray
        from ray.exceptions import RayError

        if not self._ray_is_up():
            return
        asked = [(node, node.aggregator.take.remote()) for node in nodes]
        profiling = self.profiling
        for node, ref in asked:
            node.shipped = 0
            try:
                steps, resets = ray.get(ref, timeout=_TAKE_TIMEOUT_SECONDS)
            except RayError as error:
                self._lose(node, error)
                continue
            step_anchor = profiling.step_anchor or profiling.reset_anchor
            for payload, anchor in ((steps, step_anchor), (resets, profiling.reset_anchor)):
                if payload is not None:
                    try:
                        self.merger.merge_payload(node.index, payload, anchor)
                    except PayloadError:
                        pass  # counted in the node's entry (refused_payloads); timing never breaks training

    def _lose(self, node: _Node, error: BaseException) -> None:
        node.lost = True
        if not self.node_is_lost(node.node_id):  # a lost node is told by NodeLostError
            warnings.warn(
                f"rlprof: the aggregator of Ray node {node.address} is gone ({type(error).__name__}): the "
                f"timers its workers ({', '.join(map(str, sorted(node.workers)))}) sent it since the last "
                "take are lost, and so are those they send it from now on",
                RuntimeWarning,
                stacklevel=4,
            )

    def _worker_trees(self) -> dict[int, dict[str, Any]]:
        """The workers' own trees, fetched afresh from every live aggregator (the latest fetched
        where an aggregator is gone)."""
        import ray
        from ray.exceptions import RayError

        if not self._ray_is_up():
            return dict(self.worker_trees)
        live = [node for node in self._nodes_by_index if not node.lost]
        asked = [(node, node.aggregator.worker_entries.remote()) for node in live]
        for node, ref in asked:
            try:
                entries = ray.get(ref, timeout=_TAKE_TIMEOUT_SECONDS)
            except RayError as error:
                self._lose(node, error)
                continue
            for entry in entries:
                if self.node_of_worker.get(entry["worker_id"]) is node:
                    self.worker_trees[entry["worker_id"]] = entry
        return dict(self.worker_trees)

    def _ray_is_up(self) -> bool:
        """Whether Ray still runs here: shut down first, it took the aggregators with it."""
        import ray

        if ray.is_initialized():
            return True
        for node in self._nodes_by_index:
            node.lost = True
        return False

    def close(self) -> None:
        """Take the last payloads and trees, then end the aggregators."""
        import ray

        try:
            self.collect_all()
            self._worker_trees()
        finally:
            for node in self._nodes_by_index:
                if not node.lost:
                    node.lost = True
                    try:
                        ray.kill(node.aggregator, no_restart=True)
                    except Exception:  # noqa: BLE001 - it is gone already
                        pass
            end_processes(self._local_processes)
            self.profiling.merger.take_worker_trees_from(lambda: dict(self.worker_trees))
            self.merger.retire()

    def counts(self) -> dict[str, tuple[int, int]]:
        """Each live aggregator's ``(worker payloads merged, refused)``, by node address."""
        import ray

        return {node.address: ray.get(node.aggregator.counts.remote(), timeout=_TAKE_TIMEOUT_SECONDS)
                for node in self._nodes_by_index if not node.lost}

    def _section_of(self, entry: dict[str, Any], what: str) -> Any:
        index = entry["worker_id"]
        if not 0 <= index < len(self._nodes_by_index):
            return None
        node = self._nodes_by_index[index]
        if what == "address":
            return node.address
        return {"kind": "node", "node_id": node.node_id, "node_address": node.address,
                "workers": sorted(node.workers)}
