"""Specification of copies of the envs ``rlprof run`` timed: the program's own, as under plain python.

``programs/env_copies.py`` copies (``copy.copy``, ``copy.deepcopy``, pickle, cloudpickle) real
Gymnasium envs in the trainer and in AsyncVectorEnv worker processes (fork and spawn), steps the
copies, copies and pickles the envs' ``step``, ``reset`` and ``close`` on their own (bound methods of
a copy under plain python), reads the envs' method names and signatures, and builds spawn-pickled vector envs from
``partial(gymnasium.make, ...)`` and from a closure holding a made env; it runs as a real
subprocess, once with ``python`` and once under ``rlprof run``, on both step cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from plain_and_timed import run_plain_and_timed
from step_cores import step_core  # noqa: F401  (both step timers: the C helper, the Python reference)

PROGRAM = Path(__file__).parent / "programs" / "env_copies.py"
STEPS = 12
WAYS = 4 + 3  # copy, deepcopy, pickle, cloudpickle of the env, then deepcopy, pickle, cloudpickle of
# its methods: one reset of the original env each


def counts(node: dict, name: str) -> int:
    own = node["count"] if node["name"] == name else 0
    return own + sum(counts(child, name) for child in node["children"])


@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_copies_pickles_and_signatures_are_those_of_plain_python(tmp_path, context):
    arguments = ("--context", context, "--steps", str(STEPS))
    plain, seen = run_plain_and_timed(PROGRAM, tmp_path, *arguments)
    assert seen == plain
    assert not seen["workers"][0]["deepcopy"]["original_moved"]  # a deep copy steps itself
    for place in (seen["trainer"], seen["workers"][0]):  # so does a deep copy of its step alone
        assert not place["methods"]["deepcopy"]["original_moved"]
        assert place["methods"]["deepcopy"]["types"] == ["method"] * 3
    tree = json.loads((tmp_path / "out" / "env_copies_timers.json").read_text())
    # The copies' steps and resets are not the workers': each worker counts its vector env's reset
    # and steps (no episode ends in 12 balanced steps) and, in the first, the report's resets.
    workers = tree["workers"]
    assert sorted(worker["manager_id"] for worker in workers) == [1, 1, 2, 2, 3, 3]
    for worker in workers:
        assert counts(worker, "env.step") == STEPS
        assert counts(worker, "env.reset") == 1 + (WAYS if worker["manager_id"] == 1 else 0)
        assert worker["channel"] == "complete"
