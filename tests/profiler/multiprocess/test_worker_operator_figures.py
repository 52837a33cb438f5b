"""Specification of PyTorch operator figures from env workers: a worker's operators' FLOPs,
memory, device time, shapes, dtypes and call stacks travel in its payloads (``operators``,
payload field since version 6, see profiler.gpu.operator_figures), and the trainer's dump lists them under
the path the operators have in its own tree, beside the trainer's operators."""

from __future__ import annotations

import pytest
from hand_payloads import tree_payload

from profiler import TimerMerger, get_timer_tree, hierarchical_timer
from profiler.gpu import torch_ops
from profiler.multiprocess.payload import PayloadError, snapshot_and_flush, validate_payload
from profiler.timing import timers

ADDMM = (("env.model", "aten::addmm"), 128, 64, 0.0, 0.0, (("[[4], [1, 4], [4, 4], [], []]", 2),),
         (("[float32, float32, float32, Scalar, Scalar]", 2),), (), (0, 0, 0))
"""A worker's aten::addmm, run twice under its block env.model, as its payload carries it."""

OPERATORS = ("no device time per operator: torch.cuda.is_available() is False", False, (ADDMM,))


def worker_tree():
    return ("env.model", 0.1, 2, 0, None, (("aten::addmm", 0.05, 2, 0, None, (), (None, "operator", ())),))


def test_a_payload_carries_the_figures_of_the_operators_folded_since_the_last_flush():
    torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs this")
    layer, batch = torch.nn.Linear(4, 4), torch.zeros(1, 4)
    torch_ops.start_operators()
    try:
        with hierarchical_timer("env.model"):
            layer(batch)
        unavailable, with_stack, entries = snapshot_and_flush()[15]
    finally:
        torch_ops.stop_operators()
    addmm = next(entry for entry in entries if entry[0] == ("env.model", "aten::linear", "aten::addmm"))
    assert (addmm[1], addmm[5], with_stack) == (2 * 4 * 4, (("[[4], [1, 4], [4, 4], [], []]", 1),), False)
    assert unavailable is None or "no device time" in unavailable


def test_operator_figures_travel_once():
    torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs this")
    torch_ops.start_operators()
    try:
        with hierarchical_timer("env.model"):
            torch.ones(4).exp()
        snapshot_and_flush()
        later = snapshot_and_flush()[15]
    finally:
        torch_ops.stop_operators()
    assert later is None


def test_a_process_recording_no_operators_sends_none():
    with hierarchical_timer("env.step"):
        pass
    assert snapshot_and_flush()[15] is None


def test_the_trainer_lists_a_worker_s_operators_under_the_block_it_merged_them_in():
    merger = TimerMerger()
    try:
        with hierarchical_timer("rollout"):
            merger.merge_payload(3, tree_payload(worker_tree(), operators=OPERATORS))
            merger.merge_payload(4, tree_payload(worker_tree(), operators=OPERATORS))
        section = get_timer_tree()["operators"]
    finally:
        merger.detach()
    (addmm,) = section["operators"]
    assert addmm["path"] == ["rollout", "env.model", "aten::addmm"]
    assert (addmm["flops"], addmm["cpu_memory_bytes"]) == (256, 128)
    assert addmm["input_shapes"] == {"[[4], [1, 4], [4, 4], [], []]": 4}
    assert addmm["input_dtypes"] == {"[float32, float32, float32, Scalar, Scalar]": 4}
    assert section["device_time"] is False and "is_available() is False" in section["device_time_unavailable"]


def test_a_worker_s_operators_and_the_trainer_s_are_one_section():
    torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs this")
    merger = TimerMerger()
    torch_ops.start_operators()
    try:
        with hierarchical_timer("rollout"):
            torch.ones(4).exp()
            merger.merge_payload(3, tree_payload(worker_tree(), operators=OPERATORS))
        paths = [entry["path"] for entry in get_timer_tree()["operators"]["operators"]]
    finally:
        torch_ops.stop_operators()
        merger.detach()
    assert ["rollout", "aten::exp"] in paths and ["rollout", "env.model", "aten::addmm"] in paths


def test_a_reset_forgets_the_workers_operator_figures():
    merger = TimerMerger()
    try:
        merger.merge_payload(3, tree_payload(worker_tree(), operators=OPERATORS))
        timers.reset_timers()
        tree = get_timer_tree()
    finally:
        merger.detach()
    assert "operators" not in tree


@pytest.mark.parametrize("operators, message", [
    ("not a tuple", r"operators: must be \(device_time_unavailable"),
    ((None, "no", ()), "operators.with_stack"),
    ((None, False, ((("a",), -1) + ADDMM[2:],)), r"operators\[0\].flops"),
    ((None, False, (((), *ADDMM[1:]),)), r"operators\[0\].path"),
    ((None, False, ((ADDMM[:3] + (float("nan"),) + ADDMM[4:]),)), r"operators\[0\].device_self"),
    ((None, False, ((ADDMM[:5] + ((("shapes", -2),),) + ADDMM[6:]),)), r"operators\[0\].shapes"),
    ((None, False, (ADDMM[:8] + ((0, 0),),)), r"operators\[0\].others"),
])
def test_a_malformed_operators_field_is_refused_naming_it(operators, message):
    with pytest.raises(PayloadError, match=message):
        validate_payload(tree_payload(worker_tree(), operators=operators))
