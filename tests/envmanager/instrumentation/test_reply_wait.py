"""Specification of the trainer's wait for its workers' replies: every pipe has one, nothing read."""

from __future__ import annotations

import threading
from multiprocessing import Pipe

from envmanager.instrumentation.reply_wait import ReplyWaiter


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
        late.join()
        assert all(end.poll(0) for end in trainer_ends)
        assert [end.recv() for end in trainer_ends] == [("reply", step, index) for index in range(3)]


def test_a_worker_whose_end_closed_counts_as_answered():
    trainer_ends, worker_ends = pipes(2)
    worker_ends[0].send("reply")
    worker_ends[1].close()
    ReplyWaiter().wait(trainer_ends, None)  # returns: the class's own step_wait raises its error


def test_it_gives_up_after_the_timeout_with_the_replies_missing():
    trainer_ends, worker_ends = pipes(2)
    worker_ends[0].send("reply")
    ReplyWaiter().wait(trainer_ends, 0.01)
    assert not trainer_ends[1].poll(0)


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
    late.join()
    assert [end.recv() for end in trainer_ends] == ["second", "second"]
