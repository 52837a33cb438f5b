"""CPU contention judged per machine, for runs whose workers spread over several Ray nodes.

Cores are not pooled across machines: a worker waits for a core of its own node, however idle the
others are. Summed over a cluster, 12 busy workers on 16 cores look fine while one 4-core node runs
10 of them. So where the dump says on which node each worker ran and how many cores that node has
(each worker entry's ``ray`` section: ``node_id``, ``node_cpus``, ``node_address``,
``driver_node``, as :class:`~envmanager.RayEnvManager` writes it), the CPU rule is run once per
node, on that node's workers, cores and busy processes (its workers, and the trainer on the
driver's node), and a crowded node is named, with the nodes that had cores to spare.

It reads dumped data only, and knows nothing of the rule itself: the caller passes it the rule
(:func:`judge_per_node`), so the verdict engine stays the one place the rule lives.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from profiler.analysis.worker_groups import compared_workers
from profiler.records import Record

__all__ = ["NodeLoad", "judge_per_node", "read_node_loads"]


class NodeLoad(Record):
    """One machine of the run: where it is, its cores, the workers it ran, its busy processes."""

    node_id: str
    label: str
    cores: int
    worker_ids: tuple[Any, ...]
    runs_the_trainer: bool

    @property
    def busy_processes(self) -> int:
        """Its workers, and the trainer where it runs beside them."""
        return len(self.worker_ids) + (1 if self.runs_the_trainer else 0)

    @property
    def idle_cores(self) -> int:
        return max(0, self.cores - self.busy_processes)

    def as_dict(self) -> dict[str, Any]:
        return {"node": self.label, "node_id": self.node_id, "cores": self.cores,
                "workers": len(self.worker_ids), "busy_processes": self.busy_processes}


def read_node_loads(tree: dict[str, Any]) -> list[NodeLoad] | None:
    """The nodes the compared workers ran on, in order of first appearance; None unless every
    worker says its node and that node's cores, and there are two nodes or more (one node is
    judged as one machine already)."""
    nodes: dict[str, dict[str, Any]] = {}
    for index, entry in enumerate(compared_workers(tree)):
        section = entry.get("ray")
        if not isinstance(section, dict):
            return None
        node_id, cpus = section.get("node_id"), section.get("node_cpus")
        if not isinstance(node_id, str) or not _is_cores(cpus):
            return None
        node = nodes.setdefault(node_id, {
            "label": str(section.get("node_address") or entry.get("host") or node_id[:12]),
            "cores": max(1, math.floor(cpus)),
            "workers": [],
            "trainer": section.get("driver_node") is True,
        })
        node["workers"].append(entry.get("worker_id", index))
    if len(nodes) < 2:
        return None
    return [NodeLoad(node_id, node["label"], node["cores"], tuple(node["workers"]), node["trainer"])
            for node_id, node in nodes.items()]


def judge_per_node(run: Any, rule: Callable[[Any], list[Any]]) -> list[Any] | None:
    """``rule`` (the CPU rule of :mod:`profiler.analysis.verdicts`) run on each node of ``run``
    apart, its verdicts naming their node; None when the run does not say its nodes.

    ``run`` is the verdict engine's run (``measurements``, ``cannot_tell``, a record): each
    node's run is a copy holding only that node's workers, cores and busy processes.
    """
    nodes = read_node_loads(run.tree)
    if nodes is None:
        return None
    verdicts = []
    for node in nodes:
        measurements = run.measurements.replace(
            workers=[worker for worker in run.measurements.workers if worker.worker_id in node.worker_ids],
            cores_available=node.cores,
            busy_processes=node.busy_processes,
        )
        node_run = run.replace(measurements=measurements, cannot_tell=[])
        for verdict in rule(node_run):
            verdicts.append(_naming_the_node(verdict, node, nodes))
        run.cannot_tell.extend(line for line in node_run.cannot_tell if line not in run.cannot_tell)
    return verdicts


def _naming_the_node(verdict: Any, node: NodeLoad, nodes: list[NodeLoad]) -> Any:
    idle = [other for other in nodes if other is not node and other.idle_cores > 0]
    spare = (f"; {_listed(other.label + f' ({other.idle_cores} idle)' for other in idle)} had cores to spare"
             if idle else "")
    cores = f"{node.cores} core" + ("s" if node.cores > 1 else "")
    title = f"on node {node.label} ({len(node.worker_ids)} workers, {cores}){spare}: {verdict.title}"
    evidence = {**verdict.evidence, "node": node.label, "node_id": node.node_id,
                "nodes": [other.as_dict() for other in nodes]}
    suggestion = verdict.suggestion
    if idle:
        suggestion = (f"Spread the workers by the nodes' cores (a placement group with one bundle per "
                      f"core, or scheduling_strategy=\"SPREAD\"): {node.label} is crowded while "
                      f"{_listed(other.label for other in idle)} {'has' if len(idle) == 1 else 'have'} "
                      f"idle cores. " + suggestion)
    return verdict.replace(title=title, evidence=evidence, suggestion=suggestion)


def _listed(labels: Any) -> str:
    labels = list(labels)
    return labels[0] if len(labels) == 1 else ", ".join(labels[:-1]) + " and " + labels[-1]


def _is_cores(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and 1 <= value < math.inf
