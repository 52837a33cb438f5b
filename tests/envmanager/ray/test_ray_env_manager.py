"""Specification of RayEnvManager on a real local Ray: the SubprocessEnvManager front, results
identical to SyncVectorEnv, faults, and what the dump records of each actor.

The session's Ray (``ray_cluster``, 2 CPUs) is shared by every test; each worker asks for a
quarter of a CPU so that a test's actors always fit.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import signal
import socket
import time

import gymnasium as gym
import numpy as np
import psutil
import pytest
import side_by_side
from envmanager_testenvs import CountingEnv, DictObsEnv, HangingEnv, RaisingEnv, worker_children
from gymnasium.vector import AutoresetMode
from verdict_runs import LargeObservationEnv, PLANTED_DELAYS, planted_straggler_run, run_vector_steps

from envmanager import RayEnvManager, WorkerDiedError, WorkerError, WorkerPlacementError
from envmanager.ray import ray_pool
from envmanager.ray_env_manager import cores_of_worker_nodes
from profiler.recording import events
from profiler.analysis.block_stats import walk_nodes
from profiler.analysis.verdicts import STRAGGLER, TRANSPORT_BOUND, judge_run

pytestmark = pytest.mark.usefixtures("ray_cluster")

QUARTER_CPU = 0.25


def ray_envs(env_fns, **options) -> RayEnvManager:
    return RayEnvManager(env_fns, num_cpus=QUARTER_CPU, **options)


def cartpoles(count: int) -> list:
    return [lambda: gym.make("CartPole-v1")] * count


def worker_entries(path) -> dict[int, dict]:
    with open(path) as file:
        return {entry["worker_id"]: entry for entry in json.load(file)["workers"]}


def merged_count(entry: dict, block: str) -> int:
    return sum(node["count"] for _, node in walk_nodes(entry) if node["name"] == block)


def wait_until_gone(pids: list[int], timeout: float = 60.0) -> None:
    processes = []
    for pid in pids:
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass  # gone already
    psutil.wait_procs(processes, timeout=timeout)


def kill_actor_process(envs: RayEnvManager, worker: int) -> int:
    """SIGKILL a worker's actor process, as a crash or a lost machine would end it."""
    pid = envs.timer_merger.worker_entries()[worker]["ray"]["pid"]
    os.kill(pid, signal.SIGKILL)
    return pid


# --- the same results as SyncVectorEnv ------------------------------------------------------------


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_cartpole_matches_sync_vector_env_in_every_autoreset_mode(mode):
    episodes = side_by_side.run_side_by_side(ray_envs, cartpoles(5), mode, envs_per_worker=2)
    assert episodes > 0, "the run must cross episode boundaries to test autoreset"


@pytest.mark.parametrize("mode", list(AutoresetMode))
def test_partial_and_nested_infos_match_sync_vector_env_field_for_field(mode):
    env_fns = [lambda i=i: CountingEnv(episode_length=3 + i, info_every=2 + i % 2) for i in range(4)]
    assert side_by_side.run_side_by_side(ray_envs, env_fns, mode, steps=30, envs_per_worker=3) > 0


def test_dict_observations_match_sync_vector_env():
    env_fns = [lambda: DictObsEnv(episode_length=4)] * 3
    side_by_side.run_side_by_side(ray_envs, env_fns, AutoresetMode.SAME_STEP, steps=20)


# --- faults ---------------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore:.*ERROR:")  # Gymnasium's logger reports the failed step
def test_an_env_exception_comes_back_with_its_own_type_naming_its_worker():
    with ray_envs([CountingEnv, RaisingEnv]) as envs:
        envs.reset(seed=10)
        with pytest.raises(ValueError, match="Error in step with 1") as caught:
            envs.step(np.array([0, 1]))
        assert isinstance(caught.value.__cause__, WorkerError)
        assert caught.value.__cause__.worker_index == 1


def test_a_dead_actor_raises_an_error_naming_the_worker_and_its_host_and_keeps_its_timers(tmp_path):
    envs = ray_envs(cartpoles(2), flush_every=1, summaries_dir=tmp_path, run_id="dead")
    envs.reset(seed=0)
    for _ in range(5):
        envs.step(np.array([0, 1]))
    pid = kill_actor_process(envs, 1)
    with pytest.raises(WorkerDiedError) as caught:
        for _ in range(20):  # the death is seen by the step that needs the actor
            envs.step(np.array([0, 1]))
    envs.close()
    error = caught.value
    assert (error.worker_index, error.host, error.pid) == (1, socket.gethostname(), pid)
    assert f"worker 1 (envs 1..1) on host {socket.gethostname()} (pid {pid}) died: " in str(error)
    workers = worker_entries(tmp_path / "dead_timers.json")
    assert merged_count(workers[1], "env.step") == 5  # every step it answered before it died
    assert merged_count(workers[0], "env.step") == 6  # and the one it answered as worker 1 died


def test_an_actor_ended_with_ray_kill_is_named_with_rays_cause(ray_cluster):
    with ray_envs(cartpoles(2)) as envs:
        envs.reset(seed=0)
        ray_cluster.kill(envs.actors[0])
        with pytest.raises(WorkerDiedError, match=r"worker 0 \(envs 0\.\.0\) on host .* died: .*ray\.kill"):
            for _ in range(20):
                envs.step(np.array([0, 1]))
        assert envs.actors[0] is None and envs.actors[1] is not None


def test_a_dead_actor_is_replaced_under_restart_on_failure():
    with ray_envs([lambda: CountingEnv()] * 2, restart_on_failure=True) as envs:
        envs.reset(seed=0)
        envs.step(np.array([0, 0]))
        pid = kill_actor_process(envs, 1)
        with pytest.warns(RuntimeWarning, match="worker 1 .* restarting it"):
            _, _, _, truncations, _ = envs.step(np.array([0, 0]))
        assert truncations.tolist() == [False, True]  # its episode was cut short
        envs.step(np.array([0, 0]))
        assert envs.timer_merger.worker_entries()[1]["ray"]["pid"] != pid
        assert envs.timer_merger.worker_entries()[1]["ray"]["restarts"] == 1


class SlowOnActionTwoEnv(CountingEnv):
    """Takes a second over a step with action 2."""

    def step(self, action):
        if action == 2:
            time.sleep(1.0)
        return super().step(action)


def test_a_step_that_timed_out_is_answered_later_its_reply_dropped_and_its_time_kept():
    with ray_envs([lambda: SlowOnActionTwoEnv(episode_length=100)] * 2, timeout=0.2, flush_every=1) as envs:
        envs.reset(seed=0)
        with pytest.raises(multiprocessing.TimeoutError):
            envs.step(np.array([2, 2]))
        envs.step_async(np.array([0, 0]))
        observations, *_ = envs.step_wait(timeout=60)
        assert observations[:, 0].tolist() == [2.0, 2.0]  # this step's answer, not the late one
        assert [block.count for block in envs.timer_merger.worker_block_times("env.step")] == [2, 2]


def test_close_ends_an_actor_stuck_in_its_env():
    envs = ray_envs([HangingEnv] * 2, timeout=0.2)
    envs.reset(seed=0)
    with pytest.raises(multiprocessing.TimeoutError):
        envs.step(np.array([2, 0]))
    envs.close()
    assert worker_children() == []


class PlacementGroupEnv(CountingEnv):
    """Knows the placement group its worker's actor was placed in."""

    def __init__(self) -> None:
        import ray

        super().__init__()
        group = ray.util.get_current_placement_group()
        self.placement_group_id = None if group is None else group.id.hex()


def test_workers_go_to_the_placement_group_they_are_given(ray_cluster):
    group = ray_cluster.util.placement_group([{"CPU": QUARTER_CPU}] * 2)
    ray_cluster.get(group.ready(), timeout=60)
    try:
        with ray_envs([PlacementGroupEnv] * 2, placement_group=group) as envs:
            assert envs.get_attr("placement_group_id") == (group.id.hex(), group.id.hex())
    finally:
        ray_cluster.util.remove_placement_group(group)


def test_auto_runs_one_actor_per_cpu_of_the_cluster_whatever_each_actor_reserves(ray_cluster):
    cluster_cpus = int(ray_cluster.cluster_resources()["CPU"])
    with ray_envs(cartpoles(cluster_cpus + 1), envs_per_worker="auto") as envs:
        ranges = envs.worker_env_ranges
        assert len(ranges) == cluster_cpus
        assert max(map(len, ranges)) - min(map(len, ranges)) == 1


def test_auto_never_starts_more_actors_than_fit_at_their_num_cpus(ray_cluster):
    cluster_cpus = ray_cluster.cluster_resources()["CPU"]
    with RayEnvManager(cartpoles(4), num_cpus=cluster_cpus, envs_per_worker="auto") as envs:
        assert envs.worker_env_ranges == (range(0, 4),)


def test_auto_with_a_placement_group_runs_one_actor_per_bundle(ray_cluster):
    group = ray_cluster.util.placement_group([{"CPU": QUARTER_CPU}] * 3)
    ray_cluster.get(group.ready(), timeout=60)
    try:
        with ray_envs(cartpoles(7), placement_group=group, envs_per_worker="auto") as envs:
            assert envs.worker_env_ranges == (range(0, 3), range(3, 5), range(5, 7))
    finally:
        ray_cluster.util.remove_placement_group(group)


def test_workers_the_cluster_cannot_place_get_an_error_naming_what_they_asked_for():
    with pytest.raises(WorkerPlacementError, match=r"worker\(s\) 0 could not be placed within 2 s.*'gpu_island'"):
        ray_envs(cartpoles(1), resources={"gpu_island": 1}, start_timeout=2)
    assert worker_children() == []


def test_an_env_the_nodes_cannot_import_is_named_in_the_error(tmp_path, monkeypatch):
    (tmp_path / "driver_only_envs.py").write_text(
        "from envmanager_testenvs import CountingEnv\n\n\nclass DriverOnlyEnv(CountingEnv):\n    pass\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))  # this process only: Ray's workers never see it
    from driver_only_envs import DriverOnlyEnv

    with pytest.raises(WorkerDiedError, match=r"worker 0 \(envs 0\.\.0\) on host \S+ \(pid \d+\) died: .*"
                       r"ModuleNotFoundError: No module named 'driver_only_envs'\); it was needed for `start`"):
        ray_envs([DriverOnlyEnv])
    assert worker_children() == []


@pytest.mark.parametrize("option", ["max_restarts", "max_concurrency", "lifetime"])
def test_actor_options_the_manager_sets_itself_are_refused_saying_why(option):
    with pytest.raises(ValueError, match=f"actor option '{option}' is set by RayEnvManager itself"):
        ray_envs(cartpoles(1), actor_options={option: 1})


def test_resources_are_given_as_arguments_not_as_actor_options():
    with pytest.raises(ValueError, match="give 'num_cpus' as RayEnvManager's own `num_cpus` argument"):
        RayEnvManager(cartpoles(1), actor_options={"num_cpus": 1})


def test_no_actor_outlives_close():
    envs = ray_envs(cartpoles(2))
    envs.reset(seed=0)
    actors = [entry["ray"]["pid"] for entry in envs.timer_merger.worker_entries()]
    assert sorted(child.pid for child in worker_children()) == sorted(actors)
    envs.close()
    assert worker_children() == []


def test_close_ends_an_actor_process_that_does_not_end_when_ray_kills_it(monkeypatch):
    # A stopped process cannot act on Ray's kill, as a loaded machine can delay it past any grace.
    monkeypatch.setattr(ray_pool, "EXIT_GRACE_SECONDS", 0.0)
    envs = ray_envs(cartpoles(2))
    envs.reset(seed=0)
    os.kill(envs.timer_merger.worker_entries()[0]["ray"]["pid"], signal.SIGSTOP)
    envs.close(terminate=True)
    assert worker_children() == []


# --- what the dump records ------------------------------------------------------------------------


@pytest.fixture
def recording():
    events.clear_recording()
    events.start_recording()
    yield
    events.stop_recording()
    events.clear_recording()


def test_each_worker_is_named_with_its_host_node_and_process_in_the_dump_and_on_the_timeline(
    ray_cluster, recording, tmp_path
):
    steps = 20
    env_fns = [lambda: CountingEnv(episode_length=1000)] * 4
    with ray_envs(env_fns, envs_per_worker=2, flush_every=7, summaries_dir=tmp_path, run_id="where") as envs:
        envs.reset(seed=0)
        for _ in range(steps):
            envs.step(np.zeros(4, dtype=np.int64))
    with open(tmp_path / "where_timers.json") as file:
        tree = json.load(file)
    node = ray_cluster.get_runtime_context().get_node_id()
    workers = {entry["worker_id"]: entry for entry in tree["workers"]}
    for entry in workers.values():
        assert entry["host"] == socket.gethostname()
        assert entry["ray"]["node_id"] == node and entry["ray"]["pid"] == entry["pid"]
        assert entry["ray"]["clock"]["shared_clock"] and entry["ray"]["clock"]["offset_seconds"] == 0.0
        assert merged_count(entry, "env.step") == steps * 2  # nothing lost, whatever the flushes
        assert entry["critical_path"]["vector_steps"] == steps
        assert entry["env_time"]["calls"] == (steps + 1) * 2
    processes = tree["timeline"]["processes"]
    assert [process["name"] for process in processes] == ["trainer", "worker 0", "worker 1"]
    assert [process["pid"] for process in processes[1:]] == [workers[0]["pid"], workers[1]["pid"]]
    assert {process["host"] for process in processes} == {socket.gethostname()}


def test_a_clock_estimated_from_real_round_trips_holds_the_true_offset():
    with ray_envs(cartpoles(1)) as envs:
        clock = envs.estimate_clock(0)
    # The actor runs on this machine, so the true offset is 0: the estimate must say so within
    # its uncertainty, whatever the round trips cost on a loaded machine.
    assert clock.updates == 1 and not clock.shared
    assert abs(clock.offset) <= clock.uncertainty


def test_actors_on_another_machine_get_their_clock_estimated_at_start_and_periodically(
    monkeypatch, recording, tmp_path
):
    # This machine stands for another: its actors' clock is then not taken to be the driver's.
    monkeypatch.setattr("envmanager.ray.ray_pool.monotonic_clock_id", lambda: "boot:the-driver-elsewhere")
    with ray_envs(cartpoles(2), clock_sync_interval=0.01, summaries_dir=tmp_path, run_id="clocks") as envs:
        envs.reset(seed=0)
        for _ in range(10):
            time.sleep(0.02)  # a sync is due before each step
            envs.step(np.array([0, 1]))
    with open(tmp_path / "clocks_timers.json") as file:
        tree = json.load(file)
    for entry in tree["workers"]:
        clock = entry["ray"]["clock"]
        assert not clock["shared_clock"] and clock["estimates"] >= 5
        assert abs(clock["offset_seconds"]) <= clock["uncertainty_seconds"]  # truly one clock
    for process in tree["timeline"]["processes"][1:]:
        assert process["clock_uncertainty"] >= abs(process["clock_offset"])
    # Closing waits for the processes of actors on its own machine only; these passed for remote.
    wait_until_gone([entry["ray"]["pid"] for entry in tree["workers"]])


def test_machines_other_than_the_drivers_count_their_own_cores():
    nodes = [{"NodeID": "driver", "Resources": {"CPU": 8.0}},
             {"NodeID": "a", "Resources": {"CPU": 16.0}}, {"NodeID": "b", "Resources": {"CPU": 16.0}}]
    assert cores_of_worker_nodes({"a", "b"}, "driver", nodes) == 32
    assert cores_of_worker_nodes({"driver", "a"}, "driver", nodes) == 24
    assert cores_of_worker_nodes({"driver"}, "driver", nodes) is None


# --- the verdicts on Ray runs ---------------------------------------------------------------------


def test_a_planted_slow_worker_on_ray_is_named_a_straggler():
    (straggler,) = judge_run(planted_straggler_run(manager=RayEnvManager, num_cpus=QUARTER_CPU)).of_kind(STRAGGLER)
    assert straggler.evidence["worker_id"] == PLANTED_DELAYS.index(max(PLANTED_DELAYS))


def test_large_observations_through_ray_blame_the_transport_with_advice_for_ray():
    tree = run_vector_steps([LargeObservationEnv] * 4, steps=40, manager=RayEnvManager, num_cpus=QUARTER_CPU)
    (transport,) = judge_run(tree).of_kind(TRANSPORT_BOUND)
    assert "object store" in transport.title
    assert "shared_memory" not in transport.suggestion
