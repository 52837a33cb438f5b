"""Specification of the icicle layout: widths are shares of the parent, children stay inside."""

from __future__ import annotations

import pytest

from profiler.export.flame_graph import UNTIMED_BOX, lay_out_flame_graph


def boxes_by_name(tree):
    return {box.name: box for box in lay_out_flame_graph(tree)}


def test_the_root_spans_the_whole_width(trainer_tree):
    root = lay_out_flame_graph(trainer_tree)[0]
    assert (root.name, root.depth, root.start, root.width, root.parent_index) == ("root", 0, 0.0, 1.0, None)


def test_a_block_is_as_wide_as_its_share_of_the_root(trainer_tree):
    boxes = boxes_by_name(trainer_tree)
    assert boxes["policy.update"].width == pytest.approx(0.010 / trainer_tree["total"])
    assert boxes["policy.update"].share == pytest.approx(boxes["policy.update"].width)


def test_siblings_sit_side_by_side_from_their_parent_s_left_edge(trainer_tree):
    boxes = boxes_by_name(trainer_tree)
    train, step, act = boxes["train"], boxes["vector.step"], boxes["policy.act"]
    assert step.start == train.start
    assert act.start == pytest.approx(step.start + step.width)
    assert step.depth == train.depth + 1


def test_parallel_children_adding_up_to_more_than_their_parent_are_shrunk_inside_it(run_with_workers):
    boxes = lay_out_flame_graph(run_with_workers)
    for box in boxes[1:]:
        parent = boxes[box.parent_index]
        assert parent.start - 1e-12 <= box.start
        assert box.start + box.width <= parent.start + parent.width + 1e-12
    worker_root = next(box for box in boxes if box.name == "worker_root")
    assert worker_root.is_parallel
    assert worker_root.share > worker_root.width  # its real share is shown on hover


def test_the_time_outside_any_block_is_a_labelled_box_after_the_blocks(trainer_tree):
    boxes = boxes_by_name(trainer_tree)
    untimed, train = boxes[UNTIMED_BOX], boxes["train"]
    assert untimed.depth == 1 and untimed.parent_index == 0
    assert untimed.start == pytest.approx(train.start + train.width)
    assert untimed.width == pytest.approx(trainer_tree["self"] / trainer_tree["total"])


def test_a_run_timed_throughout_has_no_untimed_box(run_with_workers):
    assert UNTIMED_BOX not in boxes_by_name({**run_with_workers, "self": 0.0,
                                             "total": sum(child["total"] for child in run_with_workers["children"])})
