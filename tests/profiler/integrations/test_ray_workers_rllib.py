"""Specification of ``rlprof run`` on an RLlib PPO run without edits (new API stack): each env
runner, a Ray actor, has its own tree with its env steps, and the learner's actor its update.

RLlib is not in the test extras: ``ray[rllib]`` 2.60 pins ``gymnasium==1.2.2`` and rlprof needs
``gymnasium>=1.4``, so pip cannot install both (docs/ray.md says how to run this test anyway, and
``benchmarks/rllib_run.py`` runs the same program). Without RLlib's dependencies these tests skip.
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch", reason="RLlib's PPO needs torch")
pytest.importorskip("ray.rllib.algorithms.ppo", reason="RLlib's dependencies are not installed (see docs/ray.md)",
                    exc_type=ImportError)  # RLlib raises ImportError, not ModuleNotFoundError, when they lack

from profiler import load_timing_tree  # noqa: E402
from ray_worker_runs import PROGRAMS, actors, child, ray_workers, run_python, walk  # noqa: E402

TRAIN_BATCH = 256  # the program's train_batch_size_per_learner


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder = tmp_path_factory.mktemp("rllib_ppo")
    profiled = run_python(folder, "-m", "profiler", "run", "--summaries-dir", "out", str(PROGRAMS / "rllib_ppo.py"))
    assert profiled.returncode == 0, profiled.stderr
    return {"profiled": profiled, "tree": load_timing_tree(folder / "out" / "rllib_ppo_timers.json")}


def env_steps(entry: dict) -> int:
    return sum(node["count"] for node in walk(entry) if node["name"] == "env.step")


def test_each_env_runner_has_its_own_tree_and_their_env_steps_add_up_to_the_steps_sampled(run):
    runners = actors(run["tree"], "SingleAgentEnvRunner")
    assert len(runners) == 2
    assert all(env_steps(runner) > 0 for runner in runners)
    assert sum(env_steps(runner) for runner in runners) == TRAIN_BATCH
    assert f"sampled {TRAIN_BATCH}" in run["profiled"].stdout


def test_the_env_runners_policy_forward_passes_are_blocks_beside_their_env_steps(run):
    for runner in actors(run["tree"], "SingleAgentEnvRunner"):
        sample = child(runner, "SingleAgentEnvRunner.apply")
        assert child(sample, "vector.step")["count"] > 0
        assert any(node["name"].endswith("forward (no grad)") for node in sample["children"])


def test_the_learners_actor_has_the_update_backward_and_optimizer_step(run):
    [learner] = [entry for entry in ray_workers(run["tree"]) if entry["ray"].get("class") == "_WrappedExecutable"]
    names = [node["name"] for node in walk(learner)]
    assert "backward" in names and "Adam.step" in names
    backward = next(node for node in walk(learner) if node["name"] == "backward")
    step = next(node for node in walk(learner) if node["name"] == "Adam.step")
    assert backward["count"] == step["count"] > 0
    assert learner["channel"] == "complete"


def test_env_runners_ended_by_rllib_ship_their_last_timers_first(run):
    assert [runner["channel"] for runner in actors(run["tree"], "SingleAgentEnvRunner")] == ["complete"] * 2
