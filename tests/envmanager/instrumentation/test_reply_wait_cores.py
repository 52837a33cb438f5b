"""Specification: the trainer's reply wait in C (``_step_core.wait_for_replies``) leaves every pipe
answered as its pure-Python reference (a ``select.poll`` per pipe) does, on random arrangements.

Apart from ``test_reply_wait.py``, whose every test runs once per core: this one runs both cores
itself, once, where the C helper is built."""

from __future__ import annotations

import random
import threading
from multiprocessing import Pipe

import pytest

from envmanager.instrumentation.reply_wait import ReplyWaiter
from envmanager.transport import timed_calls


@pytest.fixture
def restored_core():
    default = timed_calls.compiled()
    yield
    timed_calls.use_compiled(default)


@pytest.mark.skipif(not timed_calls.compiled(), reason="compares the C helper, which is not loaded, with the reference")
@pytest.mark.parametrize("seed", range(8))
def test_both_cores_leave_every_pipe_answered_for_random_replies_late_replies_and_closed_peers(restored_core, seed):
    """Replies in before the wait, replies sent from another thread while it waits (in a random
    order), peers closed. Each wait returns with every pipe answered (readable, or its peer
    closed), checked as it returns, before the late sender is joined, and reads nothing."""
    generator = random.Random(seed)
    left_to_read = {}
    for core in ("compiled", "python"):
        generator.seed(seed)
        timed_calls.use_compiled(core == "compiled")
        pairs = [Pipe() for _ in range(generator.randint(1, 20))]
        trainer_ends, worker_ends = [trainer for trainer, _ in pairs], [worker for _, worker in pairs]
        late = []
        for end in worker_ends:
            what = generator.choice(("reply", "late", "closed"))
            if what == "reply":
                end.send("reply")
            elif what == "closed":
                end.close()
            else:
                late.append(end)
        generator.shuffle(late)
        waiter = ReplyWaiter()
        for _ in range(2):  # the second wait starts with the pipe that answered last first (C)
            sender = threading.Timer(0.02, lambda: [end.send("late") for end in late])
            sender.start()
            waiter.wait(trainer_ends, None)
            answered = [end.poll(0) for end in trainer_ends]  # closed peers poll True (end of file)
            sender.join()
            left_to_read.setdefault(core, []).append(answered)
            for end, worker_end in zip(trainer_ends, worker_ends):
                if worker_end in late:
                    end.recv()  # the late reply read: the next wait waits for it again
    assert left_to_read["compiled"] == left_to_read["python"]
    assert all(all(answered) for answered in left_to_read["compiled"])
