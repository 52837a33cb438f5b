"""Specification of ``rlprof analyze``'s operator section (profile_analyze's columns for PyTorch
operators): on a hand-made dump for exact figures, and on a real torch run written by a session."""

from __future__ import annotations

import json
import re

import pytest

from profiler import Profiler, hierarchical_timer, load_timing_tree
from profiler.analysis.operator_report import operator_report, operators_text
from profiler.cli.commands import main


def operator(name, total, self_time, count, children=()):
    return {"name": name, "total": total, "self": self_time, "count": count,
            "object_type": "operator", "children": list(children)}


@pytest.fixture
def tree(tmp_path):
    """``forward`` ran aten::linear (2 s, of which aten::addmm 1.5 s) and aten::relu (0.5 s);
    ``backward`` ran aten::addmm (1 s)."""
    document = {
        "name": "root", "total": 10.0, "count": 1,
        "children": [
            {"name": "forward", "total": 4.0, "count": 2, "children": [
                operator("aten::linear", 2.0, 0.5, 2, [operator("aten::addmm", 1.5, 1.5, 2)]),
                operator("aten::relu", 0.5, 0.5, 2),
            ]},
            {"name": "backward", "total": 3.0, "count": 2, "children": [operator("aten::addmm", 1.0, 1.0, 1)]},
        ],
        "operators": {"source": "torch.profiler", "device_time": False, "operators": [
            {"path": ["forward", "aten::linear", "aten::addmm"], "flops": 3_000_000, "cpu_memory_bytes": 4096,
             "input_shapes": {"[[16], [64, 32], [32, 16], [], []]": 2}},
            {"path": ["forward", "aten::relu"], "flops": 0, "cpu_memory_bytes": 8192},
            {"path": ["backward", "aten::addmm"], "flops": 1_000_000, "cpu_memory_bytes": 0},
        ]},
    }
    path = tmp_path / "run_timers.json"
    path.write_text(json.dumps(document))
    return load_timing_tree(path), path


def test_each_operator_is_a_row_by_self_time_with_the_block_it_ran_in(tree):
    rows = operator_report(tree[0]).rows
    assert [(row.name, row.block, row.self_time) for row in rows] == [
        ("aten::addmm", "forward", 1.5), ("aten::addmm", "backward", 1.0),
        ("aten::linear", "forward", 0.5), ("aten::relu", "forward", 0.5)]


def test_flops_per_second_are_the_flops_over_the_operators_time(tree):
    addmm = operator_report(tree[0]).rows[0]
    assert (addmm.flops, addmm.flops_per_second) == (3_000_000, 2_000_000)


def test_aggregate_by_type_adds_up_each_operator_type(tree):
    rows = {row.name: row for row in operator_report(tree[0], by_type=True).rows}
    addmm = rows["aten::addmm"]
    assert (addmm.self_time, addmm.count, addmm.flops, addmm.places) == (2.5, 3, 4_000_000, 2)


def test_type_keeps_operator_types_by_full_or_short_name(tree):
    assert {row.name for row in operator_report(tree[0], types=("addmm",)).rows} == {"aten::addmm"}
    assert {row.name for row in operator_report(tree[0], types=("aten::relu",)).rows} == {"aten::relu"}


def test_the_text_has_profile_analyzes_columns_and_says_what_torch_cannot_give(tree):
    text = operators_text(operator_report(tree[0]), 120)
    header = text.splitlines()[1].split()
    assert header == ["self", "cum", "total", "count", "FLOPs", "FLOPS", "memory", "operator", "in_shapes"]
    assert re.search(r"1\.50 s +42\.9% +1\.50 s +2 +3M +2M +4 KiB  aten::addmm in forward  \[\[16\]", text)
    assert "device self time, bandwidth and out_shapes: not recorded" in text


def test_a_run_without_operators_has_no_operator_section(plain_tree):
    assert operator_report(plain_tree) is None


def test_rlprof_analyze_prints_the_operators_aggregated_by_type(tree, capsys):
    assert main(["analyze", str(tree[1]), "--aggregate-by", "type", "--type", "addmm"]) == 0
    out = capsys.readouterr().out
    assert "Operators (PyTorch): 1 of 1 operator types (of 3)" in out


def test_analyze_json_holds_the_operator_rows(tree, capsys):
    assert main(["analyze", str(tree[1]), "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)["operators"]
    assert document["not_recorded"] == ["device_self_time", "bandwidth", "out_shapes"]
    assert document["rows"][0]["flops_per_second"] == 2_000_000


def test_a_real_torch_run_analyzes_with_flops_shapes_and_memory(tmp_path, capsys):
    torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs this")
    layer, batch = torch.nn.Linear(32, 16), torch.randn(64, 32)
    with Profiler(path=tmp_path, format="timers.json", record_operators=True) as session:
        with hierarchical_timer("policy.forward"):
            layer(batch)
    assert main(["analyze", str(session.paths["timers.json"]), "--type", "addmm", "--format", "json"]) == 0
    (addmm,) = json.loads(capsys.readouterr().out)["operators"]["rows"]
    assert (addmm["block"], addmm["flops"], addmm["cpu_memory_bytes"]) == ("policy.forward", 2 * 64 * 32 * 16, 64 * 16 * 4)
    assert addmm["input_shapes"] == {"[[16], [64, 32], [32, 16], [], []]": 1}
