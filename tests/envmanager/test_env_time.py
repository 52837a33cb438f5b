"""Wall and CPU time of each worker's env calls: what the CPU did, and what it could not."""

from __future__ import annotations

import time

import numpy as np
import pytest
from envmanager_testenvs import CountingEnv, CpuBurningEnv

import profiler
from envmanager import SubprocessEnvManager
from envmanager.env_time import EnvTime, EnvTimeError, EnvTimeMeter, validate_env_time
from profiler.analysis.block_stats import walk_nodes
from profiler.cpu_cores import cores_available

# Clock granularity and the meter's own clock reads: a single-threaded env's CPU time may
# exceed its wall time by no more than this per call.
CLOCK_SLACK_SECONDS = 1e-5


def nodes_named(tree: dict, *names: str) -> list[dict]:
    """Every node of ``tree`` (the root and ``workers`` left out) called one of ``names``."""
    return [node for _, node in walk_nodes(tree) if node["name"] in names]


def env_calls_in(tree: dict) -> int:
    return sum(node["count"] for node in nodes_named(tree, "env.step", "env.reset"))


def run_and_dump(envs: SubprocessEnvManager, steps: int, directory) -> dict:
    envs.reset(seed=0)
    actions = np.zeros(envs.num_envs, dtype=np.int64)
    for _ in range(steps):
        envs.step(actions)
    return profiler.load_timing_tree(envs.dump_timers(directory))


# --- the meter and the totals -------------------------------------------------------------------


def test_the_meter_counts_each_call_and_its_wall_and_cpu_time():
    meter = EnvTimeMeter()
    for _ in range(3):
        with meter:
            time.sleep(0.002)
    wall, cpu, calls = meter.take()
    assert calls == 3
    assert wall >= 3 * 0.002
    assert 0.0 <= cpu < wall  # sleeping needs no CPU


def test_a_meter_starts_afresh_after_each_take():
    meter = EnvTimeMeter()
    with meter:
        pass
    meter.take()
    assert meter.take() == (0.0, 0.0, 0)


def test_a_call_that_raises_is_still_metered():
    meter = EnvTimeMeter()
    with pytest.raises(ValueError), meter:
        raise ValueError("env failed")
    assert meter.take()[2] == 1


def test_totals_add_up_what_the_workers_sent():
    total = EnvTime()
    total.add(0.5, 0.25, 10)
    total.add(0.5, 0.5, 5)
    assert total.section() == {"wall_seconds": 1.0, "cpu_seconds": 0.75, "calls": 15}


@pytest.mark.parametrize(
    "wall, cpu, calls, named",
    [(-1.0, 0.0, 1, "wall"), (float("nan"), 0.0, 1, "wall"), (1.0, float("inf"), 1, "cpu"),
     (1.0, 0.5, -1, "calls"), (1.0, 0.5, 1.5, "calls"), ("1", 0.5, 1, "wall")],
)
def test_figures_no_worker_sends_are_refused_naming_the_figure(wall, cpu, calls, named):
    with pytest.raises(EnvTimeError, match=named):
        validate_env_time(wall, cpu, calls)


# --- real managers -----------------------------------------------------------------------------


@pytest.mark.parametrize("flush_every", [1, 3, 1000])
def test_every_env_call_the_workers_made_is_metered_once_at_any_flush_interval(tmp_path, flush_every):
    envs = SubprocessEnvManager(
        [lambda: CountingEnv(episode_length=4)] * 3,
        context="fork",
        envs_per_worker=2,
        flush_every=flush_every,
        summaries_dir=tmp_path,
        run_id="run",
    )
    envs.reset(seed=0)
    actions = np.zeros(3, dtype=np.int64)
    for _ in range(25):
        envs.step(actions)  # episodes end and reset along the way
    envs.close()
    tree = profiler.load_timing_tree(tmp_path / "run_timers.json")
    for worker in tree["workers"]:
        assert worker["env_time"]["calls"] == env_calls_in(worker)
        # Metered inside the env.step/env.reset blocks, on the same clock.
        blocks_wall = sum(node["total"] for node in nodes_named(worker, "env.step", "env.reset"))
        assert 0.0 < worker["env_time"]["wall_seconds"] <= blocks_wall
    assert sum(worker["env_time"]["calls"] for worker in tree["workers"]) == env_calls_in(tree)


def test_a_sleeping_env_shows_wall_time_without_cpu_time(tmp_path):
    with SubprocessEnvManager([lambda: CountingEnv(episode_length=1000, delay=0.005)], context="fork") as envs:
        tree = run_and_dump(envs, 10, tmp_path)
    env_time = tree["workers"][0]["env_time"]
    assert env_time["wall_seconds"] >= 10 * 0.005
    assert env_time["cpu_seconds"] < 0.5 * env_time["wall_seconds"]


def test_a_cpu_bound_env_shows_its_cpu_time_and_never_more_than_its_wall_time(tmp_path):
    with SubprocessEnvManager([lambda: CpuBurningEnv(0.002)], context="fork") as envs:
        tree = run_and_dump(envs, 10, tmp_path)
    env_time = tree["workers"][0]["env_time"]
    assert env_time["cpu_seconds"] >= 10 * 0.002
    assert env_time["cpu_seconds"] <= env_time["wall_seconds"] + env_time["calls"] * CLOCK_SLACK_SECONDS


def test_cpu_bound_envs_oversubscribing_the_cores_wait_descheduled(tmp_path):
    cores = cores_available()
    if cores > 4:
        pytest.skip(f"{cores} cores: oversubscribing them would take too many processes for a short test")
    workers = 2 * cores + 1
    with SubprocessEnvManager([lambda: CpuBurningEnv(0.003)] * workers, context="fork") as envs:
        tree = run_and_dump(envs, 10, tmp_path)
    wall = sum(worker["env_time"]["wall_seconds"] for worker in tree["workers"])
    cpu = sum(worker["env_time"]["cpu_seconds"] for worker in tree["workers"])
    assert cpu >= workers * 10 * 0.003
    # More than twice as many busy workers as cores: each runs at most half the time it is busy.
    assert wall > 1.5 * cpu


def test_with_profiling_off_no_env_time_is_recorded(tmp_path):
    with SubprocessEnvManager([lambda: CountingEnv()], context="fork", profiling=False) as envs:
        tree = run_and_dump(envs, 3, tmp_path)
    assert "workers" not in tree
