"""The death watch: a watched process's group ends the moment the process does, with no call."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from multiprocessing.connection import Connection
from typing import Any

import psutil
from envmanager_testenvs import fork_a_child_and_report_it, start_forked

from envmanager.lifetime.death_watch import DeathWatch
from envmanager.lifetime.exit_descriptor import ExitDescriptor
from envmanager.lifetime.process_group import lead_new_process_group

WITHIN_SECONDS = 10.0  # generous: a loaded machine must never fail this


def _lead_a_group_with_a_helper(report: Connection) -> None:
    lead_new_process_group()
    report.send(subprocess.Popen(["sleep", "60"]).pid)
    time.sleep(60)


def _gone_within(pid: int, within: float = WITHIN_SECONDS) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@contextmanager
def _watched(target: Callable[[Connection], None]) -> Iterator[tuple[Any, int]]:
    """``target`` started in a forked process and watched: the process and the pid it reports.
    Afterwards the process is forgotten and reaped, the watch stopped and the reported process
    ended if it is still there."""
    process, reported = start_forked(target)
    exit_descriptor = ExitDescriptor(process)
    watch = DeathWatch()
    try:
        watch.watch(process, exit_descriptor.fileno)
        yield process, reported
    finally:
        with watch.lock:
            watch.forget(exit_descriptor.fileno)
            process.join()
        exit_descriptor.close()
        watch.stop()
        with suppress(ProcessLookupError):
            os.kill(reported, signal.SIGKILL)


def test_the_group_of_a_watched_process_is_killed_once_the_process_dies():
    with _watched(_lead_a_group_with_a_helper) as (process, helper):
        os.kill(process.pid, signal.SIGKILL)
        assert _gone_within(helper)


def _lead_a_group_with_a_forked_child(report: Connection) -> None:
    lead_new_process_group()
    fork_a_child_and_report_it(report)


def test_the_group_is_killed_at_once_also_while_a_forked_child_holds_the_processs_sentinel():
    with _watched(_lead_a_group_with_a_forked_child) as (process, child):
        os.kill(process.pid, signal.SIGKILL)
        assert _gone_within(child)


def test_a_forgotten_process_is_left_alone():
    process, helper = start_forked(_lead_a_group_with_a_helper)
    exit_descriptor = ExitDescriptor(process)
    watch = DeathWatch()
    try:
        watch.watch(process, exit_descriptor.fileno)
        with watch.lock:
            watch.forget(exit_descriptor.fileno)
        watch.stop()  # joins the watching thread: nothing is watched any more
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        exit_descriptor.close()
        assert psutil.Process(helper).status() != psutil.STATUS_ZOMBIE
    finally:
        os.kill(helper, signal.SIGKILL)
        psutil.Process(helper).wait(WITHIN_SECONDS)


def _exit_descriptor_readable(exit_descriptor: ExitDescriptor) -> bool:
    poller = select.poll()
    poller.register(exit_descriptor.fileno, select.POLLIN)
    return bool(poller.poll(WITHIN_SECONDS * 1000))


def test_a_new_worker_watched_under_the_number_of_a_dead_ones_descriptor_is_left_alone():
    # The pool restarts a dead worker: it forgets the old one, closes its exit descriptor and
    # watches the new one, whose descriptor may get the same number.  The watching thread, woken
    # by the old one's death and waiting for the lock meanwhile, must not take the new one for it.
    old, old_helper = start_forked(_lead_a_group_with_a_helper)
    new, new_helper = start_forked(_lead_a_group_with_a_helper)
    old_descriptor, new_descriptor = ExitDescriptor(old), ExitDescriptor(new)
    number = old_descriptor.fileno
    watch = DeathWatch()
    try:
        watch.watch(old, number)
        time.sleep(0.5)  # the watching thread takes the wake-up and polls the descriptor
        with watch.lock:
            os.kill(old.pid, signal.SIGKILL)
            assert _exit_descriptor_readable(old_descriptor)
            time.sleep(0.5)  # the watching thread wakes from its poll and waits for the lock
            watch.forget(number)
            old.join()
            old_descriptor.close()
            os.dup2(new_descriptor.fileno, number)
            watch._watched[number] = new  # as watch() records it, without letting go of the lock
        assert not _gone_within(new_helper, within=2.0)
        assert new.is_alive()
    finally:
        with watch.lock:
            watch.forget(number)
        watch.stop()
        for pid in (old_helper, new_helper, new.pid):
            with suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        new.join()
        os.close(number)
        new_descriptor.close()
