"""Replies that cannot cross the pipe as they are: the step raises naming the worker and the
reason, never a bare unpickling error nor only an exit code, and no timer data is dropped."""

from __future__ import annotations

import json
import multiprocessing

import numpy as np
import pytest
from envmanager_testenvs import HangingEnv, HostileInfoEnv, NoneRewardEnv, UnimportableInfoEnv
from tree_paths import count_of

from envmanager import SubprocessEnvManager, WorkerError

# A failed step is logged through gymnasium.logger.error, which warns; that is not under test here.
pytestmark = pytest.mark.filterwarnings("ignore:.*ERROR:")


def _env_steps_of(envs: SubprocessEnvManager, worker: int, tmp_path) -> int:
    tree = json.loads(envs.dump_timers(tmp_path).read_text())
    return next(count_of(w, "env.step") for w in tree["workers"] if w["worker_id"] == worker)


def test_an_info_of_a_class_only_the_worker_can_import_raises_naming_the_worker_and_keeps_its_timers(tmp_path):
    with SubprocessEnvManager([UnimportableInfoEnv] * 2, context="fork", flush_every=1) as envs:
        envs.reset(seed=0)
        envs.step(np.array([0, 0]))
        with pytest.raises(ModuleNotFoundError, match="only_in_the_worker") as raised:
            envs.step(np.array([0, 2]))
        assert any("worker 1's reply" in note for note in raised.value.__notes__)
        assert _env_steps_of(envs, 1, tmp_path) == 2  # the failed reply's timers were merged


def test_with_restarts_only_the_step_whose_info_cannot_be_read_fails():
    with SubprocessEnvManager([UnimportableInfoEnv] * 2, context="fork", restart_on_failure=True) as envs:
        envs.reset(seed=0)
        with pytest.raises(ModuleNotFoundError):
            envs.step(np.array([0, 2]))
        with pytest.warns(RuntimeWarning, match="restarting it"):
            envs.step(np.array([0, 0]))
        _, rewards, *_ = envs.step(np.array([1, 1]))
    np.testing.assert_array_equal(rewards, [1.5, 1.5])


@pytest.mark.parametrize(
    ("kind", "raised", "reason"),
    [
        ("reduce", ValueError, "refuses to be pickled"),
        ("recursion", RecursionError, "recursion"),
        ("unprintable", Exception, "_UnprintableError"),
        ("ctrl-c", RuntimeError, "KeyboardInterrupt"),
    ],
)
def test_a_reply_the_worker_cannot_pickle_or_print_raises_its_reason_naming_the_worker(kind, raised, reason):
    with SubprocessEnvManager([lambda: HostileInfoEnv(kind)] * 2, context="fork") as envs:
        envs.reset(seed=0)
        with pytest.raises(raised) as error:
            envs.step(np.array([0, 2]))
    cause = error.value.__cause__
    assert isinstance(cause, WorkerError) and cause.worker_index == 1
    assert reason in f"{type(error.value).__name__}: {error.value!r} {cause}"


def test_a_hung_env_times_out_naming_the_worker_that_did_not_answer():
    with SubprocessEnvManager([HangingEnv] * 2, context="fork") as envs:
        envs.reset(seed=0)
        envs.step_async(np.array([0, 2]))
        with pytest.raises(multiprocessing.TimeoutError, match=r"no reply from worker 1 \(envs 1\.\.1\)\.$"):
            envs.step_wait(timeout=0.2)
        envs.close(terminate=True)


@pytest.mark.parametrize("shared_memory", [True, False])
def test_a_none_reward_raises_naming_the_env_rather_than_becoming_nan(shared_memory):
    with SubprocessEnvManager([NoneRewardEnv] * 2, context="fork", shared_memory=shared_memory) as envs:
        envs.reset(seed=0)
        with pytest.raises(TypeError, match=r"env 1 \(worker 1\) returned a reward of type NoneType"):
            envs.step(np.array([0, 2]))
        _, rewards, *_ = envs.step(np.array([0, 0]))  # the manager stays usable
    np.testing.assert_array_equal(rewards, [0.5, 0.5])
