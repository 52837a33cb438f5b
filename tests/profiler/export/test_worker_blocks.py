"""Specification of the per-worker comparison behind the report's worker bars."""

from __future__ import annotations

from profiler.export.worker_blocks import main_worker_block, worker_block_times


def worker(name, **blocks):
    """A worker tree whose top-level blocks are ``name=(total, count)`` (or with a max)."""
    children = []
    for block_name, numbers in blocks.items():
        child = {"name": block_name, "total": numbers[0], "count": numbers[1], "self": numbers[0], "children": []}
        if len(numbers) > 2:
            child["max"] = numbers[2]
        children.append(child)
    return {"name": name, "worker_id": int(name.split()[-1]), "total": 0.0, "count": 1, "self": 0.0, "children": children}


def test_the_main_block_is_the_one_with_the_most_time_over_all_workers():
    workers = [worker("worker 0", step=(1.0, 10), send=(2.0, 10)), worker("worker 1", step=(3.0, 10))]
    assert main_worker_block(workers) == "step"


def test_without_workers_there_is_no_main_block():
    assert main_worker_block([]) is None


def test_each_worker_gets_its_mean_time_per_call():
    rows = worker_block_times([worker("worker 0", step=(1.0, 10)), worker("worker 1", step=(3.0, 20))], "step")
    assert [(row.worker, row.mean) for row in rows] == [("worker 0", 0.1), ("worker 1", 0.15)]


def test_the_longest_call_is_kept_when_the_tree_tracked_it():
    (row,) = worker_block_times([worker("worker 0", step=(1.0, 10, 0.4))], "step")
    assert row.max == 0.4


def test_each_row_carries_its_worker_id_so_a_verdict_can_point_at_it():
    rows = worker_block_times([worker("worker 0", step=(1.0, 1)), worker("worker 3", step=(1.0, 1))], "step")
    assert [row.worker_id for row in rows] == [0, 3]


def test_workers_that_never_ran_the_block_are_left_out():
    rows = worker_block_times([worker("worker 0", step=(1.0, 1)), worker("worker 1", send=(1.0, 1))], "step")
    assert [row.worker for row in rows] == ["worker 0"]
