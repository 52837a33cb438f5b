"""Wall and CPU time of each worker's env calls: what the CPU did, and what it could not."""

from __future__ import annotations

import time

import numpy as np
import pytest
from envmanager_testenvs import CountingEnv, CpuBurningEnv

import profiler
from envmanager import SubprocessEnvManager
from envmanager.measurement.env_time import (
    EXACT_ABOVE_SECONDS,
    MEAN_SAMPLE_SPACING,
    CpuSampler,
    EnvTime,
    EnvTimeError,
    validate_env_time,
)
from profiler.analysis.block_stats import walk_nodes
from profiler.recording.cpu_cores import cores_available
from step_cores import step_core  # noqa: F401  (both step timers: the C helper, the Python reference)

# Steps of the real runs: whatever the sampler's first gap (at most 2 x MEAN_SAMPLE_SPACING
# calls), most of their calls are measured, as every call after a long one is.
STEPS = 30

# Clock granularity and the sampler's own clock reads: a single-threaded env's CPU time may
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


# --- the sampler and the totals ----------------------------------------------------------------


def sampled_call(sampler: CpuSampler, function, *args):
    """An env call as a worker's guard makes it: measured only when the countdown is out."""
    if sampler.countdown:
        sampler.countdown -= 1
        return function(*args)
    return sampler.measure(function, *args)


def test_the_first_call_is_measured_on_both_clocks():
    sampler = CpuSampler()
    sampled_call(sampler, time.sleep, 0.002)
    measured_wall, measured_cpu, measured_calls = sampler.take()
    assert measured_calls == 1
    assert measured_wall >= 0.002
    assert 0.0 <= measured_cpu < measured_wall  # sleeping needs no CPU


def test_cheap_calls_have_their_cpu_time_measured_on_a_sample_only():
    sampler = CpuSampler(seed=0)
    for _ in range(800):
        sampled_call(sampler, int)
    assert 800 / (3 * MEAN_SAMPLE_SPACING) < sampler.take()[2] < 400


def test_calls_as_long_as_the_exact_threshold_are_all_measured():
    sampler = CpuSampler(seed=0)
    for _ in range(5):
        sampled_call(sampler, time.sleep, 2 * EXACT_ABOVE_SECONDS)
    assert sampler.take()[2] == 5


def test_the_envs_of_a_worker_taking_turns_are_sampled_alike():
    sampler = CpuSampler(seed=1)
    measured = [0, 0]
    for call in range(1600):
        before = sampler.measured_calls
        sampled_call(sampler, int)
        measured[call % 2] += sampler.measured_calls - before
    assert min(measured) > max(measured) / 3, measured


def test_a_sampler_starts_afresh_after_each_take():
    sampler = CpuSampler()
    sampled_call(sampler, int)
    sampler.take()
    assert sampler.take() == (0.0, 0.0, 0)


def test_a_call_that_raises_is_still_measured_and_the_error_goes_on():
    sampler = CpuSampler()
    with pytest.raises(ValueError):
        sampler.measure(int, "not a number")
    assert sampler.take()[2] == 1


def test_the_cpu_time_of_all_calls_is_their_wall_time_at_the_measured_calls_cpu_share():
    total = EnvTime()
    total.add(0.25, 0.125, 2)
    total.add(0.25, 0.125, 1)
    blocks = [
        {"name": "env.step", "total": 1.5, "count": 12, "children": []},
        {"name": "env.reset", "total": 0.5, "count": 4, "children": []},
        {"name": "idle", "total": 9.0, "count": 1, "children": []},
    ]
    assert total.section(blocks) == {"wall_seconds": 2.0, "cpu_seconds": 1.0, "calls": 16, "cpu_measured_calls": 3}


@pytest.mark.parametrize(
    "figures, named",
    [
        ((-1.0, 0.0, 1), "measured wall"),
        ((float("nan"), 0.0, 1), "measured wall"),
        ((1.0, float("inf"), 1), "measured cpu"),
        (("1", 0.5, 1), "measured wall"),
        ((1.0, 0.5, -1), "measured calls"),
        ((1.0, 0.5, 1.5), "measured calls"),
    ],
)
def test_figures_no_worker_sends_are_refused_naming_the_figure(figures, named):
    with pytest.raises(EnvTimeError, match=named):
        validate_env_time(*figures)


# --- real managers -----------------------------------------------------------------------------


@pytest.mark.parametrize("flush_every", [1, 3, 1000])
def test_the_env_time_covers_every_env_call_the_workers_made_at_any_flush_interval(tmp_path, flush_every):
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
        env_time = worker["env_time"]
        assert env_time["calls"] == env_calls_in(worker)
        blocks_wall = sum(node["total"] for node in nodes_named(worker, "env.step", "env.reset"))
        assert env_time["wall_seconds"] == pytest.approx(blocks_wall)
        assert 1 <= env_time["cpu_measured_calls"] <= env_time["calls"]
        assert 0.0 < env_time["cpu_seconds"] <= env_time["wall_seconds"] + env_time["calls"] * CLOCK_SLACK_SECONDS
    assert sum(worker["env_time"]["calls"] for worker in tree["workers"]) == env_calls_in(tree)


def test_a_sleeping_env_shows_wall_time_without_cpu_time(tmp_path):
    with SubprocessEnvManager([lambda: CountingEnv(episode_length=1000, delay=0.005)], context="fork") as envs:
        tree = run_and_dump(envs, STEPS, tmp_path)
    env_time = tree["workers"][0]["env_time"]
    assert env_time["wall_seconds"] >= STEPS * 0.005
    assert env_time["cpu_seconds"] < 0.5 * env_time["wall_seconds"]


def test_a_cpu_bound_env_shows_its_cpu_time_and_never_more_than_its_wall_time(tmp_path):
    with SubprocessEnvManager([lambda: CpuBurningEnv(0.002)], context="fork") as envs:
        tree = run_and_dump(envs, STEPS, tmp_path)
    env_time = tree["workers"][0]["env_time"]
    assert env_time["cpu_seconds"] >= 0.9 * STEPS * 0.002
    assert env_time["cpu_seconds"] <= env_time["wall_seconds"] + env_time["calls"] * CLOCK_SLACK_SECONDS


def test_cpu_bound_envs_oversubscribing_the_cores_wait_descheduled(tmp_path):
    cores = cores_available()
    if cores > 4:
        pytest.skip(f"{cores} cores: oversubscribing them would take too many processes for a short test")
    workers = 2 * cores + 1
    with SubprocessEnvManager([lambda: CpuBurningEnv(0.003)] * workers, context="fork") as envs:
        tree = run_and_dump(envs, STEPS, tmp_path)
    wall = sum(worker["env_time"]["wall_seconds"] for worker in tree["workers"])
    cpu = sum(worker["env_time"]["cpu_seconds"] for worker in tree["workers"])
    assert cpu >= 0.9 * workers * STEPS * 0.003
    # More than twice as many busy workers as cores: a worker waits descheduled for part of its
    # step, so its wall time clearly exceeds its CPU time (without oversubscription they are equal
    # within the clocks' slack). How much it exceeds depends on how the kernel happened to order
    # the workers in each step (measured from 1.45 to over 2), so the bound leaves room for that.
    assert wall > 1.2 * cpu


def test_with_profiling_off_no_env_time_is_recorded(tmp_path):
    with SubprocessEnvManager([lambda: CountingEnv()], context="fork", profiling=False) as envs:
        tree = run_and_dump(envs, 3, tmp_path)
    assert "workers" not in tree


def test_a_slow_env_step_the_sampler_skipped_makes_the_next_step_measured():
    from envmanager.transport.env_calls import make_env_calls

    class SlowEnv:
        def step(self, action):
            time.sleep(2 * EXACT_ABOVE_SECONDS)

    sampler = CpuSampler(seed=0)
    _, timed_step = make_env_calls(None, True, sampler)
    sampler.countdown = 50  # the next sample far away, as after a cheap reset
    timed_step(SlowEnv(), 0)
    assert sampler.take()[2] == 0
    timed_step(SlowEnv(), 0)
    assert sampler.take()[2] == 1
