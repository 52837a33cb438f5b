"""Specification: on real CleanRL-style PPO runs under ``rlprof run`` (real torch, real Gymnasium),
the policy's inference or the update is named as the limit where the run is built to be limited by
it, and neither where the environments are the limit; on real Stable-Baselines3 PPO runs, the
evaluation (``EvalCallback``) is named where the run is built to spend most of its loop there, and
not where it evaluates little; a real SB3 DQN built on its gradient steps is told to train less
often or take fewer gradient steps, where PPO is told fewer epochs; a program that steps no env
(behaviour cloning from a dataset) is told of its updates alone, and its untimed start-up, before
its first update, is called start-up where it is and not where the untimed time falls while it
trains."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from framework_runs import rlprof_run  # noqa: E402
from profiler.analysis.phase_verdicts import EVALUATION_BOUND, POLICY_BOUND, UPDATE_BOUND  # noqa: E402
from profiler.analysis.verdicts import UNTIMED, UNTIMED_START_AND_END_SHARE  # noqa: E402


def kinds(run: dict) -> list[str]:
    return [verdict["kind"] for verdict in run["verdicts"]]


def verdict_of(run: dict, kind: str) -> dict:
    return next(verdict for verdict in run["verdicts"] if verdict["kind"] == kind)


@pytest.fixture(scope="module")
def policy_heavy(tmp_path_factory):
    """Long rollouts, one update step per rollout: the policy's calls are most of the loop."""
    return rlprof_run(tmp_path_factory.mktemp("policy"), "cleanrl_torch_ppo.py", "--total-timesteps", "4096",
                      "--num-steps", "128", "--update-epochs", "1", "--num-minibatches", "1")


@pytest.fixture(scope="module")
def update_heavy(tmp_path_factory):
    """Short rollouts, 40 optimizer steps after each: the update is most of the loop."""
    return rlprof_run(tmp_path_factory.mktemp("update"), "cleanrl_torch_ppo.py", "--total-timesteps", "1024",
                      "--num-steps", "32", "--update-epochs", "10", "--num-minibatches", "4")


@pytest.fixture(scope="module")
def env_heavy(tmp_path_factory):
    """Each env step takes 2 ms more: the environments are most of the loop."""
    return rlprof_run(tmp_path_factory.mktemp("envs"), "cleanrl_torch_ppo.py", "--total-timesteps", "1024",
                      "--num-steps", "32", "--env-seconds", "0.002")


def test_a_run_built_on_its_policy_calls_names_the_programs_policy_method_as_the_limit(policy_heavy):
    assert POLICY_BOUND in kinds(policy_heavy)
    assert verdict_of(policy_heavy, POLICY_BOUND)["title"].startswith(
        "the policy's inference is the limit: Agent.get_action_and_value (no grad) took")
    assert UPDATE_BOUND not in kinds(policy_heavy)


def test_a_run_built_on_its_update_names_the_update_as_the_limit(update_heavy):
    assert UPDATE_BOUND in kinds(update_heavy)
    title = verdict_of(update_heavy, UPDATE_BOUND)["title"]
    assert title.startswith(f"the update (learner) is the limit: {8 * 10 * 4} optimizer steps took")
    assert POLICY_BOUND not in kinds(update_heavy)


def test_a_ppo_update_is_told_fewer_epochs_or_larger_minibatches(update_heavy):
    suggestion = verdict_of(update_heavy, UPDATE_BOUND)["suggestion"]
    assert suggestion.startswith("Fewer optimizer steps per rollout (fewer epochs, larger minibatches)")


@pytest.fixture(scope="module")
def dqn_update_heavy(tmp_path_factory):
    """SB3's DQN taking 4 gradient steps every 4 env steps of each env: the update is most of the loop."""
    pytest.importorskip("stable_baselines3")
    return rlprof_run(tmp_path_factory.mktemp("dqn"), "sb3_dqn.py", "--timesteps", "2000", "--gradient-steps", "4")


def test_an_sb3_dqn_built_on_its_gradient_steps_is_told_its_train_freq_and_gradient_steps(dqn_update_heavy):
    verdict = verdict_of(dqn_update_heavy, UPDATE_BOUND)
    assert "calls of DQN.train took" in verdict["title"]
    assert verdict["suggestion"].startswith(
        "Fewer gradient steps per env step (DQN's train_freq larger, or gradient_steps smaller)")


def test_a_run_built_on_its_environments_names_neither_the_policy_nor_the_update(env_heavy):
    assert POLICY_BOUND not in kinds(env_heavy) and UPDATE_BOUND not in kinds(env_heavy)


def test_the_analysis_reads_the_phases_of_a_real_run(update_heavy):
    phases = update_heavy["phases"]
    assert phases["update"]["blocks"] == [{**phases["update"]["blocks"][0], "block": "update", "calls": 320}]
    assert phases["environments"]["block"]["calls"] == 8 * 32
    assert {block["block"] for block in phases["policy"]["blocks"]} == {
        "Agent.get_action_and_value (no grad)", "Agent.get_value (no grad)"}


@pytest.fixture(scope="module")
def evaluation_heavy(tmp_path_factory):
    """SB3's PPO evaluated every 16 steps of each env, 2 episodes each time (the deterministic
    policy balances the pole for hundreds of steps): most of the loop, a third of the run's wall
    time with its start-up (importing SB3, building the model)."""
    pytest.importorskip("stable_baselines3")
    return rlprof_run(tmp_path_factory.mktemp("evaluation"), "sb3_ppo.py", "--timesteps", "512",
                      "--eval-freq", "16", "--eval-episodes", "2")


@pytest.fixture(scope="module")
def evaluation_light(tmp_path_factory):
    """The same PPO evaluated once, on one episode, as its 4,096 steps end (1,024 of each env's):
    a few percent of its loop. (At 1,024 steps the loop was some 0.2 s, its phases tens of
    milliseconds each, and the one episode, slowed by the rest of the suite, was once the largest
    of them: the largest part of that loop, though not of a run that trains.)"""
    pytest.importorskip("stable_baselines3")
    return rlprof_run(tmp_path_factory.mktemp("evaluation_light"), "sb3_ppo.py", "--timesteps", "4096",
                      "--eval-freq", "1024", "--eval-episodes", "1")


def test_a_run_built_on_its_evaluation_names_the_evaluation_as_the_limit(evaluation_heavy):
    assert EVALUATION_BOUND in kinds(evaluation_heavy)
    assert verdict_of(evaluation_heavy, EVALUATION_BOUND)["title"].startswith(
        "the evaluation is the limit: evaluate_policy took")
    assert POLICY_BOUND not in kinds(evaluation_heavy)


def test_the_evaluations_policy_calls_are_its_own_not_the_policys(evaluation_heavy):
    phases = evaluation_heavy["phases"]
    (evaluation,) = phases["evaluation"]["blocks"]
    assert evaluation["block"] == "evaluate_policy" and evaluation["calls"] == 512 // 4 // 16
    # The rollout's policy (a forward per vector step), and the program's one predict after
    # learning: none of the evaluation's hundreds of predict calls.
    policy = {block["block"]: block["calls"] for block in phases["policy"]["blocks"]}
    assert policy["ActorCriticPolicy.forward (no grad)"] == 512 // 4
    assert policy["ActorCriticPolicy.predict"] == 1


def test_a_run_that_evaluates_little_does_not_name_the_evaluation(evaluation_light):
    assert evaluation_light["phases"]["evaluation"]["blocks"][0]["calls"] == 1
    assert EVALUATION_BOUND not in kinds(evaluation_light)


# --- a program that steps no env: behaviour cloning from a dataset ------------------------------


@pytest.fixture(scope="module")
def offline_update_heavy(tmp_path_factory):
    """40 epochs of minibatch updates over a recorded dataset, after torch's import and set-up."""
    return rlprof_run(tmp_path_factory.mktemp("offline"), "offline_cloning.py", "--epochs", "40")


@pytest.fixture(scope="module")
def offline_slow_loader(tmp_path_factory):
    """8 epochs, each minibatch waiting 20 ms for its data outside any block: 10 s while it trains,
    more than torch's import and set-up take on a loaded machine."""
    return rlprof_run(tmp_path_factory.mktemp("loader"), "offline_cloning.py", "--epochs", "8",
                      "--load-seconds", "0.02")


def test_a_program_that_steps_no_env_is_told_fewer_optimizer_steps_and_nothing_of_envs(offline_update_heavy):
    verdict = verdict_of(offline_update_heavy, UPDATE_BOUND)
    # Its share is of its loop, from its first update to its last: a start-up longer than its
    # updates (torch's import on a loaded machine) does not hide them.
    assert "of the training loop (" in verdict["title"]
    suggestion = verdict["suggestion"]
    # (Followed by the advice to time the update's own code, where that leads its parts.)
    assert suggestion.startswith("Fewer optimizer steps (fewer epochs, larger minibatches) or a cheaper loss shorten it.")
    assert "env" not in suggestion and "rollout" not in suggestion


def test_untimed_start_up_before_the_first_update_is_called_start_up(offline_update_heavy):
    untimed = verdict_of(offline_update_heavy, UNTIMED)
    assert "before the program's first policy call or update (start-up)" in untimed["title"]
    assert untimed["evidence"]["start_up_seconds"] >= UNTIMED_START_AND_END_SHARE * untimed["evidence"]["untimed_seconds"]
    assert untimed["suggestion"].startswith("Most of it is the run's start-up, before it began to train")


def test_untimed_time_while_it_trains_is_not_called_start_up(offline_slow_loader):
    untimed = verdict_of(offline_slow_loader, UNTIMED)
    assert "start-up" not in untimed["title"] and "start_up_seconds" not in untimed["evidence"]
    assert "(offline_cloning.py:31)" in untimed["title"]  # its time.sleep, the slow loader
    assert untimed["suggestion"].startswith("Those lines are the program's own code between the timed phases")


# --- SB3's policy call: an outermost module call, its layers untimed ------------------------------


@pytest.fixture(scope="module")
def sb3_policy_heavy(tmp_path_factory):
    """SB3's PPO with long rollouts, one epoch and minibatches of a whole rollout: its policy's
    calls are most of the loop (with 16 minibatches an update, a loaded machine once made the
    update the larger: 171 against 159 ms)."""
    pytest.importorskip("stable_baselines3")
    return rlprof_run(tmp_path_factory.mktemp("sb3_policy"), "sb3_ppo.py", "--timesteps", "2048",
                      "--n-steps", "256", "--n-epochs", "1", "--batch-size", "1024")


def test_sb3_s_policy_call_is_named_but_not_split_into_networks_and_its_own_code(sb3_policy_heavy):
    verdict = verdict_of(sb3_policy_heavy, POLICY_BOUND)
    assert verdict["title"].startswith("the policy's inference is the limit: ActorCriticPolicy.forward (no grad) took")
    assert "outside the networks' forwards" not in verdict["suggestion"]
