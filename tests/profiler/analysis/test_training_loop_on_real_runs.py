"""Specification: on real runs under ``rlprof run`` (real torch, real Gymnasium, real
Stable-Baselines3), the verdicts tell the training loop from the run's start-up and end. The
``untimed`` verdict says that the time outside any block is start-up and end where a short run is
built to spend it there, and says how much fell inside the loop, with the planted slow function
named, where the run is built to spend it there. What limits the loop is judged on the loop: a
short SB3 run over ``SubprocVecEnv`` of cheap envs is told that its pipe is the limit though
start-up takes most of its wall time, and a run built on slow envs is not, nor such a run on a
core shared with busy programs, whose trainer waits for that core inside its steps; a worker that
holds up a short loop after a long start-up is a straggler, and no worker is where none is slow; a timed
policy that takes most of a short loop after a long start-up is the trainer's limit, and a light
one is not; untimed code between the steps of a short loop is told beside the start-up, and a loop
without any is not said to have it."""

from __future__ import annotations

import contextlib
import os

import pytest

pytest.importorskip("stable_baselines3")  # installed by the README's test command: runs in CI

from framework_runs import rlprof_run  # noqa: E402
from kernel_counts import busy_program_outside_the_run  # noqa: E402
from profiler.analysis.machine_verdicts import OUTSIDE_LOAD  # noqa: E402
from profiler.analysis.verdicts import (  # noqa: E402
    ENV_BOUND,
    STRAGGLER,
    STRAGGLER_MIN_COST_SHARE,
    TRAINER_BOUND,
    TRAINER_MIN_SHARE,
    TRANSPORT_BOUND,
    TRANSPORT_MIN_SHARE,
    UNTIMED,
    WORKERS_BALANCED,
    judge_run,
)


def verdict_of(run: dict, kind: str) -> dict:
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == kind]
    return verdict


def untimed_verdict(run: dict) -> dict:
    return verdict_of(run, UNTIMED)


def kinds(run: dict) -> list[str]:
    return [verdict["kind"] for verdict in run["verdicts"]]


@pytest.fixture(scope="module")
def short_sb3_run(tmp_path_factory):
    """SB3's PPO for 512 steps over ``SubprocVecEnv``: importing torch and SB3, starting the
    workers and building the model take most of the run; its two rollouts and updates are
    blocks, so little is untimed inside the loop, and CartPole's steps cost less than the pipe."""
    return rlprof_run(tmp_path_factory.mktemp("short_sb3"), "sb3_ppo.py", "--timesteps", "512",
                      "--vec-env", "subproc")


@pytest.fixture(scope="module")
def slow_env_run(tmp_path_factory):
    """The CleanRL-style PPO over ``AsyncVectorEnv``, each env step 2 ms longer: a short run whose
    loop is its envs' compute, far above the pipe's cost."""
    return rlprof_run(tmp_path_factory.mktemp("slow_env"), "cleanrl_torch_ppo.py", "--async-envs",
                      "--env-seconds", "0.002", "--total-timesteps", "512", "--num-steps", "32")


@pytest.fixture(scope="module")
def slow_logging_run(tmp_path_factory):
    """The CleanRL-style PPO for 24 iterations, each followed by 0.75 s of logging that nothing
    times: 17 s of untimed time between its rollouts, against a start-up of 2 s on a quiet
    machine and up to 8 s beside the rest of the suite (the first ``Adam(...)`` loads much of
    torch), and the last logging's 0.75 s after the loop."""
    return rlprof_run(tmp_path_factory.mktemp("slow_logging"), "cleanrl_torch_ppo.py", "--total-timesteps", "1536",
                      "--slow-logging", "0.75")


def test_a_short_sb3_run_is_told_its_untimed_time_is_start_up_and_end(short_sb3_run):
    verdict = untimed_verdict(short_sb3_run)
    assert "before the training loop's first step or after its last (start-up, end)" in verdict["title"]
    assert verdict["suggestion"].startswith("Most of it is the run's start-up and end, outside the training loop")
    evidence = verdict["evidence"]
    assert evidence["start_and_end_seconds"] >= 0.5 * evidence["untimed_seconds"]


def test_a_run_that_logs_slowly_between_rollouts_is_told_how_much_fell_inside_the_loop(slow_logging_run):
    verdict = untimed_verdict(slow_logging_run)
    assert "of it inside the training loop (between steps" in verdict["title"]
    assert "write_logs (cleanrl_torch_ppo.py" in verdict["title"]
    assert not verdict["suggestion"].startswith("Most of it is the run's start-up")
    assert verdict["evidence"]["between_rollouts_seconds"] >= 23 * 0.75


def test_a_short_sb3_runs_workers_all_ship_their_timers_to_rlprof(short_sb3_run):
    # The pipe's verdict below needs them: a worker whose timers were lost gives no step to judge.
    channels = {worker["name"]: worker["channel"] for worker in short_sb3_run["tree"]["workers"]}
    assert set(channels.values()) == {"complete"}, (channels, short_sb3_run["stderr"][-2000:])


def test_a_short_sb3_run_over_subprocesses_is_told_its_pipe_limits_the_loop(short_sb3_run):
    verdict = verdict_of(short_sb3_run, TRANSPORT_BOUND)
    assert verdict["title"].startswith("the pipe is the limit")
    evidence = verdict["evidence"]
    pipe = evidence["send_seconds"] + evidence["receive_and_decode_seconds"] + evidence["wait_beyond_compute_seconds"]
    assert pipe >= TRANSPORT_MIN_SHARE * evidence["training_loop_seconds"]
    assert evidence["training_loop_seconds"] < 0.5 * short_sb3_run["wall_time"]  # start-up took the rest


def test_a_short_run_built_on_slow_envs_is_told_its_envs_not_its_pipe_limit_the_loop(slow_env_run):
    assert TRANSPORT_BOUND not in kinds(slow_env_run)
    # env_bound gives way to outside_load when other programs take the cores (the rest of the
    # suite, beside this run): then the machine, not the envs, is what to change first.
    assert ENV_BOUND in kinds(slow_env_run) or OUTSIDE_LOAD in kinds(slow_env_run)


@pytest.fixture(scope="module")
def slow_envs_sharing_a_core(tmp_path_factory):
    """The run on slow envs above, each env step 1 ms longer, on one core that three busy programs
    outside the run take too: each time the actions wake a worker, or a reply wakes the trainer,
    the one woken waits for that core, so the vector step's time beyond the envs' (1.8 to 3 ms a
    step, against 1.3 ms of env compute) is mostly waiting for a core, not the pipe's work (the
    trainer ran 0.2 to 0.3 ms a step on the core)."""
    allowed = os.sched_getaffinity(0)
    with contextlib.ExitStack() as busy:
        for _ in range(3):
            busy.enter_context(busy_program_outside_the_run(cores=1))
        os.sched_setaffinity(0, {min(allowed)})  # the run's processes inherit it: the busy programs' core
        try:
            return rlprof_run(tmp_path_factory.mktemp("sharing_a_core"), "cleanrl_torch_ppo.py", "--async-envs",
                              "--env-seconds", "0.001", "--total-timesteps", "512", "--num-steps", "32")
        finally:
            os.sched_setaffinity(0, allowed)


def test_a_run_whose_trainer_waits_for_a_core_inside_its_steps_is_not_told_its_pipe_is_the_limit(
        slow_envs_sharing_a_core):
    assert TRANSPORT_BOUND not in kinds(slow_envs_sharing_a_core)


def test_read_without_the_trainers_waits_inside_its_steps_the_same_run_would_blame_the_pipe(
        slow_envs_sharing_a_core):
    # What the run is built to show: its steps' waits for a core are what would make the pipe look slow.
    tree = slow_envs_sharing_a_core["tree"]
    assert tree["scheduling"]["in_blocks"]["vector.step"]["run_queue_seconds"] > 0
    without = {**tree, "scheduling": {key: value for key, value in tree["scheduling"].items() if key != "in_blocks"}}
    assert TRANSPORT_BOUND in judge_run(without).kinds


def slow_start_run(folder, *arguments: str) -> dict:
    """6 s of start-up, then 100 steps of 4 CartPole envs in ``AsyncVectorEnv`` workers."""
    return rlprof_run(folder, "slow_start.py", "--start-up-seconds", "6", "--steps", "100", *arguments)


@pytest.fixture(scope="module")
def slow_start_with_a_straggler(tmp_path_factory):
    """Worker 3's env takes 2 ms longer a step: some 0.2 s of waits, most of the loop, about 3% of
    the wall time."""
    return slow_start_run(tmp_path_factory.mktemp("straggler"), "--slow-worker-ms", "2")


def test_a_worker_that_holds_up_a_short_loop_after_a_long_start_up_is_a_straggler(slow_start_with_a_straggler):
    verdict = verdict_of(slow_start_with_a_straggler, STRAGGLER)
    assert verdict["title"].startswith("worker 3 holds up the vector step")
    # Under the threshold as a share of the wall time, far over it as a share of the loop.
    assert verdict["share"] < STRAGGLER_MIN_COST_SHARE


@pytest.fixture(scope="module")
def slow_start_with_a_light_policy(tmp_path_factory):
    """No env slower than the others; the program times its policy, 0.1 ms a step: far less than
    the vector steps."""
    return slow_start_run(tmp_path_factory.mktemp("light_policy"), "--timed-policy-ms", "0.1")


def test_no_worker_is_a_straggler_after_a_long_start_up_where_none_is_slow(slow_start_with_a_light_policy):
    assert STRAGGLER not in kinds(slow_start_with_a_light_policy)
    assert WORKERS_BALANCED in kinds(slow_start_with_a_light_policy)


def test_a_timed_policy_that_takes_most_of_a_short_loop_after_a_long_start_up_is_the_trainers_limit(tmp_path):
    run = slow_start_run(tmp_path, "--timed-policy-ms", "5")  # 0.5 s of policy: about 7% of the wall time
    verdict = verdict_of(run, TRAINER_BOUND)
    assert verdict["title"].startswith("the trainer's own code is the limit: its blocks take ")
    assert "of the training loop" in verdict["title"] and "led by policy.act" in verdict["title"]
    evidence = verdict["evidence"]
    assert evidence["trainer_seconds"] >= TRAINER_MIN_SHARE * evidence["training_loop_seconds"]
    assert verdict["share"] < TRAINER_MIN_SHARE  # of the wall time: the start-up took most of it


def test_a_light_timed_policy_after_a_long_start_up_is_not_the_trainers_limit(slow_start_with_a_light_policy):
    assert TRAINER_BOUND not in kinds(slow_start_with_a_light_policy)


def test_untimed_code_between_the_steps_of_a_short_loop_is_told_beside_the_start_up(tmp_path):
    # 1 s between steps after 6 s of start-up: some 15 of the sampler's looks fall in the loop.
    run = slow_start_run(tmp_path, "--untimed-ms", "10")
    verdict = untimed_verdict(run)
    assert "of it before the training loop's first step or after its last (start-up, end), and " in verdict["title"]
    assert "of the training loop, inside the training loop (between steps " in verdict["title"]
    assert "inside the loop is paid at every step or rollout" in verdict["suggestion"]
    # The start-up's sleep and the loop's are told apart by when the sampler saw them.
    assert "; inside the loop: <module> (slow_start.py:" in verdict["title"]


def test_a_short_loop_without_untimed_code_between_its_steps_is_not_said_to_have_it(slow_start_with_a_light_policy):
    verdict = untimed_verdict(slow_start_with_a_light_policy)
    assert "(start-up, end)" in verdict["title"] and "inside the training loop" not in verdict["title"]
