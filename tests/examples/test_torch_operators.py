"""The PyTorch operators example records each operator under the block that ran it."""

from __future__ import annotations

import pytest
from example_runner import run_example
from tree_paths import find

from profiler import load_timing_tree

pytest.importorskip("torch", reason="torch is not installed; pip install torch runs this example")


def test_the_operators_example_folds_addmm_under_the_forward_block_with_its_flops(tmp_path):
    run_example("torch_operators.py", str(tmp_path))
    tree = load_timing_tree(tmp_path / "torch_operators_timers.json")
    addmm = find(tree, "update", "policy.forward", "aten::linear", "aten::addmm")
    assert (addmm["count"], addmm["object_type"]) == (40, "operator")  # two layers, 20 steps
    flops = {tuple(entry["path"][-3:]): entry["flops"] for entry in tree["operators"]["operators"]}
    assert flops[("policy.forward", "aten::linear", "aten::addmm")] == 20 * 2 * 16 * (8 * 32 + 32 * 2)
