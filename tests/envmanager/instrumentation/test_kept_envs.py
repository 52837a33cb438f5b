"""Specification: an env the program keeps from a ``SyncVectorEnv`` or ``DummyVecEnv`` it drops is
still timed under ``rlprof run``, with the same results as under plain python, on both step cores.

``programs/kept_envs.py`` keeps the first env of each vector env, deletes the vector env unclosed,
then resets the env it kept once and steps it ten times, outside any block of its own: those calls
are the trainer's top-level ``env.reset`` and ``env.step``.
"""

from __future__ import annotations

import json
from pathlib import Path

from plain_and_timed import run_plain_and_timed
from step_cores import step_core  # noqa: F401  (both step timers: the C helper, the Python reference)

PROGRAM = Path(__file__).parent / "programs" / "kept_envs.py"
KEPT_ENVS, KEPT_STEPS = 2, 10


def test_an_env_kept_from_a_dropped_vector_env_is_still_timed(tmp_path):
    plain, timed = run_plain_and_timed(PROGRAM, tmp_path)
    assert timed == plain
    tree = json.loads((tmp_path / "out" / f"{PROGRAM.stem}_timers.json").read_text())
    top_level = {child["name"]: child["count"] for child in tree["children"]}
    assert top_level.get("env.reset") == KEPT_ENVS
    assert top_level.get("env.step") == KEPT_ENVS * KEPT_STEPS
