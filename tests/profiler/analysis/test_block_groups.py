"""Specification of block groups: by name, worker or process, by sum, mean, min, max or count."""

from __future__ import annotations

import pytest

from profiler.analysis.block_groups import aggregate_blocks, rows_to_aggregate
from profiler.analysis.block_stats import block_rows


def by_label(rows):
    return {row.label: row for row in rows}


def test_by_name_a_block_is_summed_across_the_tree(plain_tree):
    forward = by_label(aggregate_blocks(block_rows(plain_tree), "name"))["forward"]
    assert (forward.total, forward.count, forward.places) == pytest.approx((1.5, 4, 2))


def test_a_recursive_block_is_not_counted_twice():
    tree = {"name": "root", "total": 10.0, "count": 1, "self": 0.0, "children": [
        {"name": "solve", "total": 10.0, "count": 1, "self": 4.0, "children": [
            {"name": "solve", "total": 6.0, "count": 1, "self": 6.0, "children": []}]}]}
    (solve,) = aggregate_blocks(block_rows(tree), "name")
    assert (solve.total, solve.self_time, solve.count) == (10.0, 10.0, 2)


def test_by_type_blocks_of_one_kind_are_one_row_as_profile_analyze_groups_operator_types():
    tree = {"name": "root", "total": 10.0, "count": 1, "self": 4.0, "children": [
        {"name": "env.step", "total": 3.0, "count": 3, "self": 3.0, "children": []},
        {"name": "env.reset", "total": 1.0, "count": 1, "self": 1.0, "children": []},
        {"name": "aten::addmm", "total": 2.0, "count": 2, "self": 2.0, "children": []}]}
    rows = by_label(aggregate_blocks(rows_to_aggregate(tree, "type"), "type"))
    assert {label: (row.total, row.count) for label, row in rows.items()} == {
        "env": (4.0, 4), "aten::addmm": (2.0, 2)}


def test_by_worker_each_worker_is_one_row_and_the_trainer_none(vector_tree):
    rows = by_label(aggregate_blocks(rows_to_aggregate(vector_tree, "worker"), "worker"))
    assert sorted(rows) == ["worker 0", "worker 1", "worker 2", "worker 3"]
    assert (rows["worker 3"].total, rows["worker 3"].count) == pytest.approx((0.100, 10))
    assert rows["worker 3"].is_parallel


def test_by_process_the_trainer_counts_its_outermost_blocks_only(vector_tree):
    rows = by_label(aggregate_blocks(rows_to_aggregate(vector_tree, "process"), "process"))
    assert sorted(rows) == ["trainer", "worker 0", "worker 1", "worker 2", "worker 3"]
    # Its blocks nest inside "train": their time is the train block's, not more.
    assert rows["trainer"].total == pytest.approx(vector_tree["children"][0]["total"])
    assert rows["trainer"].places == 6
    assert not rows["trainer"].is_parallel


def test_the_mean_is_over_the_groups_blocks(plain_tree):
    forward = by_label(aggregate_blocks(block_rows(plain_tree), "name", "mean"))["forward"]
    assert (forward.total, forward.count) == pytest.approx((0.75, 2.0))


@pytest.mark.parametrize(("operation", "total", "count"), [("min", 0.75, 1), ("max", 0.75, 3)])
def test_min_and_max_are_over_the_groups_blocks(plain_tree, operation, total, count):
    forward = by_label(aggregate_blocks(block_rows(plain_tree), "name", operation))["forward"]
    assert (forward.total, forward.count) == pytest.approx((total, count))


def test_count_sums_like_sum_and_counts_the_blocks(plain_tree):
    rows = block_rows(plain_tree)
    counted = by_label(aggregate_blocks(rows, "name", "count"))["forward"]
    summed = by_label(aggregate_blocks(rows, "name", "sum"))["forward"]
    assert (counted.total, counted.places) == (summed.total, 2)


def test_no_grouping_folds_every_block_into_one_row(plain_tree):
    (everything,) = aggregate_blocks(block_rows(plain_tree), None, "sum")
    assert everything.label == "all"
    assert everything.total == pytest.approx(5.0)  # load, 3 x (forward, backward), eval
    assert everything.places == 5


def test_per_call_extremes_are_kept_only_when_every_block_has_them():
    tree = {"name": "root", "total": 2.0, "count": 1, "self": 0.0, "children": [
        {"name": "a", "total": 1.0, "count": 2, "self": 1.0, "min": 0.2, "max": 0.8, "children": []},
        {"name": "b", "total": 1.0, "count": 2, "self": 1.0, "min": 0.4, "max": 0.6, "children": []},
        {"name": "c", "total": 0.5, "count": 1, "self": 0.5, "children": []}]}
    rows = block_rows(tree)
    (both,) = aggregate_blocks(rows[:2], None, "mean")
    assert (both.min_time, both.max_time) == (0.2, 0.8)
    (every,) = aggregate_blocks(rows, None, "sum")
    assert (every.min_time, every.max_time) == (None, None)


@pytest.mark.parametrize(("aggregate_by", "operation", "message"), [
    ("thread", "sum", "cannot aggregate by 'thread'; choose one of name, worker, process, domain"),
    ("name", "median", "unknown aggregate 'median'; choose one of sum, mean, min, max, count"),
])
def test_an_unknown_grouping_or_aggregate_is_refused_with_the_choices(plain_tree, aggregate_by, operation, message):
    with pytest.raises(ValueError, match=message):
        aggregate_blocks(block_rows(plain_tree), aggregate_by, operation)


def test_by_name_the_extremes_are_those_over_every_place_a_name_appears():
    tree = {"name": "root", "total": 3.0, "count": 1, "self": 0.0, "children": [
        {"name": "a", "total": 1.0, "count": 2, "self": 0.0, "min": 0.4, "max": 0.6, "children": [
            {"name": "step", "total": 1.0, "count": 2, "self": 1.0, "min": 0.25, "max": 0.75,
             "children": []}]},
        {"name": "step", "total": 2.0, "count": 2, "self": 2.0, "min": 0.5, "max": 1.5,
         "children": []}]}
    step = by_label(aggregate_blocks(block_rows(tree), "name"))["step"]
    assert (step.min_time, step.max_time, step.count) == (0.25, 1.5, 4)


def test_a_block_that_never_completed_a_call_brings_no_extremes():
    tree = {"name": "root", "total": 2.0, "count": 1, "self": 0.0, "children": [
        {"name": "loop", "total": 2.0, "count": 0, "self": 1.0, "children": [
            {"name": "step", "total": 1.0, "count": 2, "self": 1.0, "min": 0.25, "max": 0.75,
             "children": []}]}]}
    (everything,) = aggregate_blocks(block_rows(tree), None)
    assert (everything.min_time, everything.max_time) == (0.25, 0.75)


@pytest.fixture
def domain_tree(fake_clock):
    from profiler import Domain, get_timer_tree, hierarchical_timer

    learner = Domain("learner")
    for _ in range(2):
        with learner.new_task("update"):
            fake_clock.advance(1.0)
    with hierarchical_timer("log"):
        fake_clock.advance(0.5)
    return get_timer_tree()


def test_by_domain_a_domains_tasks_are_one_row_and_the_rest_another(domain_tree):
    rows = by_label(aggregate_blocks(rows_to_aggregate(domain_tree, "domain"), "domain"))
    assert sorted(rows) == ["(no domain)", "learner"]
    assert (rows["learner"].total, rows["learner"].count) == pytest.approx((2.0, 2))
    assert rows["(no domain)"].total == pytest.approx(0.5)
