"""Steps in shared memory: with ``shared_memory=True`` and an array-like action space, a step's
actions and results travel in the manager's shared step buffers and the pipe carries a
fixed-size wake-up each way; everything a step gives back is exactly what ``SyncVectorEnv``
gives, and every fault behaves as it does on the pipe."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

import numpy as np
import pytest
from envmanager_testenvs import (
    ActionSumEnv,
    ActionWritingEnv,
    CountingEnv,
    EchoEnv,
    RaisingEnv,
    SlowOnActionTwoEnv,
    SuicidalEnv,
    worker_children,
)
from gymnasium import spaces
from gymnasium.vector import SyncVectorEnv

from envmanager import SubprocessEnvManager, WorkerDiedError
from envmanager.transport import protocol

# A failed step is logged through gymnasium.logger.error, which warns; that is not under test here.
pytestmark = pytest.mark.filterwarnings("ignore:.*ERROR:")

ACTION_SPACES = {
    "Box float32": spaces.Box(-1.0, 1.0, shape=(3,), dtype=np.float32),
    "Box float64 2x2": spaces.Box(-1.0, 1.0, shape=(2, 2), dtype=np.float64),
    "Discrete": spaces.Discrete(5),
    "MultiDiscrete": spaces.MultiDiscrete([3, 4]),
    "MultiBinary": spaces.MultiBinary(4),
}


@contextmanager
def pipe_messages() -> Iterator[tuple[list[int], list[int]]]:
    """The sizes of the messages this thread writes to and reads from worker pipes while the
    block runs: a request as :mod:`envmanager.transport.protocol`'s ``write_message`` is handed
    it, a reply as it comes off the pipe (``os.read`` watched: the trainer reads a small reply
    whole, header and all, in one read, and takes a step's wake-up without decoding it)."""
    sent: list[int] = []
    received: list[int] = []
    header = 4
    real_read, thread = os.read, threading.get_ident()

    def read_watched(fd: int, size: int) -> bytes:
        data = real_read(fd, size)
        if threading.get_ident() == thread and len(data) > header:
            received.append(len(data) - header)
        return data

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call" and frame.f_code.co_name == "write_message" and frame.f_code.co_filename == protocol.__file__:
            sent.append(len(frame.f_locals["data"]))

    sys.setprofile(hook)
    os.read = read_watched
    try:
        yield sent, received
    finally:
        os.read = real_read
        sys.setprofile(None)


def steps_of(envs: Any, batches: list[np.ndarray]) -> list[tuple]:
    return [envs.step(actions) for actions in batches]


@pytest.mark.parametrize("context", ["fork", "spawn"])
@pytest.mark.parametrize("space_name", list(ACTION_SPACES))
def test_actions_rewards_and_flags_come_back_exactly_as_sync_vector_env_gives_them(space_name, context):
    space = ACTION_SPACES[space_name]
    env_fns = [lambda: EchoEnv(space)] * 3
    reference = SyncVectorEnv(env_fns)
    batches = [reference.action_space.sample() for _ in range(len(EchoEnv.REWARDS) + 2)]
    with SubprocessEnvManager(env_fns, context=context, envs_per_worker=2) as envs:
        envs.reset(seed=3)
        reference.reset(seed=3)
        for ours, theirs in zip(steps_of(envs, batches), steps_of(reference, batches)):
            for mine, expected in zip(ours[:4], theirs[:4]):
                assert mine.dtype == expected.dtype
                np.testing.assert_array_equal(mine, expected)
            assert ours[4] == theirs[4] == {}
        # Each env was given its action with the very type and dtype SyncVectorEnv gives it.
        for mine, expected in zip(envs.get_attr("last_action"), reference.get_attr("last_action")):
            assert type(mine) is type(expected)
            assert np.asarray(mine).dtype == np.asarray(expected).dtype
            np.testing.assert_array_equal(mine, expected)
    reference.close()


def test_a_step_with_nothing_else_to_say_is_a_fixed_size_wake_up_each_way():
    with SubprocessEnvManager([CountingEnv] * 2, context="fork", profiling=False) as envs:
        envs.reset(seed=0)
        with pipe_messages() as (sent, received):
            envs.step(np.array([1, 1]))
    assert sent == [len(protocol.encode((1, protocol.STEP, protocol.IN_SHARED_MEMORY)))] * 2
    assert received == [len(protocol.encode((1, True, protocol.IN_SHARED_MEMORY, None, 0.0)))] * 2
    assert max(sent + received) < 20


def test_actions_of_another_dtype_than_the_space_travel_in_the_message_and_reach_the_env_as_sent():
    with SubprocessEnvManager([CountingEnv] * 2, context="fork", profiling=False) as envs:
        envs.reset(seed=0)
        with pipe_messages() as (sent, _):
            _, rewards, *_ = envs.step(np.array([1, 2], dtype=np.int8))
        assert [type(action) for action in envs.get_attr("t")] == [int, int]
    assert min(sent) > 20  # pickled, with the actions
    np.testing.assert_array_equal(rewards, [1.5, 2.5])


def test_infos_travel_only_on_the_steps_where_an_env_reported_some():
    env_fns = [lambda: CountingEnv(episode_length=100, info_every=3)] * 2
    reference = SyncVectorEnv(env_fns)
    reference.reset(seed=0)
    with SubprocessEnvManager(env_fns, context="fork", profiling=False) as envs:
        envs.reset(seed=0)
        for step in range(1, 7):
            with pipe_messages() as (_, received):
                _, _, _, _, infos = envs.step(np.array([1, 1]))
            _, _, _, _, expected = reference.step(np.array([1, 1]))
            assert infos.keys() == expected.keys()
            np.testing.assert_array_equal(infos.get("count"), expected.get("count"))
            small = [size < 20 for size in received]
            assert small == [step % 3 != 0] * 2
    reference.close()


def test_an_env_that_writes_into_its_action_changes_neither_the_trainers_actions_nor_the_next_step():
    with SubprocessEnvManager([ActionWritingEnv] * 2, context="fork") as envs:
        envs.reset(seed=0)
        actions = np.array([[1.0, 2.0], [3.0, 4.0]], dtype=np.float32)
        first, *_ = envs.step(actions)
        np.testing.assert_array_equal(actions, [[1.0, 2.0], [3.0, 4.0]])
        second, *_ = envs.step(np.array([[5.0, 6.0], [7.0, 8.0]], dtype=np.float32))
    np.testing.assert_array_equal(first, [[1.0, 2.0], [3.0, 4.0]])
    np.testing.assert_array_equal(second, [[5.0, 6.0], [7.0, 8.0]])


def test_results_returned_to_the_user_are_not_overwritten_by_the_next_step():
    with SubprocessEnvManager([CountingEnv] * 2, context="fork") as envs:
        envs.reset(seed=0)
        _, rewards, terminations, truncations, _ = envs.step(np.array([1, 2]))
        envs.step(np.array([0, 0]))
    np.testing.assert_array_equal(rewards, [1.5, 2.5])
    assert not terminations.any() and not truncations.any()


def test_a_failing_step_raises_the_envs_exception_and_shuts_its_worker_down():
    with SubprocessEnvManager([RaisingEnv, CountingEnv], context="fork") as envs:
        envs.reset(seed=0)
        envs.step(np.array([0, 0]))
        with pytest.raises(ValueError, match="Error in step with 1"):
            envs.step(np.array([1, 1]))
        with pytest.raises(WorkerDiedError, match="worker 0"):
            envs.step(np.array([0, 0]))


def test_a_worker_that_dies_mid_step_is_replaced_and_its_envs_report_a_cut_short_episode():
    with SubprocessEnvManager([SuicidalEnv, CountingEnv], context="fork", restart_on_failure=True) as envs:
        envs.reset(seed=0)
        envs.step(np.array([1, 1]))
        with pytest.warns(RuntimeWarning, match="restarting it"):
            observations, rewards, terminations, truncations, _ = envs.step(np.array([2, 1]))
        np.testing.assert_array_equal(rewards, [0.0, 1.5])
        np.testing.assert_array_equal(terminations, [False, False])
        np.testing.assert_array_equal(truncations, [True, False])
        np.testing.assert_array_equal(observations[:, 0], [0, 2])  # worker 0's fresh env, reset
        # The fresh worker maps the same buffers: its results arrive through them.
        observations, rewards, _, truncations, _ = envs.step(np.array([0, 1]))
        np.testing.assert_array_equal(observations[:, 0], [1, 3])
        np.testing.assert_array_equal(rewards, [0.5, 1.5])
        np.testing.assert_array_equal(truncations, [False, False])


def test_a_spawned_worker_restarted_after_dying_steps_through_the_same_buffers():
    with SubprocessEnvManager([SuicidalEnv], context="spawn", restart_on_failure=True) as envs:
        envs.reset(seed=0)
        with pytest.warns(RuntimeWarning, match="restarting it"):
            envs.step(np.array([2]))
        observations, rewards, *_ = envs.step(np.array([1]))
    np.testing.assert_array_equal(observations[:, 0], [1])
    np.testing.assert_array_equal(rewards, [1.5])


def test_after_a_step_timed_out_the_next_steps_actions_reach_the_worker_still_busy_with_it():
    with SubprocessEnvManager([SlowOnActionTwoEnv], context="fork") as envs:
        envs.reset(seed=0)
        envs.step_async(np.array([2]))
        with pytest.raises(multiprocessing.TimeoutError):
            envs.step_wait(timeout=0.05)
        # The late reply to the abandoned step is dropped; this step's own results come back.
        observations, rewards, *_ = envs.step(np.array([1]))
        assert observations[0, 0] == 2  # both steps ran, in order
        np.testing.assert_array_equal(rewards, [1.5])
        observations, rewards, *_ = envs.step(np.array([0]))
    assert observations[0, 0] == 3
    np.testing.assert_array_equal(rewards, [0.5])


def test_a_step_given_up_on_before_its_worker_read_it_still_runs_with_its_own_actions():
    with SubprocessEnvManager([ActionSumEnv], context="fork") as envs:
        envs.reset(seed=0)
        (worker,) = worker_children()
        os.kill(worker.pid, signal.SIGSTOP)  # it cannot read its request before the trainer gives up
        try:
            envs.step_async(np.array([1]))
            with pytest.raises(multiprocessing.TimeoutError):
                envs.step_wait(timeout=0.05)
            envs.step_async(np.array([2]))  # while the worker still owes the abandoned step
        finally:
            os.kill(worker.pid, signal.SIGCONT)
        observations, *_ = envs.step_wait()
    np.testing.assert_array_equal(observations, [[2, 1 + 2]])
