"""A worker whose env forked a child dies: reported at once, though the child holds its pipes.

The env's child (``ForkingEnv``) sleeps ten minutes holding copies of the worker's sentinel and
reply pipe. Every test here carries a pytest timeout far below that: a wait that lasted until
the child's end fails it, while a loaded machine has minutes to spare.
"""

from __future__ import annotations

import functools
import os
import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import psutil
import pytest
from envmanager_testenvs import ForkingEnv, fork_a_child_then_die, worker_children

from envmanager import SubprocessEnvManager, WorkerDiedError

START_METHODS = ["fork", "forkserver", "spawn"]
FAR_BELOW_THE_CHILDS_SLEEP = 180  # seconds; the child sleeps 600

pytestmark = pytest.mark.timeout(FAR_BELOW_THE_CHILDS_SLEEP)


def _forked_children(envs: SubprocessEnvManager) -> list[psutil.Process]:
    return [psutil.Process(pid) for pid in envs.get_attr("helper_pid")]


def _ended(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _ended_within(process: psutil.Process, seconds: float = 30.0) -> bool:
    """Whether it ended within ``seconds``: SIGKILL is delivered, not yet acted on, when
    ``kill`` returns (generous: a loaded machine must never fail this)."""
    deadline = time.monotonic() + seconds
    while not _ended(process):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _end(processes: list[psutil.Process]) -> None:
    for process in processes:
        if not _ended(process):
            process.kill()


@contextmanager
def _manager_whose_envs_forked(context: str, *, new_session: bool = False,
                               children_end: bool = True) -> Iterator[SubprocessEnvManager]:
    """Two ``ForkingEnv`` workers; after the ``with`` body, ``close()`` leaves no worker and (unless
    the children left the workers' group) no child of theirs. Children still alive are killed."""
    envs = SubprocessEnvManager([functools.partial(ForkingEnv, new_session=new_session)] * 2, context=context)
    envs.reset(seed=0)
    children = _forked_children(envs)
    try:
        yield envs
        envs.close()
        assert worker_children() == []
        if children_end:
            assert all(_ended_within(child) for child in children)
    finally:
        _end(children)


@pytest.mark.parametrize("context", START_METHODS)
def test_a_worker_killed_mid_step_is_reported_while_the_child_its_env_forked_holds_its_pipes(context):
    with _manager_whose_envs_forked(context) as envs:
        with pytest.raises(WorkerDiedError, match="worker 1 .*SIGKILL"):
            envs.step(np.array([0, 2]))


@pytest.mark.parametrize("context", START_METHODS)
def test_a_worker_killed_between_steps_is_reported_on_the_next_step_while_its_envs_child_lives(context):
    with _manager_whose_envs_forked(context) as envs:
        os.kill(envs._pool.workers[0].process.pid, signal.SIGKILL)
        with pytest.raises(WorkerDiedError, match="worker 0 .*SIGKILL"):
            envs.step(np.array([0, 0]))


@pytest.mark.parametrize("context", START_METHODS)
def test_a_worker_killed_during_a_step_waited_with_a_timeout_is_reported_before_the_timeout(context):
    with _manager_whose_envs_forked(context) as envs:
        envs.step_async(np.array([2, 0]))
        with pytest.raises(WorkerDiedError, match="worker 0 .*SIGKILL"):
            envs.step_wait(timeout=FAR_BELOW_THE_CHILDS_SLEEP)


@pytest.mark.parametrize("context", START_METHODS)
def test_with_a_timeout_a_killed_worker_is_reported_even_while_a_child_that_left_its_group_holds_its_pipes(context):
    # Out of the group's reach, the child lives on; only a wait that watches the worker's pidfd
    # (the poll of a wait with a timeout) learns of the death before the child's end.
    with _manager_whose_envs_forked(context, new_session=True, children_end=False) as envs:
        envs.step_async(np.array([0, 2]))
        with pytest.raises(WorkerDiedError, match="worker 1 .*SIGKILL"):
            envs.step_wait(timeout=FAR_BELOW_THE_CHILDS_SLEEP)


def test_the_child_an_env_forked_ends_with_close():
    envs = SubprocessEnvManager([ForkingEnv] * 2, context="fork")
    envs.reset(seed=0)
    children = _forked_children(envs)
    try:
        envs.close()
        assert all(_ended_within(child) for child in children)
    finally:
        _end(children)


@pytest.mark.parametrize("context", START_METHODS)
def test_an_env_that_dies_while_built_to_read_the_spaces_leaving_a_forked_child_fails_the_constructor(context):
    with pytest.raises(RuntimeError, match="first env .* ended with exit code -9 before it could answer"):
        SubprocessEnvManager([fork_a_child_then_die] * 2, context=context)
    assert worker_children() == []
