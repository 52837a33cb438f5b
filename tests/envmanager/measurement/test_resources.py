"""Specification: the trainer's and the workers' CPU and memory gauges, read from ``/proc``
without psutil, are psutil's figures; a process's first sample starts its CPU measurement."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from profiler.timing.timer_stack import TimerStack

from envmanager.measurement.resources import ResourceGauges

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads Linux's /proc")


def _stopped_child() -> subprocess.Popen[bytes]:
    """A child process that uses no CPU and whose memory does not move: stopped."""
    child = subprocess.Popen([sys.executable, "-c", "import time\ntime.sleep(30)"])
    os.kill(child.pid, signal.SIGSTOP)
    os.waitpid(child.pid, os.WUNTRACED)  # returns once it is stopped
    return child


def _sample_now(gauges: ResourceGauges, workers: list[tuple[int, int | None]]) -> None:
    gauges.next_sample_at = 0.0  # due now, whatever the interval
    gauges.maybe_sample(workers)


def test_the_first_sample_records_memory_and_the_second_cpu_too():
    import psutil

    stack = TimerStack()
    gauges = ResourceGauges(3600.0, stack)
    child = _stopped_child()
    try:
        _sample_now(gauges, [(0, child.pid), (1, None)])
        assert set(stack.gauges) == {"resources.trainer.rss_mb", "resources.worker_0.rss_mb"}
        assert stack.gauges["resources.worker_0.rss_mb"].value == psutil.Process(child.pid).memory_info().rss / 2**20
        _sample_now(gauges, [(0, child.pid), (1, None)])
        assert set(stack.gauges) == {"resources.trainer.rss_mb", "resources.worker_0.rss_mb",
                                     "resources.trainer.cpu_percent", "resources.worker_0.cpu_percent"}
        assert stack.gauges["resources.worker_0.cpu_percent"].value == 0.0  # it is stopped
        assert stack.gauges["resources.trainer.cpu_percent"].value >= 0.0
    finally:
        child.kill()
        child.wait()


def test_a_sample_is_taken_only_once_the_interval_has_passed():
    stack = TimerStack()
    gauges = ResourceGauges(3600.0, stack)
    gauges.maybe_sample([])
    gauges.maybe_sample([])
    assert stack.gauges["resources.trainer.rss_mb"].count == 1


def test_a_worker_that_ended_is_left_out_and_a_restarted_one_starts_afresh():
    stack = TimerStack()
    gauges = ResourceGauges(3600.0, stack)
    first = _stopped_child()
    _sample_now(gauges, [(0, first.pid)])
    first.kill()
    first.wait()
    _sample_now(gauges, [(0, first.pid)])  # gone: nothing recorded, nothing raised
    assert "resources.worker_0.cpu_percent" not in stack.gauges
    assert stack.gauges["resources.worker_0.rss_mb"].count == 1
    restarted = _stopped_child()
    try:
        _sample_now(gauges, [(0, restarted.pid)])  # a first reading of the new process: memory only
        assert "resources.worker_0.cpu_percent" not in stack.gauges
        assert stack.gauges["resources.worker_0.rss_mb"].count == 2
    finally:
        restarted.kill()
        restarted.wait()


def test_a_nonpositive_interval_is_refused():
    with pytest.raises(ValueError, match="resource_interval"):
        ResourceGauges(0.0, TimerStack())
