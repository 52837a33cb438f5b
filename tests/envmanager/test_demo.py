"""Specification of ``rlprof demo``: a real training run that writes the run's files."""

from __future__ import annotations

import json

from envmanager.demo import train
from profiler import load_timing_tree


def names_in(node: dict) -> set[str]:
    names = {node["name"]}
    for child in node["children"]:
        names |= names_in(child)
    return names


def test_the_demo_writes_a_timer_file_that_loads(tmp_path):
    result = train(num_envs=2, vector_steps=60, output_dir=tmp_path, run_id="unit", show_progress=False)
    assert result.timers_path == tmp_path / "unit" / "unit_timers.json"
    tree = load_timing_tree(result.timers_path)
    assert {"train", "policy.act", "record"} <= names_in(tree)
    assert json.loads(result.timers_path.read_text())["metadata"]["run_id"] == "unit"


def test_the_demo_counts_every_env_step(tmp_path):
    result = train(num_envs=3, vector_steps=40, output_dir=tmp_path, run_id="count", show_progress=False)
    assert result.env_steps == 120
    act = next(
        child for child in load_timing_tree(result.timers_path)["children"][0]["children"]
        if child["name"] == "policy.act"
    )
    assert act["count"] == 40
