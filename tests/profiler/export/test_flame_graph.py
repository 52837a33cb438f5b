"""Specification of the icicle layout: widths are shares of the parent, children stay inside."""

from __future__ import annotations

import pytest

from profiler.export.flame_graph import UNTIMED_BOX, UNTIMED_PART, lay_out_flame_graph, untimed_note
from profiler.tree.timer_json import normalize_timing_tree


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


def sampled_run(*places: tuple[str, int, float], unnamed_seconds: float = 0.0) -> dict:
    """A 10 s run with 8 s outside its one block, the stack sampler's places there."""
    return normalize_timing_tree({
        "name": "root", "total": 10.0, "count": 1,
        "children": [{"name": "update", "total": 2.0, "count": 5, "children": []}],
        "untimed_samples": {
            "thread": "MainThread", "interval_seconds": 0.005, "samples": 2000, "in_blocks": 400,
            "unnamed": {"samples": int(unnamed_seconds / 0.005), "seconds": unnamed_seconds},
            "other_places": {"samples": 0, "seconds": 0.0},
            "places": [{"function": function, "file": "/code/train.py", "line": 10, "calls": "",
                        "samples": samples, "seconds": seconds} for function, samples, seconds in places],
        },
    })


def stepping_run() -> dict:
    """6 steps of 1 s, 0.5 s apart (untimed between them) but for a 6 s pause after the third (a rollout
    ends), 1 s before the first."""
    spans, clock = [], 1.0
    for step in range(6):
        spans.append(["env_manager.step", clock, clock + 1.0])
        clock += 1.0 + (6.0 if step == 2 else 0.5 if step < 5 else 0.0)
    children_total = sum(end - start for _, start, end in spans)
    return normalize_timing_tree({
        "name": "root", "total": clock, "count": 1, "self": clock - children_total,
        "children": [{"name": "env_manager.step", "total": children_total, "count": 6, "children": []}],
        "timeline": {"clock": "perf_counter", "dropped": 0, "processes": [
            {"pid": 1, "name": "trainer", "clock_offset": 0.0,
             "threads": [{"tid": 1, "name": "MainThread", "spans": spans, "instants": []}]}]},
    })


def untimed_children(tree) -> list:
    boxes = lay_out_flame_graph(tree)
    untimed = next(box for box in boxes if box.name == UNTIMED_BOX)
    return [box for box in boxes if box.parent_index == untimed.index]


def test_the_untimed_box_is_split_over_the_places_the_stack_sampler_found_and_the_unexplained_rest():
    parts = untimed_children(sampled_run(("log", 300, 4.8), ("main", 100, 1.6), unnamed_seconds=1.6))
    assert [part.name for part in parts] == [f"{UNTIMED_PART}log (train.py:10)", f"{UNTIMED_PART}main (train.py:10)",
                                             f"{UNTIMED_PART}unexplained"]
    assert [part.total for part in parts] == pytest.approx([8.0 * 3 / 5, 8.0 * 1 / 5, 8.0 * 1 / 5])
    assert "300 stack samples" in parts[0].note


def test_the_parts_of_the_untimed_box_fill_it_side_by_side():
    tree = sampled_run(("log", 300, 4.8), ("main", 100, 1.6), unnamed_seconds=1.6)
    untimed = boxes_by_name(tree)[UNTIMED_BOX]
    parts = untimed_children(tree)
    assert parts[0].start == pytest.approx(untimed.start)
    assert sum(part.width for part in parts) == pytest.approx(untimed.width)
    assert all(part.depth == 2 for part in parts)


def test_a_run_not_sampled_has_its_untimed_box_split_by_where_in_the_loop_the_time_fell():
    parts = {part.name: part for part in untimed_children(stepping_run())}
    assert parts[f"{UNTIMED_PART}between steps"].total == pytest.approx(4 * 0.5)
    assert parts[f"{UNTIMED_PART}between rollouts"].total == pytest.approx(6.0)
    assert parts[f"{UNTIMED_PART}elsewhere"].total == pytest.approx(1.0)
    assert "4 gaps" in parts[f"{UNTIMED_PART}between steps"].note


def test_a_run_with_neither_samples_nor_a_timeline_has_its_untimed_box_whole(trainer_tree):
    assert untimed_children(trainer_tree) == []
    assert untimed_note(trainer_tree) == ""


def test_with_the_places_in_boxes_the_split_by_where_in_the_loop_is_a_line_of_text():
    tree = {**stepping_run(), "untimed_samples": sampled_run(("log", 300, 3.0))["untimed_samples"]}
    assert untimed_children(tree)[0].name == f"{UNTIMED_PART}log (train.py:10)"
    assert untimed_note(tree).startswith("untimed time by where it fell in the loop")
