"""Specification of MegEngine's profile_analyze layout of the operators (profiler.analysis.
profile_analyze_views): ``--print-only``, ``--show-host``, ``--copy-time``, ``--dump-only-opr``,
``--confluence``, and ``--input-dtype``; on hand-made dumps for exact figures, and on a real torch
run written by a session."""

from __future__ import annotations

import json

import pytest

from profiler import Profiler, hierarchical_timer, load_timing_tree
from profiler.analysis.operator_report import operator_report, operators_text
from profiler.cli.commands import main


def operator(name, total, self_time, count):
    return {"name": name, "total": total, "self": self_time, "count": count, "object_type": "operator",
            "children": []}


def write(tmp_path, device_time: bool, name="run_timers.json"):
    """``update`` ran aten::addmm (1.5 s host, 0.5 s device), aten::relu (0.5 s, 1 s), and copied
    4 times: aten::to (0.1 s self) around aten::copy_ (0.2 s, 40 ms on the device)."""
    device = {"aten::addmm": 0.5, "aten::relu": 1.0, "aten::copy_": 0.04, "aten::to": 0.0}
    entries = [
        {"path": ["update", "aten::addmm"], "flops": 3_000_000,
         "input_dtypes": {"[float32, float32, float32, Scalar, Scalar]": 2}},
        {"path": ["update", "aten::relu"], "flops": 0, "input_dtypes": {"[float64]": 2}},
        {"path": ["update", "aten::copy_"], "flops": 0, "input_dtypes": {"[float32, float64, Scalar]": 4}},
        {"path": ["update", "aten::to"], "flops": 0},
    ]
    if device_time:
        for entry in entries:
            entry["device_self"] = device[entry["path"][-1]]
    document = {
        "name": "root", "total": 10.0, "count": 1,
        "children": [{"name": "update", "total": 4.0, "count": 2, "children": [
            operator("aten::addmm", 1.5, 1.5, 2), operator("aten::relu", 0.5, 0.5, 2),
            operator("aten::copy_", 0.2, 0.2, 4), operator("aten::to", 0.3, 0.1, 4),
        ]}],
        "operators": {"source": "torch.profiler", "device_time": device_time, "operators": entries},
    }
    path = tmp_path / name
    path.write_text(json.dumps(document))
    return path


@pytest.fixture
def measured(tmp_path):
    return write(tmp_path, device_time=True)


@pytest.fixture
def host_only(tmp_path):
    return write(tmp_path, device_time=False, name="host_timers.json")


@pytest.fixture(autouse=True)
def wide_terminal(monkeypatch):
    """Table lines whole, not cut at the terminal's width."""
    monkeypatch.setenv("COLUMNS", "200")


def analyze(capsys, path, *options):
    assert main(["analyze", str(path), *options]) == 0
    return capsys.readouterr().out


def table_operators(text):
    """The operators of an operator table, in order."""
    return [line.split("  ")[-2].split(" in ")[0] for line in text.splitlines() if " in update" in line]


# --- --input-dtype ------------------------------------------------------------------------------


def test_input_dtype_keeps_the_operators_with_an_input_of_that_dtype(measured):
    report = operator_report(load_timing_tree(measured), input_dtype="float64")
    assert {row.name for row in report.rows} == {"aten::relu", "aten::copy_"}


def test_input_dtype_takes_torch_s_spelling_too(measured):
    report = operator_report(load_timing_tree(measured), input_dtype="torch.float32")
    assert {row.name for row in report.rows} == {"aten::addmm", "aten::copy_"}


def test_a_real_run_s_operators_are_filtered_by_the_dtype_of_their_inputs(tmp_path, capsys):
    torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs this")
    with Profiler(path=tmp_path, format="timers.json", record_operators=True) as session:
        with hierarchical_timer("returns"):
            torch.cumsum(torch.ones(8, dtype=torch.float64), dim=0)
            torch.ones(8, dtype=torch.float32).exp()
    out = analyze(capsys, session.paths["timers.json"], "--input-dtype", "float64", "--format", "json")
    names = {row["name"] for row in json.loads(out)["operators"]["rows"]}
    assert "aten::cumsum" in names and "aten::exp" not in names


# --- the summary and --copy-time ------------------------------------------------------------------


def test_the_summary_is_the_operators_total_device_and_host_self_time(measured, capsys):
    out = analyze(capsys, measured, "--print-only", "summary")
    assert out.splitlines() == ["total device time  1.54 s", "total host time    2.30 s"]


def test_copy_time_is_the_copy_operators_device_self_time_over_the_copies_made(measured, capsys):
    out = analyze(capsys, measured, "--print-only", "summary", "--copy-time")
    assert ("copy time          tot=40.00 ms avg=10.00 ms over 4 copies "
            "(device self time of aten::copy_, aten::to)") in out
    assert "copy wait time     not recorded" in out


def test_copy_time_is_host_self_time_where_no_device_time_was_measured(host_only, capsys):
    out = analyze(capsys, host_only, "--print-only", "summary", "--copy-time")
    assert "total device time  not recorded" in out
    assert "copy time          tot=300.00 ms avg=75.00 ms over 4 copies (host self time of" in out


def test_a_real_run_s_copies_are_told_apart(tmp_path, capsys):
    torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs this")
    with Profiler(path=tmp_path, format="timers.json", record_operators=True) as session:
        with hierarchical_timer("batch"):
            for _ in range(3):
                torch.ones(16).to(torch.float64)
    out = analyze(capsys, session.paths["timers.json"], "--print-only", "summary", "--copy-time")
    assert "over 3 copies (host self time of aten::_to_copy, aten::copy_, aten::to)" in out


# --- the tables -----------------------------------------------------------------------------------


def test_print_only_device_ranks_the_operators_by_device_self_time(measured, capsys):
    out = analyze(capsys, measured, "--print-only", "device")
    assert out.startswith("device:\n")
    assert table_operators(out) == ["aten::relu", "aten::addmm", "aten::copy_", "aten::to"]


def test_print_only_host_ranks_the_operators_by_host_self_time(measured, capsys):
    out = analyze(capsys, measured, "--print-only", "host")
    assert out.startswith("host:\n")
    assert table_operators(out) == ["aten::addmm", "aten::relu", "aten::copy_", "aten::to"]


def test_print_only_device_without_device_time_says_why(host_only, capsys):
    out = analyze(capsys, host_only, "--print-only", "device")
    assert out.startswith("device: device self time, bandwidth and out_shapes: not recorded")


def test_show_host_prints_the_summary_then_the_device_and_host_tables(measured, capsys):
    parts = analyze(capsys, measured, "--show-host").split("\n\n")
    assert [part.splitlines()[0] for part in parts] == ["total device time  1.54 s", "device:", "host:"]


def test_without_device_time_the_layout_has_the_host_table_in_place_of_the_device_one(host_only, capsys):
    parts = analyze(capsys, host_only, "--copy-time").split("\n\n")
    assert [part.splitlines()[0].split(":")[0] for part in parts] == ["total device time  not recorded", "device", "host"]


def test_order_by_orders_both_tables(measured, capsys):
    out = analyze(capsys, measured, "--print-only", "device", "--order-by", "count")
    assert table_operators(out)[:2] == ["aten::copy_", "aten::to"]


def test_dump_only_opr_prints_one_operator_a_line_with_its_block(measured, capsys):
    out = analyze(capsys, measured, "--print-only", "host", "--dump-only-opr", "-t", "2")
    assert out.splitlines() == ["aten::addmm update", "aten::relu update"]


def test_dump_only_opr_by_type_prints_the_types(measured, capsys):
    out = analyze(capsys, measured, "--print-only", "device", "--dump-only-opr", "--aggregate-by", "type",
                  "--input-dtype", "float64")
    assert out.splitlines() == ["aten::relu", "aten::copy_"]


@pytest.mark.parametrize("option", ["--confluence", "--wiki"])
def test_confluence_prints_the_summary_and_tables_as_pipe_tables(measured, capsys, option):
    summary, device = analyze(capsys, measured, option).split("\n\n")
    assert summary.splitlines()[:3] == ["| name | value |", "|---|---|", "| total device time | 1.54 s |"]
    header, rule, first = device.splitlines()[:3]
    assert header.startswith("| # | device self time | self time | ratio | cumulative |")
    assert rule.count("---") == header.count("|") - 1
    assert first.startswith("| 0 | 1.00 s | 500.00 ms | 21.7% | 21.7% |") and "| aten::relu | update |" in first


def test_the_layout_is_text_only(measured, capsys):
    assert main(["analyze", str(measured), "--show-host", "--format", "json"]) == 2
    assert "leave out --format json" in capsys.readouterr().err


def test_a_run_without_operators_is_one_line(plain_run, capsys):
    assert main(["analyze", plain_run, "--print-only", "summary"]) == 2
    err = capsys.readouterr().err
    assert "recorded no operators" in err and len(err.strip().splitlines()) == 1


def test_top_end_key_is_still_refused_naming_it(measured, capsys):
    assert main(["analyze", str(measured), "--top-end-key", "kern"]) == 2
    assert "--top-end-key" in capsys.readouterr().err


# --- call stacks ----------------------------------------------------------------------------------


def test_each_operator_s_most_frequent_call_stack_is_listed_under_the_table(tmp_path):
    path = write(tmp_path, device_time=False)
    document = json.loads(path.read_text())
    document["operators"]["operators"][0]["backtraces"] = {"train.py(10): update <- train.py(1): <module>": 2,
                                                           "eval.py(3): check": 1}
    path.write_text(json.dumps(document))
    text = operators_text(operator_report(load_timing_tree(path)), 120)
    assert text.splitlines()[-2:] == [
        "Call stacks (with_backtrace), innermost first, the most frequent of each operator:",
        "aten::addmm in update (2 of 3 calls): train.py(10): update <- train.py(1): <module>"]
