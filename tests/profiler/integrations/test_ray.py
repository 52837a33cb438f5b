"""Specification of timers in any Ray code: timed tasks and actors send their blocks back with
their results, merged on the driver under the block that launched them, on a real local Ray."""

from __future__ import annotations

import socket

import pytest

from profiler import get_timer_tree, hierarchical_timer
from profiler.recording import events
from profiler.analysis.block_stats import walk_nodes

ray = pytest.importorskip("ray", reason="Ray is not installed; pip install -e '.[ray]' runs these tests")

from profiler.integrations import ray as timed_ray  # noqa: E402
from timed_ray_work import Learner, fan_out, simulate  # noqa: E402
from tree_paths import find  # noqa: E402


def ray_workers(tree: dict) -> list[dict]:
    return [entry for entry in tree.get("workers", []) if entry.get("manager") == "ray"]


def test_a_tasks_blocks_merge_under_the_block_that_launched_it(ray_cluster):
    with hierarchical_timer("collect"):
        refs = [simulate.remote(3) for _ in range(4)]
    with hierarchical_timer("later"):
        assert timed_ray.get(refs) == [3, 3, 3, 3]
    tree = get_timer_tree()
    task = find(tree, "collect", "simulate")
    assert task["is_parallel"] and task["count"] == 4
    assert find(task, "physics")["count"] == 12  # nothing lost
    assert find(tree, "later")["children"] == []


def test_each_worker_process_of_tasks_has_its_own_tree_naming_where_it_ran(ray_cluster):
    with hierarchical_timer("collect"):
        timed_ray.get([simulate.remote(1) for _ in range(6)])
    workers = ray_workers(get_timer_tree())
    assert workers and sum(find(worker, "simulate")["count"] for worker in workers) == 6
    node = ray_cluster.get_runtime_context().get_node_id()
    for worker in workers:
        assert worker["host"] == socket.gethostname()
        assert worker["ray"] == {"kind": "task", "node_id": node, "pid": worker["pid"]}


def test_each_actor_has_its_own_tree(ray_cluster):
    learners = [Learner.remote(), Learner.remote()]
    with hierarchical_timer("train"):
        for _ in range(3):
            assert timed_ray.get([learner.update.remote() for learner in learners]) in ([1, 1], [2, 2], [3, 3])
    tree = get_timer_tree()
    assert find(tree, "train", "Learner.update", "backward")["count"] == 6
    actors = [worker for worker in ray_workers(tree) if worker["ray"]["kind"] == "actor"]
    assert sorted(worker["ray"]["actor_id"] for worker in actors) == sorted(
        learner.handle._actor_id.hex() for learner in learners
    )
    for actor in actors:
        assert actor["ray"]["class"] == "Learner" and find(actor, "Learner.update")["count"] == 3
    for learner in learners:
        ray.kill(learner.handle)


def test_a_call_that_raises_ships_its_blocks_with_its_workers_next_result(ray_cluster):
    learner = Learner.remote()
    with pytest.raises(FloatingPointError, match="loss is NaN"):
        timed_ray.get(learner.diverge.remote())
    with hierarchical_timer("train"):
        timed_ray.get(learner.update.remote())
    diverge = find(get_timer_tree(), "train", "Learner.diverge")
    assert diverge["errors"] == 1 and find(diverge, "doomed")["errors"] == 1
    ray.kill(learner.handle)


def test_timed_tasks_launched_by_a_timed_task_reach_the_driver_inside_its_tree(ray_cluster):
    with hierarchical_timer("collect"):
        assert timed_ray.get(fan_out.remote(3)) == [1, 1, 1]
    assert find(get_timer_tree(), "collect", "fan_out", "simulate", "physics")["count"] == 3


def test_plain_ray_get_returns_the_wrapped_result_and_says_how_to_unwrap_it(ray_cluster):
    wrapped = ray.get(simulate.remote(1))
    assert isinstance(wrapped, timed_ray.TimedResult) and wrapped.value == 1
    assert "profiler.integrations.ray.get" in repr(wrapped)


def test_results_of_calls_that_are_not_timed_pass_through(ray_cluster):
    assert timed_ray.get(ray.put("plain")) == "plain"


def test_timed_workers_record_their_timeline_while_the_driver_records(ray_cluster):
    events.start_recording()
    try:
        with hierarchical_timer("collect"):
            timed_ray.get(simulate.remote(2))
        processes = get_timer_tree()["timeline"]["processes"]
    finally:
        events.stop_recording()
        events.clear_recording()
    (worker,) = [process for process in processes if process["name"] != "trainer"]
    spans = [span[0] for thread in worker["threads"] for span in thread["spans"]]
    assert spans.count("physics") == 2 and "simulate" in spans


def worker_spans(tree: dict) -> int:
    processes = tree["timeline"]["processes"][1:]
    return sum(len(thread["spans"]) for process in processes for thread in process["threads"])


def test_timed_workers_stop_recording_when_the_driver_has_stopped(ray_cluster):
    events.start_recording()
    try:
        timed_ray.get([simulate.remote(1) for _ in range(4)])
    finally:
        events.stop_recording()
    recorded = worker_spans(get_timer_tree())
    timed_ray.get([simulate.remote(1) for _ in range(4)])
    events.clear_recording()
    assert recorded > 0 and worker_spans(get_timer_tree()) == recorded


def test_more_than_one_return_is_refused():
    with pytest.raises(TypeError, match="num_returns must be 1"):
        timed_ray.remote(num_returns=2)


def test_async_actors_are_refused():
    class Streamer:
        async def next(self) -> int:
            return 1

    with pytest.raises(TypeError, match="Streamer.next is async"):
        timed_ray.remote(Streamer)


def test_results_fetched_in_any_order_lose_no_blocks(ray_cluster):
    learner = Learner.remote()
    with hierarchical_timer("train"):
        refs = [learner.update.remote() for _ in range(3)]
    for ref in reversed(refs):  # the last call's payload arrives first
        timed_ray.get(ref)
    tree = get_timer_tree()
    assert find(tree, "train", "Learner.update", "backward")["count"] == 3
    (actor,) = [worker for worker in ray_workers(tree) if worker["ray"]["kind"] == "actor"]
    assert (actor["payloads"], actor["missed_payloads"], actor["duplicates"]) == (3, 0, 0)
    ray.kill(learner.handle)
