"""Specification of RayEnvManager across several Ray nodes: placement, where each worker ran,
clocks, one timeline, losing a whole node while stepping, and the CPU verdict per node.

The cluster (``multi_node_cluster``, see tests/profiler/multi_node_cluster.py) is three real raylets on this machine: the
driver's node and two env nodes at their own addresses, one CPU each. Each test's workers ask for
a quarter of a CPU, so any test's actors fit wherever they are sent.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
from collections.abc import Iterator

import numpy as np
import psutil
import pytest
from envmanager_testenvs import CountingEnv, CpuBurningEnv
from verdict_runs import run_vector_steps

from envmanager import NodeLostError, RayEnvManager, WorkerDiedError
from profiler.analysis.block_stats import walk_nodes
from profiler.analysis.verdicts import CPU_OVERSUBSCRIPTION, judge_run
from profiler.recording import events

pytestmark = pytest.mark.usefixtures("multi_node_cluster")

QUARTER_CPU = 0.25
STEPS = 12


def counting_envs(count: int) -> list:
    return [lambda: CountingEnv(episode_length=1000)] * count


def dumped(path) -> dict:
    with open(path) as file:
        return json.load(file)


def merged_count(entry: dict, block: str) -> int:
    return sum(node["count"] for _, node in walk_nodes(entry) if node["name"] == block)


def step_all(envs: RayEnvManager, steps: int = STEPS) -> None:
    envs.reset(seed=0)
    for _ in range(steps):
        envs.step(np.zeros(envs.num_envs, dtype=np.int64))


@contextlib.contextmanager
def one_worker_per_node(**options) -> Iterator[RayEnvManager]:
    """Three workers in a STRICT_SPREAD placement group: one on each node, the driver's included."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group([{"CPU": QUARTER_CPU}] * 3, strategy="STRICT_SPREAD")
    try:
        ray.get(group.ready(), timeout=60)
        with RayEnvManager(counting_envs(3), num_cpus=QUARTER_CPU, placement_group=group, **options) as envs:
            yield envs
    finally:
        remove_placement_group(group)


# --- where each worker runs, its clock, one timeline: one run, read by several tests ---------------


@pytest.fixture(scope="module")
def spread_run(tmp_path_factory) -> dict:
    """Three workers, one on each node, stepped with a flush every step and the timeline recorded:
    the nodes of the placement group's bundles, the workers' entries and a fresh clock estimate of
    each while they run, and the dump."""
    import ray

    folder = tmp_path_factory.mktemp("spread")
    events.clear_recording()
    events.start_recording()
    try:
        with one_worker_per_node(flush_every=1, summaries_dir=folder, run_id="spread") as envs:
            group_nodes = ray.util.placement_group_table(envs.placement_group)["bundles_to_node_id"]
            step_all(envs)
            entries = envs.timer_merger.worker_entries()
            estimates = [envs.estimate_clock(index) for index in range(3)]
    finally:
        events.stop_recording()
        events.clear_recording()
    return {"group_nodes": group_nodes, "entries": entries, "estimates": estimates,
            "tree": dumped(folder / "spread_timers.json")}


def test_workers_spread_over_the_nodes_each_record_their_node_its_address_and_its_cores(
    multi_node_cluster, spread_run
):
    tree, group_nodes = spread_run["tree"], spread_run["group_nodes"]
    workers = {entry["worker_id"]: entry["ray"] for entry in tree["workers"]}
    assert [workers[index]["node_id"] for index in range(3)] == [group_nodes[index] for index in range(3)]
    assert {section["node_id"] for section in workers.values()} == {
        multi_node_cluster.driver_node, *multi_node_cluster.env_node_ids
    }
    addresses = {section["node_id"]: section["node_address"] for section in workers.values()}
    assert {addresses[node] for node in multi_node_cluster.env_node_ids} == {"127.0.0.2", "127.0.0.3"}
    assert {section["node_cpus"] for section in workers.values()} == {1.0}
    assert [section["driver_node"] for section in workers.values()].count(True) == 1
    assert {entry["host"] for entry in tree["workers"]} == {socket.gethostname()}
    assert tree["metadata"]["ray_nodes"] == "3" and tree["metadata"]["cores_available"] == "3"
    for entry in tree["workers"]:
        assert merged_count(entry, "env.step") == STEPS


def test_node_affinity_puts_every_worker_on_the_node_named(multi_node_cluster):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    target = multi_node_cluster.env_node_ids[1]
    strategy = NodeAffinitySchedulingStrategy(target, soft=False)
    with RayEnvManager(counting_envs(2), num_cpus=QUARTER_CPU, scheduling_strategy=strategy) as envs:
        step_all(envs, steps=2)
        sections = [entry["ray"] for entry in envs.timer_merger.worker_entries()]
    assert [(section["node_id"], section["node_address"]) for section in sections] == [(target, "127.0.0.3")] * 2


def test_a_custom_resource_of_one_node_keeps_the_workers_there(multi_node_cluster):
    with RayEnvManager(counting_envs(2), num_cpus=QUARTER_CPU, resources={"env_node_0": 0.25}) as envs:
        step_all(envs, steps=2)
        nodes = {entry["ray"]["node_id"] for entry in envs.timer_merger.worker_entries()}
    assert nodes == {multi_node_cluster.env_node_ids[0]}


def test_every_nodes_clock_is_known_to_be_the_drivers_where_the_kernel_is_shared_and_checked_by_round_trips(
    spread_run
):
    sections = [entry["ray"]["clock"] for entry in spread_run["entries"]]
    # Every node here runs on this machine's kernel: one monotonic clock, no offset to estimate.
    assert all(clock["shared_clock"] and clock["offset_seconds"] == 0.0 for clock in sections)
    assert all(clock["uncertainty_seconds"] == 0.0 for clock in sections)
    # Real round trips to each node agree: the true offset, 0, lies within each one's uncertainty.
    assert all(abs(estimate.offset) <= estimate.uncertainty for estimate in spread_run["estimates"])


def test_the_timeline_puts_every_nodes_env_steps_inside_the_drivers_vector_steps(spread_run):
    nodes = {entry["pid"]: entry["ray"]["node_id"] for entry in spread_run["entries"]}
    processes = spread_run["tree"]["timeline"]["processes"]
    trainer, workers = processes[0], processes[1:]
    vector_steps = sorted(
        (start, end) for thread in trainer["threads"] for name, start, end, *_ in thread["spans"]
        if name == "env_manager.step"
    )
    assert len(vector_steps) == STEPS
    assert len({nodes[process["pid"]] for process in workers}) == 3  # a track per node's worker
    for process in workers:
        env_steps = sorted(
            (start, end) for thread in process["threads"] for name, start, end, *_ in thread["spans"]
            if name == "env.step"
        )
        assert len(env_steps) == STEPS
        for (step_start, step_end), (env_start, env_end) in zip(vector_steps, env_steps):
            assert step_start <= env_start <= env_end <= step_end


# --- losing a node ----------------------------------------------------------------------------------


def workers_on(envs: RayEnvManager, node_id: str) -> list[dict]:
    return [entry for entry in envs.timer_merger.worker_entries() if entry["ray"]["node_id"] == node_id]


def assert_ended(pids: list[int]) -> None:
    processes = []
    for pid in pids:
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    _, alive = psutil.wait_procs(processes, timeout=30)
    assert not [process for process in alive if process.status() != psutil.STATUS_ZOMBIE]


def test_a_lost_node_is_named_with_every_worker_it_ran_and_the_timers_so_far_are_dumped(
    multi_node_cluster, tmp_path
):
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    doomed = multi_node_cluster.add_node("127.0.0.4", resources={"doomed": 1})
    # Workers 1 and 2 need the doomed node's own resource; worker 0 goes elsewhere if it can.
    group = placement_group(
        [{"CPU": QUARTER_CPU}] + [{"CPU": QUARTER_CPU, "doomed": 0.5}] * 2, strategy="SPREAD"
    )
    ray.get(group.ready(), timeout=60)
    envs = RayEnvManager(counting_envs(3), num_cpus=QUARTER_CPU, placement_group=group, flush_every=1,
                         summaries_dir=tmp_path, run_id="lost")
    step_all(envs, steps=5)
    lost = workers_on(envs, doomed.node_id)
    multi_node_cluster.cluster.remove_node(doomed)
    try:
        with pytest.raises(NodeLostError) as caught:
            for _ in range(50):  # the loss is seen by the step that needs its workers
                envs.step(np.zeros(3, dtype=np.int64))
    finally:
        envs.close()
        remove_placement_group(group)
    error = caught.value
    assert isinstance(error, WorkerDiedError)
    assert [entry["worker_id"] for entry in lost][-2:] == [1, 2]
    assert (error.node_id, error.node_address) == (doomed.node_id, "127.0.0.4")
    assert error.lost_workers == [entry["worker_id"] for entry in lost]
    assert f"its Ray node 127.0.0.4 (id {doomed.node_id[:12]}) was lost, with workers " in str(error)
    workers = {entry["worker_id"]: entry for entry in dumped(tmp_path / "lost_timers.json")["workers"]}
    assert [merged_count(workers[index], "env.step") for index in (1, 2)] == [5, 5]  # all before the loss
    assert_ended([entry["ray"]["pid"] for entry in lost])


def test_under_restart_on_failure_a_lost_nodes_workers_are_replaced_on_the_surviving_nodes(
    multi_node_cluster, tmp_path
):
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    doomed = multi_node_cluster.add_node("127.0.0.5")
    # Soft affinity: the doomed node while it lives, any other after.
    strategy = NodeAffinitySchedulingStrategy(doomed.node_id, soft=True)
    envs = RayEnvManager(counting_envs(2), num_cpus=QUARTER_CPU, scheduling_strategy=strategy, flush_every=1,
                         restart_on_failure=True, summaries_dir=tmp_path, run_id="replaced")
    step_all(envs, steps=5)
    lost_pids = [entry["ray"]["pid"] for entry in workers_on(envs, doomed.node_id)]
    multi_node_cluster.cluster.remove_node(doomed)
    with pytest.warns(RuntimeWarning, match="its Ray node 127.0.0.5 .* was lost, with workers 0, 1 on it; restarting"):
        for _ in range(5):
            envs.step(np.zeros(2, dtype=np.int64))
    envs.close()
    surviving = {multi_node_cluster.driver_node, *multi_node_cluster.env_node_ids}
    for entry in dumped(tmp_path / "replaced_timers.json")["workers"]:
        assert entry["ray"]["restarts"] == 1 and entry["ray"]["node_id"] in surviving
        assert merged_count(entry, "env.step") >= 5 + 1  # the steps before the loss, and after
    assert len(lost_pids) == 2
    assert_ended(lost_pids)


# --- the CPU verdict per node -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def one_core_nodes(multi_node_cluster):
    """The env nodes, each truly one core: their raylets (and so their workers) pinned to core 0
    and core 1 of this machine (see tests/profiler/multi_node_cluster.py). Custom resources
    ``core_a`` and ``core_b`` name them."""
    for address, core in (("127.0.0.2", 0), ("127.0.0.3", 1)):
        assert raylet_of(address).cpu_affinity() == [sorted(os.sched_getaffinity(0))[core]]
    return multi_node_cluster.env_nodes


def raylet_of(address: str) -> psutil.Process:
    for process in psutil.Process().children(recursive=True):
        try:
            command = process.cmdline()
        except psutil.Error:
            continue  # ended while we looked
        if command and command[0].endswith("raylet") and f"--node_ip_address={address}" in command:
            return process
    raise AssertionError(f"no raylet of node {address} among this process's children")


def cpu_bound_run_on(nodes: list[str]) -> dict:
    """CPU-bound envs (4 ms of CPU a step), worker ``i`` on the one-core node ``nodes[i]``
    (``"core_a"`` or ``"core_b"``), 30 steps; the verdicts on the dump."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    group = placement_group([{"CPU": 0.1, node: 1} for node in nodes], strategy="PACK")
    try:
        ray.get(group.ready(), timeout=60)
        tree = run_vector_steps([lambda: CpuBurningEnv(cpu_seconds=0.004)] * len(nodes), steps=30,
                                manager=RayEnvManager, num_cpus=0.1, placement_group=group)
    finally:
        remove_placement_group(group)
    return judge_run(tree)


@pytest.mark.quiet_machine  # nodes of one core each, which no other test may load (tests/conftest.py)
def test_a_node_crowded_by_the_placement_is_named_by_the_cpu_verdict(one_core_nodes):
    verdicts = cpu_bound_run_on(["core_a"] * 3 + ["core_b"])
    (cpu,) = verdicts.of_kind(CPU_OVERSUBSCRIPTION)
    assert cpu.title.startswith("on node 127.0.0.2 (3 workers, 1 core)")
    assert (cpu.evidence["node"], cpu.evidence["workers"], cpu.evidence["cores_available"]) == ("127.0.0.2", 3, 1)


@pytest.mark.quiet_machine  # nodes of one core each, which no other test may load (tests/conftest.py)
def test_workers_given_a_core_each_on_their_nodes_crowd_no_node(one_core_nodes):
    verdicts = cpu_bound_run_on(["core_a", "core_b"])
    assert not verdicts.of_kind(CPU_OVERSUBSCRIPTION)
