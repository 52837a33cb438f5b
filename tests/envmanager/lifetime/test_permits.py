"""max_concurrency permits: a bound across processes, and a dead holder's permit comes back."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import pickle
import signal
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection

import pytest

from envmanager.lifetime.permits import ConcurrencyPermits

# Generous: "it happens" must never fail because the machine is slow.
WITHIN_SECONDS = 10.0


def _hold_a_permit(permits: ConcurrencyPermits, report: Connection) -> None:
    """Take a permit, say so, and keep it until killed; SIGTERM makes it exit with code 3."""

    def exit_3(signum: int, frame: object) -> None:
        raise SystemExit(3)

    signal.signal(signal.SIGTERM, exit_3)
    report.send("taking")
    with permits:
        report.send("holding")
        time.sleep(60)


@pytest.fixture
def permits() -> Iterator[ConcurrencyPermits]:
    permits = ConcurrencyPermits(1)
    yield permits
    permits.remove()


def _start_holder(permits: ConcurrencyPermits, context: str) -> tuple[multiprocessing.Process, Connection]:
    """A process about to take a permit (its SIGTERM handler is in place)."""
    ctx = multiprocessing.get_context(context)
    receiver, sender = ctx.Pipe(duplex=False)
    holder = ctx.Process(target=_hold_a_permit, args=(permits, sender))
    holder.start()
    sender.close()
    assert receiver.poll(WITHIN_SECONDS) and receiver.recv() == "taking"
    return holder, receiver


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_permit_held_by_a_killed_process_is_given_back(permits, context):
    first, first_report = _start_holder(permits, context)
    second, second_report = _start_holder(permits, context)
    try:
        ready = multiprocessing.connection.wait([first_report, second_report], WITHIN_SECONDS)
        assert len(ready) == 1  # one permit: the other process waits
        holder, waiter_report = (first, second_report) if ready == [first_report] else (second, first_report)
        assert not waiter_report.poll(0.2)
        holder.kill()
        assert waiter_report.poll(WITHIN_SECONDS)
        assert waiter_report.recv() == "holding"
    finally:
        for process in (first, second):
            process.kill()
            process.join()


def test_a_process_waiting_for_a_permit_runs_its_sigterm_handler(permits):
    holder, holder_report = _start_holder(permits, "fork")
    try:
        assert holder_report.poll(WITHIN_SECONDS)
        waiter, waiter_report = _start_holder(permits, "fork")
        try:
            assert not waiter_report.poll(0.2)  # it waits for the permit
            waiter.terminate()
            waiter.join(WITHIN_SECONDS)
            assert waiter.exitcode == 3
        finally:
            waiter.kill()
            waiter.join()
    finally:
        holder.kill()
        holder.join()


def test_permits_pickle_as_the_same_semaphore(permits):
    copy = pickle.loads(pickle.dumps(permits))
    with copy:
        pass
    assert (copy.limit, copy.semaphore_id) == (permits.limit, permits.semaphore_id)


def test_removing_twice_is_harmless():
    permits = ConcurrencyPermits(2)
    permits.remove()
    permits.remove()
