"""The MXNet-style example writes its files at exit, without a dump() call, and prints dumps()."""

from __future__ import annotations

import json

from example_runner import run_example
from tree_paths import find

from profiler import load_timing_tree


def test_the_mxnet_style_example_writes_timers_trace_and_report_at_exit(tmp_path):
    completed = run_example("mxnet_style_profiling.py", str(tmp_path))
    assert "sorted by max (descending)" in completed.stdout
    tree = load_timing_tree(tmp_path / "mxnet_style_timers.json")
    iteration = find(tree, "iteration")
    assert (iteration["count"], iteration["domain"], iteration["object_type"]) == (200, "rl", "frame")
    assert find(iteration, "update")["object_type"] == "task"
    assert find(iteration, "env_manager.step")["scopes"] == ["rollout:"]
    assert tree["gauges"]["rl.episodes"]["count"] >= 1
    assert tree["memory"]["processes"][0]["samples"]  # profile_memory=True
    trace = json.loads((tmp_path / "mxnet_style_trace.json").read_text())["traceEvents"]
    assert any(event["ph"] == "i" and event["s"] == "g" and event.get("cat") == "rl" for event in trace)
    assert (tmp_path / "mxnet_style.html").read_text().count('id="frames"') == 1
