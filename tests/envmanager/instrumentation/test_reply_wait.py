"""Specification of the trainer's wait for its workers' replies: every pipe has one, nothing read.

Every test runs on both cores: the step path's C helper (``wait_for_replies``) and the Python
reference (a ``select.poll`` per pipe)."""

from __future__ import annotations

import signal
import threading
from multiprocessing import Pipe

import pytest

from envmanager.instrumentation.reply_wait import ReplyWaiter
from step_cores import step_core  # noqa: F401  (an autouse fixture, parametrised by implementation)


def pipes(count: int) -> tuple[list, list]:
    pairs = [Pipe() for _ in range(count)]
    return [trainer for trainer, _ in pairs], [worker for _, worker in pairs]


def test_it_returns_once_every_pipe_has_a_reply_and_leaves_the_replies_to_be_read():
    trainer_ends, worker_ends = pipes(3)
    waiter = ReplyWaiter()
    for step in range(2):  # the same poll object at the next step
        worker_ends[0].send(("reply", step, 0))
        late = threading.Timer(0.05, lambda: [end.send(("reply", step, index))
                                              for index, end in enumerate(worker_ends) if index])
        late.start()
        waiter.wait(trainer_ends, None)
        answered = [end.poll(0) for end in trainer_ends]  # as the wait returns: before the sender is joined
        late.join()
        assert answered == [True] * 3
        assert [end.recv() for end in trainer_ends] == [("reply", step, index) for index in range(3)]


def test_a_worker_whose_end_closed_counts_as_answered():
    trainer_ends, worker_ends = pipes(2)
    worker_ends[0].send("reply")
    worker_ends[1].close()
    ReplyWaiter().wait(trainer_ends, None)  # returns: the class's own step_wait raises its error


def test_it_gives_up_after_the_timeout_with_the_replies_missing():
    trainer_ends, worker_ends = pipes(2)
    worker_ends[0].send("reply")
    assert ReplyWaiter().wait(trainer_ends, 0.01) is False  # the caller's step_wait is then given no time left
    assert not trainer_ends[1].poll(0)


def test_it_says_every_pipe_answered_within_the_timeout_and_with_none():
    trainer_ends, worker_ends = pipes(2)
    for end in worker_ends:
        end.send("reply")
    waiter = ReplyWaiter()
    assert waiter.wait(trainer_ends, 10.0) is True
    assert waiter.wait(trainer_ends, None) is True
    assert ReplyWaiter().wait([], 0.0) is True


def test_a_step_whose_replies_were_all_in_at_once_leaves_every_pipe_waited_on_at_the_next():
    trainer_ends, worker_ends = pipes(2)
    waiter = ReplyWaiter()
    for end in worker_ends:
        end.send("first")
    waiter.wait(trainer_ends, None)
    assert [end.recv() for end in trainer_ends] == ["first", "first"]
    worker_ends[0].send("second")
    waiter.wait(trainer_ends, 0.01)  # the second worker's reply is missing: the wait times out
    assert not trainer_ends[1].poll(0)
    late = threading.Timer(0.05, lambda: worker_ends[1].send("second"))
    late.start()
    waiter.wait(trainer_ends, None)
    answered = [end.poll(0) for end in trainer_ends]
    late.join()
    assert answered == [True, True]
    assert [end.recv() for end in trainer_ends] == ["second", "second"]


def test_more_pipes_than_the_c_helper_keeps_on_its_stack_are_all_waited_on():
    trainer_ends, worker_ends = pipes(20)
    for end in worker_ends[:-1]:
        end.send("reply")
    late = threading.Timer(0.05, lambda: worker_ends[-1].send("reply"))
    late.start()
    ReplyWaiter().wait(trainer_ends, None)
    answered = [end.poll(0) for end in trainer_ends]
    late.join()
    assert all(answered)


class Interrupted(Exception):
    pass


def test_a_signal_handler_that_raises_ends_the_wait_with_its_exception():
    trainer_ends, _worker_ends = pipes(2)  # no reply ever comes

    def interrupt(signum, frame):
        raise Interrupted

    previous = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.05)
    try:
        with pytest.raises(Interrupted):
            ReplyWaiter().wait(trainer_ends, None)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def test_a_signal_whose_handler_returns_does_not_end_the_wait_early():
    trainer_ends, worker_ends = pipes(2)
    worker_ends[0].send("reply")
    handled = []
    previous = signal.signal(signal.SIGALRM, lambda signum, frame: handled.append(signum))
    signal.setitimer(signal.ITIMER_REAL, 0.02)
    late = threading.Timer(0.1, lambda: worker_ends[1].send("reply"))
    late.start()
    try:
        ReplyWaiter().wait(trainer_ends, None)
        answered = [end.poll(0) for end in trainer_ends]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        late.join()
    assert handled == [signal.SIGALRM]
    assert all(answered)
