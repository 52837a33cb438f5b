"""Specification: an env ``rlprof run`` times is freed when the program closes and drops it, as under
plain python, not at the next garbage collection; a ``step`` the program took from it keeps it
alive and steps it.

``programs/env_lifetimes.py`` turns the garbage collector off and notes which of its envs were freed
(their ``__del__``) after closing and deleting one made by ``gymnasium.make``, after deleting another
whose ``step`` it kept (then after stepping through that step and deleting it), after closing and
deleting a ``SyncVectorEnv``, and after closing an ``AsyncVectorEnv`` (its workers' envs); it runs as
a real subprocess, once with ``python`` and once under ``rlprof run``, on both step cores.

An env dropped without being closed, on its own or in a ``SyncVectorEnv`` dropped unclosed, is the
one difference left (docs/environments-in-place.md): under ``rlprof run`` it is freed at the next
garbage collection.
"""

from __future__ import annotations

from pathlib import Path

from plain_and_timed import run_plain_and_timed
from step_cores import step_core  # noqa: F401  (both step timers: the C helper, the Python reference)

PROGRAM = Path(__file__).parent / "programs" / "env_lifetimes.py"
NOT_CLOSED = ("not closed: freed at del", "not closed: freed by a collection")


def test_envs_are_freed_when_the_program_drops_them_as_under_plain_python(tmp_path):
    plain_seen, seen = run_plain_and_timed(PROGRAM, tmp_path)
    every_one = ["sync, not closed 0", "sync, not closed 1", "made, not closed"]
    assert {key: seen[key] for key in NOT_CLOSED} == {NOT_CLOSED[0]: [], NOT_CLOSED[1]: every_one}
    assert {key: plain_seen[key] for key in NOT_CLOSED} == {NOT_CLOSED[0]: every_one, NOT_CLOSED[1]: every_one}
    for key in NOT_CLOSED:
        del seen[key], plain_seen[key]
    assert seen == plain_seen
    assert seen["made, step kept, env closed and deleted"] == ["made"]  # the step kept holds its env
    assert seen["the step kept, deleted"] == ["made", "made, step kept"]
    # Every env went, none at a collection: the AsyncVectorEnv's first is also made (and dropped) in
    # the trainer, for its spaces.
    assert seen["async, closed"] == ["async 0", "async 0", "async 1", "made", "made, step kept", "sync 0", "sync 1"]
