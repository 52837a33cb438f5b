"""Ctrl-C (a real SIGINT) landing anywhere in a step: the script ends, the timers are dumped,
nothing is read out of step, no process is left behind."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import psutil
import pytest
from envmanager_testenvs import BigActionEnv, CountingEnv, CtrlCEnv, LeakyHelperProcessEnv, semaphore_exists
from interrupts import after_request, between_header_and_body, ctrl_c_when, entering
from tree_paths import count_of

from envmanager import SubprocessEnvManager, WorkerDiedError
from envmanager.transport import pool

HERE = Path(__file__).parents[1]  # the trainer scripts sit with the shared test envs


def run_script(script: str, *args: str) -> tuple[subprocess.CompletedProcess, list[int]]:
    """Run a trainer script in its own session; on a hang, kill the whole session and fail."""
    process = subprocess.Popen(
        [sys.executable, str(HERE / script), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"{script} did not end within 60 s after the interrupt")
    worker_pids = json.loads(stdout.splitlines()[0])
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr), worker_pids


@pytest.fixture
def generous_reply_grace(monkeypatch):
    """Closing gives a busy worker 1 s to answer; a loaded machine can take longer to run the
    worker at all. These tests are about what the answer delivers, so they wait for it: the
    grace bounds the wait, and a worker that answers ends it."""
    monkeypatch.setattr(pool, "REPLY_GRACE_SECONDS", 60.0)


def env_steps_per_worker(timers_file: Path) -> dict[int, int]:
    """Each worker's merged ``env.step`` count, from the dump's ``workers`` section."""
    tree = json.loads(timers_file.read_text())
    return {worker["worker_id"]: count_of(worker, "env.step") for worker in tree["workers"]}


def still_running(pids: list[int]) -> list[int]:
    running = []
    for pid in pids:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                running.append(pid)
        except psutil.NoSuchProcess:
            pass
    return running


def test_ctrl_c_in_the_middle_of_reading_a_reply_ends_the_script_with_its_timers_dumped(tmp_path):
    result, worker_pids = run_script("interrupted_trainer.py", str(tmp_path))
    assert result.returncode == -signal.SIGINT, result.stderr
    assert "KeyboardInterrupt" in result.stderr
    assert still_running(worker_pids) == []
    tree = json.loads((tmp_path / "interrupted_timers.json").read_text())
    # Flushed every step: the three steps before the interrupt were merged, both workers' trees kept.
    assert count_of(tree, "env.step") >= 6
    assert len(tree["workers"]) == 2


def test_a_worker_whose_request_was_cut_in_half_is_never_written_to_again_and_can_be_restarted():
    # Actions in the request (not in shared memory), so that it is long enough to be cut in half.
    envs = SubprocessEnvManager(
        [BigActionEnv] * 2, shared_memory=False, context="fork", restart_on_failure=True, timeout=30
    )
    envs.reset(seed=0)
    actions = np.zeros((2, 8192), dtype=np.float32)
    with pytest.raises(KeyboardInterrupt), ctrl_c_when(between_header_and_body):
        envs.step(actions)
    with pytest.warns(RuntimeWarning, match="worker 0 .*cut off.*restarting it"):
        observations, *_ = envs.step(actions)
    # Worker 0 was replaced (fresh envs, reset, then stepped); worker 1 had not been sent a thing.
    np.testing.assert_array_equal(observations[:, 0], [1, 1])
    envs.close()


def test_without_restarts_a_cut_off_worker_is_named_when_it_is_needed_again():
    envs = SubprocessEnvManager([BigActionEnv] * 2, shared_memory=False, context="fork", timeout=30)
    envs.reset(seed=0)
    actions = np.zeros((2, 8192), dtype=np.float32)
    with pytest.raises(KeyboardInterrupt), ctrl_c_when(between_header_and_body):
        envs.step(actions)
    with pytest.raises(WorkerDiedError, match="worker 0 .*cut off by an interrupt"):
        envs.step(actions)
    envs.close()


def test_a_worker_cut_off_just_after_its_request_was_written_still_delivers_its_timers(tmp_path, generous_reply_grace):
    envs = SubprocessEnvManager(
        [lambda: CountingEnv(episode_length=1000)] * 2, context="fork", summaries_dir=tmp_path, run_id="cut"
    )
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.array([1, 1]))
    with pytest.raises(KeyboardInterrupt), ctrl_c_when(after_request(1)):
        envs.step(np.array([1, 1]))  # worker 0 got its whole request, worker 1 nothing
    envs.close()
    assert env_steps_per_worker(tmp_path / "cut_timers.json") == {0: 4, 1: 3}


def test_an_interrupt_between_two_workers_requests_keeps_every_worker_in_step():
    envs = SubprocessEnvManager(
        [lambda: CountingEnv(episode_length=1000)] * 3, context="fork", restart_on_failure=True, timeout=30
    )
    envs.reset(seed=0)
    with pytest.raises(KeyboardInterrupt), ctrl_c_when(after_request(2)):
        envs.step(np.array([1, 1, 1]))  # worker 0 got its request, worker 1 maybe, worker 2 not
    with pytest.warns(RuntimeWarning, match="worker 1 .*cut off.*restarting it"):
        observations, *_ = envs.step(np.array([1, 1, 1]))
    np.testing.assert_array_equal(observations[:, 0], [2, 1, 1])  # worker 0 ran the interrupted step
    observations, *_ = envs.step(np.array([1, 1, 1]))
    np.testing.assert_array_equal(observations[:, 0], [3, 2, 2])
    envs.close()


def test_ctrl_c_while_workers_are_busy_lets_them_deliver_their_reply_and_last_timers(tmp_path, generous_reply_grace):
    envs = SubprocessEnvManager(
        [lambda: CtrlCEnv(interrupt_at=4), CountingEnv], context="fork", summaries_dir=tmp_path, run_id="busy"
    )
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.array([1, 1]))
    with pytest.raises(KeyboardInterrupt):
        envs.step(np.array([1, 1]))
    envs.close()
    assert env_steps_per_worker(tmp_path / "busy_timers.json") == {0: 4, 1: 4}


def test_ctrl_c_during_close_with_a_step_pending_still_stops_everything_and_dumps(tmp_path):
    envs = SubprocessEnvManager(
        [LeakyHelperProcessEnv] * 2, context="fork", max_concurrency=1, summaries_dir=tmp_path, run_id="closing"
    )
    envs.reset(seed=0)
    helpers = [psutil.Process(pid) for pid in envs.get_attr("helper_pid")]
    semaphore = envs._pool.permits.semaphore_id
    envs.step_async(np.array([0, 2]))  # worker 1 hangs in its step
    try:
        with pytest.raises(KeyboardInterrupt), warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's "closing while waiting" warning
            with ctrl_c_when(entering(pool, "receive_outstanding")):
                envs.close()
        assert envs.closed
        assert still_running([helper.pid for helper in helpers]) == []
        assert not semaphore_exists(semaphore)
        assert (tmp_path / "closing_timers.json").is_file()
    finally:
        for helper in helpers:
            with contextlib.suppress(psutil.Error):
                helper.kill()


def test_ctrl_c_while_spawned_workers_start_is_the_trainers_alone():
    trainer = subprocess.Popen(
        [sys.executable, str(HERE / "lifecycle_trainer.py"), "starting", "spawn"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=HERE,
        start_new_session=True,  # its own process group, which the test's Ctrl-C goes to
        env={**os.environ, "LIFECYCLE_SLOW_WORKER_START": "1"},
    )
    try:
        assert "worker_starting" in trainer.stdout.readline()
        os.killpg(trainer.pid, signal.SIGINT)  # as a terminal's Ctrl-C: to the whole group
        _, stderr = trainer.communicate(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(trainer.pid, signal.SIGKILL)
        trainer.communicate()
    assert trainer.returncode == -signal.SIGINT
    assert stderr.count("Traceback") == 1, stderr  # the trainer's; none from the workers
