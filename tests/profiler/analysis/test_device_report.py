"""Specification of device time in the analysis (profiler.analysis.device_report), on fake dumps:
the gpu_idle and launch_only verdicts on both sides of every threshold, and the device section of
``rlprof analyze``'s text and JSON."""

from __future__ import annotations

import json

import pytest

from profiler.tree.tree_reader import normalize_timing_tree
from profiler.analysis import device_report
from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.verdicts import judge_run

WALL = 10.0


def dump(blocks, device_time=None, operators=None):
    """A run of WALL seconds with top-level ``blocks`` {name: host total} and the given sections."""
    children = [{"name": name, "total": host, "count": 10, "self": host, "min": host / 10,
                 "max": host / 10, "children": []} for name, host in blocks.items()]
    document = {"name": "root", "total": WALL, "count": 1, "self": WALL - sum(blocks.values()),
                "min": WALL, "max": WALL, "children": children}
    if device_time is not None:
        document["device_time"] = device_time
    if operators is not None:
        document["operators"] = operators
    return normalize_timing_tree(json.loads(json.dumps(document)))


def device(path, total, mode="events"):
    return {"path": path, "device": "cuda", "mode": mode, "total": total, "count": 10,
            "min": total / 10, "max": total / 10}


def kinds(tree):
    return judge_run(tree).kinds


def test_a_gpu_busy_for_less_than_half_the_run_is_idle():
    tree = dump({"update": 4.0}, [device(["update"], 0.49 * WALL)])
    verdict = judge_run(tree).of_kind(device_report.GPU_IDLE)[0]
    assert verdict.cost_seconds == pytest.approx(0.51 * WALL)


def test_a_gpu_busy_for_half_the_run_is_not_idle():
    tree = dump({"update": 6.0}, [device(["update"], 0.5 * WALL)])
    assert device_report.GPU_IDLE not in kinds(tree)


def test_inner_device_blocks_are_not_counted_twice():
    tree = dump({"update": 6.0}, [device(["update"], 0.6 * WALL), device(["update", "loss"], 0.3 * WALL)])
    assert device_report.GPU_IDLE not in kinds(tree)


def test_a_run_without_device_time_is_told_nothing_about_a_gpu():
    assert device_report.GPU_IDLE not in kinds(dump({"update": 1.0}))


def test_kernels_recorded_by_pytorch_are_the_busy_time_when_present():
    operators = {"device_time": True, "operators": [
        {"path": ["update", "aten::mm"], "flops": 0, "cpu_memory_bytes": 0, "device_self": 1.0, "device_total": 1.0}]}
    # The block's event pair spans 9 s (the stream waited on the host), the kernels ran 1 s.
    tree = dump({"update": 9.0}, [device(["update"], 9.0)], operators)
    verdict = judge_run(tree).of_kind(device_report.GPU_IDLE)[0]
    assert verdict.evidence["busy_seconds"] == pytest.approx(1.0)


def test_a_block_whose_device_time_is_three_times_its_host_time_measured_launches_only():
    tree = dump({"update": 1.0}, [device(["update"], 3.0)])
    verdict = judge_run(tree).of_kind(device_report.LAUNCH_ONLY)[0]
    assert (verdict.evidence["block"], verdict.cost_seconds) == (["update"], pytest.approx(2.0))


def test_a_block_whose_device_time_is_under_three_times_its_host_time_is_not_told():
    tree = dump({"update": 1.0}, [device(["update"], 2.9)])
    assert device_report.LAUNCH_ONLY not in kinds(tree)


def test_launches_whose_missed_device_time_is_under_a_hundredth_of_the_run_are_not_told():
    tree = dump({"update": 0.001}, [device(["update"], 0.09)])  # missed 0.089 s < 0.1 s
    assert device_report.LAUNCH_ONLY not in kinds(tree)


def test_a_synchronised_block_is_never_launch_only():
    tree = dump({"update": 1.0}, [device(["update"], 3.0, mode="sync")])
    assert device_report.LAUNCH_ONLY not in kinds(tree)


def test_analyze_shows_each_device_block_beside_its_host_time():
    tree = dump({"update": 1.0}, [device(["update"], 3.0)])
    analysis = analyze_run(tree)
    document = json.loads(render_analysis(analysis, "json"))
    assert document["device"]["blocks"][0] == {"path": ["update"], "process": "trainer", "device": "cuda",
                                               "mode": "events", "device_total": 3.0, "count": 10,
                                               "host_total": 1.0}
    assert "Device time (blocks timed on a GPU):" in render_analysis(analysis)


def test_analyze_says_in_one_line_why_operators_have_no_device_time():
    operators = {"device_time": False, "device_time_unavailable": "no device time per operator: no GPU",
                 "operators": []}
    text = render_analysis(analyze_run(dump({"update": 1.0}, operators=operators)))
    assert "Operators: no device time per operator: no GPU" in text
