"""Specification: the trainer's reply wait in C (``_step_core.wait_for_replies``) leaves the same
pipes answered as its pure-Python reference (a ``select.poll`` per pipe), on random arrangements.

Apart from ``test_reply_wait.py``, whose every test runs once per core: this one runs both cores
itself, once, where the C helper is built."""

from __future__ import annotations

import random
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
@pytest.mark.parametrize("seed", range(5))
def test_both_cores_leave_the_same_pipes_answered_for_random_replies_and_closed_peers(restored_core, seed):
    """Every wait returns, reads nothing, and what is left to read is the same."""
    generator = random.Random(seed)
    left_to_read = {}
    for core in ("compiled", "python"):
        generator.seed(seed)
        timed_calls.use_compiled(core == "compiled")
        pairs = [Pipe() for _ in range(generator.randint(1, 8))]
        trainer_ends = [trainer for trainer, _ in pairs]
        for _, end in pairs:
            what = generator.choice(("reply", "nothing", "closed"))
            if what == "reply":
                end.send("reply")
            elif what == "closed":
                end.close()
        ReplyWaiter().wait(trainer_ends, 0.0)
        left_to_read[core] = [end.poll(0) for end in trainer_ends]
    assert left_to_read["compiled"] == left_to_read["python"]
