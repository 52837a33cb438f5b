"""Workers that raise, die or hang: clear errors, no endless wait, no process left behind."""

from __future__ import annotations

import multiprocessing
import re
import time
import warnings

import numpy as np
import pytest
from envmanager_testenvs import CountingEnv, HangingEnv, RaisingEnv, SuicidalEnv, worker_children

from envmanager import SubprocessEnvManager, WorkerDiedError, WorkerError


def test_an_exception_in_reset_is_re_raised_with_its_type_and_message_and_the_worker_index():
    envs = SubprocessEnvManager([RaisingEnv] * 2, context="fork")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        envs.reset(seed=[0, 0])
    assert caught == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="Error in reset") as raised:
            envs.reset(seed=[1, 0])
        envs.close()
    cause = raised.value.__cause__
    assert isinstance(cause, WorkerError)
    assert cause.worker_index == 0 and cause.env_index == 0
    assert 'raise ValueError("Error in reset")' in cause.remote_traceback
    # Gymnasium's three log lines for one failing worker.
    assert len(caught) == 3
    assert "Received the following error from Worker-0 - Shutting it down" in str(caught[0].message)
    assert "ValueError: Error in reset" in str(caught[1].message)
    assert "Raising the last exception back to the main process." in str(caught[2].message)


def test_when_two_workers_raise_in_step_the_last_exception_is_raised_and_both_are_logged():
    envs = SubprocessEnvManager([RaisingEnv] * 3, context="fork")
    envs.reset(seed=[0, 0, 0])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="Error in step with [12]"):
            envs.step(np.array([0, 1, 2]))
        envs.close()
    assert len(caught) == 5
    assert re.search(
        r"Traceback \(most recent call last\):(?s:.)*ValueError: Error in step with [12]",
        str(caught[1].message),
    )


def test_other_workers_are_unaffected_and_the_failed_one_is_reported_when_used_again():
    envs = SubprocessEnvManager([RaisingEnv] * 2, context="fork")
    envs.reset(seed=[0, 0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(ValueError):
            envs.step(np.array([0, 1]))
    assert len(worker_children()) == 1  # the failing worker was shut down, as Gymnasium does
    with pytest.raises(
        WorkerDiedError, match="worker 1 .*shut down after its env raised ValueError: Error in step with 1"
    ):
        envs.step(np.array([0, 0]))
    envs.close()


def test_an_exception_in_env_construction_is_raised_from_the_constructor():
    def broken():
        raise KeyError("no such env")

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with pytest.raises(KeyError, match="no such env"):
            SubprocessEnvManager([CountingEnv, broken], context="fork")


def test_a_killed_worker_raises_worker_died_error_naming_the_worker_and_the_signal():
    envs = SubprocessEnvManager([SuicidalEnv] * 3, context="fork")
    envs.reset(seed=0)
    started = time.monotonic()
    with pytest.raises(WorkerDiedError, match="worker 1 .*SIGKILL") as raised:
        envs.step(np.array([0, 2, 0]))
    assert time.monotonic() - started < 5
    assert raised.value.worker_index == 1
    assert raised.value.exitcode == -9 and raised.value.signal_name == "SIGKILL"
    with pytest.raises(WorkerDiedError):  # and again on the next use, never an EOFError or a hang
        envs.step(np.array([0, 0, 0]))
    envs.close()


@pytest.mark.parametrize("context", ["fork", "forkserver", "spawn"])
@pytest.mark.parametrize("workers", [1, 2])
def test_a_worker_killed_mid_step_is_reported_whatever_the_start_method_and_the_number_of_workers(context, workers):
    # Without a timeout the trainer waits by reading the reply pipes (see WorkerPool.wait):
    # the worker's death must end that read as it fires its sentinel.
    envs = SubprocessEnvManager([SuicidalEnv] * workers, context=context)
    envs.reset(seed=0)
    with pytest.raises(WorkerDiedError, match=f"worker {workers - 1} .*SIGKILL"):
        envs.step(np.array([0] * (workers - 1) + [2]))
    envs.close()
    assert worker_children() == []


def test_a_worker_killed_from_outside_between_calls_is_detected_on_the_next_call():
    envs = SubprocessEnvManager([CountingEnv] * 2, context="fork")
    envs.reset(seed=0)
    envs._pool.workers[0].process.kill()
    envs._pool.workers[0].process.join()
    with pytest.raises(WorkerDiedError, match="worker 0"):
        envs.step(np.array([0, 0]))
    envs.close()


def test_a_hanging_worker_times_out_and_close_terminates_it_promptly():
    envs = SubprocessEnvManager([HangingEnv] * 2, context="fork")
    envs.reset(seed=0)
    envs.step_async(np.array([0, 2]))
    with pytest.raises(multiprocessing.TimeoutError):
        envs.step_wait(timeout=0.2)
    started = time.monotonic()
    envs.close()
    assert time.monotonic() - started < 5
    assert worker_children() == []


def test_restart_on_failure_replaces_a_dead_worker_and_training_continues():
    envs = SubprocessEnvManager([SuicidalEnv] * 3, context="fork", restart_on_failure=2, envs_per_worker=2)
    envs.reset(seed=0)
    envs.step(np.array([1, 1, 1]))
    with pytest.warns(RuntimeWarning, match="worker 0 .*SIGKILL.*restarting it"):
        observations, rewards, terminations, truncations, _ = envs.step(np.array([2, 0, 1]))
    # The restarted worker's envs start a fresh episode, flagged as truncated.
    np.testing.assert_array_equal(truncations, [True, True, False])
    np.testing.assert_array_equal(rewards, [0.0, 0.0, 1.5])
    np.testing.assert_array_equal(observations[:, 0], [0, 0, 2])
    _, rewards, *_ = envs.step(np.array([1, 1, 1]))
    np.testing.assert_array_equal(rewards, [1.5, 1.5, 1.5])
    assert len(worker_children()) == 2
    envs.close()


def test_restarts_stop_at_the_limit():
    envs = SubprocessEnvManager([SuicidalEnv] * 2, context="fork", restart_on_failure=1)
    envs.reset(seed=0)
    with pytest.warns(RuntimeWarning):
        envs.step(np.array([2, 0]))
    with pytest.raises(WorkerDiedError, match="worker 0"):
        envs.step(np.array([2, 0]))
    envs.close()


def test_no_child_process_is_left_after_close_following_any_fault():
    envs = SubprocessEnvManager([SuicidalEnv, HangingEnv, RaisingEnv], context="fork")
    envs.reset(seed=[0, 0, 0])
    with pytest.raises(WorkerDiedError):
        envs.step(np.array([2, 0, 0]))
    envs.close()
    assert worker_children() == []
