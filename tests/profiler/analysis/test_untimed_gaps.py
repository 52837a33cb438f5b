"""Specification: the trainer's untimed time is split into between steps, between rollouts and
elsewhere, from the timeline's vector-step spans (or the blocks that hold a rollout's steps); the
``untimed`` verdict says whether most of it is the run's start-up and end or inside its loop."""

from __future__ import annotations

import json

import pytest

from phase_trees import timeline_tree, with_latest_spans

from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.untimed_gaps import untimed_gaps
from profiler.analysis.verdicts import UNTIMED, judge_run
from profiler.tree.tree_reader import normalize_untimed_samples


def loop_tree(rollouts: int = 3, steps: int = 4, start_up: float = 5.0) -> dict:
    """A loop of ``rollouts`` rollouts of ``steps`` steps (1 s each, 0.25 s apart, of which the
    policy block covers 0.125 s), then an update block of 2 s and 3 s untimed before the next
    rollout; the run starts ``start_up`` seconds before the first step."""
    spans, clock = [], start_up
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
    return timeline_tree(spans, total=clock)


def rollout_block_tree(rollouts: int = 3, steps: int = 4) -> dict:
    """SB3's shape: each rollout a ``PPO.collect_rollouts`` block holding its ``steps`` steps (1 s
    each, 0.25 s apart), 0.5 s untimed, a ``PPO.train`` block of 2 s, then 1 s untimed before the
    next rollout; the run starts 5 s before the first rollout and ends 3 s after the last train."""
    spans, clock = [], 5.0
    for _ in range(rollouts):
        rollout_start = clock
        for step in range(steps):
            spans.append(["vector.step", clock, clock + 1.0])
            clock += 1.0 if step == steps - 1 else 1.25
        spans.append(["PPO.collect_rollouts", rollout_start, clock])
        spans.append(["PPO.train", clock + 0.5, clock + 2.5])
        clock += 3.5
    return timeline_tree(spans, total=clock - 1.0 + 3.0)


def test_the_short_gaps_are_between_steps_less_the_blocks_inside_them():
    gaps = untimed_gaps(loop_tree())
    assert gaps.between_steps_gaps == 3 * 3
    assert gaps.between_steps == pytest.approx(9 * 0.125)


def episodes_tree(episodes: int = 3, steps: int = 4) -> dict:
    """One env the program steps itself: ``episodes`` episodes of ``steps`` ``env.step`` calls (1 s
    each, 0.25 s apart), then 0.5 s untimed (the update, shorter than ten of those gaps) and an
    ``env.reset`` of 0.25 s before the next episode's first step, 0.25 s later."""
    spans, clock = [], 0.0
    for episode in range(episodes):
        for step in range(steps):
            spans.append(["env.step", clock, clock + 1.0])
            clock += 1.0 if step == steps - 1 else 1.25
        if episode < episodes - 1:
            spans.append(["env.reset", clock + 0.5, clock + 0.75])
            clock += 1.0
    return timeline_tree(spans, total=clock)


def test_a_gap_that_holds_a_reset_ends_an_episode_however_short():
    gaps = untimed_gaps(episodes_tree())
    assert (gaps.step_block, gaps.between_rollouts_gaps, gaps.between_steps_gaps) == ("env.step", 2, 3 * 3)
    assert gaps.between_rollouts == pytest.approx(2 * 0.75)  # the update and the wait after the reset


def test_the_long_gaps_are_between_rollouts_less_the_update_block():
    gaps = untimed_gaps(loop_tree())
    assert gaps.between_rollouts_gaps == 2
    assert gaps.between_rollouts == pytest.approx(2 * 3.0)


def test_the_rest_of_the_untimed_time_is_elsewhere():
    gaps = untimed_gaps(loop_tree())
    assert gaps.elsewhere == pytest.approx(5.0)


def long_loop_tree() -> dict:
    """:func:`loop_tree` of 20 rollouts as a long run's dump holds it: its timeline kept the last 15
    rollouts (the 5th update ended at 51.75 s), 60 of its 80 steps."""
    return with_latest_spans(loop_tree(rollouts=20), complete_after=51.75)


def test_a_long_runs_gaps_between_steps_are_read_from_the_steps_it_held_and_scaled_to_the_run():
    gaps = untimed_gaps(long_loop_tree())
    assert gaps.steps_held_share == pytest.approx(0.75)
    assert gaps.between_steps_gaps == 20 * 3
    assert gaps.between_steps == pytest.approx(20 * 3 * 0.125)


def test_a_long_runs_gaps_between_rollouts_are_scaled_to_the_run_within_one_gap():
    gaps = untimed_gaps(long_loop_tree())
    assert gaps.between_rollouts_gaps == 19
    assert gaps.between_rollouts == pytest.approx(19 * 3.0, abs=3.0)


def test_a_long_runs_start_up_is_what_the_scaled_gaps_leave_within_one_gap():
    assert untimed_gaps(long_loop_tree()).elsewhere == pytest.approx(5.0, abs=3.0)


def test_a_timeline_that_dropped_only_spans_before_the_loop_is_split_whole():
    whole = untimed_gaps(loop_tree())
    tree = with_latest_spans(loop_tree(), complete_after=1.0)
    assert untimed_gaps(tree) == whole


def test_the_table_says_a_long_runs_gaps_were_scaled_from_the_steps_its_timeline_held():
    text = render_analysis(analyze_run(long_loop_tree()))
    assert "between steps 7.50 s (about 60 gaps)" in text
    assert "read from the latest 75.0% of the steps, which the timeline held, and scaled to the run" in text


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


def test_steps_inside_rollout_blocks_leave_no_untimed_time_between_steps():
    gaps = untimed_gaps(rollout_block_tree())
    assert (gaps.between_steps, gaps.between_steps_gaps) == (0.0, 0)
    assert (gaps.step_block, gaps.rollout_block) == ("vector.step", "PPO.collect_rollouts")


def test_the_table_says_which_block_holds_the_steps():
    text = render_analysis(analyze_run(rollout_block_tree()))
    assert "untimed time by where it fell in the loop (vector.step, inside PPO.collect_rollouts): between steps 0 s" in text


def test_steps_of_their_own_have_no_rollout_block():
    assert untimed_gaps(loop_tree()).rollout_block is None


def test_the_untimed_time_between_rollout_blocks_is_between_rollouts_less_the_blocks_between():
    gaps = untimed_gaps(rollout_block_tree())
    assert gaps.between_rollouts_gaps == 2
    assert gaps.between_rollouts == pytest.approx(2 * (0.5 + 1.0))


def test_before_the_first_rollout_block_and_after_the_last_is_elsewhere():
    # 5 s of start-up; after the last rollout, 0.5 s before its train and 3 s after it.
    assert untimed_gaps(rollout_block_tree()).elsewhere == pytest.approx(5.0 + 0.5 + 3.0)


def test_a_gap_between_a_rollout_block_and_a_step_of_its_own_ends_a_rollout_and_steps_after_are_steps():
    spans = [["vector.step", 1.5, 2.0], ["PPO.collect_rollouts", 1.0, 2.5],
             ["vector.step", 4.5, 5.0], ["vector.step", 5.1, 5.6], ["vector.step", 5.7, 6.2]]
    gaps = untimed_gaps(timeline_tree(spans, total=7.0))
    assert (gaps.between_rollouts_gaps, gaps.between_rollouts) == (1, pytest.approx(2.0))
    assert (gaps.between_steps_gaps, gaps.between_steps) == (2, pytest.approx(0.2))


def untimed_verdict(tree: dict):
    (verdict,) = judge_run(tree).of_kind(UNTIMED)
    return verdict


def test_the_untimed_verdict_says_most_of_it_is_start_up_and_end_where_the_timeline_tells_so():
    verdict = untimed_verdict(loop_tree(start_up=30.0))  # 30 s before the first step, 7.1 s in the loop
    assert ", 30.00 s of it before the training loop's first step or after its last (start-up, end)" in verdict.title
    assert verdict.suggestion.startswith("Most of it is the run's start-up and end, outside the training loop")
    assert verdict.evidence["start_and_end_seconds"] == pytest.approx(30.0)


def test_the_untimed_verdict_says_how_much_fell_inside_the_loop_where_most_of_it_did():
    verdict = untimed_verdict(loop_tree(start_up=1.0))
    assert ("of it inside the training loop (between steps 1.12 s, between rollouts 6.00 s)"
            in verdict.title)
    assert not verdict.suggestion.startswith("Most of it is the run's start-up")


def test_beside_start_up_the_untimed_verdict_tells_a_part_inside_the_loop_that_is_a_tenth_of_it():
    verdict = untimed_verdict(loop_tree(start_up=30.0))  # 7.12 s untimed in a loop of 24.25 s
    assert (", and 7.12 s, 29.4% of the training loop, inside the training loop (between steps 1.12 s, "
            "between rollouts 6.00 s)") in verdict.title
    assert "The 7.12 s inside the loop is paid at every step or rollout" in verdict.suggestion


def test_beside_start_up_the_untimed_verdict_leaves_out_a_part_inside_the_loop_under_a_tenth_of_it():
    spans = [["vector.step", 30.0 + 1.05 * step, 31.0 + 1.05 * step] for step in range(10)]
    verdict = untimed_verdict(timeline_tree(spans, total=40.45))  # 0.45 s untimed in a loop of 10.45 s
    assert verdict.title.endswith("(start-up, end): nothing here says what it was")
    assert "inside the loop" not in verdict.suggestion


def with_places(tree: dict, *places: tuple[str, float, float]) -> dict:
    """``tree`` sampled at ``places``, each ``(function, first look, last look)`` with 2 s of looks."""
    tree["untimed_samples"] = normalize_untimed_samples({
        "thread": "MainThread", "interval_seconds": 0.02, "samples": 100, "in_blocks": 0,
        "unnamed": {"samples": 0, "seconds": 0.0}, "other_places": {"samples": 0, "seconds": 0.0},
        "places": [{"function": function, "file": "/code/train.py", "line": line, "calls": "", "samples": 10,
                    "seconds": 2.0, "first_look": first, "last_look": last}
                   for line, (function, first, last) in enumerate(places, start=1)]})
    return tree


def test_beside_start_up_the_untimed_verdict_names_the_places_inside_the_loop_apart():
    tree = with_places(loop_tree(start_up=30.0), ("load_checkpoint", 1.0, 29.0), ("store_rollout", 31.0, 50.0))
    title = untimed_verdict(tree).title
    assert "the stack samples place it: load_checkpoint (train.py:1) 2.00 s" in title
    assert "; inside the loop: store_rollout (train.py:2) 2.00 s" in title


def test_places_without_their_looks_times_are_not_named_inside_the_loop():
    tree = loop_tree(start_up=30.0)
    tree["untimed_samples"] = normalize_untimed_samples({
        "thread": "MainThread", "interval_seconds": 0.02, "samples": 10, "in_blocks": 0,
        "places": [{"function": "store_rollout", "file": "/code/train.py", "line": 2, "calls": "",
                    "samples": 10, "seconds": 2.0}]})
    assert "inside the loop:" not in untimed_verdict(tree).title


def test_where_every_place_ran_in_the_loop_the_places_are_all_named_inside_it():
    tree = with_places(loop_tree(start_up=30.0), ("store_rollout", 31.0, 50.0))
    assert "the stack samples place it: inside the loop: store_rollout (train.py:1) " in untimed_verdict(tree).title


def test_where_most_of_it_fell_inside_the_loop_the_untimed_verdict_names_the_loops_places_first():
    tree = with_places(loop_tree(start_up=1.0), ("import_torch", 0.1, 0.9), ("store_rollout", 2.0, 50.0))
    title = untimed_verdict(tree).title
    assert "the stack samples place it: inside the loop: store_rollout (train.py:2) 2.00 s" in title
    assert title.endswith("; before or after it: import_torch (train.py:1) 2.00 s ± 447.21 ms")


def test_in_a_long_run_a_place_the_loop_ran_before_the_timelines_window_is_still_named_inside_the_loop():
    # The loop began at 5 s; the timeline holds it from 51.75 s on; store_rollout ran all along.
    tree = with_places(long_loop_tree(), ("import_torch", 0.1, 4.0), ("early_logging", 8.0, 20.0),
                       ("store_rollout", 6.0, 190.0))
    title = untimed_verdict(tree).title
    assert "inside the loop: early_logging (train.py:2) 2.00 s ± 516.40 ms, store_rollout (train.py:3)" in title
    assert title.endswith("; before or after it: import_torch (train.py:1) 2.00 s ± 516.40 ms")
