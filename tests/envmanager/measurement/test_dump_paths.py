"""A run's dump lands inside the summaries folder, in a regular file: its name is never a path, and
no link planted there is written through."""

from __future__ import annotations

import pytest
from envmanager_testenvs import CountingEnv

from envmanager import SubprocessEnvManager

ESCAPING_RUN_IDS = ["../../x", "a/b", "..", ".", "", "a\\b"]


@pytest.mark.parametrize("run_id", ESCAPING_RUN_IDS)
def test_a_manager_refuses_a_run_id_that_is_a_path_before_starting_workers(tmp_path, run_id):
    summaries = tmp_path / "a" / "b"
    with pytest.raises(ValueError, match="run_id must be a non-empty name without path separators"):
        SubprocessEnvManager([CountingEnv] * 2, summaries_dir=summaries, run_id=run_id, context="fork")
    assert list(tmp_path.rglob("*_timers.json")) == []


def test_dump_timers_refuses_a_run_id_that_is_a_path(tmp_path):
    with SubprocessEnvManager([CountingEnv] * 2, context="fork") as envs:
        envs.reset(seed=0)
        with pytest.raises(ValueError, match="run_id must be a non-empty name"):
            envs.dump_timers(tmp_path / "a", run_id="../x")
    assert not (tmp_path / "x_timers.json").exists()


def test_a_symlink_planted_at_the_managers_dump_path_is_refused_and_its_target_kept(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("private")
    (tmp_path / "envmanager_timers.json").symlink_to(secret)
    with SubprocessEnvManager([CountingEnv] * 2, context="fork") as envs:
        envs.reset(seed=0)
        with pytest.raises(OSError, match="is a symbolic link"):
            envs.dump_timers(tmp_path)
    assert secret.read_text() == "private"
