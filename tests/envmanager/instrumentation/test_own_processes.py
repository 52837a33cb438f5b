"""Specification: under ``rlprof run``, the envs that ``gymnasium.make`` builds in processes the
program starts itself (a hand-written worker pool), forked, spawned or from a forkserver, are
timed where they run, each process a worker of the dump's ``workers`` section; rlprof's own
workers are not timed twice.

Real programs (programs/) as real subprocesses, under ``python`` and under ``rlprof run``.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from envmanager.instrumentation.pool_tasks import TASK_SHIPMENT_SPACING_SECONDS
from tests.envmanager.instrumentation.test_environments_in_place import (
    PROGRAMS,
    ROLLOUT,
    counts,
    run_plain,
    run_rlprof,
    same_results,
)

POOL = PROGRAMS / "own_worker_pool.py"
POOL_EVALUATION = PROGRAMS / "pool_evaluation.py"
WORKERS, STEPS = 3, 150


def pool_arguments(context: str, *more: str) -> tuple[str, ...]:
    return ("--context", context, "--workers", str(WORKERS), "--steps", str(STEPS), *more)


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
@pytest.mark.parametrize("close_envs", [False, True], ids=["envs left open", "envs closed"])
def test_each_started_process_is_a_worker_with_every_env_call_and_the_same_results(tmp_path, context, close_envs):
    arguments = pool_arguments(context, *(["--close-envs"] if close_envs else []))
    run_plain(tmp_path, POOL, "plain.npy", *arguments)
    tree, stderr = run_rlprof(tmp_path, POOL, "timed.npy", *arguments)
    assert same_results(tmp_path / "plain.npy", tmp_path / "timed.npy")
    workers = tree["workers"]
    assert sorted(worker["worker_id"] for worker in workers) == list(range(WORKERS))
    for worker in workers:
        assert worker["manager"] == "Process"
        assert counts(worker, "env.step") == STEPS
        assert worker["channel"] == "complete"  # shipped as the process ended, closed or not
        assert "critical_path" not in worker
    assert counts(tree, "env.step") == WORKERS * STEPS  # merged into the trainer's tree, nothing twice
    assert f"rlprof: environments timed where they ran: gymnasium.make in {WORKERS} processes the program started" \
        in stderr


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_a_process_subclass_that_overrides_run_has_its_envs_timed(tmp_path, context):
    arguments = pool_arguments(context, "--subclass", "--close-envs")
    run_plain(tmp_path, POOL, "plain.npy", *arguments)
    tree, _ = run_rlprof(tmp_path, POOL, "timed.npy", *arguments)
    assert same_results(tmp_path / "plain.npy", tmp_path / "timed.npy")
    assert [counts(worker, "env.step") for worker in tree["workers"]] == [STEPS] * WORKERS


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_daemons_left_running_are_not_waited_for_and_the_dump_says_so(tmp_path, context):
    arguments = pool_arguments(context, "--leave-running")
    run_plain(tmp_path, POOL, "plain.npy", *arguments)
    tree, stderr = run_rlprof(tmp_path, POOL, "timed.npy", *arguments)
    assert same_results(tmp_path / "plain.npy", tmp_path / "timed.npy")
    for index in range(WORKERS):
        assert (f"rlprof: Process worker {index}: a daemon process still running as the program ended, which "
                "multiprocessing ends at the exit: the dump lacks what it timed since its last shipment (") in stderr
    assert "_Terminated" not in stderr  # terminated at the exit, each dies by SIGTERM as under python


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("env_per", ["task", "worker"])
def test_a_pool_worker_ships_every_call_of_its_envs_before_the_pool_terminates_it(tmp_path, context, env_per):
    # Per task: each task closes its env (the worker's goodbye) and the next one builds another.
    # Per worker: the pool's initializer builds it, no task closes it, and the pool's exit
    # terminates the worker; each task is longer than the spacing of a worker's shipments before
    # its results (pool_tasks), here 400 episodes, about 9,000 steps.
    assert TASK_SHIPMENT_SPACING_SECONDS <= 0.02
    arguments = ("--context", context, "--workers", "2", "--tasks", "6",
                 *(["--env-per-worker", "--episodes", "400"] if env_per == "worker" else []))
    run_plain(tmp_path, POOL_EVALUATION, "plain.json", *arguments)
    tree, stderr = run_rlprof(tmp_path, POOL_EVALUATION, "timed.json", *arguments)
    plain = json.loads((tmp_path / "plain.json").read_text())
    assert json.loads((tmp_path / "timed.json").read_text()) == plain
    assert counts(tree, "env.step") == sum(task["steps"] for task in plain)
    assert counts(tree, "env.reset") == sum(task["resets"] for task in plain)
    assert {worker["channel"] for worker in tree["workers"]} == {"complete"}
    assert "rlprof: Process worker" not in stderr  # no line of timers lost


def test_the_worker_table_says_no_vector_step_joins_started_processes(tmp_path):
    _, stderr = run_rlprof(tmp_path, POOL, "timed.npy", *pool_arguments("fork"))
    assert "(last, waited on: no vector step in this run for a worker to be last in)" in stderr


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_started_process_names_where_its_time_outside_env_calls_went(tmp_path, context):
    # Long enough for several looks of each worker's sampler (one each 100 ms) on a loaded machine.
    tree, _ = run_rlprof(tmp_path, POOL, "timed.npy", *pool_arguments(context, "--steps", "3000"))
    for worker in tree["workers"]:
        places = worker["untimed_samples"]["places"]
        assert {place["function"] for place in places} <= {"worker"}
        assert {place["file"] for place in places} == {str(POOL)}


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("options", [(), ("--vector-env=all",)], ids=["in place", "substituted"])
def test_rlprofs_own_worker_processes_time_their_envs_once(tmp_path, options, context):
    # vector_rollout's factories call gymnasium.make in the workers (and, substituted, in the
    # process that reads the first env's spaces).
    tree, stderr = run_rlprof(tmp_path, ROLLOUT, "timed.npz", "--vector", "async", "--context", context,
                              "--envs", "2", "--steps", "40", options=options)
    assert len(tree["workers"]) == 2
    assert "Process" not in {worker["manager"] for worker in tree["workers"]}
    assert "processes the program started" not in stderr
    merged = counts(tree, "env.step")
    assert merged == sum(counts(worker, "env.step") for worker in tree["workers"]) > 0


GYMNASIUM_IMPORTED_IN_THE_WORKER = """
import multiprocessing


def worker(steps):
    import gymnasium as gym  # the spawned process imports Gymnasium only here, after rlprof's mark was unpickled

    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()


if __name__ == "__main__":
    process = multiprocessing.get_context("spawn").Process(target=worker, args=(25,))
    process.start()
    process.join()
"""


def test_a_spawned_process_that_imports_gymnasium_late_has_its_envs_timed(tmp_path):
    program = tmp_path / "late_import.py"
    program.write_text(GYMNASIUM_IMPORTED_IN_THE_WORKER)
    tree, _ = run_rlprof(tmp_path, program)
    (worker,) = tree["workers"]
    assert counts(worker, "env.step") == 25


MAKE_BOUND_BEFORE_THE_PROCESS_STARTED = """
import functools
import multiprocessing
import sys

from gymnasium import make  # bound again in each spawned process, before rlprof's code runs there


def by_name(steps):
    run(make, steps)


def run(make_env, steps):
    env = make_env("CartPole-v1")
    env.reset(seed=0)
    for _ in range(steps):
        _, _, terminated, truncated, _ = env.step(0)
        if terminated or truncated:
            env.reset()


if __name__ == "__main__":
    context = multiprocessing.get_context(sys.argv[1])
    targets = [functools.partial(by_name, 20), functools.partial(run, make, 30)]  # make pickled in the target
    for target in targets:
        process = context.Process(target=target)
        process.start()
        process.join()
"""


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_names_bound_to_gymnasium_make_before_a_fresh_process_starts_are_timed(tmp_path, context):
    program = tmp_path / "make_by_name.py"
    program.write_text(MAKE_BOUND_BEFORE_THE_PROCESS_STARTED)
    tree, _ = run_rlprof(tmp_path, program, context)
    assert sorted(counts(worker, "env.step") for worker in tree["workers"]) == [20, 30]


FAILING_WORKER = """
import multiprocessing


def worker():
    raise ValueError("the worker's own error")


if __name__ == "__main__":
    process = multiprocessing.get_context("spawn").Process(target=worker)
    process.start()
    process.join()
"""


def test_a_spawned_process_reports_its_error_with_the_programs_frames_only(tmp_path):
    program = tmp_path / "failing_worker.py"
    program.write_text(FAILING_WORKER)
    plain = subprocess.run([sys.executable, str(program)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    _, stderr = run_rlprof(tmp_path, program)
    end = "ValueError: the worker's own error"
    traceback = stderr[stderr.index("Traceback"):stderr.index(end)]
    assert traceback == plain.stderr[plain.stderr.index("Traceback"):plain.stderr.index(end)]


THREAD_POOL_EVALUATION = """
from multiprocessing.pool import ThreadPool

import gymnasium as gym


def episode(seed):
    env = gym.make("CartPole-v1")
    env.reset(seed=seed)
    steps, done = 0, False
    while not done:
        _, _, terminated, truncated, _ = env.step(0)
        steps, done = steps + 1, terminated or truncated
    env.close()
    return steps


with ThreadPool(2) as pool:
    print(sum(pool.map(episode, range(10))))
"""


def test_a_thread_pools_workers_are_threads_of_the_trainer_and_left_as_they_are(tmp_path):
    program = tmp_path / "thread_pool.py"
    program.write_text(THREAD_POOL_EVALUATION)
    plain = subprocess.run([sys.executable, str(program)], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    profiled = subprocess.run([sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", str(program)],
                              cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert plain.stdout == profiled.stdout
    tree = json.loads((tmp_path / "out" / "thread_pool_timers.json").read_text())
    assert counts(tree, "env.step") == int(plain.stdout)
    assert "workers" not in tree or not tree["workers"]
