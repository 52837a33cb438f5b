"""A worker's reply stamp is a number from another process: one no clock of this machine reads
(NaN, infinite, 1e300) is not trusted, and the trainer's dump stays readable.

The workers are forked with a clock (``profiler.timing.timers.set_clock``, public) that reads
``perf_counter`` until a flag file appears, then returns the hostile value: the stamps prove the
clock shared at start-up, and go bad during the run, as a broken simulation clock would.
"""

from __future__ import annotations

import os
import time
import warnings

import numpy as np
import pytest
from envmanager_testenvs import CountingEnv

import profiler
from envmanager import SubprocessEnvManager
from profiler.recording import events
from profiler.timing import timers


def clock_turning_to(value, flag):
    def worker_clock():
        return value if os.path.exists(flag) else time.perf_counter()

    return worker_clock


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300, 1e299], ids=str)
@pytest.mark.parametrize("recording", [False, True], ids=["no timeline", "timeline"])
def test_a_worker_clock_gone_wrong_leaves_the_trainers_dump_readable(tmp_path, value, recording):
    flag = tmp_path / "clock_went_wrong"
    if recording:
        events.start_recording()
    previous = timers.set_clock(clock_turning_to(value, flag))
    try:
        envs = SubprocessEnvManager([lambda: CountingEnv(episode_length=1000)] * 2, context="fork")
    finally:
        timers.set_clock(previous)
    timers.reset_timers()  # the trainer's own blocks on its own clock
    with envs, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the workers' payloads are dropped, and say so
        envs.reset(seed=0)
        flag.touch()
        for _ in range(5):
            envs.step(np.zeros(2, dtype=np.int64))
        dump = envs.dump_timers(tmp_path)
    tree = profiler.load_timing_tree(dump)
    assert sum(worker["critical_path"]["vector_steps"] for worker in tree["workers"]) == 2 * 5
