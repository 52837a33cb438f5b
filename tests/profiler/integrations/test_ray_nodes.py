"""Specification of per-node merging on a real multi-node Ray cluster: an aggregator actor on each
node merges its workers' payloads, and the driver merges one payload per node per interval."""

from __future__ import annotations

import pytest
from node_payload_work import SteppingWorker

from profiler import get_timer_tree, hierarchical_timer
from profiler.analysis.block_stats import walk_nodes
from profiler.integrations.ray_nodes import NodeAggregators

pytestmark = pytest.mark.usefixtures("multi_node_cluster")

WORKERS_PER_NODE = 2
INTERVALS = 3
STEPS = 4


def count_of(tree: dict, block: str) -> int:
    return sum(node["count"] for _, node in walk_nodes(tree) if node["name"] == block)


def test_the_driver_merges_one_payload_per_node_per_interval_and_each_workers_tree_stays_on_its_node(
    multi_node_cluster,
):
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    aggregators = NodeAggregators()
    nodes = [node_id for node_id, _ in aggregators._nodes]
    assert set(nodes) == {multi_node_cluster.driver_node, *multi_node_cluster.env_node_ids}
    worker_class = ray.remote(SteppingWorker)
    workers = [
        worker_class.options(
            num_cpus=0.1, scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False)
        ).remote(index, aggregators.handles)
        for index, node in enumerate(nodes * WORKERS_PER_NODE)
    ]
    try:
        collected = []
        for _ in range(INTERVALS):
            ray.get([worker.work.remote(STEPS) for worker in workers], timeout=60)
            with hierarchical_timer("collect"):
                collected.append(aggregators.collect())
        per_worker = aggregators.worker_entries()
        counts = aggregators.counts()
    finally:
        for worker in workers:
            ray.kill(worker)
        aggregators.close()
    assert collected == [3] * INTERVALS  # 6 workers, 3 nodes: 3 payloads an interval
    tree = get_timer_tree()
    assert count_of(tree["children"][0], "env.step") == len(workers) * INTERVALS * STEPS
    node_entries = [entry for entry in tree["workers"] if entry["manager"] == "ray nodes"]
    assert sorted(entry["ray"]["node_id"] for entry in node_entries) == sorted(nodes)
    assert all(count_of(entry, "env.step") == WORKERS_PER_NODE * INTERVALS * STEPS for entry in node_entries)
    assert {entry["host"] for entry in node_entries} == set(per_worker)
    for entries in per_worker.values():
        assert len(entries) == WORKERS_PER_NODE
        assert all(count_of(entry, "env.step") == INTERVALS * STEPS for entry in entries)
    assert set(counts.values()) == {(WORKERS_PER_NODE * INTERVALS, INTERVALS, 0)}


def test_a_lost_nodes_aggregator_is_named_in_one_warning_and_the_other_nodes_are_still_collected(
    multi_node_cluster,
):
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    doomed = multi_node_cluster.add_node("127.0.0.8")
    aggregators = NodeAggregators()
    survivor = multi_node_cluster.env_node_ids[0]
    worker = ray.remote(SteppingWorker).options(
        num_cpus=0.1, scheduling_strategy=NodeAffinitySchedulingStrategy(survivor, soft=False)
    ).remote(0, aggregators.handles)
    try:
        ray.get(worker.work.remote(STEPS), timeout=60)
        multi_node_cluster.remove_node(doomed)
        with pytest.warns(RuntimeWarning, match=r"the aggregator of Ray node 127\.0\.0\.8 is gone .* are lost"):
            assert aggregators.collect() == 1  # the survivor's payload
        assert doomed.node_id not in aggregators.handles
        assert aggregators.collect() == 0  # nothing new, and no second warning
    finally:
        ray.kill(worker)
        aggregators.close()
