"""Specification: a program with vector envs of both kinds (envs in the trainer, envs in
workers) has each kind's steps in blocks of their own, so no block mixes the trainer's env calls
with the workers' merged ones, and ``vector.step`` keeps one layout for the analysis.

A real program (programs/train_and_eval.py) as a real subprocess, under ``python`` and under
``rlprof run``.
"""

from __future__ import annotations

import numpy as np
import pytest

from tests.envmanager.instrumentation.test_environments_in_place import (
    PROGRAMS,
    counts,
    run_plain,
    run_rlprof,
    same_results,
)

PROGRAM = PROGRAMS / "train_and_eval.py"
TRAIN_ENVS, EVAL_ENVS, STEPS = 3, 2, 120


def node(tree: dict, path: str) -> dict:
    for name in path.split("/"):
        (tree,) = [child for child in tree["children"] if child["name"] == name]
    return tree


def evaluation_steps(saved) -> int:
    return int(np.load(saved)["evaluation_steps"])


def run_both(tmp_path, *arguments: str) -> tuple[dict, str]:
    run_plain(tmp_path, PROGRAM, "plain.npz", "--steps", str(STEPS), *arguments)
    tree, stderr = run_rlprof(tmp_path, PROGRAM, "timed.npz", "--steps", str(STEPS), *arguments)
    assert same_results(tmp_path / "plain.npz", tmp_path / "timed.npz")
    return tree, stderr


def test_sync_evaluation_envs_built_after_async_training_envs_are_timed_apart(tmp_path):
    tree, stderr = run_both(tmp_path, "--train", "async", "--eval", "sync")
    evaluated = evaluation_steps(tmp_path / "timed.npz")
    assert node(tree, "vector.step")["count"] == STEPS
    assert node(tree, "vector.step/env.step")["is_parallel"]
    assert counts(node(tree, "vector.step"), "env.step") == sum(
        counts(worker, "env.step") for worker in tree["workers"])
    assert node(tree, "SyncVectorEnv.step")["count"] == evaluated
    # Each env's call in a step: a step, or a reset after its episode ended (next-step autoreset).
    calls = [node(tree, f"SyncVectorEnv.step/{name}") for name in ("env.step", "env.reset")]
    assert sum(call["count"] for call in calls) == EVAL_ENVS * evaluated
    assert not any(call.get("is_parallel") for call in calls)
    assert "SyncVectorEnv (2 envs, in this process; timed as SyncVectorEnv.step, apart from the other " \
           "kind's vector.step)" in stderr


def test_async_training_envs_built_after_sync_evaluation_envs_are_timed_apart(tmp_path):
    tree, _ = run_both(tmp_path, "--train", "async", "--eval", "sync", "--eval-first")
    evaluated = evaluation_steps(tmp_path / "timed.npz")
    assert node(tree, "vector.step")["count"] == evaluated
    assert not node(tree, "vector.step/env.step").get("is_parallel")
    assert node(tree, "AsyncVectorEnv.step")["count"] == STEPS
    assert {child["name"] for child in node(tree, "AsyncVectorEnv.step")["children"]} >= {
        "vector.send_actions", "vector.wait_for_workers", "vector.receive_results"}
    merged = counts(node(tree, "AsyncVectorEnv.step"), "env.step")
    assert merged == sum(counts(worker, "env.step") for worker in tree["workers"]) > 0
    assert {worker["manager"] for worker in tree["workers"]} == {"AsyncVectorEnv"}


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_vector_envs_of_one_kind_share_vector_step(tmp_path, kind):
    tree, stderr = run_both(tmp_path, "--train", kind, "--eval", kind)
    evaluated = evaluation_steps(tmp_path / "timed.npz")
    assert node(tree, "vector.step")["count"] == STEPS + evaluated
    assert "apart from the other" not in stderr
