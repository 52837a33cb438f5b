"""Specification: the trainer's end of rlprof's channel (envmanager/instrumentation/channel.py)."""

from __future__ import annotations

import os
import resource
import socket
import sys
import threading
import time

import pytest

from envmanager.instrumentation.channel import ChannelServer, connect

WORKERS = 16


def test_the_final_wait_takes_in_workers_that_connected_before_the_trainer_accepted_them():
    # A short program can end before the channel's thread has accepted workers that did connect:
    # the kernel completed their connections. The trainer's main thread keeps the interpreter here
    # (a long switch interval) until it waits, as a busy trainer does, so nothing is accepted
    # before the final wait begins.
    received: list[object] = []
    closed: list[int] = []
    lock = threading.Lock()

    def on_message(connection: int, message: object) -> None:
        with lock:
            received.append(message)

    server = ChannelServer(on_message, closed.append)
    interval = sys.getswitchinterval()
    try:
        sys.setswitchinterval(1000.0)
        ends = [connect(server.address, ("hello", worker)) for worker in range(WORKERS)]
        assert all(end is not None for end in ends)
        for end in ends:
            end.close()
        assert server.wait_for_workers(timeout=30.0)
    finally:
        sys.setswitchinterval(interval)
        server.close()
    assert sorted(received) == [("hello", worker) for worker in range(WORKERS)]
    assert sorted(closed) == list(range(WORKERS))


def test_a_default_socket_timeout_set_by_the_program_leaves_the_channel_listening():
    arrived = threading.Event()
    previous = socket.getdefaulttimeout()
    socket.setdefaulttimeout(0.01)
    try:
        server = ChannelServer(lambda connection, message: arrived.set(), lambda connection: None)
    finally:
        socket.setdefaulttimeout(previous)
    time.sleep(0.2)  # many times the program's timeout, before any worker connects
    assert_the_channels_thread_takes_a_worker_in(server, arrived)


def test_the_channel_listens_on_a_descriptor_beyond_1024():
    # A program with many files open (datasets, shared memory, many envs) hands the channel's
    # listener a descriptor that select() cannot watch.
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and hard < 1200:
        pytest.skip(f"this machine allows {hard} open files")
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, 1200), hard))
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        arrived = threading.Event()
        server = ChannelServer(lambda connection, message: arrived.set(), lambda connection: None)
        assert_the_channels_thread_takes_a_worker_in(server, arrived)
    finally:
        for descriptor in filler:
            os.close(descriptor)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def assert_the_channels_thread_takes_a_worker_in(server: ChannelServer, arrived: threading.Event) -> None:
    """A worker connects and says hello; the channel's thread (not the final wait, which is never
    called) hands the message on. Closes ``server``."""
    try:
        end = connect(server.address, "hello")
        assert end is not None
        assert arrived.wait(timeout=30.0)
        end.close()
    finally:
        server.close()
