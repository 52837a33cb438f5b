"""The Ray example profiles env workers in Ray actors and a timed learner actor in one tree."""

from __future__ import annotations

import json
import socket

import pytest
from example_runner import run_example

pytest.importorskip("ray", reason="Ray is not installed; pip install -e '.[ray]' runs this example")


def test_the_ray_example_times_env_actors_and_a_learner_actor_in_one_tree(tmp_path):
    completed = run_example("ray_rollouts.py", str(tmp_path))
    assert "timers written to" in completed.stdout
    tree = json.loads((tmp_path / "ray_rollouts_timers.json").read_text())
    step = next(node for node in tree["children"] if node["name"] == "env_manager.step")
    assert step["count"] == 200
    assert any(node["name"] == "env.step" and node["is_parallel"] for node in step["children"])
    train = next(node for node in tree["children"] if node["name"] == "train")
    assert [node["name"] for node in train["children"]] == ["Learner.update"]
    workers = {(worker["manager"], worker["worker_id"]): worker for worker in tree["workers"]}
    assert set(workers) == {("envmanager", 0), ("envmanager", 1), ("ray", 0)}
    assert all(worker["host"] == socket.gethostname() for worker in workers.values())
    assert workers[("ray", 0)]["ray"]["class"] == "Learner"
