"""Specification: the policy's inference or the update is named as the limit, in the program's own
calls, on both sides of each threshold (built dumps; real runs: test_phase_verdicts_on_real_runs)."""

from __future__ import annotations

import pytest

from phase_trees import phase_tree
from profiler.analysis.phase_verdicts import (
    PHASE_MIN_SHARE,
    POLICY_BOUND,
    ROLLOUT_WITH_GRAD,
    SB3_OFF_POLICY_ALGORITHMS,
    UPDATE_BOUND,
)
from profiler.analysis.untimed_gaps import training_loop_seconds
from profiler.analysis.verdicts import TRAINER_BOUND, judge_run


def shares(policy: float, update: float, env: float) -> dict:
    """Seconds of a 10 s run with these shares of it, the rest untimed."""
    return {"policy": 10 * policy, "update": 10 * update, "env": 10 * env,
            "untimed": 10 * (1 - policy - update - env)}


def test_the_policy_is_the_limit_from_the_threshold_when_it_is_the_largest_phase():
    verdicts = judge_run(phase_tree(**shares(PHASE_MIN_SHARE + 0.01, 0.1, 0.1)))
    [verdict] = verdicts.of_kind(POLICY_BOUND)
    assert "Agent.get_action_and_value (no grad) took" in verdict.title
    assert verdict.share == pytest.approx(PHASE_MIN_SHARE + 0.01)


def test_below_the_threshold_the_policy_is_not_the_limit():
    assert not judge_run(phase_tree(**shares(PHASE_MIN_SHARE - 0.01, 0.1, 0.1))).of_kind(POLICY_BOUND)


def test_a_policy_above_the_threshold_but_behind_the_envs_is_not_the_limit():
    assert not judge_run(phase_tree(**shares(0.3, 0.1, 0.35))).of_kind(POLICY_BOUND)


def test_the_policy_verdict_says_how_much_of_the_call_ran_outside_the_networks():
    [verdict] = judge_run(phase_tree(**shares(0.5, 0.1, 0.1))).of_kind(POLICY_BOUND)
    assert "60.0% ran outside the networks' forwards" in verdict.suggestion


def test_a_policy_call_with_no_network_forward_timed_inside_it_is_told_nothing_of_its_own_code():
    tree = phase_tree(**shares(0.5, 0.1, 0.1))
    policy = tree["children"][0]
    policy["children"], policy["self"] = [], policy["total"]  # an outermost module call: its layers untimed
    [verdict] = judge_run(tree).of_kind(POLICY_BOUND)
    assert "outside the networks' forwards" not in verdict.suggestion


def test_the_update_is_the_limit_from_the_threshold_naming_its_costliest_parts():
    [verdict] = judge_run(phase_tree(**shares(0.1, PHASE_MIN_SHARE + 0.01, 0.1), updates=8)).of_kind(UPDATE_BOUND)
    assert verdict.title.startswith("the update (learner) is the limit: 8 optimizer steps took")
    assert "led by" in verdict.title and "backward 6.3%" in verdict.title and "Adam.step 4.2%" in verdict.title


def test_an_update_led_by_its_own_code_is_told_to_time_its_lines():
    [verdict] = judge_run(phase_tree(**shares(0.1, 0.5, 0.1), timed_in_update=0.2)).of_kind(UPDATE_BOUND)
    assert "led by the update's own code (its batch, the loss, clipping)" in verdict.title
    assert verdict.suggestion.endswith("The update's own code between its timed calls leads it: time its lines "
                                       "in hierarchical_timer blocks to see which of them cost most.")


def test_a_program_that_steps_no_env_is_told_of_its_updates_alone():
    [verdict] = judge_run(phase_tree(**shares(0.0, 0.5, 0.0), steps_envs=False)).of_kind(UPDATE_BOUND)
    assert verdict.suggestion == "Fewer optimizer steps (fewer epochs, larger minibatches) or a cheaper loss shorten it."


def test_a_program_that_steps_no_env_has_its_update_judged_in_its_loop_not_behind_a_long_start_up():
    # 1 s of updates (4 blocks, 0.25 s apart) after 8 s of untimed start-up: 10% of the wall time
    tree = phase_tree(policy=0.0, update=1.0, env=0.0, untimed=8.0, updates=4, gap=0.25, steps_envs=False)
    [verdict] = judge_run(tree).of_kind(UPDATE_BOUND)
    assert verdict.title.startswith("the update (learner) is the limit: 4 optimizer steps took 100.0% of the "
                                    "training loop (")


def test_a_program_that_steps_envs_it_has_no_timeline_of_keeps_the_wall_time_for_its_loop():
    tree = phase_tree(policy=0.0, update=1.0, env=0.5, untimed=8.0, updates=4, gap=0.25)
    assert training_loop_seconds(tree) == tree["total"]


def test_a_program_that_steps_its_env_in_the_trainer_without_a_vector_env_is_told_its_env_calls_time():
    tree = phase_tree(**shares(0.0, 0.5, 0.0), steps_envs=False)
    tree["children"].append({"name": "env.step", "total": 1.0, "count": 100, "self": 1.0, "children": []})
    tree["total"] += 1.0
    [verdict] = judge_run(tree).of_kind(UPDATE_BOUND)
    assert verdict.suggestion.startswith("Fewer optimizer steps per rollout (fewer epochs, larger minibatches) or "
                                         "a cheaper loss shorten it; the env side can win back at most its env "
                                         "calls' time, ")


def test_a_program_that_steps_envs_is_told_what_the_env_side_can_win_back():
    [verdict] = judge_run(phase_tree(**shares(0.1, 0.5, 0.1))).of_kind(UPDATE_BOUND)
    assert verdict.suggestion.startswith("Fewer optimizer steps per rollout (fewer epochs, larger minibatches) or "
                                         "a cheaper loss shorten it; the env side can win back at most the vector "
                                         "steps' time, ")


def test_an_update_led_by_a_timed_call_is_not_told_to_time_its_lines():
    [verdict] = judge_run(phase_tree(**shares(0.1, 0.5, 0.1))).of_kind(UPDATE_BOUND)
    assert "time its lines" not in verdict.suggestion


def test_below_the_threshold_the_update_is_not_the_limit():
    assert not judge_run(phase_tree(**shares(0.1, PHASE_MIN_SHARE - 0.01, 0.1))).of_kind(UPDATE_BOUND)


def test_an_update_behind_the_policy_is_not_the_limit():
    assert not judge_run(phase_tree(**shares(0.4, 0.3, 0.1))).of_kind(UPDATE_BOUND)


def test_sb3s_update_is_named_by_its_train_calls():
    [verdict] = judge_run(phase_tree(**shares(0.1, 0.5, 0.1), sb3=True, updates=3)).of_kind(UPDATE_BOUND)
    assert "3 calls of PPO.train took" in verdict.title


def test_an_on_policy_update_is_told_to_take_fewer_epochs_or_larger_minibatches():
    [verdict] = judge_run(phase_tree(**shares(0.1, 0.5, 0.1), sb3=True)).of_kind(UPDATE_BOUND)
    assert verdict.suggestion.startswith("Fewer optimizer steps per rollout (fewer epochs, larger minibatches)")


@pytest.mark.parametrize("algorithm", sorted(SB3_OFF_POLICY_ALGORITHMS))
def test_an_sb3_off_policy_update_is_told_its_train_freq_and_gradient_steps_not_epochs(algorithm):
    [verdict] = judge_run(phase_tree(**shares(0.1, 0.5, 0.1), sb3=True, algorithm=algorithm)).of_kind(UPDATE_BOUND)
    assert verdict.suggestion.startswith(
        f"Fewer gradient steps per env step ({algorithm}'s train_freq larger, or gradient_steps smaller)")
    assert "epochs" not in verdict.suggestion


def test_a_phase_verdict_replaces_the_trainer_bound_one_that_would_name_the_same_blocks():
    verdicts = judge_run(phase_tree(**shares(0.6, 0.1, 0.1)))
    assert verdicts.of_kind(POLICY_BOUND) and not verdicts.of_kind(TRAINER_BOUND)


def test_a_rollout_run_with_grad_is_told_and_no_phase_is_named_the_limit():
    verdicts = judge_run(phase_tree(**shares(0.1, 0.5, 0.1), step_inside_update=True))
    assert verdicts.of_kind(ROLLOUT_WITH_GRAD)
    assert not verdicts.of_kind(UPDATE_BOUND) and not verdicts.of_kind(POLICY_BOUND)
