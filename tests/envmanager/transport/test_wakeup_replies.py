"""The trainer's taking of a step's wake-up replies (envmanager.transport.wakeup_replies), on both
implementations (the C helper and its Python reference, see tests/envmanager/step_cores.py): what
is taken and how it leaves the handle and the manager's lists, what is left for the general path,
and a property test that drives both with the same random handles and compares what they leave.
Real WorkerHandles, their replies read ahead as a wait reads them off a real pipe."""

from __future__ import annotations

import os
import random
import struct

import numpy as np
import pytest

from profiler.multiprocess.payload import MAX_SECONDS

from envmanager import SubprocessEnvManager
from envmanager.transport import protocol, timed_calls
from envmanager.transport.pool import WorkerHandle
from envmanager.transport.wakeup_replies import take_wakeups_function, take_wakeups_in_python
from envmanager_testenvs import CountingEnv
from step_cores import step_core  # noqa: F401  (an autouse fixture, parametrised by implementation)

SEQUENCE = 7


def framed(message: bytes) -> bytes:
    """``message`` as the trainer's wait reads it off the pipe: write_message's framing and all."""
    reader, writer = os.pipe()
    try:
        protocol.write_message(writer, message)
        return os.read(reader, protocol.READ_SIZE)
    finally:
        os.close(reader)
        os.close(writer)


def wakeup(finished_at: float, sequence: int = SEQUENCE) -> bytes:
    return framed(protocol.encode((sequence, True, protocol.IN_SHARED_MEMORY, None, finished_at)))


def awaiting_handle(index: int, read_ahead: bytes | None, outstanding: int = 1) -> WorkerHandle:
    handle = WorkerHandle(index, range(index, index + 1), None)  # type: ignore[arg-type]
    handle.awaiting = SEQUENCE
    handle.outstanding = outstanding
    handle.read_ahead = read_ahead
    return handle


def state_of(handles: list[WorkerHandle]) -> list[tuple]:
    return [(h.index, h.awaiting, h.outstanding, h.read_ahead) for h in handles]


def test_the_implementation_in_force_is_the_one_asked_for(step_core):
    assert (take_wakeups_function() is take_wakeups_in_python) is (step_core == "python")


def test_a_wake_up_read_whole_is_taken_as_the_general_path_would_settle_it():
    take_wakeups = take_wakeups_function()
    handle = awaiting_handle(1, wakeup(12.5))
    ready_at, counted, cleared = [None, None], [3, 4], [["info"], ["info"]]
    left = take_wakeups([handle], ready_at, counted, cleared)
    assert left == []
    assert (handle.read_ahead, handle.outstanding, handle.awaiting) == (None, 0, 0)
    assert ready_at == [None, 12.5]
    assert counted == [3, 5]
    assert cleared == [["info"], None]


def test_handles_awaiting_nothing_are_neither_taken_nor_left():
    handle = awaiting_handle(0, None, outstanding=0)
    handle.awaiting = 0
    assert take_wakeups_function()([handle], [None], [0], [None]) == []
    assert state_of([handle]) == [(0, 0, 0, None)]


@pytest.mark.parametrize(
    "read_ahead, outstanding",
    [
        (None, 1),  # the wait polled and read nothing
        (framed(protocol.encode((SEQUENCE, True, ("obs", 1.0), {"info": 1}, 2.0))), 1),  # a pickled reply
        (framed(protocol.encode((SEQUENCE, True, protocol.IN_SHARED_MEMORY, None, 2.0)))[:-1], 1),  # not yet whole
        (b"", 1),  # the end of the pipe
        (framed(protocol.encode((SEQUENCE, True, protocol.IN_SHARED_MEMORY, None, 2.0))), 2),  # a stale reply first
    ],
    ids=["nothing read", "pickled", "partial", "end of pipe", "stale reply owed"],
)
def test_anything_but_a_whole_wake_up_owed_alone_is_left_untouched_for_the_general_path(read_ahead, outstanding):
    handles = [awaiting_handle(0, wakeup(1.0)), awaiting_handle(1, read_ahead, outstanding), awaiting_handle(2, wakeup(3.0))]
    before = state_of(handles[1:2])
    ready_at, counted, cleared = [None] * 3, [0] * 3, [None] * 3
    left = take_wakeups_function()(handles, ready_at, counted, cleared)
    assert left == [handles[1]]
    assert state_of(handles[1:2]) == before
    assert (ready_at, counted) == ([1.0, None, 3.0], [1, 0, 1])


@pytest.mark.parametrize("stamp", [-1.0, float("nan"), float("inf"), MAX_SECONDS, 1e300])
def test_a_stamp_beyond_the_shared_clock_is_left_for_the_general_path_which_stops_trusting_stamps(stamp):
    handle = awaiting_handle(0, wakeup(stamp))
    ready_at = [None]
    assert take_wakeups_function()([handle], ready_at, [0], [None]) == [handle]
    assert ready_at == [None] and handle.outstanding == 1


def test_the_manager_steps_on_wake_ups_and_counts_every_step_for_its_dump():
    with SubprocessEnvManager([CountingEnv] * 2, context="fork") as envs:
        envs.reset(seed=0)
        for step in range(1, 6):
            observations, *_ = envs.step(np.array([1, 1]))
            np.testing.assert_array_equal(observations[:, 0], [step, step])
        assert envs._unreported_steps == [5, 5]  # no payload yet: each wake-up counted
        assert all(isinstance(stamp, float) for stamp in envs._pool.ready_at)


def random_read_ahead(generator: random.Random) -> bytes | bytearray | None:
    choice = generator.randrange(7)
    if choice == 0:
        return None
    if choice == 1:
        return b""
    stamp = generator.choice([generator.random() * 1e4, -generator.random(), float("nan"), float("inf"), MAX_SECONDS])
    whole = wakeup(stamp, generator.randrange(1 << 40))
    if choice == 2:
        return whole[: generator.randrange(len(whole))]
    if choice == 3:
        return whole + b"x"
    if choice == 4:  # the same size, another tag or header
        position = generator.randrange(5)
        return whole[:position] + bytes([whole[position] ^ 1]) + whole[position + 1 :]
    if choice == 5:
        return bytearray(whole)
    return whole


@pytest.mark.parametrize("seed", range(20))
def test_both_implementations_take_and_leave_the_same_for_the_same_random_handles(seed):
    if timed_calls.extension() is None:
        pytest.skip(timed_calls.unavailable_reason or "the step path's C helper is not built")
    results = []
    for take_wakeups in (take_wakeups_in_python, timed_calls.extension().take_wakeups):
        generator = random.Random(seed)
        workers = generator.randrange(1, 9)
        handles = []
        for index in range(workers):
            handle = awaiting_handle(index, random_read_ahead(generator), generator.choice([1, 1, 1, 2, 0]))
            if generator.random() < 0.2:
                handle.awaiting = 0
            handles.append(handle)
        ready_at = [generator.choice([None, 0.5]) for _ in range(workers)]
        counted = [generator.randrange(5) for _ in range(workers)]
        cleared = [generator.choice([None, ["info"]]) for _ in range(workers)]
        left = take_wakeups(handles, ready_at, counted, cleared)
        results.append(([h.index for h in left], state_of(handles), struct.pack(f"{workers}d", *[
            float("-1") if stamp is None else stamp for stamp in ready_at]), counted, cleared))
    assert results[0] == results[1]
