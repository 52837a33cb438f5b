"""The multiprocessing Pool example runs as documented and dumps a merged tree that adds up."""

from __future__ import annotations

from example_runner import run_example

from profiler import load_timing_tree

def run_pool_example(*arguments: str) -> str:
    return run_example("multiprocessing_pool.py", *arguments).stdout


def child(node: dict, name: str) -> dict:
    return next(child for child in node["children"] if child["name"] == name)


def test_the_pool_example_dumps_every_task_merged_under_the_map(tmp_path):
    path = tmp_path / "pool_timers.json"
    output = run_pool_example("--workers", "2", "--tasks", "12", "--out", str(path))
    tree = load_timing_tree(path)
    task = child(child(tree, "pool.map"), "task")
    assert task["count"] == 12
    assert task["is_parallel"] is True
    assert sum(child(worker, "task")["count"] for worker in tree["workers"]) == 12
    assert "slowest worker" in output


def test_the_pool_example_records_a_timeline_per_worker(tmp_path):
    path = tmp_path / "pool_timers.json"
    run_pool_example("--workers", "2", "--tasks", "6", "--out", str(path), "--timeline")
    processes = load_timing_tree(path)["timeline"]["processes"]
    spans = [span for process in processes[1:] for thread in process["threads"] for span in thread["spans"]]
    assert processes[0]["name"] == "trainer"
    assert sum(1 for span in spans if span[0] == "task") == 6
