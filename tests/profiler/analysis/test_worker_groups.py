"""Specification of which workers the per-worker analysis compares when a run had several vector envs."""

from __future__ import annotations

import copy

import pytest
from run_files import write_vector_run

from profiler import load_timing_tree
from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.worker_groups import compared_workers, other_managers


@pytest.fixture
def train_and_eval_tree(tmp_path, fake_clock):
    """The vector run's four workers as manager "train", plus two "eval" workers, one very slow."""
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock))
    for worker in tree["workers"]:
        worker["manager"], worker["manager_id"] = "train", 1
    evaluation = copy.deepcopy(tree["workers"][:2])
    for worker in evaluation:
        worker["manager"], worker["manager_id"] = "eval", 2
        worker["children"][0]["count"] = 2  # fewer steps than a training worker
    evaluation[1]["children"][0]["total"] *= 50
    tree["workers"].extend(evaluation)
    return tree


def test_the_workers_of_the_manager_with_the_most_env_steps_are_compared(train_and_eval_tree):
    assert [worker["manager"] for worker in compared_workers(train_and_eval_tree)] == ["train"] * 4
    assert [(other.name, other.workers) for other in other_managers(train_and_eval_tree)] == [("eval", 2)]


def test_a_slow_worker_of_another_manager_is_never_named_the_straggler(train_and_eval_tree):
    text = render_analysis(analyze_run(train_and_eval_tree))
    assert "(not compared with these: the workers of eval (2 workers), another vector env)" in text
    assert "[straggler] worker 3 likely holds up the vector step" in text  # train's, not eval's
    assert "workers: 4;" in text


def test_workers_without_a_manager_are_one_group(tmp_path, fake_clock):
    tree = load_timing_tree(write_vector_run(tmp_path / "run.json", fake_clock))
    assert compared_workers(tree) == tree["workers"]
    assert other_managers(tree) == []
