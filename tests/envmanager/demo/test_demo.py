"""Specification of ``rlprof demo``: a real training run that writes the run's files."""

from __future__ import annotations

import gzip
import json

from envmanager.demo.training_run import train
from profiler import load_timing_tree
from profiler.analysis.verdict_text import verdicts_as_text
from profiler.analysis.verdicts import judge_run
from profiler.cli.commands import main


def names_in(node: dict) -> set[str]:
    names = {node["name"]}
    for child in node["children"]:
        names |= names_in(child)
    return names


def test_the_demo_writes_a_timer_file_that_loads(tmp_path):
    result = train(num_envs=2, vector_steps=60, output_dir=tmp_path, run_id="unit", show_progress=False)
    assert result.timers_path == tmp_path / "unit" / "unit_timers.json"
    tree = load_timing_tree(result.timers_path)
    assert {"train", "policy.act", "record", "env_manager.step", "env.step"} <= names_in(tree)
    assert json.loads(result.timers_path.read_text())["metadata"]["run_id"] == "unit"


def test_the_demo_counts_every_env_step(tmp_path):
    result = train(
        num_envs=3, vector_steps=40, output_dir=tmp_path, run_id="count", show_progress=False, flush_every=7
    )
    assert result.env_steps == 120
    worker_steps = sum(
        child["count"]
        for worker in load_timing_tree(result.timers_path)["workers"]
        for child in worker["children"]
        if child["name"] == "env.step"
    )
    assert worker_steps == 120


def test_the_demo_writes_a_trace_with_a_track_per_worker(tmp_path):
    result = train(num_envs=2, vector_steps=30, output_dir=tmp_path, run_id="trace", show_progress=False)
    trace = json.loads(gzip.decompress(result.trace_path.read_bytes()))
    process_names = {
        event["args"]["name"] for event in trace["traceEvents"]
        if event["ph"] == "M" and event["name"] == "process_name"
    }
    assert {"trainer", "worker 0", "worker 1"} <= process_names
    assert any(event["ph"] == "X" and event["name"] == "env.step" for event in trace["traceEvents"])


def test_the_demo_writes_a_self_contained_report(tmp_path):
    result = train(num_envs=2, vector_steps=30, output_dir=tmp_path, run_id="report", show_progress=False)
    html = result.report_path.read_text()
    assert html.startswith("<!DOCTYPE html>") and "env_manager.step" in html


def test_rlprof_demo_prints_where_the_step_time_went(tmp_path, capsys):
    exit_code = main([
        "demo", "--num-envs", "2", "--steps", "40", "--output", str(tmp_path),
        "--run-id", "cli", "--no-progress",
    ])
    printed = capsys.readouterr().out
    assert exit_code == 0
    assert "Where the env_manager.step time went" in printed
    assert "Per worker" in printed
    assert (tmp_path / "cli" / "cli_timers.json").exists()


def test_rlprof_demo_prints_the_verdicts_of_the_run_it_wrote(tmp_path, capsys):
    assert main([
        "demo", "--num-envs", "2", "--steps", "40", "--output", str(tmp_path),
        "--run-id", "verdicts", "--no-progress",
    ]) == 0
    printed = capsys.readouterr().out
    verdicts = judge_run(load_timing_tree(tmp_path / "verdicts" / "verdicts_timers.json"))
    assert verdicts_as_text(verdicts) in printed
    assert printed.index("Verdicts (what limits this run") < printed.index("Where the env_manager")
