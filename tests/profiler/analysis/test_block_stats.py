"""Specification of per-block statistics: rows, their process and kind, selection and ordering."""

from __future__ import annotations

import re

import pytest
from run_files import write_vector_run

from profiler import load_timing_tree
from profiler.analysis.block_stats import (
    block_rows,
    has_min_max,
    matches_type,
    process_rows,
    select_blocks,
)


@pytest.fixture
def plain_rows(plain_tree):
    return block_rows(plain_tree)


def by_label(rows):
    return {row.label: row for row in rows}


def test_each_block_is_a_row_named_by_its_path(plain_rows):
    assert sorted(by_label(plain_rows)) == ["backward", "eval", "eval/forward", "forward", "load"]


def test_a_row_carries_total_self_count_and_time_per_call(plain_rows):
    backward = by_label(plain_rows)["backward"]
    assert (backward.total, backward.self_time, backward.count) == pytest.approx((3.0, 3.0, 3))
    assert backward.avg == pytest.approx(1.0)


def test_the_share_of_wall_time_divides_by_the_wall_time(plain_rows):
    assert by_label(plain_rows)["backward"].share_of(5.25) == pytest.approx(3.0 / 5.25)
    assert by_label(plain_rows)["backward"].share_of(0.0) is None


MLAGENTS_LIKE_TREE = {"name": "root", "total": 2.0, "count": 1, "self": 0.0, "children": [
    {"name": "step", "total": 2.0, "count": 4, "self": 2.0, "children": []}]}
"""A tree from a file that records no per-call min/max (ML-Agents', an older rlprof)."""


def test_rows_without_per_call_min_max_leave_them_unknown():
    rows = block_rows(MLAGENTS_LIKE_TREE)
    assert not has_min_max(rows)
    assert all(row.min_time is None and row.max_time is None for row in rows)


def test_rlprof_records_every_blocks_shortest_and_longest_call(plain_rows):
    assert has_min_max(plain_rows)
    backward = by_label(plain_rows)["backward"]
    assert backward.min_time <= backward.avg <= backward.max_time


def test_a_block_that_never_completed_a_call_does_not_hide_the_others_extremes():
    tree = {"name": "root", "total": 2.0, "count": 1, "self": 0.0, "children": [
        {"name": "loop", "total": 2.0, "count": 0, "self": 1.0, "children": [
            {"name": "step", "total": 1.0, "count": 2, "self": 1.0, "min": 0.25, "max": 0.75,
             "children": []}]}]}
    rows = block_rows(tree)
    assert has_min_max(rows)
    assert [row.label for row in select_blocks(rows, order_by="max")] == ["loop/step", "loop"]


def test_per_call_min_max_are_read_when_nodes_record_them():
    tree = {"name": "root", "total": 1.0, "count": 1, "self": 0.0, "children": [
        {"name": "step", "total": 1.0, "count": 4, "self": 1.0, "min": 0.1, "max": 0.4,
         "children": []}]}
    (step,) = block_rows(tree)
    assert (step.min_time, step.max_time) == (0.1, 0.4)
    assert has_min_max([step])


def test_selection_orders_largest_first_by_default(plain_rows):
    assert [row.label for row in select_blocks(plain_rows)][:2] == ["backward", "eval"]


def test_selection_breaks_ties_by_path(plain_rows):
    labels = [row.label for row in select_blocks(plain_rows, order_by="total")]
    assert labels == ["backward", "eval", "eval/forward", "forward", "load"]


def test_selection_orders_by_calls_when_asked(plain_rows):
    assert [row.label for row in select_blocks(plain_rows, order_by="count")][:2] == [
        "backward", "forward"]


def test_selection_keeps_blocks_whose_name_or_path_matches(plain_rows):
    assert [row.label for row in select_blocks(plain_rows, pattern=re.compile("^forw"))] == [
        "eval/forward", "forward"]
    assert [row.label for row in select_blocks(plain_rows, pattern=re.compile("eval/"))] == [
        "eval/forward"]


def test_selection_drops_blocks_under_the_minimum_time(plain_rows):
    assert [row.label for row in select_blocks(plain_rows, min_time=0.76)] == ["backward"]


def test_selection_cuts_to_the_top_rows(plain_rows):
    assert len(select_blocks(plain_rows, top=2)) == 2


def test_ordering_by_max_without_recorded_max_is_refused():
    with pytest.raises(ValueError, match="do not record per-call min/max"):
        select_blocks(block_rows(MLAGENTS_LIKE_TREE), order_by="max")


def test_selection_drops_blocks_over_the_maximum_time(plain_rows):
    assert [row.label for row in select_blocks(plain_rows, max_time=0.74)] == ["load"]


def test_the_time_bounds_include_their_ends(plain_rows):
    assert [row.label for row in select_blocks(plain_rows, min_time=3.0, max_time=3.0)] == ["backward"]


def test_selection_orders_smallest_first_when_ascending(plain_rows):
    assert [row.label for row in select_blocks(plain_rows, ascending=True)][0] == "load"


def test_the_kind_of_a_block_is_its_name_up_to_the_first_dot():
    tree = {"name": "root", "total": 1.0, "count": 1, "self": 0.0, "children": [
        {"name": "env.step.inner", "total": 1.0, "count": 1, "self": 1.0, "children": []},
        {"name": "update", "total": 0.0, "count": 1, "self": 0.0, "children": []}]}
    assert [row.kind for row in block_rows(tree)] == ["env", "update"]


def test_merged_worker_blocks_belong_to_the_workers_and_threads_to_the_trainer(vector_tree):
    processes = {row.label: row.process for row in block_rows(vector_tree)}
    assert processes["train/vector.step"] == "trainer"
    assert processes["train/vector.step/env.step"] == "workers"


def test_another_threads_blocks_are_the_trainers_process():
    tree = {"name": "root", "total": 1.0, "count": 1, "self": 0.0, "children": [
        {"name": "thread:logger", "total": 1.0, "count": 1, "self": 0.0, "is_parallel": True,
         "children": [{"name": "flush", "total": 1.0, "count": 1, "self": 1.0,
                       "is_parallel": True, "children": []}]}]}
    assert {row.process for row in block_rows(tree)} == {"trainer"}


def test_process_rows_take_each_workers_blocks_from_its_own_tree(vector_tree):
    rows = process_rows(vector_tree)
    workers = [row for row in rows if row.process.startswith("worker ")]
    assert sorted({row.process for row in workers}) == ["worker 0", "worker 1", "worker 2", "worker 3"]
    assert {row.label for row in workers} == {"env.step"}
    assert not [row for row in rows if row.process == "workers"]
    assert all(row.is_parallel for row in workers)


def test_process_rows_of_a_file_without_worker_trees_keep_the_merged_rows(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock, with_workers_section=False))
    assert "workers" in {row.process for row in process_rows(tree)}


@pytest.mark.parametrize(("block_type", "labels"), [
    ("trainer", {"train", "train/policy.act", "train/vector.step", "train/vector.step/vector.send_actions",
                 "train/vector.step/vector.wait_for_workers", "train/vector.step/vector.receive_results"}),
    ("worker", {"train/vector.step/env.step"}),
    ("policy", {"train/policy.act"}),
    ("vector", {"train/vector.step", "train/vector.step/vector.send_actions",
                "train/vector.step/vector.wait_for_workers", "train/vector.step/vector.receive_results"}),
])
def test_a_type_is_the_trainer_the_workers_or_a_block_kind(vector_tree, block_type, labels):
    assert {row.label for row in block_rows(vector_tree) if matches_type(row, block_type)} == labels


def test_type_domain_keeps_the_tasks_and_frames_of_any_domain(fake_clock):
    from profiler import Domain, get_timer_tree, hierarchical_timer

    with Domain("learner").new_task("update"):
        fake_clock.advance(1.0)
    with hierarchical_timer("log"):
        pass
    assert [row.label for row in block_rows(get_timer_tree()) if matches_type(row, "domain")] == ["update"]
