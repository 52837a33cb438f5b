"""Specification: on real runs under ``rlprof run`` (real torch, real Gymnasium, real
Stable-Baselines3), the ``untimed`` verdict says that the time outside any block is the run's
start-up and end where a short run is built to spend it there, and says how much fell inside the
training loop, with the planted slow function named, where the run is built to spend it there."""

from __future__ import annotations

import pytest

pytest.importorskip("stable_baselines3")  # installed by the README's test command: runs in CI

from framework_runs import rlprof_run  # noqa: E402
from profiler.analysis.verdicts import UNTIMED  # noqa: E402


def untimed_verdict(run: dict) -> dict:
    (verdict,) = [verdict for verdict in run["verdicts"] if verdict["kind"] == UNTIMED]
    return verdict


@pytest.fixture(scope="module")
def short_sb3_run(tmp_path_factory):
    """SB3's PPO for 512 steps: importing torch and SB3 and building the model take most of the
    run; its two rollouts and updates are blocks, so little is untimed inside the loop."""
    return rlprof_run(tmp_path_factory.mktemp("short_sb3"), "sb3_ppo.py", "--timesteps", "512")


@pytest.fixture(scope="module")
def slow_logging_run(tmp_path_factory):
    """The CleanRL-style PPO for 12 iterations, each followed by 0.5 s of logging that nothing
    times: 5.5 s of untimed time between its rollouts, against the start-up's 2 to 3 s."""
    return rlprof_run(tmp_path_factory.mktemp("slow_logging"), "cleanrl_torch_ppo.py", "--total-timesteps", "768",
                      "--slow-logging", "0.5")


def test_a_short_sb3_run_is_told_its_untimed_time_is_start_up_and_end(short_sb3_run):
    verdict = untimed_verdict(short_sb3_run)
    assert "before the training loop's first step or after its last (start-up, end)" in verdict["title"]
    assert verdict["suggestion"].startswith("Most of it is the run's start-up and end, outside the training loop")
    evidence = verdict["evidence"]
    assert evidence["start_and_end_seconds"] >= 0.5 * evidence["untimed_seconds"]


def test_a_run_that_logs_slowly_between_rollouts_is_told_how_much_fell_inside_the_loop(slow_logging_run):
    verdict = untimed_verdict(slow_logging_run)
    assert "of it inside the training loop (between steps" in verdict["title"]
    assert "write_logs (cleanrl_torch_ppo.py" in verdict["title"]
    assert not verdict["suggestion"].startswith("Most of it is the run's start-up")
    assert verdict["evidence"]["between_rollouts_seconds"] >= 11 * 0.5
