"""Specification of per-block statistics: rows, aggregation by name, selection and ordering."""

from __future__ import annotations

import re

import pytest
from run_files import write_plain_run

from profiler import load_timing_tree
from profiler.analysis.block_stats import aggregate_by_name, block_rows, has_min_max, select_blocks


@pytest.fixture
def plain_rows(tmp_path, fake_clock):
    return block_rows(load_timing_tree(write_plain_run(tmp_path / "run.json", fake_clock)))


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


def test_aggregating_by_name_sums_a_block_across_the_tree(plain_rows):
    forward = by_label(aggregate_by_name(plain_rows))["forward"]
    assert (forward.total, forward.count, forward.places) == pytest.approx((1.5, 4, 2))


def test_aggregating_does_not_count_a_recursive_block_twice():
    tree = {"name": "root", "total": 10.0, "count": 1, "self": 0.0, "children": [
        {"name": "solve", "total": 10.0, "count": 1, "self": 4.0, "children": [
            {"name": "solve", "total": 6.0, "count": 1, "self": 6.0, "children": []}]}]}
    solve = aggregate_by_name(block_rows(tree))[0]
    assert (solve.total, solve.self_time, solve.count) == (10.0, 10.0, 2)


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


def test_aggregating_keeps_the_extremes_over_every_place_a_name_appears():
    tree = {"name": "root", "total": 3.0, "count": 1, "self": 0.0, "children": [
        {"name": "a", "total": 1.0, "count": 2, "self": 0.0, "min": 0.4, "max": 0.6, "children": [
            {"name": "step", "total": 1.0, "count": 2, "self": 1.0, "min": 0.25, "max": 0.75,
             "children": []}]},
        {"name": "step", "total": 2.0, "count": 2, "self": 2.0, "min": 0.5, "max": 1.5,
         "children": []}]}
    step = by_label(aggregate_by_name(block_rows(tree)))["step"]
    assert (step.min_time, step.max_time, step.count) == (0.25, 1.5, 4)


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
