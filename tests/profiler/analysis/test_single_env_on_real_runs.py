"""Specification: a program that steps one env itself, in the trainer, with no vector env
(REINFORCE on CartPole, ``reinforce_single_env.py`` under ``rlprof run``, real torch and Gymnasium),
is told that the environment limits it where its env is built slow (on a loaded machine too: the
share of its wall time it waited for a core is taken off its env calls' time), and not where its
policy's calls are the larger part."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")  # installed by the README's test command: runs in CI

from framework_runs import rlprof_run  # noqa: E402
from profiler.analysis.verdicts import ENV_BOUND  # noqa: E402


def test_a_slow_env_stepped_in_the_trainer_is_told_to_step_several_in_workers(tmp_path):
    run = rlprof_run(tmp_path, "reinforce_single_env.py", "--episodes", "8", "--env-seconds", "0.006",
                     "--recompute")
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == ENV_BOUND]
    assert verdict["title"].startswith("the environment is the limit: the program's own env calls")
    assert verdict["suggestion"].startswith("Step several envs at once in worker processes")


def test_a_single_env_program_built_on_its_policy_is_not_told_its_env_limits_it(tmp_path):
    run = rlprof_run(tmp_path, "reinforce_single_env.py", "--episodes", "20")
    assert ENV_BOUND not in [verdict["kind"] for verdict in run["verdicts"]]
