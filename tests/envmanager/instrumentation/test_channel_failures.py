"""Specification: when rlprof's channel fails midway, the training run goes on, with the same
results, and the dump says what was lost.

The program (programs/channel_cut.py) cuts the channel from inside its workers after their first
shipment, with ``SIGPIPE`` at its default action (a write to the cut channel must not kill them),
under each start method. A worker that never reaches the channel is specified in
test_environments_in_place.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

PROGRAM = Path(__file__).parent / "programs" / "channel_cut.py"
STEPS = 101  # the program's vector steps
FIRST_SHIPMENT = 51  # vector steps before the first shipment, at the earliest


def counts(node: dict, name: str) -> int:
    own = node["count"] if node["name"] == name else 0
    return own + sum(counts(child, name) for child in node["children"])


@pytest.mark.parametrize("context", ["fork", "spawn", "forkserver"])
def test_a_channel_cut_midway_leaves_training_alone_and_the_dump_says_what_was_lost(tmp_path, context):
    plain = subprocess.run([sys.executable, str(PROGRAM), "plain.npy", "--context", context],
                           cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--summaries-dir", "out", str(PROGRAM), "cut.npy",
         "--context", context, "--cut"],
        cwd=tmp_path, capture_output=True, text=True, timeout=180,
    )
    assert result.returncode == 0, result.stderr
    assert np.array_equal(np.load(tmp_path / "plain.npy"), np.load(tmp_path / "cut.npy"))
    tree = json.loads((tmp_path / "out" / "channel_cut_timers.json").read_text())
    assert counts(tree, "vector.step") == STEPS  # every step of the trainer timed
    for worker in tree["workers"]:
        arrived = counts(worker, "env.step") + counts(worker, "env.reset")
        # What it shipped before the cut is kept, and nothing after it is made up.
        assert 1 + FIRST_SHIPMENT <= arrived < 1 + STEPS
        assert worker["env_time"]["calls"] == arrived
        assert worker["channel"] == (
            "its channel ended before its last timers: the dump lacks what it timed since its last "
            f"shipment ({arrived} env calls arrived; the trainer took {STEPS} vector steps)")
        assert f"rlprof: AsyncVectorEnv worker {worker['worker_id']}: {worker['channel']}" in result.stderr
