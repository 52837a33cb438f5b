"""Specification: on a real CleanRL-style DQN run under ``rlprof run`` (real torch, real Gymnasium)
whose rollout calls its Q-network with grad enabled, as CleanRL's does, the analysis splits the
update blocks that hold the rollout at their last vector step: the policy is the rollout's
Q-network calls and its own code around them, the update the optimizer steps, and the verdict
names the calls with grad. The same program with its rollout under ``torch.no_grad()`` draws no
such verdict; in both, the target network's calls before each update are the update's, not the
policy's. Built on its updates, the DQN is told to train less often, not to take fewer epochs (it
has none).

REINFORCE on one env stepped in the trainer (no vector env) keeps each step's log-probability for
its loss: its env steps are the environments, its updates are split at their last env step, it
is told that the policy limits it, and to recompute the log-probabilities in one batched forward
rather than only to call the policy under ``no_grad``; the same program doing so draws no such
verdict.

CleanRL's SAC (one critic update per env step, the rollout's actor called with grad, target
critics under ``no_grad``) is update-bound, told to take fewer optimizer steps per env step, not
fewer epochs; its rollout's actor calls and its optimizer steps are counted as it counted them.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from framework_runs import counted_run  # noqa: E402
from profiler.analysis.phase_verdicts import POLICY_BOUND, ROLLOUT_WITH_GRAD, UPDATE_BOUND  # noqa: E402
from profiler.analysis.training_phases import ROLLOUT_CODE_PART  # noqa: E402

STEPS = 1500


def dqn_run(folder, *options: str) -> tuple[dict, dict]:
    return counted_run(folder, "cleanrl_torch_dqn.py", "--total-timesteps", str(STEPS), *options)


@pytest.fixture(scope="module")
def with_grad(tmp_path_factory):
    return dqn_run(tmp_path_factory.mktemp("with_grad"))


@pytest.fixture(scope="module")
def without_grad(tmp_path_factory):
    return dqn_run(tmp_path_factory.mktemp("without_grad"), "--policy-no-grad")


def test_the_rollouts_calls_with_grad_are_the_policy_and_the_optimizer_steps_the_update(with_grad):
    run, counts = with_grad
    phases = run["phases"]
    assert phases["rollout_with_grad"] and phases["split_at_steps"]
    policy = {block["block"]: block["calls"] for block in phases["policy"]["blocks"]
              if block["block"] != ROLLOUT_CODE_PART}
    assert policy == {"q_network.forward": counts["policy_calls"]}  # the target network's are the update's
    update = {block["block"]: block["calls"] for block in phases["update"]["blocks"]}
    assert update["update"] == counts["optimizer_steps"]
    assert phases["environments"]["block"]["calls"] == STEPS


def test_the_verdict_names_the_rollouts_calls_with_grad(with_grad):
    run, counts = with_grad
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == ROLLOUT_WITH_GRAD]
    assert verdict["title"].startswith(
        f"the rollout's policy ran with grad enabled: q_network.forward ({counts['policy_calls']} calls, ")
    assert "cannot be told apart" not in verdict["title"]


def test_a_rollout_under_no_grad_draws_no_rollout_with_grad_verdict(without_grad):
    run, counts = without_grad
    assert ROLLOUT_WITH_GRAD not in [verdict["kind"] for verdict in run["verdicts"]]
    assert not run["phases"]["rollout_with_grad"]
    policy = {block["block"]: block["calls"] for block in run["phases"]["policy"]["blocks"]}
    assert policy == {"q_network.forward (no grad)": counts["policy_calls"]}


def test_a_target_networks_calls_before_each_update_are_the_updates_not_the_policys(without_grad):
    run, counts = without_grad
    update = {block["block"]: block["calls"] for block in run["phases"]["update"]["blocks"]}
    assert update == {"update": counts["optimizer_steps"],
                      "target_network.forward (no grad)": counts["optimizer_steps"]}


def test_a_dqn_built_on_its_updates_is_told_to_train_less_often_not_to_take_fewer_epochs(tmp_path):
    run, _ = dqn_run(tmp_path, "--policy-no-grad", "--train-frequency", "2")  # 650 optimizer steps
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == UPDATE_BOUND]
    assert verdict["suggestion"].startswith(
        "Fewer optimizer steps per env step (train less often, or take fewer gradient steps each time)")
    assert "epochs" not in verdict["suggestion"]


def test_the_split_updates_parts_are_what_ran_after_the_last_step_its_own_code_included(with_grad):
    run, counts = with_grad
    update = run["phases"]["update"]
    parts = {part["block"]: part for part in update["parts"]}
    assert parts["backward"]["calls"] == parts["Adam.step"]["calls"] == counts["optimizer_steps"]
    assert parts["target_network.forward (no grad)"]["calls"] >= counts["optimizer_steps"] - 1
    assert parts["(untimed)"]["seconds"] > 0  # sampling the replay buffer, the loss
    (learner,) = [block for block in update["blocks"] if block["block"] == "update"]
    assert sum(part["seconds"] for part in parts.values()) == pytest.approx(learner["seconds"])


def test_the_rollouts_own_code_inside_the_updates_is_the_policys(with_grad):
    run, _ = with_grad
    seconds = {block["block"]: block["seconds"] for block in run["phases"]["policy"]["blocks"]}
    assert seconds[ROLLOUT_CODE_PART] > 0  # choosing the action, adding the step to the replay buffer


def test_a_dqn_whose_update_recomputes_its_q_values_is_told_to_call_the_rollouts_policy_under_no_grad(with_grad):
    run, _ = with_grad
    assert not run["phases"]["loss_on_rollout_graph"]
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == ROLLOUT_WITH_GRAD]
    assert verdict["suggestion"].startswith("Call the policy under torch.no_grad()")


EPISODES = 60


def reinforce_run(folder, *options: str) -> tuple[dict, dict]:
    return counted_run(folder, "reinforce_single_env.py", "--episodes", str(EPISODES), *options)


@pytest.fixture(scope="module")
def reinforce(tmp_path_factory):
    return reinforce_run(tmp_path_factory.mktemp("reinforce"))


@pytest.fixture(scope="module")
def reinforce_recomputing(tmp_path_factory):
    return reinforce_run(tmp_path_factory.mktemp("reinforce_recomputing"), "--recompute")


def test_a_single_envs_steps_in_the_trainer_are_the_environments_phase(reinforce):
    run, counts = reinforce
    block = run["phases"]["environments"]["block"]
    assert (block["block"], block["calls"]) == ("env.step", counts["env_steps"])


def test_reinforces_updates_are_split_at_their_last_env_step(reinforce):
    run, counts = reinforce
    phases = run["phases"]
    assert phases["rollout_with_grad"] and phases["split_at_steps"] and phases["loss_on_rollout_graph"]
    policy = {block["block"]: block["calls"] for block in phases["policy"]["blocks"]}
    assert policy["policy.forward"] == counts["policy_calls"]
    update = {block["block"]: block["calls"] for block in phases["update"]["blocks"]}
    assert update == {"update": counts["optimizer_steps"]}


def test_reinforce_is_told_to_recompute_its_log_probabilities_in_one_batched_forward(reinforce):
    run, _ = reinforce
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == ROLLOUT_WITH_GRAD]
    assert "recompute the log-probabilities at the update in one batched forward" in verdict["suggestion"]
    assert not verdict["suggestion"].startswith("Call the policy under torch.no_grad()")


def test_reinforce_built_on_its_rollout_names_the_policy_not_the_update_and_not_inference_mode(reinforce):
    run, _ = reinforce
    kinds = [verdict["kind"] for verdict in run["verdicts"]]
    assert POLICY_BOUND in kinds and UPDATE_BOUND not in kinds
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == POLICY_BOUND]
    assert "inference_mode" not in verdict["suggestion"]
    assert "several envs in a vector env" in verdict["suggestion"]


def test_reinforce_recomputing_its_log_probabilities_draws_no_rollout_with_grad_verdict(reinforce_recomputing):
    run, counts = reinforce_recomputing
    assert ROLLOUT_WITH_GRAD not in [verdict["kind"] for verdict in run["verdicts"]]
    policy = {block["block"]: block["calls"] for block in run["phases"]["policy"]["blocks"]}
    assert policy == {"policy.forward (no grad)": counts["policy_calls"]}


@pytest.fixture(scope="module")
def sac(tmp_path_factory):
    return counted_run(tmp_path_factory.mktemp("sac"), "cleanrl_torch_sac.py")


def test_sacs_rollout_calls_of_its_actor_are_the_policy_and_its_optimizer_steps_the_update(sac):
    run, counts = sac
    policy = {block["block"]: block["calls"] for block in run["phases"]["policy"]["blocks"]}
    assert policy["Actor.get_action"] == counts["policy_calls"]
    update = {block["block"]: block["calls"] for block in run["phases"]["update"]["blocks"]}
    assert update["update"] == counts["optimizer_steps"]


def test_sac_built_on_its_updates_is_told_to_take_fewer_optimizer_steps_per_env_step(sac):
    run, _ = sac
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == UPDATE_BOUND]
    assert verdict["suggestion"].startswith("Fewer optimizer steps per env step")
    assert "epochs" not in verdict["suggestion"]
