"""Profiling built in: worker timers merged under the step block, nothing lost, never in infos."""

from __future__ import annotations

import gc
import json
import time
import warnings

import gymnasium as gym
import numpy as np
import pytest
from envmanager_testenvs import CountingEnv, RaisingEnv, SuicidalEnv
from tree_paths import count_of, nodes_named

import profiler
from envmanager import SubprocessEnvManager, WorkerDiedError
from profiler import hierarchical_timer, timed
from profiler.recording import scheduling
from profiler.recording.block_waits import READ_ALL_FIRST
from profiler.timing.phased_block import FOLD_AT_RUNS


class TimedEnv(CountingEnv):
    """An env whose author timed a part of its step themselves."""

    @timed(name="physics")
    def _physics(self) -> None:
        time.sleep(0)

    def step(self, action):
        self._physics()
        with hierarchical_timer("reward"):
            return super().step(action)


def cartpole_steps(envs: SubprocessEnvManager, steps: int) -> int:
    """Step with random actions; return how many env.step calls the workers really made.

    Under NEXT_STEP a step right after an episode ended resets instead of stepping.
    """
    envs.action_space.seed(0)
    ended = np.zeros(envs.num_envs, dtype=bool)
    real_steps = 0
    for _ in range(steps):
        real_steps += int((~ended).sum())
        _, _, terminations, truncations, _ = envs.step(envs.action_space.sample())
        ended = terminations | truncations
    return real_steps


@pytest.mark.parametrize("flush_every", [1, 3, 7, 1000])
def test_after_close_the_merged_env_step_count_equals_the_env_steps_taken(tmp_path, flush_every):
    envs = SubprocessEnvManager(
        [lambda: gym.make("CartPole-v1")] * 3,
        context="fork",
        envs_per_worker=2,
        flush_every=flush_every,
        summaries_dir=tmp_path,
        run_id="run",
    )
    envs.reset(seed=0)
    with hierarchical_timer("train"):
        real_steps = cartpole_steps(envs, 60)
    envs.close()
    tree = json.loads((tmp_path / "run_timers.json").read_text())
    assert count_of(tree, "env.step") == real_steps
    workers = tree["workers"]
    assert [w["worker_id"] for w in workers] == [0, 1]
    assert sum(count_of(w, "env.step") for w in workers) == real_steps
    assert count_of(tree, "env.reset") == 3 + (3 * 60 - real_steps)


def test_worker_blocks_are_merged_as_parallel_under_the_step_block():
    envs = SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2, context="fork", flush_every=1)
    envs.reset(seed=0)
    for _ in range(5):
        envs.step(np.array([0, 1]))
    envs.close()
    tree = profiler.get_timer_tree()
    (step,) = nodes_named(tree, "env_manager.step")
    children = {child["name"]: child for child in step["children"]}
    assert {"send_actions", "wait_for_workers", "receive_results", "env.step"} <= children.keys()
    assert children["env.step"]["is_parallel"] is True
    assert "is_parallel" not in children["wait_for_workers"]
    assert children["send_actions"]["count"] == children["wait_for_workers"]["count"] == 5


@pytest.mark.skipif(not scheduling.schedstat_available(), reason="needs Linux's schedstat")
def test_the_trainer_reads_its_waits_for_a_core_inside_each_of_its_first_steps():
    envs = SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2, context="fork")
    envs.reset(seed=0)
    for _ in range(50):
        envs.step(np.array([0, 1]))
    envs.close()
    in_steps = profiler.get_timer_tree()["scheduling"]["in_blocks"]["env_manager.step"]
    assert in_steps["runs_read"] == 50 < READ_ALL_FIRST
    assert in_steps["run_queue_seconds"] >= 0


def test_user_timer_blocks_in_env_code_land_in_that_workers_tree():
    envs = SubprocessEnvManager([TimedEnv] * 2, context="fork", flush_every=2)
    envs.reset(seed=0)
    for _ in range(4):
        envs.step(np.array([1, 1]))
    envs.close()
    workers = {w["worker_id"]: w for w in profiler.get_timer_tree()["workers"]}
    for worker in workers.values():
        (step,) = nodes_named(worker, "env.step")
        assert {c["name"]: c["count"] for c in step["children"]} == {"physics": 4, "reward": 4}


class NumpyGaugeEnv(CountingEnv):
    """Env code that sets gauges straight from NumPy, as real envs do (and one NaN)."""

    def step(self, action):
        result = super().step(action)
        profiler.set_gauge("reward", np.float64(result[1]))
        profiler.set_gauge("distance", np.float32(self.t))
        profiler.set_gauge("loss", float("nan"))
        return result


def test_numpy_and_nan_gauges_in_env_code_cost_no_merged_steps(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a rejected payload would warn
        envs = SubprocessEnvManager(
            [NumpyGaugeEnv] * 2, context="fork", flush_every=2, summaries_dir=tmp_path, run_id="run"
        )
        envs.reset(seed=0)
        for _ in range(6):
            envs.step(np.array([1, 1]))
        envs.close()
    tree = profiler.load_timing_tree(tmp_path / "run_timers.json")
    assert count_of(tree, "env.step") == 12
    for worker in tree["workers"]:
        assert worker["gauges"]["reward"] == {"value": 1.5, "min": 1.5, "max": 1.5, "count": 6}
        assert worker["gauges"]["distance"]["max"] == 6.0
        assert np.isnan(worker["gauges"]["loss"]["value"])


def test_timer_payloads_never_appear_in_infos():
    envs = SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2, context="fork", flush_every=1)
    _, infos = envs.reset(seed=0)
    assert infos == {}
    for _ in range(5):
        *_, infos = envs.step(np.array([0, 1]))
        assert infos == {}
    envs.close()


def test_profiling_emits_no_warnings_on_a_normal_reset_and_step():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        envs = SubprocessEnvManager(
            [lambda: gym.make("CartPole-v1")] * 2, context="fork", flush_every=1, resource_interval=0.001
        )
        envs.reset(seed=0)
        envs.step(np.array([0, 1]))
        envs.close()
    assert caught == []


def test_timers_merged_before_a_worker_crash_are_still_dumped(tmp_path):
    envs = SubprocessEnvManager(
        [SuicidalEnv] * 2, context="fork", flush_every=1, summaries_dir=tmp_path, run_id="crash"
    )
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.array([1, 1]))
    with pytest.raises(WorkerDiedError):
        envs.step(np.array([1, 2]))
    envs.close()
    tree = json.loads((tmp_path / "crash_timers.json").read_text())
    assert count_of(tree, "env.step") >= 6


def test_dump_timers_while_running_includes_what_workers_had_not_shipped_yet(tmp_path):
    envs = SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2, context="fork", flush_every=1000)
    envs.reset(seed=0)
    real_steps = cartpole_steps(envs, 10)
    path = envs.dump_timers(tmp_path, "live")
    assert path == tmp_path / "live_timers.json"
    assert count_of(json.loads(path.read_text()), "env.step") == real_steps
    envs.step(np.array([0, 0]))  # still usable afterwards
    envs.close()


def test_flush_interval_ships_timers_without_waiting_for_close():
    envs = SubprocessEnvManager(
        [lambda: CountingEnv(episode_length=1000)] * 2, context="fork", flush_interval=0.01
    )
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.array([1, 1]))
        time.sleep(0.02)
    envs.step(np.array([1, 1]))
    assert count_of(profiler.get_timer_tree(), "env.step") >= 6
    envs.close()


def test_resource_interval_records_cpu_and_rss_gauges_of_trainer_and_workers():
    envs = SubprocessEnvManager([CountingEnv] * 2, context="fork", resource_interval=0.001)
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.array([1, 1]))
        time.sleep(0.005)
    envs.close()
    gauges = profiler.get_timer_tree()["gauges"]
    for process in ("trainer", "worker_0", "worker_1"):
        assert gauges[f"resources.{process}.rss_mb"]["value"] > 0
        assert f"resources.{process}.cpu_percent" in gauges


def test_profiling_off_records_no_blocks_at_all():
    envs = SubprocessEnvManager([TimedEnv] * 2, context="fork", profiling=False, flush_every=1)
    envs.reset(seed=0)
    envs.step(np.array([1, 1]))
    envs.close()
    tree = profiler.get_timer_tree()
    assert tree["children"] == [] and "workers" not in tree
    assert envs.timer_merger is None


@pytest.mark.parametrize(
    "options", [{"flush_every": 0}, {"flush_every": 1.5}, {"flush_interval": 0}, {"resource_interval": -1}]
)
def test_invalid_profiling_options_raise_value_error(options):
    with pytest.raises(ValueError):
        SubprocessEnvManager([CountingEnv], context="fork", **options)


def test_spawned_workers_are_profiled_too():
    envs = SubprocessEnvManager([lambda: TimedEnv()] * 2, context="spawn", flush_every=1)
    envs.reset(seed=0)
    envs.step(np.array([1, 1]))
    envs.close()
    assert count_of(profiler.get_timer_tree(), "physics") == 2


def test_a_restart_is_recorded_as_a_gauge():
    envs = SubprocessEnvManager([SuicidalEnv] * 2, context="fork", restart_on_failure=True)
    envs.reset(seed=0)
    with pytest.warns(RuntimeWarning, match="restarting"):
        envs.step(np.array([2, 1]))
    envs.close()
    assert profiler.get_timer_tree()["gauges"]["env_manager.restarts"]["value"] == 1


def test_busy_processes_counts_the_trainer_and_the_workers():
    with SubprocessEnvManager([lambda: CountingEnv()] * 3, context="fork", envs_per_worker=2):
        assert profiler.get_timer_tree()["metadata"]["busy_processes"] == "3"


def test_busy_processes_counts_the_workers_of_every_manager_alive_at_once():
    with SubprocessEnvManager([lambda: CountingEnv()] * 2, context="fork"):
        with SubprocessEnvManager([lambda: CountingEnv()] * 3, context="fork", profiling=False):
            pass
        assert profiler.get_timer_tree()["metadata"]["busy_processes"] == "6"


def test_a_manager_closed_before_another_starts_is_not_counted_as_busy():
    with SubprocessEnvManager([lambda: CountingEnv()] * 3, context="fork", profiling=False):
        pass
    with SubprocessEnvManager([lambda: CountingEnv()] * 2, context="fork"):
        assert profiler.get_timer_tree()["metadata"]["busy_processes"] == "3"


def test_busy_processes_survives_a_reset_of_the_timers():
    with SubprocessEnvManager([lambda: CountingEnv()] * 2, context="fork") as envs:
        envs.reset(seed=0)
        profiler.reset_timers()
        envs.step(np.zeros(2, dtype=np.int64))
        assert profiler.get_timer_tree()["metadata"]["busy_processes"] == "3"


def test_a_manager_collected_without_close_is_no_longer_counted_as_busy():
    forgotten = SubprocessEnvManager([lambda: CountingEnv()] * 3, context="fork", profiling=False)
    del forgotten
    gc.collect()
    with SubprocessEnvManager([lambda: CountingEnv()] * 2, context="fork"):
        assert profiler.get_timer_tree()["metadata"]["busy_processes"] == "3"


def test_steps_taken_while_the_profiler_is_paused_run_and_record_nothing_in_the_trainer():
    with SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2, flush_every=1) as envs:
        envs.reset(seed=0)
        profiler.pause()
        try:
            envs.step(envs.action_space.sample())
            envs.reset(seed=1)
        finally:
            profiler.resume()
        envs.step(envs.action_space.sample())
        tree = profiler.get_timer_tree()
    assert count_of(tree, "env_manager.step") == 1
    assert count_of(tree, "env_manager.reset") == 1


STEP_PARTS = ("send_actions", "wait_for_workers", "receive_results")


def test_steps_timed_from_stamps_and_steps_timed_with_blocks_fill_the_same_blocks():
    # While a timeline is recorded every block is entered with `with`; otherwise the step times
    # itself from clock stamps. Both must count into the same nodes, worker blocks beneath.
    with SubprocessEnvManager([CountingEnv] * 2, context="fork", flush_every=1) as envs:
        envs.reset(seed=0)
        for _ in range(3):
            envs.step(np.array([0, 0]))
        profiler.recording.events.start_recording()
        try:
            for _ in range(2):
                envs.step(np.array([0, 0]))
        finally:
            profiler.recording.events.stop_recording()
        tree = profiler.get_timer_tree()
    (step,) = nodes_named(tree, "env_manager.step")
    assert step["count"] == 5
    children = {child["name"]: child for child in step["children"]}
    assert all(children[part]["count"] == 5 for part in STEP_PARTS)
    assert children["env.step"]["count"] == 10 and children["env.step"]["is_parallel"] is True
    assert sum(children[part]["total"] for part in STEP_PARTS) <= step["total"]


@pytest.mark.filterwarnings("ignore:.*ERROR:")  # Gymnasium's logger reports the failed step
def test_a_step_whose_env_raises_counts_an_error_in_the_step_in_its_receive_part_and_in_env_step():
    envs = SubprocessEnvManager([RaisingEnv] * 2, context="fork", flush_every=1)
    envs.reset(seed=10)  # seed 1 makes a RaisingEnv fail its reset
    envs.step(np.array([0, 0]))
    with pytest.raises(ValueError, match="Error in step with 1"):
        envs.step(np.array([0, 1]))
    envs.close()
    tree = profiler.get_timer_tree()
    (step,) = nodes_named(tree, "env_manager.step")
    children = {child["name"]: child for child in step["children"]}
    assert step["count"] == 2 and step["errors"] == 1
    assert children["receive_results"]["errors"] == 1
    assert "errors" not in children["send_actions"] and "errors" not in children["wait_for_workers"]
    assert children["env.step"]["count"] == 4 and children["env.step"]["errors"] == 1


def test_steps_held_for_counting_in_bulk_are_all_in_the_dump_and_on_the_critical_path(tmp_path):
    # The step's runs and critical-path stamps are counted in bulk: at every fold of
    # FOLD_AT_RUNS runs, and for what is left when the dump reads them.
    steps = FOLD_AT_RUNS + 5
    envs = SubprocessEnvManager([CountingEnv] * 2, context="fork", summaries_dir=tmp_path, run_id="run")
    envs.reset(seed=0)
    for _ in range(steps):
        envs.step(np.array([0, 0]))
    envs.close()
    tree = json.loads((tmp_path / "run_timers.json").read_text())
    (step,) = nodes_named(tree, "env_manager.step")
    assert step["count"] == steps
    assert all(child["count"] == steps for child in step["children"] if child["name"] in STEP_PARTS)
    paths = [worker["critical_path"] for worker in tree["workers"]]
    assert [path["vector_steps"] for path in paths] == [steps, steps]
    assert sum(path["last_to_reply"] for path in paths) == steps
