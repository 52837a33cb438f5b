"""Env workers started while the trainer records PyTorch's operators record their own: each
worker's operators are folded under the worker's blocks and reach the trainer's tree in its
payloads, their figures (FLOPs, shapes, dtypes) with them, so that ``rlprof analyze`` shows them
as it shows the trainer's (real workers, real torch on CPU)."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest

import profiler
from envmanager import SubprocessEnvManager
from profiler import hierarchical_timer
from profiler.analysis.operator_report import operator_report
from profiler.gpu import torch_ops

torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs these")


class TorchEnv(gymnasium.Env):
    """An env whose step runs a small linear layer inside a block of its own."""

    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), dtype=np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self) -> None:
        self.layer = torch.nn.Linear(4, 4)

    def reset(self, *, seed=None, options=None):
        return np.zeros(4, dtype=np.float32), {}

    def step(self, action):
        with hierarchical_timer("env.model"):
            with torch.no_grad():
                self.layer(torch.zeros(1, 4))
        return np.zeros(4, dtype=np.float32), 0.0, False, False, {}



@pytest.mark.parametrize("context", ["fork", "spawn"])
def test_a_worker_started_while_operators_are_recorded_ships_its_operators(context):
    torch_ops.start_operators()
    try:
        with SubprocessEnvManager([TorchEnv], context=context) as envs:
            envs.reset(seed=0)
            for _ in range(3):
                envs.step(np.zeros(1, dtype=np.int64))
        tree = profiler.get_timer_tree()
    finally:
        torch_ops.stop_operators()
    linear = [node for node in _walk(tree) if node["name"] == "aten::linear" and node.get("object_type") == "operator"]
    assert linear and sum(node["count"] for node in linear) == 3


def test_the_figures_of_a_worker_s_operators_reach_the_trainer_s_dump_and_analysis():
    torch_ops.start_operators()
    try:
        with SubprocessEnvManager([TorchEnv, TorchEnv], context="spawn") as envs:
            envs.reset(seed=0)
            for _ in range(3):
                with hierarchical_timer("rollout"):
                    envs.step(np.zeros(2, dtype=np.int64))
        tree = profiler.get_timer_tree()
    finally:
        torch_ops.stop_operators()
    (addmm,) = [entry for entry in tree["operators"]["operators"]
                if entry["path"][0] == "rollout" and entry["path"][-1] == "aten::addmm"]
    assert addmm["flops"] == 2 * 3 * (2 * 1 * 4 * 4)  # two workers, three steps, a 1x4 by 4x4 product
    assert addmm["input_shapes"] == {"[[4], [1, 4], [4, 4], [], []]": 6}
    (row,) = [row for row in operator_report(tree, types=("addmm",)).rows if row.block.startswith("rollout/")]
    assert row.block.endswith("env.model") and row.flops == addmm["flops"]


def test_a_worker_started_without_operators_records_none():
    with SubprocessEnvManager([TorchEnv], context="spawn") as envs:
        envs.reset(seed=0)
        envs.step(np.zeros(1, dtype=np.int64))
    assert not [node for node in _walk(profiler.get_timer_tree()) if node["name"] == "aten::linear"]


def _walk(node):
    yield node
    for child in node.get("children", []):
        yield from _walk(child)
