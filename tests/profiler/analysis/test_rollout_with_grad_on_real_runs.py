"""Specification: on a real CleanRL-style DQN run under ``rlprof run`` (real torch, real Gymnasium)
whose rollout calls its Q-network with grad enabled, as CleanRL's does, the analysis splits the
update blocks that hold the rollout at their last vector step: the policy is the rollout's
Q-network calls, the update the optimizer steps, and the verdict names the calls with grad. The
same program with its rollout under ``torch.no_grad()`` draws no such verdict; in both, the
target network's calls before each update are the update's, not the policy's. Built on its
updates, the DQN is told to train less often, not to take fewer epochs (it has none)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from framework_runs import rlprof_run  # noqa: E402
from profiler.analysis.phase_verdicts import ROLLOUT_WITH_GRAD, UPDATE_BOUND  # noqa: E402

STEPS = 1500


def dqn_run(folder, *options: str) -> tuple[dict, dict]:
    run = rlprof_run(folder, "cleanrl_torch_dqn.py", "--total-timesteps", str(STEPS), "--counts", "counts.json",
                     *options)
    return run, json.loads((folder / "counts.json").read_text())


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
    policy = {block["block"]: block["calls"] for block in phases["policy"]["blocks"]}
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
