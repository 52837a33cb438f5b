"""Specification of ``rlprof run`` on a Ray program without edits: every Ray worker process is timed
through Ray's own worker set-up hook, and its blocks come home merged per worker.

The program (``ray_programs/plain_ray.py``) is plain Ray code: a remote function, actors that step
a Gymnasium CartPole env and call a ``@timed`` function, a ``runtime_env`` of its own with
``env_vars`` and a set-up hook, an actor it kills and one still in a call at its end. It runs twice, as a job on the
test session's real Ray (2 CPUs, one node), which it joins: once with ``python``, once under ``rlprof run``; the tests
read both.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("ray", reason="Ray is not installed; pip install -e '.[ray]' runs these tests")

from profiler import load_timing_tree  # noqa: E402
from ray_worker_runs import PROGRAMS, actors, child, ray_workers, run_python  # noqa: E402


@pytest.fixture(scope="module")
def runs(ray_cluster, tmp_path_factory: pytest.TempPathFactory) -> dict:
    # Both runs join the session's Ray (a job each), as a program on a running cluster does.
    address = ray_cluster.get_runtime_context().gcs_address
    folder = tmp_path_factory.mktemp("plain_ray")
    plain = run_python(folder, str(PROGRAMS / "plain_ray.py"), ray_address=address)
    assert plain.returncode == 0, plain.stderr
    profiled = run_python(folder, "-m", "profiler", "run", "--summaries-dir", "out", str(PROGRAMS / "plain_ray.py"),
                          ray_address=address)
    assert profiled.returncode == 0, profiled.stderr
    tree = load_timing_tree(folder / "out" / "plain_ray_timers.json")
    return {"plain": plain, "profiled": profiled, "tree": tree}


def test_the_programs_results_and_output_are_its_own(runs):
    assert runs["profiled"].stdout == runs["plain"].stdout
    assert "runs [50.0, 50.0]" in runs["plain"].stdout


def test_the_programs_runtime_env_is_kept_its_env_vars_and_its_own_setup_hook(runs):
    assert "environment ('kept', 'yes')" in runs["profiled"].stdout


def test_each_actor_has_its_own_tree_with_its_env_steps_and_timed_function_counted_exactly(runs):
    runners = actors(runs["tree"], "Runner")
    assert len(runners) == 2
    for runner in runners:
        run = child(runner, "Runner.run")
        assert run["count"] == 2
        assert child(run, "env.step")["count"] == 50 + 30
        assert child(run, "score")["count"] == 2
        assert child(runner, "Runner.__init__")["count"] == 1
        assert runner["channel"] == "complete"


def test_remote_function_calls_are_blocks_of_the_worker_processes_that_ran_them(runs):
    task_workers = [entry for entry in ray_workers(runs["tree"]) if entry["ray"]["kind"] == "task"]
    squares = [child(entry, "square") for entry in task_workers if any(c["name"] == "square" for c in entry["children"])]
    assert sum(square["count"] for square in squares) == 5
    assert sum(child(square, "multiply")["count"] for square in squares) == 5


def test_the_driver_tree_sums_the_workers_blocks_marked_parallel(runs):
    run = child(runs["tree"], "Runner.run")
    assert run["is_parallel"] and run["count"] == 4
    assert child(run, "env.step")["count"] == 2 * 80


def test_each_worker_names_its_process_node_and_actor(runs):
    for entry in ray_workers(runs["tree"]):
        assert entry["pid"] == entry["ray"]["pid"] > 0
        assert len(entry["ray"]["node_id"]) == 56  # Ray's node id, in hex
        assert entry["host"]
    for runner in actors(runs["tree"], "Runner"):
        assert len(runner["ray"]["actor_id"]) == 32


def test_a_killed_actor_is_named_with_what_was_lost(runs):
    [doomed] = actors(runs["tree"], "Doomed")
    assert doomed["channel"].startswith("its process ended without sending its last timers")
    assert child(doomed, "Doomed.__init__")["count"] == 1  # shipped before it was killed
    assert "actor Doomed" in runs["profiled"].stderr and "is lost" in runs["profiled"].stderr


def test_an_actor_still_in_a_call_at_the_end_is_named_with_its_call_among_those_that_may_have_lost_timers(runs):
    # It was started just before the end: the driver asks it even if it has not read its hello yet
    # (test_ray_workers_channel.py), and it answers that its call is still running.
    [sleeper] = actors(runs["tree"], "Sleeper")
    assert sleeper["channel"] == ("Sleeper.nap still running when the driver asked for its last timers: what it "
                                  "timed since its last shipment may be lost")
    assert "(actor Sleeper, pid" in runs["profiled"].stderr


def test_the_run_says_which_ray_workers_were_timed_and_not_that_no_env_was(runs):
    stderr = runs["profiled"].stderr
    task_workers = sum(1 for entry in ray_workers(runs["tree"]) if entry["ray"]["kind"] == "task")
    assert (f"rlprof: Ray workers timed: {4 + task_workers} processes on 1 node: 4 actors (Doomed, Runner, Sleeper), "
            f"{task_workers} task worker{'s' if task_workers > 1 else ''}, environments timed in 2 of them") in stderr
    assert "no environment was instrumented" not in stderr


def test_rlprofs_own_ray_code_is_left_to_ship_its_own_timers(ray_cluster, tmp_path):
    # RayEnvManager's env actors and profiler.integrations.ray's actors reply with their timers
    # themselves: under rlprof run they are timed once, by their own managers, as under python.
    example = Path(__file__).resolve().parents[3] / "examples" / "ray_rollouts.py"
    profiled = run_python(tmp_path, "-m", "profiler", "run", "--summaries-dir", "out", str(example), "here",
                          ray_address=ray_cluster.get_runtime_context().gcs_address)
    assert profiled.returncode == 0, profiled.stderr
    tree = load_timing_tree(tmp_path / "out" / "ray_rollouts_timers.json")
    assert sorted((entry["manager"], entry["worker_id"]) for entry in tree["workers"]) == [
        ("envmanager", 0), ("envmanager", 1), ("ray", 0)]
    for entry in tree["workers"]:
        if entry["manager"] == "envmanager":  # each env step timed once: by the env worker itself
            assert sorted(node["name"] for node in entry["children"]) == ["env.reset", "env.step"]
    [learner] = [entry for entry in tree["workers"] if entry["manager"] == "ray"]
    update = child(learner, "Learner.update")
    assert [node["name"] for node in update["children"]] == ["backward"]
    assert update["count"] == child(update, "backward")["count"] == 4


def test_with_memory_each_timed_ray_worker_samples_its_own(ray_cluster, tmp_path):
    # rlprof run --memory: every Ray worker process rlprof times samples its memory as the driver
    # does, and the samples come home with its timers, one memory entry per worker process.
    profiled = run_python(tmp_path, "-m", "profiler", "run", "--memory=0.1", "--summaries-dir", "out",
                          str(PROGRAMS / "plain_ray.py"), ray_address=ray_cluster.get_runtime_context().gcs_address)
    assert profiled.returncode == 0, profiled.stderr
    tree = load_timing_tree(tmp_path / "out" / "plain_ray_timers.json")
    sampled = {process["pid"]: process for process in tree["memory"]["processes"]}
    assert sampled[int(tree["metadata"]["pid"])]["name"] == "trainer"
    for entry in ray_workers(tree):
        assert sampled[entry["pid"]]["name"] == f"worker {entry['worker_id']}"
        assert sampled[entry["pid"]]["samples"]
