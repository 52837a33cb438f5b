"""Specification of the trainer's sum of the workers' waits for a core (envmanager.measurement.cpu_waits)
and of the ``scheduling`` entries a real manager dumps."""

from __future__ import annotations

import json

import numpy as np
import pytest
from envmanager_testenvs import CpuBurningEnv

from envmanager.measurement.cpu_waits import CpuWaits, CpuWaitsError, validate_cpu_waits
from envmanager.subprocess_env_manager import SubprocessEnvManager
from profiler.recording.scheduling import schedstat_available


def test_figures_add_up_per_worker_and_a_worker_that_never_sent_any_has_no_entry():
    waits = CpuWaits()
    assert waits.section() is None
    waits.add((0.5, 1.0, 2.0, 3))
    waits.add(None)  # a worker that cannot read them
    waits.add((0.25, 0.5, 1.0, 1))
    assert waits.section() == {"run_queue_seconds": 0.75, "cpu_seconds": 1.5, "wall_seconds": 3.0,
                               "involuntary_switches": 4}
    waits.clear()
    assert waits.section() is None


@pytest.mark.parametrize("figures, named", [
    ((0.1, 0.2, 0.3), "four numbers"),
    ((0.1, -0.2, 0.3, 1), "seconds"),
    ((0.1, 0.2, float("nan"), 1), "seconds"),
    ((0.1, 0.2, 0.3, 1.5), "switches"),
    ([0.1, 0.2, 0.3, 1], "four numbers"),
])
def test_figures_no_worker_sends_are_refused_naming_what_is_wrong(figures, named):
    with pytest.raises(CpuWaitsError, match=named):
        validate_cpu_waits(figures)


@pytest.mark.skipif(not schedstat_available(), reason="needs Linux's schedstat")
def test_a_managers_dump_holds_each_workers_waits_and_its_settings(tmp_path):
    envs = SubprocessEnvManager([lambda: CpuBurningEnv(0.002)] * 2, envs_per_worker=1)
    try:
        envs.reset(seed=0)
        for _ in range(5):
            envs.step(np.zeros(2, dtype=np.int64))
        path = envs.dump_timers(tmp_path, "waits")
    finally:
        envs.close()
    tree = json.loads(path.read_text())
    for entry in tree["workers"]:
        assert entry["scheduling"]["cpu_seconds"] >= 0.002 * 5 * 0.5  # the tick at worst
        assert entry["scheduling"]["run_queue_seconds"] <= entry["scheduling"]["wall_seconds"]
    assert tree["scheduling"]["wall_seconds"] > 0
    assert {key: tree["metadata"][key] for key in ("env_manager_class", "shared_memory", "envs_per_worker",
                                                    "num_envs")} == {
        "env_manager_class": "SubprocessEnvManager", "shared_memory": "True", "envs_per_worker": "1",
        "num_envs": "2"}
