"""The Ray example profiles env workers in Ray actors and a timed learner actor in one tree."""

from __future__ import annotations

import json
import socket

from example_runner import run_example


def test_the_ray_example_times_env_actors_and_a_learner_actor_in_one_tree(ray_cluster, tmp_path):
    # The example joins the session's Ray, as a second driver, rather than starting its own.
    address = ray_cluster.get_runtime_context().gcs_address
    completed = run_example("ray_rollouts.py", str(tmp_path), environment={"RAY_ADDRESS": address})
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
