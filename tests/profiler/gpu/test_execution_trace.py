"""Specification of operators' outputs from PyTorch's execution trace (profiler.gpu.execution_trace),
with real torch on CPU: each operator block's output shapes and the bytes of the tensors its calls
took and returned, for profile_analyze's out_shapes and bandwidth."""

from __future__ import annotations

import json
import multiprocessing
import re
from collections.abc import Iterator

import pytest
from tree_paths import operators_by_path

import profiler
from profiler import Profiler, hierarchical_timer, load_timing_tree
from profiler.cli.commands import main
from profiler.gpu import execution_trace, torch_ops

torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs these")

BATCH, IN_FEATURES, OUT_FEATURES = 64, 32, 16
FLOAT32 = 4


@pytest.fixture
def recording() -> Iterator[torch_ops.OperatorRecording]:
    recording = torch_ops.start_operators(record_outputs=True)
    yield recording
    torch_ops.stop_operators()


@pytest.fixture
def linear():
    torch.manual_seed(0)
    return torch.nn.Linear(IN_FEATURES, OUT_FEATURES), torch.randn(BATCH, IN_FEATURES)


def test_each_operator_block_counts_its_calls_by_output_shapes(recording, linear):
    layer, batch = linear
    with hierarchical_timer("policy.forward"):
        layer(batch)
        layer(batch[:8])
    operators = operators_by_path(profiler.get_timer_tree())
    assert operators[("policy.forward", "aten::linear")]["output_shapes"] == {"[[64, 16]]": 1, "[[8, 16]]": 1}
    assert operators[("policy.forward", "aten::linear", "aten::addmm")]["output_shapes"] == {
        "[[64, 16]]": 1, "[[8, 16]]": 1}


def test_tensor_bytes_are_the_sizes_of_the_inputs_and_outputs_summed_over_calls(recording, linear):
    layer, batch = linear
    with hierarchical_timer("policy.forward"):
        layer(batch)
    weights = (OUT_FEATURES * IN_FEATURES + OUT_FEATURES) * FLOAT32
    expected = BATCH * IN_FEATURES * FLOAT32 + weights + BATCH * OUT_FEATURES * FLOAT32
    assert operators_by_path(profiler.get_timer_tree())[("policy.forward", "aten::linear")]["tensor_bytes"] == expected


def test_a_list_of_tensors_counts_every_tensor_in_it(recording):
    halves = torch.zeros(3, 4, dtype=torch.float64), torch.zeros(5, 4, dtype=torch.float64)
    with hierarchical_timer("stack"):
        torch.cat(halves)
    cat = operators_by_path(profiler.get_timer_tree())[("stack", "aten::cat")]
    assert cat["output_shapes"] == {"[[8, 4]]": 1}
    assert cat["tensor_bytes"] == (3 * 4 + 5 * 4 + 8 * 4) * 8


def test_outputs_are_kept_across_reads_of_the_tree(recording, linear):
    layer, batch = linear
    with hierarchical_timer("policy.forward"):
        layer(batch)
        profiler.get_timer_tree()  # a fold: PyTorch's profiler and the trace restart
        layer(batch)
    linear_entry = operators_by_path(profiler.get_timer_tree())[("policy.forward", "aten::linear")]
    assert linear_entry["output_shapes"] == {"[[64, 16]]": 2}


def test_without_record_outputs_no_output_shapes_are_kept(linear):
    torch_ops.start_operators()
    try:
        layer, batch = linear
        with hierarchical_timer("policy.forward"):
            layer(batch)
        tree = profiler.get_timer_tree()
    finally:
        torch_ops.stop_operators()
    assert tree["operators"]["record_outputs"] is False
    assert "output_shapes" not in operators_by_path(tree)[("policy.forward", "aten::linear")]


def _add_in_a_block():
    # No matrix multiplication: OpenMP's threads, started by the parent's, hang a forked child's.
    for _ in range(5):
        with hierarchical_timer("policy.forward"):
            torch.ones(4).add(1)


def test_a_process_forked_while_tracing_leaves_its_calls_out_of_its_parents_trace(recording, linear):
    layer, batch = linear
    with hierarchical_timer("policy.forward"):
        layer(batch)
    child = multiprocessing.get_context("fork").Process(target=_add_in_a_block)
    child.start()
    child.join(timeout=60)
    tree = profiler.get_timer_tree()
    assert child.exitcode == 0
    assert operators_by_path(tree)[("policy.forward", "aten::linear")]["output_shapes"] == {"[[64, 16]]": 1}
    assert ("policy.forward", "aten::add") not in operators_by_path(tree)
    assert "outputs_lost" not in tree["operators"] and "outputs_unmatched" not in tree["operators"]


def test_tensor_bytes_count_the_tensors_of_an_execution_trace_node():
    arguments = {"types": ["Tensor(float)", "Int", "GenericList[Tensor(double),Tensor(double)]"],
                 "values": [[1, 2, 0, 6, 4, "cpu"], 3, [[3, 4, 0, 2, 8, "cpu"], [5, 6, 0, 1, 8, "cpu"]]]}
    assert execution_trace.tensor_bytes(arguments) == 6 * 4 + 2 * 8 + 1 * 8


# --- the sessions, and what rlprof analyze shows --------------------------------------------------


def test_a_session_with_record_outputs_writes_output_shapes_to_its_files(tmp_path, linear):
    layer, batch = linear
    with Profiler(path=tmp_path, format="timers.json", name="step", record_outputs=True) as session:
        layer(batch)
    tree = load_timing_tree(session.paths["timers.json"])
    assert tree["operators"]["record_outputs"] is True
    assert operators_by_path(tree)[("step", "aten::linear")]["output_shapes"] == {"[[64, 16]]": 1}
    assert not torch_ops.is_recording_operators()


def test_set_config_record_shapes_with_profile_all_records_output_shapes(linear):
    layer, batch = linear
    profiler.set_config(profile_all=True, record_shapes=True, formats="timers")
    profiler.set_state("run")
    with hierarchical_timer("forward"):
        layer(batch)
    profiler.set_state("stop")
    assert operators_by_path(profiler.get_timer_tree())[("forward", "aten::linear")]["output_shapes"] == {
        "[[64, 16]]": 1}


def test_analyze_shows_bandwidth_and_out_shapes_of_a_run_that_recorded_outputs(tmp_path, linear, capsys,
                                                                                monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    layer, batch = linear
    with Profiler(path=tmp_path, format="timers.json", name="step", record_outputs=True) as session:
        layer(batch)
    assert main(["analyze", str(session.paths["timers.json"]), "--type", "aten::linear"]) == 0
    out = capsys.readouterr().out
    header = next(line for line in out.splitlines() if {"self", "operator"} <= set(line.split()))
    assert header.split()[-4:] == ["bandwidth", "operator", "in_shapes", "out_shapes"]
    assert re.search(r"[\d.]+ [kMG]?B/s +aten::linear in step +\[\[64, 32\], \[16, 32\], \[16\]\] +\[\[64, 16\]\]", out)
    assert "bandwidth: the sizes of the tensors each operator took and returned" in out
    assert "out_shapes: not recorded" not in out


def test_analyze_json_gives_bandwidth_as_tensor_bytes_per_second_of_the_operator_s_time(tmp_path, linear, capsys):
    layer, batch = linear
    with Profiler(path=tmp_path, format="timers.json", name="step", record_outputs=True) as session:
        layer(batch)
    assert main(["analyze", str(session.paths["timers.json"]), "--type", "aten::linear", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)["operators"]
    row = document["rows"][0]
    assert document["not_recorded"] == ([] if torch.cuda.is_available() else ["device_self_time"])
    assert row["output_shapes"] == {"[[64, 16]]": 1}
    assert row["bandwidth"] == pytest.approx(row["tensor_bytes"] / row["total"])
