"""Specification: the machine's figures read from ``/proc`` are psutil's, without importing psutil.

Each test compares a figure read by :mod:`profiler.recording.proc_files` with psutil's reading of
the same figure on this machine (Linux: the project's tests run where ``/proc`` is).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from profiler.recording import proc_files

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc"), reason="reads Linux's /proc")


def test_the_boot_time_is_psutils():
    assert proc_files.boot_time() == psutil.boot_time()


def test_a_process_start_time_is_psutils_create_time():
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        for pid in (os.getpid(), child.pid):
            assert proc_files.process_start_time(pid) == psutil.Process(pid).create_time()
    finally:
        child.kill()
        child.wait()


def test_a_process_start_cpu_seconds_and_resident_memory_are_psutils():
    # A child that burnt some CPU, stopped: its figures do not move between the two readings. It
    # says when its work is done; stopped before that, it would have burnt none (0.0 == 0.0).
    child = subprocess.Popen([sys.executable, "-c", "import time\nsum(range(3_000_000))\n"
                              "print('worked', flush=True)\ntime.sleep(30)"], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "worked\n"
        os.kill(child.pid, signal.SIGSTOP)
        os.waitpid(child.pid, os.WUNTRACED)  # returns once it is stopped
        start_ticks, cpu_seconds, rss = proc_files.process_start_cpu_and_rss(child.pid)
        process = psutil.Process(child.pid)
        assert start_ticks / os.sysconf("SC_CLK_TCK") + psutil.boot_time() == process.create_time()
        times = process.cpu_times()
        assert cpu_seconds == times.user + times.system
        assert cpu_seconds > 0
        assert rss == process.memory_info().rss
        assert rss > 0
    finally:
        child.kill()
        child.wait()
        child.stdout.close()


def test_a_process_that_does_not_exist_has_no_cpu_or_memory_figures():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(ProcessLookupError):
        proc_files.process_start_cpu_and_rss(child.pid)


def test_a_process_that_does_not_exist_has_no_start_time():
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    with pytest.raises(ProcessLookupError):
        proc_files.process_start_time(child.pid)


@pytest.mark.parametrize("name", ["short", "a_name_longer_than_fifteen_characters"])
def test_a_process_name_is_psutils_the_kernels_cut_name_extended_from_its_command(tmp_path, name):
    program = tmp_path / name
    program.symlink_to(sys.executable)
    child = subprocess.Popen([str(program), "-c", "import time; print('started', flush=True); time.sleep(30)"],
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "started\n"  # its name and command are its own from here
        assert proc_files.process_name(child.pid) == psutil.Process(child.pid).name()
        assert proc_files.process_name(child.pid) == name
    finally:
        child.kill()
        child.wait()
        child.stdout.close()


def test_each_cores_busy_seconds_are_psutils_cpu_times_less_idle_iowait_and_guest():
    ours = proc_files.busy_seconds_per_core()
    theirs = [sum(value for field, value in times._asdict().items()
                  if field not in ("idle", "iowait") and not field.startswith("guest"))
              for times in psutil.cpu_times(percpu=True)]
    assert len(ours) == len(theirs)
    # read a moment apart: the cores kept counting in between (by clock ticks, 1/100 s)
    assert all(0 <= after - before < 1.0 for before, after in zip(ours, theirs))


def test_the_available_memory_is_psutils():
    # read a moment apart: other programs allocate in between
    assert proc_files.available_memory() == pytest.approx(psutil.virtual_memory().available, rel=0.05)


def test_reading_them_imports_no_psutil():
    code = ("import os, sys; from profiler.recording import proc_files as p; "
            "p.boot_time(); p.process_start_time(os.getpid()); p.process_name(os.getpid()); "
            "p.busy_seconds_per_core(); p.available_memory(); print('psutil' in sys.modules)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout == "False\n"
