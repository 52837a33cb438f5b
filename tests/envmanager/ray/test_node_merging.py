"""Specification of RayEnvManager's merging per node (``merge_per_node=True``) on a real multi-node
cluster: the workers of a node that runs two or more of them send their payloads to an aggregator
on that node, the driver merges one payload per node; every count exact per worker and per node,
nothing lost, nothing counted twice; a lost node named with its workers, the timers so far kept.

The cluster (``multi_node_cluster``, see tests/profiler/multi_node_cluster.py): the driver's node
and two env nodes (custom resources ``env_node_0`` and ``env_node_1``), one CPU each.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from envmanager_testenvs import CountingEnv

from envmanager import NodeLostError, RayEnvManager
from profiler.analysis.block_stats import walk_nodes

pytestmark = pytest.mark.usefixtures("multi_node_cluster")

QUARTER_CPU = 0.25
STEPS = 6


def counting_envs(count: int) -> list:
    return [lambda: CountingEnv(episode_length=1000)] * count


def merged_count(entry: dict, block: str) -> int:
    return sum(node["count"] for _, node in walk_nodes(entry) if node["name"] == block)


def bundle_on(resource: str) -> dict:
    return {"CPU": QUARTER_CPU, resource: 0.01}


def driver_node_resource() -> str:
    """Ray's own resource of the driver's node (``node:<address>``), to place a worker there."""
    import ray

    driver = ray.get_runtime_context().get_node_id()
    [node] = [node for node in ray.nodes() if node["NodeID"] == driver]
    return next(name for name in node["Resources"] if name.startswith("node:") and name != "node:__internal_head__")


def test_two_workers_per_env_node_merge_there_one_alone_ships_to_the_driver_every_count_exact(tmp_path):
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    # Workers 0 and 1 on env node 0, 2 and 3 on env node 1, worker 4 alone on the driver's node.
    bundles = [bundle_on("env_node_0")] * 2 + [bundle_on("env_node_1")] * 2 + [bundle_on(driver_node_resource())]
    group = placement_group(bundles, strategy="PACK")
    try:
        ray.get(group.ready(), timeout=60)
        with RayEnvManager(counting_envs(5), num_cpus=QUARTER_CPU, placement_group=group, flush_every=1,
                           merge_per_node=True, summaries_dir=tmp_path, run_id="nodes") as envs:
            for _ in range(2):  # two resets: the resets' time apart from the steps'
                envs.reset(seed=0)
                for _ in range(STEPS):
                    envs.step(np.zeros(5, dtype=np.int64))
            envs.dump_timers(tmp_path, "so_far")  # a FLUSH: each worker waits until its payloads are merged
            nodes = envs.node_merging.nodes
            counts = envs.node_merging.counts()
    finally:
        remove_placement_group(group)
    tree = json.loads((tmp_path / "nodes_timers.json").read_text())
    # The trainer's tree: every worker's steps and resets once, under the manager's blocks.
    step = next(node for node in tree["children"] if node["name"] == "env_manager.step")
    reset = next(node for node in tree["children"] if node["name"] == "env_manager.reset")
    assert merged_count(step, "env.step") == 5 * 2 * STEPS and merged_count(step, "env.reset") == 0
    assert merged_count(reset, "env.reset") == 5 * 2 and merged_count(reset, "env.step") == 0
    assert merged_count(tree, "env.step") == 5 * 2 * STEPS  # nowhere else
    # Each worker's own tree, whether it was merged on its node or by the driver.
    workers = {entry["worker_id"]: entry for entry in tree["workers"] if entry["manager"] == "nodes"}
    assert sorted(workers) == [0, 1, 2, 3, 4]
    for entry in workers.values():
        assert (merged_count(entry, "env.step"), merged_count(entry, "env.reset")) == (2 * STEPS, 2)
        assert entry["unreported_steps"] == 0
    # Only the env nodes, with two workers each, have an aggregator; each node one entry.
    assert sorted(sorted(node.workers) for node in nodes.values()) == [[0, 1], [2, 3]]
    node_entries = [entry for entry in tree["workers"] if entry["manager"] == "ray nodes"]
    assert sorted(entry["ray"]["workers"] for entry in node_entries) == [[0, 1], [2, 3]]
    assert {entry["host"] for entry in node_entries} == {"127.0.0.2", "127.0.0.3"}
    for entry in node_entries:
        assert (merged_count(entry, "env.step"), merged_count(entry, "env.reset")) == (2 * 2 * STEPS, 2 * 2)
    # Every payload of the two workers of each node was merged there: one a reset and one a step,
    # the flush before the second reset and the dump's (the last ones, at close, after the counts).
    assert sorted(counts.values()) == [(2 * (2 + 2 * STEPS + 2), 0)] * 2


def test_a_lost_node_is_named_with_its_workers_and_the_timers_taken_from_it_are_kept(multi_node_cluster, tmp_path):
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    doomed = multi_node_cluster.add_node("127.0.0.9", resources={"doomed": 1})
    group = placement_group([{"CPU": QUARTER_CPU}] + [bundle_on("doomed")] * 2, strategy="SPREAD")
    ray.get(group.ready(), timeout=60)
    envs = RayEnvManager(counting_envs(3), num_cpus=QUARTER_CPU, placement_group=group, flush_every=1,
                         merge_per_node=True, summaries_dir=tmp_path, run_id="lost")
    envs.reset(seed=0)
    for _ in range(STEPS):
        envs.step(np.zeros(3, dtype=np.int64))
    [node] = envs.node_merging.nodes.values()
    assert (node.node_id, sorted(node.workers)) == (doomed.node_id, [1, 2])
    envs.dump_timers(tmp_path, "before")  # the timers so far, taken from the node and its workers' trees
    assert [merged_count(entry, "env.step") for entry in envs.timer_merger.worker_entries()] == [STEPS] * 3
    multi_node_cluster.remove_node(doomed)
    try:
        with pytest.raises(NodeLostError) as caught:
            for _ in range(50):  # the loss is seen by the step that needs its workers
                envs.step(np.zeros(3, dtype=np.int64))
    finally:
        envs.close()
        remove_placement_group(group)
    error = caught.value
    assert (error.node_address, error.lost_workers) == ("127.0.0.9", [1, 2])
    tree = json.loads((tmp_path / "lost_timers.json").read_text())
    [node_entry] = [entry for entry in tree["workers"] if entry["manager"] == "ray nodes"]
    assert merged_count(node_entry, "env.step") == 2 * STEPS  # every step taken from it before the loss
    workers = {entry["worker_id"]: entry for entry in tree["workers"] if entry["manager"] == "lost"}
    assert [merged_count(workers[index], "env.step") for index in (1, 2)] == [STEPS, STEPS]  # as last fetched
    # The trainer's tree: the lost node's steps once, and the surviving worker's, all of them.
    assert merged_count(tree, "env.step") - merged_count(node_entry, "env.step") == merged_count(workers[0], "env.step")
