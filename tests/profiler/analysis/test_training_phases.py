"""Specification: a dump's framework blocks read back as the training loop's phases — the policy's
inference, the update, the environments — named as the program calls them."""

from __future__ import annotations

import pytest

from phase_trees import phase_tree
from profiler.analysis.training_phases import training_phases
from profiler.tree.timer_json import normalize_timing_tree


def test_the_policy_is_the_outermost_inference_calls_not_the_forwards_inside_them():
    phases = training_phases(phase_tree(policy=2.0))
    assert [block.name for block in phases.policy] == ["Agent.get_action_and_value (no grad)"]
    assert phases.policy_seconds == pytest.approx(2.0)
    assert phases.policy[0].self_seconds == pytest.approx(1.2)  # outside the actor's forward


def test_the_update_is_its_blocks_and_the_untimed_time_between_consecutive_ones():
    phases = training_phases(phase_tree(update=2.0, updates=4, gap=0.1))
    assert phases.update_between_seconds == pytest.approx(3 * 0.1)
    assert phases.update_seconds == pytest.approx(2.0 + 0.3)


def test_a_pause_between_two_updates_longer_than_an_update_is_not_the_update():
    phases = training_phases(phase_tree(update=2.0, updates=4, gap=1.0))  # each update 0.5 s
    assert phases.update_between_seconds == 0.0


def test_the_updates_parts_are_its_blocks_and_its_own_code_between_them():
    parts = {part.name: part.seconds for part in training_phases(phase_tree(update=1.0)).update_parts}
    assert parts == pytest.approx({"backward": 0.3, "Adam.step": 0.2, "Agent.get_action_and_value": 0.3,
                                   "(untimed)": 0.2})


def test_the_environments_are_the_vector_steps():
    phases = training_phases(phase_tree(env=3.0))
    assert (phases.env_steps.name, phases.env_seconds) == ("vector.step", pytest.approx(3.0))


def test_sb3s_train_is_the_update_and_its_policy_forward_the_inference():
    phases = training_phases(phase_tree(sb3=True, update=2.0, policy=1.5))
    assert [block.name for block in phases.update] == ["PPO.train"]
    assert phases.update_seconds == pytest.approx(2.0)
    assert phases.policy_seconds == pytest.approx(1.5)


def test_an_update_that_holds_vector_steps_is_a_rollout_run_with_grad_not_an_update():
    phases = training_phases(phase_tree(step_inside_update=True))
    assert phases.rollout_with_grad
    assert phases.update == ()
    assert phases.env_seconds == pytest.approx(1.0)


def test_a_run_without_framework_blocks_has_no_phases():
    tree = normalize_timing_tree({"name": "root", "total": 1.0, "count": 1,
                                  "children": [{"name": "train", "total": 0.5, "count": 1, "children": []}]})
    assert training_phases(tree) is None
