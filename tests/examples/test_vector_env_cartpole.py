"""The CartPole example runs as a user would run it."""

from __future__ import annotations

from example_runner import run_example


def test_the_cartpole_example_runs_and_reports_episodes():
    completed = run_example("vector_env_cartpole.py")
    assert "episodes ended" in completed.stdout
    assert completed.stderr == ""
