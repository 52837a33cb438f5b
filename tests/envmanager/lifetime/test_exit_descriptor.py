"""A worker's exit descriptor: its pidfd where the system gives one, its sentinel elsewhere."""

from __future__ import annotations

import multiprocessing
import os
import signal
import time
from multiprocessing.connection import wait as wait_for_ready

import numpy as np
import pytest
from envmanager_testenvs import SuicidalEnv, fork_a_child_and_report_it, start_forked, worker_children

from envmanager import SubprocessEnvManager, WorkerDiedError
from envmanager.lifetime.exit_descriptor import ExitDescriptor

WITHIN_SECONDS = 30.0  # generous: a loaded machine must never fail this


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this system")
def test_it_is_readable_once_the_process_exits_while_a_child_it_forked_holds_its_sentinel():
    process, child = start_forked(fork_a_child_and_report_it)
    exit_descriptor = ExitDescriptor(process)
    try:
        assert exit_descriptor.fileno != process.sentinel
        assert wait_for_ready([exit_descriptor.fileno], 0) == []
        os.kill(process.pid, signal.SIGKILL)
        assert wait_for_ready([exit_descriptor.fileno], WITHIN_SECONDS) == [exit_descriptor.fileno]
        assert wait_for_ready([process.sentinel], 0) == []  # the child still holds it
    finally:
        os.kill(child, signal.SIGKILL)
        process.join()
        exit_descriptor.close()


def test_without_pidfds_it_is_the_sentinel_and_closing_it_leaves_the_sentinel_open(monkeypatch):
    monkeypatch.delattr(os, "pidfd_open", raising=False)  # a system without them
    process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(0,))
    process.start()
    exit_descriptor = ExitDescriptor(process)
    assert exit_descriptor.fileno == process.sentinel
    process.join()
    exit_descriptor.close()
    os.fstat(process.sentinel)  # still open: multiprocessing's own


def test_without_pidfds_a_killed_worker_is_still_reported(monkeypatch):
    monkeypatch.delattr(os, "pidfd_open", raising=False)  # a system without them
    envs = SubprocessEnvManager([SuicidalEnv] * 2, context="fork")
    envs.reset(seed=0)
    with pytest.raises(WorkerDiedError, match="worker 1 .*SIGKILL"):
        envs.step(np.array([0, 2]))
    envs.close()
    assert worker_children() == []
