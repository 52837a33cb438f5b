"""The operator section's MegEngine columns where the run measured device time, the options
that order operators by what only they have, and what the output says a run cannot give."""

from __future__ import annotations

import json
import re

import pytest

from profiler import load_timing_tree
from profiler.analysis.operator_report import operator_report, operators_text
from profiler.cli.commands import main


def operator(name, total, self_time, count):
    return {"name": name, "total": total, "self": self_time, "count": count, "object_type": "operator",
            "children": []}


def write(tmp_path, operators_section, name="run_timers.json"):
    document = {
        "name": "root", "total": 10.0, "count": 1,
        "children": [{"name": "update", "total": 4.0, "count": 2, "children": [
            operator("aten::addmm", 1.5, 1.5, 2), operator("aten::relu", 0.5, 0.5, 2), operator("my::op", 0.2, 0.2, 1),
        ]}],
        "operators": operators_section,
    }
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


@pytest.fixture
def measured(tmp_path):
    """A run whose operators have device self time (as PyTorch's CUDA profiler gives it)."""
    return write(tmp_path, {"source": "torch.profiler", "device_time": True, "operators": [
        {"path": ["update", "aten::addmm"], "flops": 3_000_000, "device_self": 0.5},
        {"path": ["update", "aten::relu"], "flops": 0, "device_self": 1.0},
        {"path": ["update", "my::op"], "flops": 0},
    ]})


@pytest.fixture
def host_only(tmp_path):
    return write(tmp_path, {"source": "torch.profiler", "operators": [
        {"path": ["update", "aten::addmm"], "flops": 3_000_000},
        {"path": ["update", "aten::relu"], "flops": 1_000},
    ]}, "host_timers.json")


def test_device_self_time_is_a_column_where_it_was_measured(measured):
    text = operators_text(operator_report(load_timing_tree(measured)), 120)
    assert text.splitlines()[1].split()[:2] == ["device", "self"]
    assert re.search(r"500\.00 ms +1\.50 s .* aten::addmm in update", text)
    assert re.search(r" - +200\.00 ms .* my::op in update", text)  # not measured for this one


def test_flops_per_second_use_the_device_self_time_where_measured(measured):
    addmm = next(row for row in operator_report(load_timing_tree(measured)).rows if row.name == "aten::addmm")
    assert addmm.flops_per_second == 6_000_000


def test_with_device_time_only_bandwidth_and_out_shapes_are_said_missing(measured):
    report = operator_report(load_timing_tree(measured))
    assert report.not_recorded_columns == ("bandwidth", "out_shapes")
    assert "bandwidth and out_shapes: not recorded" in operators_text(report, 120)


def test_without_device_time_there_is_no_device_column_and_the_output_says_so(host_only):
    text = operators_text(operator_report(load_timing_tree(host_only)), 120)
    assert text.splitlines()[1].split()[0] == "self"
    assert "device self time, bandwidth and out_shapes: not recorded" in text


def test_order_by_device_orders_the_operators_by_device_self_time(measured, capsys):
    assert main(["analyze", str(measured), "--order-by", "device", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in document["operators"]["rows"]][:2] == ["aten::relu", "aten::addmm"]
    assert document["operators"]["rows"][0]["device_self_time"] == 1.0


def test_order_by_flops_orders_the_operators_and_the_blocks_keep_their_order_saying_so(host_only, capsys):
    assert main(["analyze", str(host_only), "--order-by", "flops"]) == 0
    out = capsys.readouterr().out
    assert "by total, largest first (blocks have no flops: the operators below are ordered by it)" in out
    assert "by flops, largest first" in out


def test_order_by_device_without_device_time_orders_by_self_and_says_so(host_only, capsys):
    assert main(["analyze", str(host_only), "--order-by", "device"]) == 0
    assert "by self (no device time recorded)" in capsys.readouterr().out


def test_order_by_an_operator_figure_on_a_run_without_operators_is_one_line(plain_run, capsys):
    assert main(["analyze", plain_run, "--order-by", "flops"]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "only operators have it, and this run recorded none" in err[0]


def test_opr_name_is_megengines_name_for_filter(host_only, capsys):
    assert main(["analyze", str(host_only), "--opr-name", "^aten::relu", "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [row["name"] for row in document["operators"]["rows"]] == ["aten::relu"]


def test_analyze_json_lists_what_the_run_cannot_give(host_only, measured, capsys):
    main(["analyze", str(host_only), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["operators"]["not_recorded"] == [
        "device_self_time", "bandwidth", "out_shapes"]
    main(["analyze", str(measured), "--format", "json"])
    assert json.loads(capsys.readouterr().out)["operators"]["not_recorded"] == ["bandwidth", "out_shapes"]


def test_a_negative_device_time_in_a_file_is_refused_by_name(tmp_path, capsys):
    path = write(tmp_path, {"operators": [{"path": ["update", "aten::addmm"], "device_self": -1}]})
    assert main(["analyze", str(path)]) != 0
    assert "device_self: must be a number of seconds >= 0" in capsys.readouterr().err


@pytest.fixture
def with_outputs(tmp_path):
    """A run recorded with record_outputs: aten::addmm moved 2 MB of tensors in 0.5 s on the device."""
    return write(tmp_path, {"source": "torch.profiler", "device_time": True, "record_outputs": True, "operators": [
        {"path": ["update", "aten::addmm"], "flops": 0, "device_self": 0.5, "tensor_bytes": 2_000_000,
         "output_shapes": {"[[64, 16]]": 2}},
        {"path": ["update", "aten::relu"], "flops": 0, "device_self": 1.0, "tensor_bytes": 0,
         "output_shapes": {"[[64, 16]]": 2}},
    ]}, "outputs_timers.json")


def test_bandwidth_is_tensor_bytes_per_second_of_device_self_time_where_measured(with_outputs):
    report = operator_report(load_timing_tree(with_outputs))
    addmm = next(row for row in report.rows if row.name == "aten::addmm")
    assert (addmm.bandwidth, addmm.common_output_shapes) == (4_000_000, "[[64, 16]]")
    assert report.not_recorded_columns == ()
    assert re.search(r"4 MB/s +aten::addmm in update .* \[\[64, 16\]\]", operators_text(report, 160))


def test_confluence_has_bandwidth_and_out_shapes_columns_where_recorded(with_outputs, capsys):
    assert main(["analyze", str(with_outputs), "--confluence", "--print-only", "device"]) == 0
    table = [line for line in capsys.readouterr().out.splitlines() if line.startswith("|")]
    assert table[0].endswith("| bandwidth (tensor bytes/s) | out_shapes |")
    assert next(line for line in table if "aten::addmm" in line).endswith("| 4e+06 | [[64, 16]] |")
