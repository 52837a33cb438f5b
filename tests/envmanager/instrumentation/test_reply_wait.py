"""Specification of the trainer's wait for every reply before a ``step_wait`` given a timeout reads
any: every pipe answered, or the timeout ran out; nothing read."""

from __future__ import annotations

import threading
from multiprocessing import Pipe

from envmanager.instrumentation.reply_wait import wait_for_replies


def pipes(count: int) -> tuple[list, list]:
    pairs = [Pipe() for _ in range(count)]
    return [trainer for trainer, _ in pairs], [worker for _, worker in pairs]


def test_it_returns_once_every_pipe_has_a_reply_and_leaves_the_replies_to_be_read():
    trainer_ends, worker_ends = pipes(3)
    worker_ends[0].send(("reply", 0))
    late = threading.Timer(0.05, lambda: [end.send(("reply", index)) for index, end in enumerate(worker_ends) if index])
    late.start()
    assert wait_for_replies(trainer_ends, 60.0) is True
    answered = [end.poll(0) for end in trainer_ends]  # as the wait returns: before the sender is joined
    late.join()
    assert answered == [True] * 3
    assert [end.recv() for end in trainer_ends] == [("reply", index) for index in range(3)]


def test_a_worker_whose_end_closed_counts_as_answered_and_a_closed_pipe_is_left_to_the_class():
    trainer_ends, worker_ends = pipes(3)
    worker_ends[0].send("reply")
    worker_ends[1].close()
    trainer_ends[2].close()
    assert wait_for_replies(trainer_ends, 60.0) is True  # the class's own step_wait raises its error


def test_it_gives_up_after_the_timeout_with_the_replies_missing():
    trainer_ends, worker_ends = pipes(2)
    worker_ends[0].send("reply")
    assert wait_for_replies(trainer_ends, 0.01) is False  # the caller's step_wait is then given no time left
    assert not trainer_ends[1].poll(0)
    assert wait_for_replies([], 0.0) is True
