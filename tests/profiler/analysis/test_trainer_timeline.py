"""Specification: the trainer thread's spans an analysis reads are those its timeline holds whole,
and what they count scales to the run by the tree's calls."""

from __future__ import annotations

from phase_trees import timeline_tree, with_latest_spans

from profiler.analysis.trainer_timeline import trainer_spans


def steps_tree(steps: int = 8) -> dict:
    """``steps`` vector steps of 1 s, each after a policy call of 0.5 s."""
    spans = []
    for step in range(steps):
        spans += [["policy", 2.0 * step, 2.0 * step + 0.5], ["vector.step", 2.0 * step + 1.0, 2.0 * step + 2.0]]
    return timeline_tree(spans, total=2.0 * steps)


def test_a_complete_timeline_is_read_whole_and_scales_by_one():
    tree = steps_tree()
    timeline = trainer_spans(tree)
    assert timeline.complete
    assert timeline.spans is tree["timeline"]["processes"][0]["threads"][0]["spans"]
    assert timeline.scale(tree, {"vector.step"}) == 1.0


def test_a_long_runs_timeline_is_read_after_the_moment_it_holds_every_span_from():
    timeline = trainer_spans(with_latest_spans(steps_tree(), complete_after=8.0))
    assert not timeline.complete
    assert min(end for _, _, end in timeline.spans) > 8.0


def test_what_a_long_runs_timeline_holds_scales_to_the_run_by_the_trees_calls():
    tree = with_latest_spans(steps_tree(8), complete_after=8.0)  # holds the last 4 of 8 steps
    assert trainer_spans(tree).scale(tree, {"vector.step"}) == 2.0


def test_a_block_the_long_runs_timeline_no_longer_holds_cannot_be_scaled():
    tree = with_latest_spans(steps_tree(8), complete_after=16.0)
    assert trainer_spans(tree).scale(tree, {"vector.step"}) is None


def test_a_run_without_a_timeline_has_no_trainer_spans():
    tree = steps_tree()
    del tree["timeline"]
    assert trainer_spans(tree) is None
