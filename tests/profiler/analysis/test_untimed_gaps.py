"""Specification: the trainer's untimed time is split into between steps, between rollouts and
elsewhere, from the timeline's vector-step spans."""

from __future__ import annotations

import json

import pytest

from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.untimed_gaps import outermost_spans, untimed_gaps
from profiler.tree.timer_json import normalize_timing_tree


def loop_tree(rollouts: int = 3, steps: int = 4) -> dict:
    """A loop of ``rollouts`` rollouts of ``steps`` steps (1 s each, 0.25 s apart, of which the
    policy block covers 0.125 s), then an update block of 2 s and 3 s untimed before the next
    rollout; the run starts 5 s before the first step."""
    spans, clock = [], 5.0
    for rollout in range(rollouts):
        for step in range(steps):
            spans.append(["env_manager.step", clock, clock + 1.0])
            clock += 1.0
            if step < steps - 1:
                spans.append(["policy", clock + 0.0625, clock + 0.1875])
                clock += 0.25
        if rollout < rollouts - 1:
            spans.append(["update", clock + 1.0, clock + 3.0])
            clock += 5.0
    total = clock
    children_total = sum(end - start for _, start, end in spans)
    return normalize_timing_tree({
        "name": "root", "total": total, "count": 1, "self": total - children_total,
        "children": [{"name": name, "total": sum(end - start for other, start, end in spans if other == name),
                      "count": sum(1 for other, _, _ in spans if other == name), "children": []}
                     for name in ("env_manager.step", "policy", "update")],
        "timeline": {"clock": "perf_counter", "dropped": 0, "processes": [
            {"pid": 1, "name": "trainer", "clock_offset": 0.0,
             "threads": [{"tid": 1, "name": "MainThread", "spans": spans, "instants": []}]}]},
    })


def test_the_short_gaps_are_between_steps_less_the_blocks_inside_them():
    gaps = untimed_gaps(loop_tree())
    assert gaps.between_steps_gaps == 3 * 3
    assert gaps.between_steps == pytest.approx(9 * 0.125)


def test_the_long_gaps_are_between_rollouts_less_the_update_block():
    gaps = untimed_gaps(loop_tree())
    assert gaps.between_rollouts_gaps == 2
    assert gaps.between_rollouts == pytest.approx(2 * 3.0)


def test_the_rest_of_the_untimed_time_is_elsewhere():
    gaps = untimed_gaps(loop_tree())
    assert gaps.elsewhere == pytest.approx(5.0)


def test_the_outermost_spans_are_those_no_other_holds_the_first_recorded_of_a_tie_kept():
    spans = [["inner", 1.0, 2.0], ["outer", 0.5, 3.0], ["twin a", 4.0, 5.0], ["twin b", 4.0, 5.0],
             ["after", 5.0, 6.0], ["inside after", 5.0, 5.5]]
    assert outermost_spans(spans) == [("outer", 0.5, 3.0), ("twin a", 4.0, 5.0), ("after", 5.0, 6.0)]


def test_a_timeline_read_again_after_more_steps_were_added_is_split_afresh():
    tree = loop_tree(rollouts=1)
    spans = tree["timeline"]["processes"][0]["threads"][0]["spans"]
    assert untimed_gaps(tree).between_steps_gaps == 3
    last_end = spans[-1][2]
    spans.append(["env_manager.step", last_end + 0.25, last_end + 1.25])  # the same list, one step longer
    assert untimed_gaps(tree).between_steps_gaps == 4


def test_a_run_without_vector_steps_in_its_timeline_has_no_split():
    tree = loop_tree()
    del tree["timeline"]
    assert untimed_gaps(tree) is None


def test_the_split_is_in_the_json_and_the_table():
    analysis = analyze_run(loop_tree())
    gaps = json.loads(render_analysis(analysis, "json"))["untimed"]["gaps"]
    assert gaps["between_rollouts"] == {"seconds": pytest.approx(6.0), "gaps": 2}
    assert "between rollouts 6.00 s (2 gaps)" in render_analysis(analysis)
