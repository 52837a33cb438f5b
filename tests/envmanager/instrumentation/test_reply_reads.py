"""Specification of the trainer's timed reads of its workers' replies: each pipe's ``recv`` is the
connection's own, which, while a timed ``step_wait`` runs, first waits for its pipe to be readable
and counts the time it blocked, on the run's clock (a fake one here: no test times).

Every test runs on both cores: the step path's C helper (``TimedReceive``) and the Python
reference (:func:`~envmanager.instrumentation.reply_reads.timed_receive`)."""

from __future__ import annotations

import gc
import signal
import threading
import weakref
from multiprocessing import Pipe

import pytest

from envmanager.instrumentation.reply_reads import ReplyReads
from step_cores import step_core  # noqa: F401  (an autouse fixture, parametrised by implementation)


class FakeClock:
    """Reads 1.0, 3.5, 7.0, ... and counts its readings."""

    def __init__(self) -> None:
        self.readings = 0

    def __call__(self) -> float:
        self.readings += 1
        return {1: 1.0, 2: 3.5, 3: 7.0, 4: 7.25}[self.readings]


class VectorEnv:
    """What holds the pipes, as a vector env does: the timed recv's go when it goes."""

    def __init__(self, pipes: list) -> None:
        self.pipes = pipes


OWNERS: list[VectorEnv] = []  # each test's, alive through it


def attached(count: int) -> tuple[ReplyReads, list, list]:
    pairs = [Pipe() for _ in range(count)]
    reads = ReplyReads()
    trainer_ends = [trainer for trainer, _ in pairs]
    OWNERS[:] = [VectorEnv(list(trainer_ends))]
    reads.attach(OWNERS[0], trainer_ends)
    return reads, trainer_ends, [worker for _, worker in pairs]


def activate(reads: ReplyReads, clock) -> None:
    reads.waits.begin(clock)


def test_outside_a_timed_step_wait_a_read_is_the_connections_own_and_counts_nothing():
    reads, trainer_ends, worker_ends = attached(1)
    assert "recv" in vars(trainer_ends[0])  # on the instance, not on the class
    assert "recv" not in vars(type(trainer_ends[0]))
    worker_ends[0].send({"reply": 1})
    assert trainer_ends[0].recv() == {"reply": 1}
    assert reads.waits.blocked == 0.0


def test_outside_a_timed_step_wait_a_late_reply_is_waited_for_by_the_connections_own_recv_uncounted():
    reads, trainer_ends, worker_ends = attached(1)
    clock = FakeClock()
    for when in ("before any step_wait", "after one"):  # reset_wait, call_wait, close: no clock yet, or an old one
        sender = threading.Timer(0.05, worker_ends[0].send, (when,))
        sender.start()
        assert trainer_ends[0].recv() == when
        sender.join()
        activate(reads, clock)
        reads.waits.end()
    assert (reads.waits.blocked, clock.readings) == (0.0, 0)


def test_a_reply_already_in_is_read_without_waiting_nor_reading_the_clock():
    reads, trainer_ends, worker_ends = attached(2)
    clock = FakeClock()
    activate(reads, clock)
    for index, end in enumerate(worker_ends):
        end.send(("reply", index))
    assert [end.recv() for end in trainer_ends] == [("reply", 0), ("reply", 1)]
    assert (reads.waits.blocked, clock.readings) == (0.0, 0)


def test_a_late_reply_is_waited_for_and_the_time_blocked_counted_on_the_runs_clock():
    reads, trainer_ends, worker_ends = attached(2)
    clock = FakeClock()
    activate(reads, clock)
    worker_ends[0].send("first")
    assert trainer_ends[0].recv() == "first"
    for late in ("second", "third"):  # the pipe blocks twice: 3.5 - 1.0, then 7.25 - 7.0
        sender = threading.Timer(0.05, worker_ends[1].send, (late,))
        sender.start()
        assert trainer_ends[1].recv() == late
        sender.join()
    assert (reads.waits.end(), clock.readings) == (2.75, 4)
    assert not reads.waits.active  # the step_wait is over: a read now is the connection's own
    worker_ends[1].send("after")
    assert trainer_ends[1].recv() == "after"


def test_a_pipe_whose_peer_closed_raises_the_connections_own_error():
    reads, trainer_ends, worker_ends = attached(1)
    activate(reads, FakeClock())
    worker_ends[0].close()
    with pytest.raises(EOFError):
        trainer_ends[0].recv()


def test_a_closed_pipe_raises_the_connections_own_error():
    reads, trainer_ends, _worker_ends = attached(1)
    activate(reads, FakeClock())
    trainer_ends[0].close()
    with pytest.raises(OSError, match="handle is closed"):
        trainer_ends[0].recv()


def test_release_gives_each_connection_its_own_recv_back():
    reads, trainer_ends, worker_ends = attached(2)
    reads.release()
    assert all("recv" not in vars(end) for end in trainer_ends)
    worker_ends[1].send("reply")
    assert trainer_ends[1].recv() == "reply"


def test_the_connections_of_a_vector_env_the_program_drops_are_freed_at_once_as_under_python():
    reads, trainer_ends, _worker_ends = attached(2)
    gone = [weakref.ref(end) for end in trainer_ends]
    gc.disable()
    try:
        del trainer_ends[:]
        assert all(end() is not None for end in gone)  # the vector env holds them
        OWNERS.clear()
        # The cycle through each one's own recv is broken as the vector env goes: freed by their count.
        assert [end() for end in gone] == [None, None]
    finally:
        gc.enable()
    reads.release()


def test_a_vector_env_collected_by_gc_reads_its_pipes_in_its_finalizer_with_their_own_recv():
    trainer_end, worker_end = Pipe()
    read = []

    class Finalized(VectorEnv):
        def __del__(self) -> None:  # as AsyncVectorEnv.__del__ closing with a step pending
            read.append(self.pipes[0].recv())

    owner = Finalized([trainer_end])
    owner.cycle = owner
    ReplyReads().attach(owner, [trainer_end])
    worker_end.send("reply")
    del owner  # the pipe stays alive here: not finalized by the same collection (its own __del__ closes it)
    gc.collect()
    assert read == ["reply"] and "recv" not in vars(trainer_end)


def test_a_recv_taken_from_its_connection_keeps_the_connection_as_a_bound_method_does():
    # Under python `pipe.recv` is a bound method, which holds its connection: it still reads once
    # the program dropped the pipe. So does a finalizer that reads its pipe while gc collects the
    # cycle holding both (gc clears the weak references to them first): gymnasium's
    # AsyncVectorEnv.__del__ closing a vector env with a step pending.
    reads, trainer_ends, worker_ends = attached(1)
    worker_ends[0].send("reply")
    receive = trainer_ends[0].recv
    del trainer_ends[:]
    assert receive() == "reply"
    reads.release()


class Interrupted(Exception):
    pass


def test_a_signal_handler_that_raises_ends_the_wait_with_its_exception():
    reads, trainer_ends, _worker_ends = attached(1)  # no reply ever comes
    activate(reads, FakeClock())

    def interrupt(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        with pytest.raises(Interrupted):
            trainer_ends[0].recv()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_signal_whose_handler_returns_does_not_end_the_wait_early():
    reads, trainer_ends, worker_ends = attached(1)
    clock = FakeClock()
    activate(reads, clock)
    handled = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: handled.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    late = threading.Timer(0.1, worker_ends[0].send, ("reply",))
    late.start()
    try:
        assert trainer_ends[0].recv() == "reply"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        late.join()
    assert handled == [signal.SIGALRM]
    assert (reads.waits.blocked, clock.readings) == (2.5, 2)
