"""Specification of a thread's waits for a core, and time on one, inside a block's runs
(profiler.recording.block_waits): the kernel's own count, read around each of the first
``READ_ALL_FIRST`` runs, then one in ``READ_EVERY``, in the thread that read first and the process
that opened the file; checked against what the kernel reports, read by the test itself; no
timing."""

from __future__ import annotations

import os
import threading
import time

import pytest
from kernel_counts import busy_program_outside_the_run, kernel_run_queue_nanoseconds

import profiler
from profiler.recording import scheduling
from profiler.recording.block_waits import READ_ALL_FIRST, READ_EVERY, BlockWaits, block_waits_section
from profiler.timing import timers

pytestmark = pytest.mark.skipif(not scheduling.schedstat_available(), reason="needs Linux's schedstat")


def burn(seconds: float) -> None:
    end = time.thread_time() + seconds
    while time.thread_time() < end:
        pass


def run_block(waits: BlockWaits, work=lambda: None) -> None:
    """One run of the block, read as rlprof's vector step reads it."""
    before = waits.start()
    work()
    if before is not None:
        waits.end(before)


@pytest.fixture
def stack():
    """This thread's timer stack, reset."""
    profiler.reset_timers()
    return timers.get_timer_stack_for_thread(threading.current_thread())


def test_every_run_is_read_at_first(stack):
    waits = BlockWaits("vector.step", stack)
    for _ in range(100):
        run_block(waits)
    assert waits.runs_read == 100


def test_after_the_first_runs_one_run_in_read_every_is_read(stack):
    waits = BlockWaits("vector.step", stack)
    for _ in range(READ_ALL_FIRST + 3 * READ_EVERY + 1):
        run_block(waits)
    assert waits.runs_read == READ_ALL_FIRST + 4  # the next after the first ones, then one in READ_EVERY


def test_a_run_read_counts_the_waits_for_a_core_and_the_time_on_one_the_kernel_counted_inside_it(stack):
    waits = BlockWaits("vector.step", stack)
    thread = threading.get_native_id()
    allowed = os.sched_getaffinity(0)
    with busy_program_outside_the_run(cores=1):
        os.sched_setaffinity(0, {min(allowed)})  # this thread shares the busy program's one core
        try:
            waited, ran = kernel_run_queue_nanoseconds(os.getpid(), [thread]), time.thread_time_ns()
            run_block(waits, lambda: burn(0.05))
            waited = kernel_run_queue_nanoseconds(os.getpid(), [thread]) - waited
            ran = time.thread_time_ns() - ran
        finally:
            os.sched_setaffinity(0, allowed)
    assert waits.runs_read == 1
    assert 0 < waits.run_queue_nanoseconds <= waited
    assert 0.04e9 <= waits.cpu_nanoseconds <= ran  # it burned 50 ms of its own CPU time inside


def test_another_threads_runs_are_not_read(stack):
    waits = BlockWaits("vector.step", stack)
    run_block(waits)  # this thread read first: the file is its own

    def elsewhere():
        for _ in range(3):
            run_block(waits)

    other = threading.Thread(target=elsewhere)
    other.start()
    other.join()
    assert waits.runs_read == 1


def test_a_forked_childs_runs_are_not_read(stack):
    waits = BlockWaits("vector.step", stack)
    run_block(waits)
    reading, writing = os.pipe()
    child = os.fork()
    if child == 0:  # the descriptor still reads the parent's thread here
        waits.countdown = 0
        run_block(waits)
        os.write(writing, str(waits.runs_read).encode())
        os._exit(0)
    os.close(writing)
    os.waitpid(child, 0)
    assert os.read(reading, 16) == b"1"
    os.close(reading)


def test_a_reset_of_the_timers_forgets_the_runs_read(stack):
    waits = BlockWaits("vector.step", stack)
    run_block(waits)
    profiler.reset_timers()
    assert waits.runs_read == 0 and waits.run_queue_nanoseconds == 0 and waits.cpu_nanoseconds == 0


def test_a_closed_reader_reads_no_run(stack):
    waits = BlockWaits("vector.step", stack)
    run_block(waits)
    waits.close()
    waits.countdown = 0
    run_block(waits)
    assert waits.runs_read == 1


def test_the_section_sums_the_readers_of_a_block_and_leaves_out_blocks_none_read(stack):
    first, second, unread = (BlockWaits("vector.step", stack), BlockWaits("vector.step", stack),
                             BlockWaits("SyncVectorEnv.step", stack))
    run_block(first)
    run_block(second)
    section = block_waits_section(stack)
    assert list(section) == ["vector.step"]
    assert section["vector.step"]["runs_read"] == 2
    assert section["vector.step"]["run_queue_seconds"] == pytest.approx(
        (first.run_queue_nanoseconds + second.run_queue_nanoseconds) * 1e-9)
    assert section["vector.step"]["cpu_seconds"] == pytest.approx(
        (first.cpu_nanoseconds + second.cpu_nanoseconds) * 1e-9)
    assert unread.runs_read == 0


def test_the_trainers_dump_carries_the_waits_inside_its_blocks(stack):
    scheduling.follow_stack(stack)
    waits = BlockWaits("vector.step", stack)
    run_block(waits)
    assert profiler.get_timer_tree()["scheduling"]["in_blocks"] == {
        "vector.step": {"runs_read": 1, "run_queue_seconds": waits.run_queue_nanoseconds * 1e-9,
                        "cpu_seconds": waits.cpu_nanoseconds * 1e-9}}
