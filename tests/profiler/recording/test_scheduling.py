"""Specification of the kernel's count of a process's waits for a core (profiler.recording.scheduling):
each figure checked against what the kernel reports, read by the test itself; no timing."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time

import pytest
from kernel_counts import kernel_run_queue_nanoseconds

import profiler
from profiler.recording import scheduling
from profiler.timing import timers

pytestmark = pytest.mark.skipif(not scheduling.schedstat_available(), reason="needs Linux's schedstat")


def in_nanoseconds(seconds: float) -> int:
    """A sampler's figure back in the kernel's unit: the sampler turns whole nanoseconds into
    seconds, so comparing in seconds against a difference of two readings in seconds would compare
    two roundings (0.000110515 against 2.323794033 - 2.323683518 failed on equal counts)."""
    return round(seconds * 1e9)


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def test_a_workers_sampler_reports_at_least_the_waits_the_kernel_counted_between_its_readings():
    sampler = scheduling.SchedulingSampler()
    before = kernel_run_queue_nanoseconds(os.getpid())
    burn(0.05)
    after = kernel_run_queue_nanoseconds(os.getpid())
    run_queue, cpu, wall, switches = sampler.take(final=True)
    assert in_nanoseconds(run_queue) >= after - before
    assert cpu >= 0.04  # getrusage counts CPU time to the tick at worst
    assert wall >= cpu * 0.9 and switches >= 0


def test_a_thread_the_sampler_ignores_adds_none_of_its_waits():
    others = {int(tid) for tid in os.listdir("/proc/self/task")}
    before = kernel_run_queue_nanoseconds(os.getpid(), others)
    sampler = scheduling.SchedulingSampler()
    started, stop = threading.Event(), threading.Event()

    def busy() -> None:  # rlprof's own thread, say: it competes for the cores with the program
        started.set()
        while not stop.is_set():
            burn(0.001)

    ignored = threading.Thread(target=busy)
    ignored.start()
    started.wait()
    sampler.ignore_thread(ignored.native_id)
    try:
        burn(0.05)
        run_queue = sampler.take(final=True)[0]
        after = kernel_run_queue_nanoseconds(os.getpid(), others)
    finally:
        stop.set()
        ignored.join()
    assert in_nanoseconds(run_queue) <= after - before  # the other threads' waits only, never the ignored one's


def test_readings_closer_than_the_spacing_report_nothing_and_the_next_covers_them():
    sampler = scheduling.SchedulingSampler()
    assert sampler.take() == (0.0, 0.0, 0.0, 0)  # just created: within the spacing
    burn(0.02)
    assert sampler.take(final=True)[1] >= 0.01


def test_the_dump_lists_each_live_python_thread_with_its_cpu_time():
    burnt, stop = threading.Event(), threading.Event()

    def work():
        burn(0.05)
        burnt.set()
        stop.wait()

    thread = threading.Thread(target=work, name="burner")
    thread.start()
    try:
        burnt.wait()
        section = scheduling.scheduling_section(timers.get_timer_stack_for_thread(threading.current_thread()))
        threads = {entry["name"]: entry for entry in section["python_threads"]}
        assert {"MainThread", "burner"} <= set(threads)
        assert threads["burner"]["cpu_seconds"] >= 0.05 * 0.99
    finally:
        stop.set()
        thread.join()


def test_a_followed_stack_counts_from_its_reset():
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    scheduling.follow_stack(stack)
    burn(0.03)
    profiler.reset_timers()
    section = scheduling.scheduling_section(stack)
    assert section["since"] == "timers start"
    assert section["cpu_seconds"] < 0.03


def test_under_a_fake_clock_the_dump_has_no_kernel_figures(fake_clock):
    with profiler.hierarchical_timer("work"):
        fake_clock.advance(1.0)
    tree = profiler.get_timer_tree()
    assert "scheduling" not in tree and "machine_load" not in tree


@pytest.mark.skipif(sys.platform != "linux", reason="Linux")
def test_the_real_clocks_dump_carries_the_processs_figures():
    profiler.reset_timers()
    tree = profiler.get_timer_tree()
    assert tree["scheduling"]["wall_seconds"] > 0
    assert tree["scheduling"]["involuntary_switches"] >= 0


def a_followed_stack():
    """This thread's stack, its timers reset and the kernel's figures counted from now."""
    profiler.reset_timers()
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    scheduling.follow_stack(stack)
    return stack


def a_thread_that_burned_in_a_block(stack, name: str) -> tuple[dict, dict]:
    """The dump's scheduling section once a thread ``name`` burned 50 ms of CPU in a block and
    ended, and that thread's entry in it."""

    def work():
        with profiler.hierarchical_timer("env.step"):
            burn(0.05)

    thread = threading.Thread(target=work, name=name)
    thread.start()
    thread.join()
    section = scheduling.scheduling_section(stack)
    return section, {entry["name"]: entry for entry in section["python_threads"]}[name]


def test_a_thread_that_timed_blocks_and_ended_before_the_dump_is_still_listed():
    _, entry = a_thread_that_burned_in_a_block(a_followed_stack(), "ended-worker")
    assert entry["ended"] is True
    assert entry["cpu_seconds"] >= 0.05 * 0.99


def test_a_thread_says_when_it_began_timing_and_ended_with_the_processs_cpu_time_then():
    stack = a_followed_stack()
    burn(0.05)  # the process's CPU time before the thread began
    section, entry = a_thread_that_burned_in_a_block(stack, "timed-worker")
    assert 0 < entry["started_seconds"] <= entry["ended_seconds"] <= section["wall_seconds"]
    assert entry["process_at_start"]["cpu_seconds"] >= 0.05 * 0.99
    spent_meanwhile = entry["process_at_end"]["cpu_seconds"] - entry["process_at_start"]["cpu_seconds"]
    assert spent_meanwhile >= 0.05 * 0.99


def test_a_running_thread_says_when_it_began_timing_but_not_an_end():
    stack = a_followed_stack()
    began, finish = threading.Event(), threading.Event()

    def work():
        with profiler.hierarchical_timer("env.step"):
            began.set()
            finish.wait()

    thread = threading.Thread(target=work, name="running-worker")
    thread.start()
    began.wait()
    try:
        entry = {entry["name"]: entry
                 for entry in scheduling.scheduling_section(stack)["python_threads"]}["running-worker"]
    finally:
        finish.set()
        thread.join()
    assert "started_seconds" in entry and "process_at_start" in entry
    assert "ended_seconds" not in entry and "ended" not in entry


def test_threads_that_ended_before_the_timers_were_reset_are_not_listed():
    def work():
        with profiler.hierarchical_timer("env.step"):
            burn(0.01)

    thread = threading.Thread(target=work, name="before-reset")
    thread.start()
    thread.join()
    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    scheduling.follow_stack(stack)
    profiler.reset_timers()
    names = {entry["name"] for entry in scheduling.scheduling_section(stack)["python_threads"]}
    assert "before-reset" not in names


def test_a_process_is_said_to_have_lived_no_longer_than_its_parent_saw_it_live():
    # Boot time in whole seconds made psutil's create_time() say 0.9 s of a 40 ms old process;
    # the kernel's start tick is good to one tick (10 ms).
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, "-c", "from profiler.recording import scheduling; print(scheduling.seconds_lived())"],
        capture_output=True, text=True, check=True, timeout=60)
    seen = time.monotonic() - started
    lived = float(completed.stdout)
    assert 0.0 < lived <= seen + 0.011
