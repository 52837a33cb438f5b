"""Specification: the trainer's timed reads in C (``_step_core.TimedReceive``) read and count what
their pure-Python reference (``reply_reads.timed_receive``) does, on random arrangements of pipes.

Apart from ``test_reply_reads.py``, whose every test runs once per core: this one runs both cores
itself, once, where the C helper is built."""

from __future__ import annotations

import random
import threading
from multiprocessing import Pipe

import pytest

from envmanager.instrumentation.reply_reads import ReplyReads
from envmanager.transport import timed_calls


@pytest.fixture
def restored_core():
    default = timed_calls.compiled()
    yield
    timed_calls.use_compiled(default)


class VectorEnv:
    """What holds the pipes (here, the test itself): their timed recv's go when it goes."""


def read_all(kinds: list[str]) -> list[tuple[str, float]]:
    """Each pipe read once inside a timed step_wait: what it gave (or the error it raised) and the
    blocked time it added. A late reply is sent once its read has begun to block (the fake clock's
    first reading of a wait sends it), so that it blocks at every run, whatever the load."""
    pairs = [Pipe() for _ in kinds]
    reads = ReplyReads()
    vector_env = VectorEnv()  # alive through the reads
    reads.attach(vector_env, [trainer for trainer, _ in pairs])
    senders: list[threading.Thread] = []
    reading = {"late": None, "count": 0}

    def clock() -> float:
        reading["count"] += 1
        if reading["count"] % 2:  # a wait begins: its reply may come now
            sender = threading.Thread(target=reading["late"].send, args=("late",))
            sender.start()
            senders.append(sender)
        return float(reading["count"])

    reads.waits.begin(clock)
    outcomes = []
    for (trainer, worker), kind in zip(pairs, kinds):
        if kind == "reply":
            worker.send("reply")
        elif kind == "peer closed":
            worker.close()
        elif kind == "closed":
            trainer.close()
        reading["late"] = worker
        blocked = reads.waits.blocked
        try:
            outcome = repr(trainer.recv())
        except (EOFError, OSError) as error:
            outcome = type(error).__name__
        outcomes.append((outcome, reads.waits.blocked - blocked))
    for sender in senders:
        sender.join()
    return outcomes


@pytest.mark.skipif(not timed_calls.compiled(), reason="compares the C helper, which is not loaded, with the reference")
@pytest.mark.parametrize("seed", range(8))
def test_both_cores_read_and_count_alike_for_replies_late_replies_and_closed_pipes(restored_core, seed):
    kinds = random.Random(seed).choices(("reply", "late", "peer closed", "closed"), k=random.Random(seed).randint(1, 12))
    found = {}
    for core in ("compiled", "python"):
        timed_calls.use_compiled(core == "compiled")
        assert (type(ReplyReads().waits).__module__ == "envmanager.transport._step_core") == (core == "compiled")
        found[core] = read_all(kinds)
    assert found["compiled"] == found["python"]
    expected = {"reply": ("'reply'", 0.0), "late": ("'late'", 1.0), "peer closed": ("EOFError", 0.0),
                "closed": ("OSError", 0.0)}
    assert found["python"] == [expected[kind] for kind in kinds]
