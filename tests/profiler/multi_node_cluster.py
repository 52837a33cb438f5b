"""A real multi-node Ray cluster on this one machine, for the tests of what spans several nodes.

Ray's own multi-node test cluster (``ray.cluster_utils.Cluster``) starts one raylet per node:
each node is a scheduler of its own, with its own resources, object store, worker processes and
node id, and here its own address (127.0.0.2, 127.0.0.3: Linux routes all of 127/8 to the
loopback). What it cannot give is another kernel: every node reads the same clock, which is
what the tests check it is told (offset exactly 0).

Starting nodes costs seconds on 2 cores, so one cluster serves every test that asks for it (the
fixture is the session's, registered in ``tests/conftest.py``): a head node (the driver's, 1 CPU)
and two env nodes (1 CPU each, with custom resources naming each: ``env_node_0`` and ``core_a``,
``env_node_1`` and ``core_b``). Each env node is truly one core: its raylet, and so every worker
process it starts, which inherits its CPU affinity, runs on one core of this machine (env node 0
on the first, env node 1 on the second), which the CPU verdict per node needs. The session's one-node Ray
(``ray_cluster``) is shut down first: a driver talks to one cluster, and the tests using this one
run after every other (``tests/conftest.py`` orders them).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil
import pytest

ENV_NODES = 2
OBJECT_STORE_BYTES = 80 * 1024 * 1024  # Ray's smallest store: the tests carry small observations

# The modules the tests' envs and Ray work come from, which the nodes' worker processes import by
# name: the shared helpers and the Ray tests' own modules.
_TESTS = Path(__file__).parents[1]
_TEST_MODULE_FOLDERS = [_TESTS / "envmanager", _TESTS / "envmanager" / "ray", _TESTS / "profiler",
                        _TESTS / "profiler" / "integrations"]


@dataclass
class MultiNodeCluster:
    """The running cluster: Ray's ``Cluster``, the driver's node id and the env nodes' ids and
    addresses, in order."""

    cluster: Any
    driver_node: str
    env_nodes: list[Any]

    @property
    def env_node_ids(self) -> list[str]:
        return [node.node_id for node in self.env_nodes]

    def add_node(self, address: str, resources: dict[str, float] | None = None) -> Any:
        """One more node (1 CPU) at ``address``, for a test to lose."""
        with _test_modules_importable():
            node = _add_node(self.cluster, address, resources or {})
        self.cluster.wait_for_nodes()
        return node

    def remove_node(self, node: Any) -> None:
        self.cluster.remove_node(node)


@pytest.fixture(scope="session")
def multi_node_cluster() -> Iterator[MultiNodeCluster]:
    ray = pytest.importorskip("ray", reason="Ray is not installed; pip install -e '.[ray]' runs the Ray tests")
    from ray.cluster_utils import Cluster

    ray.shutdown()
    # Processes of the session that were there before (multiprocessing's helpers, ...) are not its.
    before = _descendants()
    with _test_modules_importable():
        cluster = Cluster(
            initialize_head=True,
            head_node_args={"num_cpus": 1, "include_dashboard": False, "object_store_memory": OBJECT_STORE_BYTES},
        )
        cores = sorted(os.sched_getaffinity(0))
        env_nodes = [
            _add_node(cluster, f"127.0.0.{index + 2}", {f"env_node_{index}": 1, f"core_{'ab'[index]}": 8},
                      core=cores[index % len(cores)])
            for index in range(ENV_NODES)
        ]
    ray_processes = _descendants() - before
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        cluster.wait_for_nodes()
        yield MultiNodeCluster(cluster, ray.get_runtime_context().get_node_id(), env_nodes)
    finally:
        ray.shutdown()
        cluster.shutdown()
    left = [process for process in ray_processes | (_descendants() - before) if _is_running(process)]
    assert not left, f"processes of the multi-node cluster outlived it: {left}"


def _add_node(cluster: Any, address: str, resources: dict[str, float], core: int | None = None) -> Any:
    """A node of 1 CPU at ``address``; with ``core``, its raylet pinned to that core of this machine."""
    previous = os.sched_getaffinity(0)
    try:
        if core is not None:
            os.sched_setaffinity(0, {core})
        return cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE_BYTES, node_ip_address=address,
                                resources=resources)
    finally:
        os.sched_setaffinity(0, previous)


class _test_modules_importable:
    """PYTHONPATH holds the test modules' folders while nodes start: their raylets, and through
    them their worker processes, inherit this process's environment."""

    def __enter__(self) -> None:
        self.previous = os.environ.get("PYTHONPATH")
        folders = [str(folder) for folder in _TEST_MODULE_FOLDERS]
        os.environ["PYTHONPATH"] = os.pathsep.join(folders + ([self.previous] if self.previous else []))

    def __exit__(self, *exc_info: Any) -> None:
        if self.previous is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = self.previous


def _descendants() -> set[psutil.Process]:
    """This process's descendants (a process is told by its pid and start time, so a reused pid
    is another process)."""
    return set(psutil.Process().children(recursive=True))


def _is_running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False
