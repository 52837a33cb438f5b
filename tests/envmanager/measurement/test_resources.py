"""Specification: the trainer's and the workers' CPU and memory gauges, read from ``/proc``
without psutil, are psutil's figures; a process's first sample starts its CPU measurement."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap

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


def _worker_0_sampled_then_ended(gauges: ResourceGauges) -> int:
    """Sample a worker 0 once, then end it; its pid."""
    first = _stopped_child()
    _sample_now(gauges, [(0, first.pid)])
    first.kill()
    first.wait()
    return first.pid


def test_a_worker_that_ended_is_left_out():
    stack = TimerStack()
    gauges = ResourceGauges(3600.0, stack)
    ended_pid = _worker_0_sampled_then_ended(gauges)
    _sample_now(gauges, [(0, ended_pid)])  # gone: nothing recorded, nothing raised
    assert "resources.worker_0.cpu_percent" not in stack.gauges
    assert stack.gauges["resources.worker_0.rss_mb"].count == 1


def test_a_worker_restarted_between_two_samples_starts_afresh():
    stack = TimerStack()
    gauges = ResourceGauges(3600.0, stack)
    _worker_0_sampled_then_ended(gauges)
    restarted = _stopped_child()
    try:
        # the next sample sees only the new process: its first reading, memory only
        _sample_now(gauges, [(0, restarted.pid)])
        assert "resources.worker_0.cpu_percent" not in stack.gauges
        assert stack.gauges["resources.worker_0.rss_mb"].count == 2
    finally:
        restarted.kill()
        restarted.wait()


_PID_REUSE = textwrap.dedent("""
    import json, os, subprocess, sys
    from profiler.timing.timer_stack import TimerStack
    from envmanager.measurement.resources import ResourceGauges

    def child(work):
        process = subprocess.Popen([sys.executable, "-c", work + "\\nprint('ready', flush=True)\\n"
                                    "import time\\ntime.sleep(30)"], stdout=subprocess.PIPE, text=True)
        assert process.stdout.readline() == "ready\\n"
        return process

    stack = TimerStack()
    gauges = ResourceGauges(3600.0, stack)
    first = child("sum(range(5_000_000))")  # CPU seconds the restarted worker has not spent
    gauges.next_sample_at = 0.0
    gauges.maybe_sample([(0, first.pid)])
    first.kill()
    first.wait()
    # This namespace's next process gets the dead worker's pid, as a pid reused after the
    # numbers wrapped round would be.
    with open("/proc/sys/kernel/ns_last_pid", "w") as last_pid:
        last_pid.write(str(first.pid - 1))
    restarted = child("pass")
    gauges.next_sample_at = 0.0
    gauges.maybe_sample([(0, restarted.pid)])
    restarted.kill()
    restarted.wait()
    print(json.dumps({"same_pid": restarted.pid == first.pid,
                      "gauges": {name: gauge.value for name, gauge in stack.gauges.items()}}))
""")


def _in_own_pid_namespace() -> list[str]:
    """The command prefix that runs a program as pid 1 of a pid namespace of its own, where it
    may choose the next pid (``ns_last_pid``): empty where this machine cannot make one."""
    prefix = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--mount-proc"]
    if shutil.which("unshare") is None:
        return []
    trial = subprocess.run([*prefix, "sh", "-c", "echo 100 > /proc/sys/kernel/ns_last_pid"],
                           capture_output=True)
    return prefix if trial.returncode == 0 else []


def test_a_worker_restarted_with_the_dead_workers_pid_starts_afresh():
    prefix = _in_own_pid_namespace()
    if not prefix:
        pytest.skip("needs a pid namespace of its own (unshare --user --pid) to reuse a pid")
    result = subprocess.run([*prefix, sys.executable, "-c", _PID_REUSE], capture_output=True, text=True,
                            check=True)
    outcome = json.loads(result.stdout)
    assert outcome["same_pid"]
    # the pid alone says it is the same process: its CPU seconds then went down, a negative percent
    assert "resources.worker_0.cpu_percent" not in outcome["gauges"]
    assert "resources.worker_0.rss_mb" in outcome["gauges"]


def test_a_nonpositive_interval_is_refused():
    with pytest.raises(ValueError, match="resource_interval"):
        ResourceGauges(0.0, TimerStack())
