"""Specification: on real CleanRL-style PPO runs under ``rlprof run`` (real torch, real Gymnasium),
the policy's inference or the update is named as the limit where the run is built to be limited by
it, and neither where the environments are the limit."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from framework_runs import rlprof_run  # noqa: E402
from profiler.analysis.phase_verdicts import POLICY_BOUND, UPDATE_BOUND  # noqa: E402


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


def test_a_run_built_on_its_environments_names_neither_the_policy_nor_the_update(env_heavy):
    assert POLICY_BOUND not in kinds(env_heavy) and UPDATE_BOUND not in kinds(env_heavy)


def test_the_analysis_reads_the_phases_of_a_real_run(update_heavy):
    phases = update_heavy["phases"]
    assert phases["update"]["blocks"] == [{**phases["update"]["blocks"][0], "block": "update", "calls": 320}]
    assert phases["environments"]["block"]["calls"] == 8 * 32
    assert {block["block"] for block in phases["policy"]["blocks"]} == {
        "Agent.get_action_and_value (no grad)", "Agent.get_value (no grad)"}
