"""Process life: no worker and no env helper process outlives its trainer or ``close()``.

The trainer is killed for real (SIGKILL) or left to exit by itself: those tests run a small
trainer (``lifecycle_trainer.py``) as a process of its own and watch its workers from here.
"""

from __future__ import annotations

import functools
import gc
import json
import select
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import psutil
import pytest
from envmanager_testenvs import (
    CountingEnv,
    DiesInResetEnv,
    HangingEnv,
    HelperAtConstructionEnv,
    HelperProcessEnv,
    LeakyHelperProcessEnv,
    SlowToRebuildEnv,
    SuicidalEnv,
    kill_all,
    semaphore_exists,
    worker_children,
)
from lifecycle_trainer import NEVER_CLOSED_STEPS

from envmanager import SubprocessEnvManager, WorkerDiedError
from envmanager.transport.pool import CLOSE_GRACE_SECONDS
from profiler.analysis.block_stats import walk_nodes
from profiler.tree.timer_json import load_timing_tree

TRAINER = Path(__file__).parents[1] / "lifecycle_trainer.py"
START_METHODS = ["fork", "spawn", "forkserver"]
# "Within a few seconds" on a loaded machine: generous, since a test must never fail for slowness.
DEATH_WITHIN_SECONDS = 10.0
TRAINER_START_SECONDS = 60.0


def _merged_env_steps(tree: dict) -> int:
    """The count of the workers' ``env.step`` blocks merged under the manager's step."""
    return dict(walk_nodes(tree))[("env_manager.step", "env.step")]["count"]


def _is_gone(process: psutil.Process) -> bool:
    try:
        return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _survivors(processes: list[psutil.Process], within: float = DEATH_WITHIN_SECONDS) -> list[int]:
    """The pids still running after waiting up to ``within`` seconds for all to end."""
    deadline = time.monotonic() + within
    while True:
        alive = [p for p in processes if not _is_gone(p)]
        if not alive or time.monotonic() > deadline:
            return [p.pid for p in alive]
        time.sleep(0.05)


def _processes(pids: list[int]) -> list[psutil.Process]:
    processes = []
    for pid in pids:
        try:
            processes.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            pass
    return processes


def _semaphore_removed_within(semaphore_id: int, within: float = DEATH_WITHIN_SECONDS) -> bool:
    deadline = time.monotonic() + within
    while semaphore_exists(semaphore_id):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@contextmanager
def _trainer(*args: str) -> Iterator[tuple[subprocess.Popen, dict]]:
    """Run ``lifecycle_trainer.py`` with ``args``; yield it and its JSON report.

    Whatever happens, every process it started is killed on the way out.
    """
    trainer = subprocess.Popen(
        [sys.executable, str(TRAINER), *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    started: list[psutil.Process] = []
    try:
        ready, _, _ = select.select([trainer.stdout], [], [], TRAINER_START_SECONDS)
        line = trainer.stdout.readline() if ready else ""
        if not line:
            trainer.kill()
            raise AssertionError(f"the trainer did not report; stderr:\n{trainer.communicate()[1]}")
        report = json.loads(line)
        started = psutil.Process(trainer.pid).children(recursive=True)
        started += _processes(report.get("workers", []) + report.get("helpers", []))
        if "forked_child" in report:
            started += _processes([report["forked_child"]])
        yield trainer, report
    finally:
        kill_all(started)
        if trainer.poll() is None:
            trainer.kill()
        trainer.communicate()


# -- item 1: the trainer is killed ------------------------------------------------------------


@pytest.mark.parametrize("start_method", START_METHODS)
def test_workers_env_helpers_and_permits_go_with_a_trainer_killed_while_they_hang_in_a_step(start_method):
    with _trainer("hung", start_method) as (trainer, report):
        watched = _processes(report["workers"] + report["helpers"])
        trainer.send_signal(signal.SIGKILL)
        assert _survivors(watched) == []
        assert _semaphore_removed_within(report["semaphore"])


@pytest.mark.parametrize("start_method", START_METHODS)
def test_workers_die_with_a_killed_trainer_even_while_a_child_it_forked_lives_on(start_method):
    with _trainer("forked-child", start_method) as (trainer, report):
        watched = _processes(report["workers"] + report["helpers"])
        forked_child = psutil.Process(report["forked_child"])
        trainer.send_signal(signal.SIGKILL)
        assert _survivors(watched) == []
        assert not _is_gone(forked_child)  # it held the pipes open: EOF alone could not tell


@pytest.mark.parametrize("start_method", START_METHODS)
def test_a_child_an_env_forked_goes_with_a_killed_trainer(start_method):
    with _trainer("env-forked-child", start_method) as (trainer, report):
        watched = _processes(report["workers"] + report["helpers"])
        trainer.send_signal(signal.SIGKILL)
        assert _survivors(watched) == []


# Not forkserver: its workers are forked by the forkserver's main thread whoever asks.
@pytest.mark.parametrize("start_method", ["fork", "spawn"])
def test_workers_started_by_a_thread_that_ended_keep_working_and_still_die_with_their_trainer(start_method):
    with _trainer("thread-built", start_method) as (trainer, report):
        watched = _processes(report["workers"] + report["helpers"])
        trainer.send_signal(signal.SIGKILL)
        assert _survivors(watched) == []


def test_a_forked_child_of_the_trainer_exiting_normally_leaves_the_manager_working():
    with _trainer("child-exits", "fork") as (trainer, report):
        assert report == {"stepped": True}
        assert trainer.wait(TRAINER_START_SECONDS) == 0


# -- item 13: env helper processes ------------------------------------------------------------


@contextmanager
def _manager_with_helpers(env_fn: Callable, context: str = "fork") -> Iterator[tuple]:
    """A manager whose envs run helper processes (started by a first reset), and those helpers.

    Whatever happens, the helpers are killed on the way out.
    """
    envs = SubprocessEnvManager([env_fn] * 2, context=context)
    envs.reset(seed=0)
    helpers = _processes(list(envs.get_attr("helper_pid")))
    try:
        yield envs, helpers
    finally:
        kill_all(helpers)


@pytest.mark.parametrize("start_method", START_METHODS)
def test_close_terminate_stops_the_envs_helper_processes(start_method):
    with _manager_with_helpers(HelperProcessEnv, start_method) as (envs, helpers):
        envs.close(terminate=True)
        assert _survivors(helpers) == []


def test_closing_with_a_worker_hung_in_a_step_stops_its_helper_process():
    with _manager_with_helpers(HelperProcessEnv) as (envs, helpers):
        envs.step_async(np.array([0, 2]))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # gymnasium's "closing while waiting" warning
            envs.close()
        assert _survivors(helpers) == []


def test_a_manager_collected_without_close_stops_the_envs_helper_processes():
    envs = SubprocessEnvManager([HelperProcessEnv] * 2, context="fork")
    envs.reset(seed=0)
    helpers = _processes(list(envs.get_attr("helper_pid")))
    try:
        del envs
        gc.collect()
        assert _survivors(helpers) == []
    finally:
        kill_all(helpers)


@pytest.mark.parametrize("terminate", [False, True])
def test_helper_processes_an_env_forgot_to_stop_die_with_their_worker(terminate):
    with _manager_with_helpers(LeakyHelperProcessEnv) as (envs, helpers):
        envs.close(terminate=terminate)
        assert _survivors(helpers) == []


# -- item 3: max_concurrency and a dying worker -----------------------------------------------


@pytest.mark.parametrize("start_method", START_METHODS)
def test_restart_recovers_after_a_worker_died_holding_the_only_concurrency_permit(start_method):
    envs = SubprocessEnvManager(
        [SuicidalEnv] * 3, context=start_method, max_concurrency=1, restart_on_failure=True
    )
    envs.reset(seed=0)
    with pytest.warns(RuntimeWarning, match="worker 1 .*SIGKILL.*restarting it"):
        # The restarted worker's reset needs the permit the dead one held.
        _, _, _, truncations, _ = envs.step(np.array([0, 2, 0]))
    np.testing.assert_array_equal(truncations, [False, True, False])
    _, rewards, *_ = envs.step(np.array([1, 1, 1]))
    np.testing.assert_array_equal(rewards, [1.5, 1.5, 1.5])
    envs.close()


def test_a_worker_killed_holding_the_only_permit_is_named_and_the_others_keep_running():
    envs = SubprocessEnvManager([SuicidalEnv] * 3, context="fork", max_concurrency=1)
    envs.reset(seed=0)
    for _ in range(3):
        envs.step(np.array([0, 0, 0]))
    with pytest.raises(WorkerDiedError, match="worker 1 .*SIGKILL"):
        envs.step(np.array([0, 2, 0]))  # no timeout: it must not hang either
    assert len(worker_children()) == 2
    envs.close()


# -- item 6: never closed ---------------------------------------------------------------------


@pytest.mark.parametrize("start_method", START_METHODS)
def test_an_unclosed_manager_with_non_daemon_workers_lets_the_interpreter_exit(start_method):
    with _trainer("never-closed", start_method) as (trainer, report):
        workers = _processes(report["workers"])
        try:
            exit_code = trainer.wait(TRAINER_START_SECONDS)
        except subprocess.TimeoutExpired:
            pytest.fail("the interpreter did not exit")
        assert exit_code == 0
        assert _survivors(workers) == []


@pytest.mark.parametrize("start_method", START_METHODS)
def test_an_unclosed_manager_is_closed_at_exit_and_writes_its_timers(start_method, tmp_path):
    with _trainer("never-closed", start_method, str(tmp_path)) as (trainer, report):
        workers = _processes(report["workers"])
        _, stderr = trainer.communicate(timeout=TRAINER_START_SECONDS)
        assert trainer.returncode == 0
        assert stderr == ""
        assert _survivors(workers) == []
    tree = load_timing_tree(tmp_path / "unclosed_timers.json")
    assert _merged_env_steps(tree) == 2 * NEVER_CLOSED_STEPS


# -- item 14: restarts, constructor, close ----------------------------------------------------


def test_a_worker_dying_in_the_reset_after_its_restart_is_restarted_again_while_budget_lasts(tmp_path):
    countdown = tmp_path / "countdown"
    countdown.write_text("0")
    factory = functools.partial(DiesInResetEnv, str(countdown))
    envs = SubprocessEnvManager([factory] * 2, context="fork", restart_on_failure=3)
    envs.reset(seed=0)
    countdown.write_text("1")  # the first restarted worker dies in its reset, the next one lives
    try:
        with pytest.warns(RuntimeWarning, match="restarting it") as warned:
            _, _, _, truncations, _ = envs.step(np.array([2, 0]))
        restarts = [str(item.message).rsplit("(", 1)[1] for item in warned]
        assert restarts == ["restart 1 of 3).", "restart 2 of 3)."]
        np.testing.assert_array_equal(truncations, [True, False])
        envs.step(np.array([0, 0]))
    finally:
        envs.close()


def test_the_timeout_bounds_the_reset_after_a_restart_not_the_new_workers_start_up(tmp_path):
    slow = tmp_path / "slow"
    factory = functools.partial(SlowToRebuildEnv, str(slow), seconds=6.0)
    envs = SubprocessEnvManager([factory] * 2, context="fork", restart_on_failure=True, timeout=3.0)
    envs.reset(seed=0)
    slow.write_text("")  # the restarted worker takes twice the timeout to build its env
    with pytest.warns(RuntimeWarning, match="restarting it"):
        _, _, _, truncations, _ = envs.step(np.array([0, 2]))
    np.testing.assert_array_equal(truncations, [False, True])
    envs.close()


def test_a_worker_dying_in_the_reset_after_its_restart_raises_once_the_budget_is_spent(tmp_path):
    countdown = tmp_path / "countdown"
    countdown.write_text("0")
    factory = functools.partial(DiesInResetEnv, str(countdown))
    envs = SubprocessEnvManager([factory] * 2, context="fork", restart_on_failure=2)
    envs.reset(seed=0)
    countdown.write_text("5")
    with pytest.warns(RuntimeWarning, match="restarting it"):
        with pytest.raises(WorkerDiedError, match="worker 0 .*SIGKILL.*reset after restart"):
            envs.step(np.array([2, 0]))
    envs.close()


def test_a_constructor_failing_part_way_leaves_no_worker_running():
    unpicklable = threading.Lock()

    def holds_a_lock():
        assert unpicklable is not None
        return CountingEnv()

    # The second worker's factory cannot be sent to a spawned process: the first worker is
    # already running when that fails.
    with pytest.raises(TypeError, match="lock") as raised:
        SubprocessEnvManager([CountingEnv, holds_a_lock], context="spawn")
    assert "while starting worker 1 (envs 1..1) with start method 'spawn'" in raised.value.__notes__[0]
    assert worker_children() == []


def test_close_terminates_a_worker_stuck_in_a_pending_call_without_waiting_the_close_grace():
    envs = SubprocessEnvManager([HangingEnv] * 2, context="fork")
    envs.reset(seed=0)
    envs.step_async(np.array([0, 2]))
    started = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # gymnasium's "closing while waiting" warning
        envs.close()
    # A stuck worker is terminated after a short grace, not after the close grace.
    assert time.monotonic() - started < CLOSE_GRACE_SECONDS / 2
    assert worker_children() == []


def test_a_failed_timer_dump_still_closes_the_manager_and_raises_naming_the_file(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    envs = SubprocessEnvManager([CountingEnv] * 2, context="fork", summaries_dir=not_a_directory / "runs")
    envs.reset(seed=0)
    envs.step(np.array([1, 1]))
    with pytest.raises(OSError, match="runs") as raised:
        envs.close()
    assert "the manager is closed" in raised.value.__notes__[0]
    assert envs.closed
    assert worker_children() == []
    envs.close()  # closing again is a no-op


def test_after_a_failed_dump_at_close_the_timers_can_be_written_elsewhere(tmp_path):
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    envs = SubprocessEnvManager([CountingEnv] * 2, context="fork", summaries_dir=not_a_directory / "runs")
    envs.reset(seed=0)
    envs.step(np.array([1, 1]))
    with pytest.raises(OSError):
        envs.close()
    assert _merged_env_steps(load_timing_tree(envs.dump_timers(tmp_path))) == 2


# -- round two: whoever sees the trainer gone ends the workers' groups ------------------------

@pytest.mark.parametrize("start_method", START_METHODS)
def test_forgotten_helpers_die_with_a_trainer_killed_while_its_workers_write_their_replies(start_method):
    with _trainer("replying", start_method) as (trainer, report):
        watched = _processes(report["workers"] + report["helpers"])
        trainer.send_signal(signal.SIGKILL)
        assert _survivors(watched) == []


@pytest.mark.parametrize("start_method", START_METHODS)
def test_forgotten_helpers_die_when_the_death_signals_come_as_the_worker_starts_to_end_its_group(
    start_method, tmp_path
):
    marks = tmp_path / "signalled"
    with _trainer("signalled", start_method, str(marks)) as (trainer, report):
        watched = _processes(report["workers"] + report["helpers"])
        trainer.send_signal(signal.SIGKILL)
        assert _survivors(watched) == []
    assert sorted(path.name for path in tmp_path.iterdir()) == ["signalled.0", "signalled.1"]


@pytest.mark.parametrize("start_method", START_METHODS)
def test_forgotten_helpers_and_the_permits_go_when_the_trainer_main_thread_ends_before_its_process(start_method):
    with _trainer("main-thread-ends", start_method) as (trainer, report):
        watched = _processes(report["workers"] + report["helpers"])
        time.sleep(0.5)  # the main thread is gone; the process lives on in another thread
        trainer.send_signal(signal.SIGKILL)
        assert _survivors(watched) == []
        assert _semaphore_removed_within(report["semaphore"])


@pytest.mark.parametrize("start_method", START_METHODS)
def test_a_helper_of_the_env_built_to_read_the_spaces_dies_with_a_trainer_killed_meanwhile(start_method):
    with _trainer("constructing", start_method) as (trainer, report):
        watched = _processes(report["helpers"])
        trainer.send_signal(signal.SIGKILL)
        assert _survivors(watched) == []


def test_a_helper_forgotten_by_the_env_built_to_read_the_spaces_is_gone_after_construction(tmp_path):
    pid_file = tmp_path / "helpers"
    envs = SubprocessEnvManager([functools.partial(HelperAtConstructionEnv, pid_file=str(pid_file))] * 2, context="fork")
    try:
        worker_helpers = set(envs.get_attr("helper_pid"))
        every_helper = {int(line) for line in pid_file.read_text().split()}
        first_env_helpers = _processes(sorted(every_helper - worker_helpers))
        assert len(every_helper) == 3  # the two workers' envs and the first env
        assert _survivors(first_env_helpers) == []
    finally:
        envs.close()


def test_the_helper_of_a_worker_killed_from_outside_dies_without_waiting_for_the_next_call():
    with _manager_with_helpers(LeakyHelperProcessEnv) as (envs, helpers):
        envs._pool.workers[1].process.kill()
        assert _survivors(helpers[1:]) == []  # no call to the manager in between
        assert not _is_gone(helpers[0])
        with pytest.raises(WorkerDiedError, match="worker 1"):
            envs.step(np.array([0, 0]))
        envs.close()
