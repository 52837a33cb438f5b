"""Specification of the channel between ``rlprof run``'s driver and the Ray workers it times, at the
end of the run: which workers are asked for their last timers. A real socket and a peer that speaks
as a worker does (key, hello, answers); no Ray is started."""

from __future__ import annotations

import socket
import threading
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge

import pytest

pytest.importorskip("ray", reason="Ray is not installed; pip install -e '.[ray]' runs these tests")

from profiler.integrations.ray_workers import RayWorkers  # noqa: E402

NODE_ID = "ab" * 28


def connected_worker(workers: RayWorkers) -> Connection:
    """A worker's end of the channel, its key checked by the driver: where a worker starts running
    tasks, whether or not the driver has read its hello yet."""
    connection = Connection(socket.create_connection(workers._listen()).detach())
    answer_challenge(connection, workers._authkey)
    deliver_challenge(connection, workers._authkey)
    return connection


def test_a_worker_whose_hello_the_driver_has_not_read_yet_is_still_asked_for_its_last_timers():
    # An actor started just before the end: in its first call, its hello not read by the driver
    # when the driver asks for the last timers. It must be asked, and so named with its call.
    workers = RayWorkers(record_timeline=False, framework_phases=True)
    connection = connected_worker(workers)
    asking = threading.Thread(target=workers.collect_last_timers)
    asking.start()
    connection.send(("hello", 4242, "node-7", NODE_ID))
    connection.send(("actor", "Sleeper", "cd" * 16))
    assert connection.recv() == ("flush",)
    connection.send(("flushed", ("Sleeper.nap",)))
    asking.join()
    lines = workers.finish()
    connection.close()
    assert (f"Ray worker 0 (actor Sleeper, pid 4242, node {NODE_ID[:8]}): Sleeper.nap still running when the "
            "driver asked for its last timers: what it timed since its last shipment may be lost") in lines


def test_a_peer_that_hangs_up_before_its_hello_holds_up_no_request_for_the_last_timers():
    workers = RayWorkers(record_timeline=False, framework_phases=True)
    connected_worker(workers).close()
    workers.collect_last_timers()  # returns: the connection came to nothing
    assert workers.finish() == []
