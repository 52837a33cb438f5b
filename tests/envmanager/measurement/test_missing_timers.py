"""Timing the trainer could not get is never missing silently: the dump says whose, how much, why."""

from __future__ import annotations

import json
import multiprocessing
import warnings

import numpy as np
import pytest
from envmanager_testenvs import HangingEnv, SabotagingEnv, SuicidalEnv
from tree_paths import count_of

from envmanager import SubprocessEnvManager, WorkerDiedError


def worker_entries(timers_file) -> dict[int, dict]:
    return {worker["worker_id"]: worker for worker in json.loads(timers_file.read_text())["workers"]}


def test_dump_timers_while_a_worker_hangs_writes_what_it_has_and_names_the_silent_worker(tmp_path):
    envs = SubprocessEnvManager([HangingEnv] * 2, context="fork", flush_every=1)
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.array([1, 1]))
    envs.step_async(np.array([1, 2]))  # worker 1 hangs in its env
    with pytest.raises(multiprocessing.TimeoutError):
        envs.step_wait(timeout=0.2)
    with pytest.warns(RuntimeWarning, match=r"worker 1 did not answer"):
        path = envs.dump_timers(tmp_path, "hung")
    entries = worker_entries(path)
    assert count_of(entries[0], "env.step") == 4  # the answering worker's timers are complete
    assert "did not answer" in entries[1]["unreported_reason"]
    assert "unreported_reason" not in entries[0]
    envs.close()


def test_a_worker_killed_before_its_first_flush_leaves_its_step_count_in_the_dump(tmp_path):
    envs = SubprocessEnvManager(
        [SuicidalEnv] * 2, context="fork", flush_interval=3600, summaries_dir=tmp_path, run_id="killed"
    )
    envs.reset(seed=0)
    for _ in range(5):
        envs.step(np.array([1, 1]))
    with pytest.raises(WorkerDiedError):
        envs.step(np.array([1, 2]))  # worker 1 kills itself before it ever shipped its timers
    envs.close()
    entries = worker_entries(tmp_path / "killed_timers.json")
    assert entries[1]["unreported_steps"] == 5
    assert "SIGKILL" in entries[1]["unreported_reason"]
    assert entries[0]["unreported_steps"] == 0
    assert count_of(entries[0], "env.step") == 6


def test_steps_lost_with_a_restarted_workers_old_process_stay_counted(tmp_path):
    envs = SubprocessEnvManager(
        [SuicidalEnv] * 2, context="fork", flush_interval=3600, restart_on_failure=True
    )
    envs.reset(seed=0)
    for _ in range(5):
        envs.step(np.array([1, 1]))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the restart warning
        envs.step(np.array([1, 2]))
    envs.step(np.array([1, 1]))
    envs.close()
    path = envs.dump_timers(tmp_path, "restarted")
    entry = worker_entries(path)[1]
    assert entry["unreported_steps"] == 5
    assert "earlier process" in entry["unreported_reason"]


def test_a_dump_while_nothing_is_missing_reports_zero_unreported_steps(tmp_path):
    envs = SubprocessEnvManager([SuicidalEnv] * 2, context="fork", flush_interval=3600)
    envs.reset(seed=0)
    envs.step(np.array([1, 1]))
    entries = worker_entries(envs.dump_timers(tmp_path, "live"))
    envs.close()
    assert [entry["unreported_steps"] for entry in entries.values()] == [0, 0]
    assert all("unreported_reason" not in entry for entry in entries.values())


def test_a_refused_payload_is_counted_warned_about_and_its_steps_reported_missing(tmp_path):
    envs = SubprocessEnvManager([SabotagingEnv] * 2, context="fork", flush_every=1)
    envs.reset(seed=0)
    envs.step(np.array([1, 1]))
    with pytest.warns(RuntimeWarning, match="dropped a malformed timer payload from worker 0"):
        envs.step(np.array([2, 1]))  # worker 0's payload for this step carries a NaN time
    envs.step(np.array([1, 1]))
    path = envs.dump_timers(tmp_path, "refused")
    envs.close()
    entries = worker_entries(path)
    assert entries[0]["refused_payloads"] == 1
    assert entries[0]["unreported_steps"] == 1
    assert "refused" in entries[0]["unreported_reason"]
    assert count_of(entries[0], "env.step") == 2  # the steps of the payloads merged
    assert count_of(entries[1], "env.step") == 3
    assert "refused_payloads" not in entries[1]
