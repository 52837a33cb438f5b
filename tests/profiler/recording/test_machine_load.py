"""Specification of the machine's load over a run (profiler.recording.machine_load): a real busy
program outside the run is named; the run's own processes are not."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest
from kernel_counts import busy_program_outside_the_run

from profiler.recording import machine_load
from profiler.timing import timers
from profiler.timing.timer_stack import TimerStack

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="affinity and /proc")

_BURN = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end:\n    pass\n"


def test_a_busy_program_outside_the_run_is_named_with_the_cpu_it_used():
    stack = TimerStack("machine-load-test")
    with busy_program_outside_the_run() as pid:
        machine_load.follow_stack(stack)
        # Until the loop has used some CPU over the run: the kernel's count, not a clock.
        subprocess.run([sys.executable, "-c", _BURN], check=True)
        section = machine_load.machine_load_section(stack)
    listed = {entry["pid"]: entry for entry in section["outside_processes"]}
    assert pid in listed and listed[pid]["cpu_seconds"] > 0
    assert listed[pid]["name"].startswith("python")


def test_the_runs_own_child_processes_are_not_outside_it():
    stack = TimerStack("machine-load-test")
    machine_load.follow_stack(stack)
    child = subprocess.Popen([sys.executable, "-c", _BURN + "print(flush=True)\ninput()\n"],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        child.stdout.readline()  # it has burnt its CPU and is still alive
        section = machine_load.machine_load_section(stack)
        assert child.pid not in {entry["pid"] for entry in section["outside_processes"]}
    finally:
        child.communicate("\n")


def test_the_runs_grandchildren_are_not_outside_it_either():
    stack = TimerStack("machine-load-test")
    machine_load.follow_stack(stack)
    starts_a_child = ("import subprocess, sys\n"
                      f"child = subprocess.Popen([sys.executable, '-c', {_BURN + 'print(flush=True)' + chr(10) + 'input()' + chr(10)!r}],"
                      " stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)\n"
                      "child.stdout.readline()\nprint(child.pid, flush=True)\ninput()\nchild.communicate('\\n')\n")
    parent = subprocess.Popen([sys.executable, "-c", starts_a_child],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        grandchild = int(parent.stdout.readline())
        section = machine_load.machine_load_section(stack)
        assert {parent.pid, grandchild}.isdisjoint(entry["pid"] for entry in section["outside_processes"])
    finally:
        parent.communicate("\n")


def test_the_cpu_of_a_child_the_run_waited_for_counts_as_the_runs_own():
    stack = TimerStack("machine-load-test")
    machine_load.follow_stack(stack)
    child = subprocess.run([sys.executable, "-c", _BURN + "print(time.process_time())"], check=True,
                           capture_output=True, text=True)
    section = machine_load.machine_load_section(stack)
    # /proc counts a reaped child's user and system time apart, each in whole clock ticks, down.
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert section["run_processes_cpu_seconds"] >= float(child.stdout) - 2 * tick


def test_a_dump_that_repeats_the_previous_scan_gives_no_figure_for_the_runs_processes():
    stack = TimerStack("machine-load-test")
    machine_load.follow_stack(stack)
    assert "run_processes_cpu_seconds" in machine_load.machine_load_section(stack)
    assert "run_processes_cpu_seconds" not in machine_load.machine_load_section(stack)  # within 10 s


def test_reading_proc_and_reading_through_psutil_agree_on_each_process():
    # psutil is what other systems than Linux read the processes through
    through_proc = machine_load._process_cpu()
    through_psutil = machine_load._process_cpu_through_psutil()
    own = os.getpid()
    assert through_proc[own][:2] == through_psutil[own][:2]  # parent, create time
    assert abs(through_proc[own][2] - through_psutil[own][2]) < 1.0  # CPU seconds, read a moment apart
    assert abs(through_proc[own][3] - through_psutil[own][3]) < 1.0  # its reaped children's
    assert set(through_proc) & set(through_psutil) >= {own, os.getppid()}


def test_the_cores_busy_time_holds_at_least_this_processs_own_cpu():
    stack = TimerStack("machine-load-test")
    machine_load.follow_stack(stack)
    before = os.times()
    exec(_BURN)
    after = os.times()
    used = (after.user + after.system) - (before.user + before.system)
    section = machine_load.machine_load_section(stack)
    assert section["busy_core_seconds"] >= used * 0.9
    assert section["cores"] and section["wall_seconds"] > 0


def test_a_stack_never_followed_has_no_section():
    assert machine_load.machine_load_section(TimerStack("never-followed")) is None


def test_following_the_run_follows_this_threads_stack():
    machine_load.follow_run()
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    assert machine_load.machine_load_section(stack) is not None
