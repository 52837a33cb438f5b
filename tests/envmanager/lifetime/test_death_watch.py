"""The death watch: a watched process's group ends the moment the process does, with no call."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import time
from multiprocessing.connection import Connection

import psutil

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


def test_the_group_of_a_watched_process_is_killed_once_the_process_dies():
    reader, writer = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_lead_a_group_with_a_helper, args=(writer,))
    process.start()
    helper = reader.recv()
    exit_descriptor = ExitDescriptor(process)
    watch = DeathWatch()
    try:
        watch.watch(process, exit_descriptor.fileno)
        os.kill(process.pid, signal.SIGKILL)
        assert _gone_within(helper)
    finally:
        with watch.lock:
            watch.forget(exit_descriptor.fileno)
            process.join()
        exit_descriptor.close()
        watch.stop()
        if not _gone_within(helper, 0):
            os.kill(helper, signal.SIGKILL)


def _lead_a_group_with_a_forked_child(report: Connection) -> None:
    lead_new_process_group()
    child = os.fork()
    if child == 0:  # holds every descriptor of its parent, the sentinel's writing end among them
        time.sleep(60)
        os._exit(0)
    report.send(child)
    time.sleep(60)


def test_the_group_is_killed_at_once_also_while_a_forked_child_holds_the_processs_sentinel():
    reader, writer = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_lead_a_group_with_a_forked_child, args=(writer,))
    process.start()
    child = reader.recv()
    exit_descriptor = ExitDescriptor(process)
    watch = DeathWatch()
    try:
        watch.watch(process, exit_descriptor.fileno)
        os.kill(process.pid, signal.SIGKILL)
        assert _gone_within(child)
    finally:
        with watch.lock:
            watch.forget(exit_descriptor.fileno)
            os.kill(child, signal.SIGKILL)
            process.join()
        exit_descriptor.close()
        watch.stop()


def test_a_forgotten_process_is_left_alone():
    reader, writer = multiprocessing.Pipe(duplex=False)
    process = multiprocessing.get_context("fork").Process(target=_lead_a_group_with_a_helper, args=(writer,))
    process.start()
    helper = reader.recv()
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
