"""Specification: a dump's framework blocks read back as the training loop's phases — the policy's
inference, the update, the environments — named as the program calls them."""

from __future__ import annotations

import pytest

from phase_trees import phase_tree, with_latest_spans
from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.training_phases import (
    ROLLOUT_CODE_PART,
    PhaseBlock,
    TrainingPhases,
    policy_calls_in_threads,
    training_phases,
    training_start,
    training_window,
)
from profiler.tree.timer_json import normalize_timing_tree
from tests.profiler.analysis.test_step_time_in_the_trainer import collector_thread_run


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


def test_policy_calls_of_a_collector_thread_are_found_beside_the_main_thread(fake_clock, tmp_path):
    (calls,) = policy_calls_in_threads(collector_thread_run(fake_clock, tmp_path))
    assert (calls.thread, calls.block, calls.calls) == ("thread:ended:collector", "Agent.forward (no grad)", 10)
    assert calls.seconds == pytest.approx(0.020)


def test_a_run_whose_policy_runs_only_in_a_thread_is_told_where_it_ran(fake_clock, tmp_path):
    analysis = analyze_run(collector_thread_run(fake_clock, tmp_path))
    text = " ".join(render_analysis(analysis).split())
    assert ("policy (inference) 0 s 0.0% none in this thread; beside it: Agent.forward (no grad) in "
            "thread:ended:collector, 10 calls, 20.00 ms") in text
    assert [calls.as_dict()["calls"] for calls in analysis.policy_in_threads] == [10]


def test_sb3s_train_is_the_update_and_its_policy_forward_the_inference():
    phases = training_phases(phase_tree(sb3=True, update=2.0, policy=1.5))
    assert [block.name for block in phases.update] == ["PPO.train"]
    assert phases.update_seconds == pytest.approx(2.0)
    assert phases.policy_seconds == pytest.approx(1.5)


def test_sb3s_evaluation_is_its_own_phase_with_the_policy_calls_and_steps_inside_it():
    tree = phase_tree(sb3=True, policy=1.5, env=1.0)
    evaluation = {"name": "evaluate_policy", "total": 4.0, "count": 2, "children": [
        {"name": "ActorCriticPolicy.predict", "total": 2.5, "count": 900, "children": []},
        {"name": "vector.step", "total": 1.0, "count": 900, "children": []}]}
    tree["children"].append(evaluation)
    phases = training_phases(normalize_timing_tree(tree))
    assert [(block.name, block.calls) for block in phases.evaluation] == [("evaluate_policy", 2)]
    assert phases.evaluation_seconds == pytest.approx(4.0)
    assert phases.policy_seconds == pytest.approx(1.5) and phases.env_steps.calls == 100


def test_an_update_that_holds_vector_steps_is_a_rollout_run_with_grad_not_an_update():
    phases = training_phases(phase_tree(step_inside_update=True))
    assert phases.rollout_with_grad
    assert phases.update == ()
    assert phases.env_seconds == pytest.approx(1.0)


def rollout_with_grad_tree() -> dict:
    """A DQN-like run whose rollout calls its Q-network with grad: one call and step before the
    program first trained (no update block yet), then an update block that holds two rollout calls
    and steps before its own target and Q-network calls, backward and step, then a plain update."""
    def block(name: str, total: float, count: int, children: list | None = None) -> dict:
        return {"name": name, "total": total, "count": count, "children": children or []}

    spans = [["q_network.forward", 0.0, 0.1], ["vector.step", 0.1, 0.3],
             ["update", 1.0, 3.0], ["q_network.forward", 1.0, 1.1], ["vector.step", 1.1, 1.3],
             ["q_network.forward", 1.3, 1.4], ["vector.step", 1.4, 1.6],
             ["target_network.forward (no grad)", 1.7, 1.8], ["q_network.forward", 1.8, 1.9],
             ["backward", 2.0, 2.5], ["Adam.step", 2.5, 3.0],
             ["update", 4.0, 4.5], ["q_network.forward", 4.0, 4.1], ["backward", 4.1, 4.3],
             ["Adam.step", 4.3, 4.5]]
    update = block("update", 2.5, 2, [block("q_network.forward", 0.4, 4), block("vector.step", 0.4, 2),
                                      block("target_network.forward (no grad)", 0.1, 1),
                                      block("backward", 0.7, 2), block("Adam.step", 0.7, 2)])
    return torch_run_tree(5.0, [block("q_network.forward", 0.1, 1), block("vector.step", 0.2, 1), update], spans)


def torch_run_tree(total: float, children: list[dict], spans: list[list]) -> dict:
    """A run of ``total`` seconds whose torch phases were timed: its tree's ``children``, and the
    ``spans`` its trainer thread recorded."""
    return normalize_timing_tree({
        "name": "root", "total": total, "count": 1, "children": children,
        "metadata": {"rlprof_framework_phases": "torch"},
        "timeline": {"clock": "perf_counter", "dropped": 0, "processes": [
            {"pid": 1, "name": "trainer", "clock_offset": 0.0,
             "threads": [{"tid": 1, "name": "MainThread", "spans": spans, "instants": []}]}]}})


def test_update_blocks_that_hold_the_rollout_are_split_at_their_last_vector_step():
    phases = training_phases(rollout_with_grad_tree())
    assert phases.rollout_with_grad and phases.split_at_steps
    assert [(block.name, block.calls) for block in phases.update] == [("update", 2)]
    assert phases.update_seconds == pytest.approx((3.0 - 1.6) + 0.5)  # the target's call is the update's


def test_the_rollouts_calls_with_grad_are_the_policy_before_and_inside_the_updates():
    phases = training_phases(rollout_with_grad_tree())
    assert [(block.name, block.calls) for block in phases.policy] == [("q_network.forward", 3)]  # no code between
    assert phases.policy_seconds == pytest.approx(0.3)


def test_the_time_in_no_block_before_an_updates_last_step_is_the_rollouts_own_code_in_the_policy():
    tree = rollout_with_grad_tree()
    spans = tree["timeline"]["processes"][0]["threads"][0]["spans"]
    spans[spans.index(["vector.step", 1.4, 1.6])][1] = 1.45  # 50 ms between the call and the step
    phases = training_phases(tree)
    assert {block.name: block.seconds for block in phases.policy} == pytest.approx(
        {"q_network.forward": 0.3, ROLLOUT_CODE_PART: 0.05})


def test_an_update_that_recomputes_its_forward_after_the_rollout_does_not_learn_from_the_rollouts_graph():
    assert not training_phases(rollout_with_grad_tree()).loss_on_rollout_graph


def reinforce_tree(recompute: bool = False) -> dict:
    """REINFORCE on one env stepped in the trainer (no vector env): an episode before the program
    first trained, then one whose update block holds its policy calls with grad and env steps,
    then ``backward`` and the optimizer's step; with ``recompute``, a forward with grad after the
    last step (the log-probabilities recomputed in one batch)."""
    def block(name: str, total: float, count: int, children: list | None = None) -> dict:
        return {"name": name, "total": total, "count": count, "children": children or []}

    spans = [["policy.forward", 0.0, 0.1], ["env.step", 0.15, 0.25], ["backward", 0.3, 0.4], ["Adam.step", 0.4, 0.5],
             ["update", 1.0, 2.0], ["policy.forward", 1.0, 1.1], ["env.step", 1.2, 1.3],
             ["policy.forward", 1.3, 1.4], ["env.step", 1.5, 1.6], ["backward", 1.7, 1.9], ["Adam.step", 1.9, 2.0]]
    inside = [block("policy.forward", 0.2, 2), block("env.step", 0.2, 2), block("backward", 0.2, 1),
              block("Adam.step", 0.1, 1)]
    if recompute:
        spans.append(["policy.forward", 1.62, 1.68])
        inside[0] = block("policy.forward", 0.26, 3)
    return torch_run_tree(3.0, [block("policy.forward", 0.1, 1), block("env.step", 0.1, 1), block("backward", 0.1, 1),
                                block("Adam.step", 0.1, 1), block("update", 1.0, 1, inside)], spans)


def test_a_program_that_steps_one_env_itself_has_its_env_steps_for_the_environments():
    phases = training_phases(reinforce_tree())
    assert (phases.env_steps.name, phases.env_steps.calls) == ("env.step", 3)
    assert phases.env_seconds == pytest.approx(0.3)


def test_updates_that_hold_a_single_envs_steps_are_split_at_the_last_one():
    phases = training_phases(reinforce_tree())
    assert phases.rollout_with_grad and phases.split_at_steps
    assert {block.name: (block.seconds, block.calls) for block in phases.policy} == {
        "policy.forward": (pytest.approx(0.3), 3), ROLLOUT_CODE_PART: (pytest.approx(0.2), 1)}
    assert phases.update_seconds == pytest.approx(0.4)


def test_an_update_with_no_forward_after_the_rollout_learns_from_the_rollouts_graph():
    assert training_phases(reinforce_tree()).loss_on_rollout_graph


def test_an_update_that_recomputes_the_log_probabilities_in_a_forward_does_not_learn_from_the_rollouts_graph():
    assert not training_phases(reinforce_tree(recompute=True)).loss_on_rollout_graph


def test_without_a_timeline_an_update_holding_the_rollout_is_not_split():
    tree = rollout_with_grad_tree()
    del tree["timeline"]
    phases = training_phases(tree)
    assert phases.rollout_with_grad and not phases.split_at_steps
    assert phases.update == ()


def inference_before_updates_tree(before_update: str) -> dict:
    """A rollout of ``Agent.act (no grad)`` calls and vector steps, then ``before_update`` (an
    inference call) right before each of two update blocks."""
    def block(name: str, total: float, count: int) -> dict:
        return {"name": name, "total": total, "count": count, "children": []}

    spans = []
    for start in (0.0, 10.0):
        spans += [["Agent.act (no grad)", start, start + 0.1], ["vector.step", start + 0.1, start + 0.3],
                  [before_update, start + 1.0, start + 1.2], ["update", start + 2.0, start + 3.0]]
    return normalize_timing_tree({
        "name": "root", "total": 20.0, "count": 1,
        "children": [block("Agent.act (no grad)", 0.2, 2), block("vector.step", 0.4, 2),
                     block(before_update, 0.4, 2), block("update", 2.0, 2)],
        "metadata": {"rlprof_framework_phases": "torch"},
        "timeline": {"clock": "perf_counter", "dropped": 0, "processes": [
            {"pid": 1, "name": "trainer", "clock_offset": 0.0,
             "threads": [{"tid": 1, "name": "MainThread", "spans": spans, "instants": []}]}]}})


def test_a_target_networks_inference_before_each_update_is_the_updates():
    phases = training_phases(inference_before_updates_tree("target_network.forward (no grad)"))
    assert [(block.name, block.calls) for block in phases.policy] == [("Agent.act (no grad)", 2)]
    assert {block.name: block.calls for block in phases.update} == {
        "update": 2, "target_network.forward (no grad)": 2}
    assert phases.update_seconds == pytest.approx(2.0 + 0.4)
    assert [(block.name, block.calls) for block in phases.update_blocks] == [("update", 2)]  # the optimizer steps


def test_a_long_runs_target_network_calls_are_scaled_to_the_names_calls():
    tree = inference_before_updates_tree("target_network.forward (no grad)")
    spans = tree["timeline"]["processes"][0]["threads"][0]["spans"]
    del spans[:4]  # as if the ring had dropped the first rollout and update
    tree["timeline"]["processes"][0]["threads"][0]["spans_complete_after"] = 3.0
    phases = training_phases(tree)
    assert {block.name: block.calls for block in phases.update} == {
        "update": 2, "target_network.forward (no grad)": 2}
    assert phases.update_seconds == pytest.approx(2.0 + 0.4)


def test_the_rollout_models_own_inference_before_an_update_stays_the_policys():
    phases = training_phases(inference_before_updates_tree("Agent.get_value (no grad)"))  # PPO's bootstrap value
    assert {block.name: block.calls for block in phases.policy} == {
        "Agent.act (no grad)": 2, "Agent.get_value (no grad)": 2}
    assert [block.name for block in phases.update] == ["update"]


def test_a_run_without_framework_blocks_has_no_phases():
    tree = normalize_timing_tree({"name": "root", "total": 1.0, "count": 1,
                                  "children": [{"name": "train", "total": 0.5, "count": 1, "children": []}]})
    assert training_phases(tree) is None


def phases_of(policy: tuple[str, ...], update: tuple[str, ...], update_parts: tuple[str, ...] = ()) -> TrainingPhases:
    def blocks(names: tuple[str, ...]) -> tuple[PhaseBlock, ...]:
        return tuple(PhaseBlock(name=name, seconds=1.0, calls=1) for name in names)

    return TrainingPhases(policy=blocks(policy), update=blocks(update), update_parts=blocks(update_parts),
                          update_between_seconds=0.0, env_steps=None, rollout_with_grad=False)


def test_an_update_that_calls_another_model_under_no_grad_reads_a_target_network():
    assert phases_of(("q_network.forward (no grad)",),
                     ("update", "target_network.forward (no grad)")).reads_a_target_network
    assert phases_of(("q_network.forward (no grad)",), ("update",),
                     ("target_network.forward (no grad)", "backward")).reads_a_target_network


def test_a_target_network_the_policy_called_once_before_the_first_update_is_still_the_updates():
    # SAC's first training step runs before the hooks open any update: its target critics' calls
    # are then outside one, among the policy's.
    phases = TrainingPhases(
        policy=(PhaseBlock("Actor.get_action", 1.0, 2500), PhaseBlock("qf1_target.forward (no grad)", 0.001, 1)),
        update=(PhaseBlock("update", 20.0, 7500),),
        update_parts=(PhaseBlock("qf1_target.forward (no grad)", 0.7, 2499), PhaseBlock("backward", 8.0, 7500)),
        update_between_seconds=0.0, env_steps=None, rollout_with_grad=True)
    assert phases.reads_a_target_network


def test_an_update_that_calls_only_the_rollouts_model_reads_no_target_network():
    # CleanRL's PPO asks its agent for the value to bootstrap from, under no grad, before its update.
    assert not phases_of(("Agent.get_action_and_value (no grad)",),
                         ("update", "Agent.get_value (no grad)"), ("Agent.get_action_and_value", "backward")
                         ).reads_a_target_network


# --- when the program began to train -------------------------------------------------------------


def test_training_starts_at_the_first_update_of_a_program_that_steps_no_env():
    tree = phase_tree(policy=0.0, update=2.0, env=0.0, updates=4, steps_envs=False)
    assert training_start(tree) == 10.0  # phase_tree's first update span starts at 10 s


def test_the_training_window_of_a_program_that_steps_no_env_runs_from_its_first_update_to_its_last():
    tree = phase_tree(policy=0.0, update=2.0, env=0.0, updates=4, gap=0.5, steps_envs=False)
    assert training_window(tree) == (10.0, 13.5)  # 4 updates of 0.5 s, 0.5 s apart, from 10 s


def test_a_run_without_a_timeline_does_not_say_when_it_began_to_train():
    tree = phase_tree(steps_envs=False)
    del tree["timeline"]
    assert training_start(tree) is None


def test_a_long_runs_timeline_that_no_longer_holds_its_first_update_does_not_say_when_it_began_to_train():
    tree = with_latest_spans(phase_tree(steps_envs=False), complete_after=10.3)  # the first update ended at 10.25 s
    assert training_start(tree) is None


def test_a_long_runs_time_between_updates_is_scaled_to_its_updates():
    tree = with_latest_spans(phase_tree(update=2.0, updates=20, gap=0.1), complete_after=11.0)  # held 15 of 20
    phases = training_phases(tree)
    assert phases.update_between_seconds == pytest.approx(19 * 0.1, abs=0.1)  # within one gap


def sac_like_tree(updates: int = 8) -> dict:
    """A SAC-like run that calls its actor with grad in the rollout: each of ``updates`` update
    blocks of 1 s holds the actor's call (0.1 s), a vector step (0.2 s), then the target's and the
    critic's calls, backward and the optimizer step; 0.5 s between updates."""
    def block(name: str, total: float, count: int, children: list | None = None) -> dict:
        return {"name": name, "total": total, "count": count, "children": children or []}

    spans, clock = [], 0.0
    for _ in range(updates):
        spans += [["update", clock, clock + 1.0], ["Actor.get_action", clock, clock + 0.1],
                  ["vector.step", clock + 0.1, clock + 0.3], ["target.forward (no grad)", clock + 0.4, clock + 0.5],
                  ["critic.forward", clock + 0.5, clock + 0.6], ["backward", clock + 0.6, clock + 0.8],
                  ["Adam.step", clock + 0.8, clock + 1.0]]
        clock += 1.5
    update = block("update", 1.0 * updates, updates, [
        block("Actor.get_action", 0.1 * updates, updates), block("vector.step", 0.2 * updates, updates),
        block("target.forward (no grad)", 0.1 * updates, updates), block("critic.forward", 0.1 * updates, updates),
        block("backward", 0.2 * updates, updates), block("Adam.step", 0.2 * updates, updates)])
    return torch_run_tree(clock, [update], spans)


def test_a_long_runs_updates_that_hold_the_rollout_are_split_from_those_it_held_and_scaled_to_the_run():
    whole = training_phases(sac_like_tree())
    phases = training_phases(with_latest_spans(sac_like_tree(), complete_after=5.75))  # held the last 4 of 8
    assert phases.split_at_steps
    assert phases.update_seconds == pytest.approx(whole.update_seconds) == pytest.approx(8 * 0.7)
    assert [(block.name, block.calls) for block in phases.update] == [("update", 8)]
    assert [(block.name, block.calls) for block in phases.policy] == [
        (block.name, block.calls) for block in whole.policy]
    assert {block.name: block.seconds for block in phases.update_parts} == pytest.approx(
        {block.name: block.seconds for block in whole.update_parts})


def test_a_long_run_whose_timeline_holds_no_update_has_its_updates_unsplit():
    phases = training_phases(with_latest_spans(sac_like_tree(), complete_after=20.0))
    assert phases.rollout_with_grad and not phases.split_at_steps
