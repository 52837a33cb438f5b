"""Specification of CPU contention judged per node, on fake-clock runs whose workers say on which
Ray node they ran (the ``ray`` section :class:`~envmanager.RayEnvManager` writes)."""

from __future__ import annotations

import json

import pytest
from run_files import write_vector_run

from profiler import load_timing_tree
from profiler.analysis.node_load import read_node_loads
from profiler.analysis.verdicts import CPU_OVERSUBSCRIPTION, judge_run

# Four workers, each 8 ms of CPU a step.
BUSY_WORKERS = {"measured": True, "worker_step_seconds": (0.008,) * 4, "env_cpu_fraction": 1.0}


def on_nodes(path, placement: list[tuple[str, int]], driver: str = "10.0.0.1") -> dict:
    """The run at ``path`` with worker ``i`` on node ``placement[i] = (address, its cores)``."""
    document = json.loads(path.read_text())
    for entry, (address, cores) in zip(document["workers"], placement):
        entry["host"] = f"host-{address}"
        entry["ray"] = {"node_id": f"node-{address}", "node_address": address, "node_cpus": float(cores),
                        "driver_node": address == driver, "pid": entry["pid"]}
    path.write_text(json.dumps(document))
    return load_timing_tree(path)


@pytest.fixture
def judged_on_nodes(tmp_path, fake_clock):
    def judged(placement, **options):
        path = write_vector_run(tmp_path / "run.json", fake_clock, **{**BUSY_WORKERS, **options})
        return judge_run(on_nodes(path, placement))
    return judged


def test_one_crowded_node_among_idle_ones_is_named_with_the_nodes_that_had_cores_to_spare(judged_on_nodes):
    # 3 workers on a 1-core node, 1 on a 4-core node: 4 workers on 5 cores in all, yet 3 share one.
    verdicts = judged_on_nodes([("10.0.0.2", 1)] * 3 + [("10.0.0.3", 4)], cores=5, busy_processes=5)
    (cpu,) = verdicts.of_kind(CPU_OVERSUBSCRIPTION)
    assert cpu.title.startswith("on node 10.0.0.2 (3 workers, 1 core); 10.0.0.3 (3 idle) had cores to spare: ")
    assert "3 busy processes (workers and trainer) share 1 cores" in cpu.title
    assert cpu.evidence["node"] == "10.0.0.2" and cpu.evidence["workers"] == 3
    # The step waits for 3 workers' 24 ms on one core, where the busiest alone needs 8 ms.
    assert cpu.evidence["cores_floor_per_step_seconds"] == pytest.approx(0.024)
    assert cpu.evidence["busiest_worker_cpu_per_step_seconds"] == pytest.approx(0.008)
    assert "10.0.0.2 is crowded while 10.0.0.3 has idle cores" in cpu.suggestion


def test_the_same_workers_summed_over_the_cluster_hide_the_crowded_node(tmp_path, fake_clock):
    path = write_vector_run(tmp_path / "run.json", fake_clock, cores=5, busy_processes=5, **BUSY_WORKERS)
    assert not judge_run(load_timing_tree(path)).of_kind(CPU_OVERSUBSCRIPTION)


def test_workers_spread_by_the_nodes_cores_crowd_no_node(judged_on_nodes):
    verdicts = judged_on_nodes([("10.0.0.2", 2)] * 2 + [("10.0.0.3", 2)] * 2, cores=4, busy_processes=5)
    assert not verdicts.of_kind(CPU_OVERSUBSCRIPTION)


def test_the_trainer_counts_among_the_busy_processes_of_its_own_node(tmp_path, fake_clock):
    path = write_vector_run(tmp_path / "run.json", fake_clock, **BUSY_WORKERS)
    tree = on_nodes(path, [("10.0.0.1", 4)] * 2 + [("10.0.0.3", 2)] * 2)
    driver_node, other = read_node_loads(tree)
    assert (driver_node.busy_processes, driver_node.idle_cores) == (3, 1)
    assert (other.busy_processes, other.idle_cores) == (2, 0)


def test_workers_that_do_not_say_their_node_are_judged_as_one_machine(tmp_path, fake_clock):
    path = write_vector_run(tmp_path / "run.json", fake_clock, **BUSY_WORKERS)
    tree = on_nodes(path, [("10.0.0.2", 1)] * 4)
    assert read_node_loads(tree) is None  # one node: the machine's own count holds
    tree["workers"][0]["ray"].pop("node_cpus")
    assert read_node_loads(tree) is None
