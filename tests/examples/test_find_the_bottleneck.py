"""The find-the-bottleneck example (docs/cli.md walks through it) writes a run whose slow worker
the verdicts name."""

from __future__ import annotations

from example_runner import run_example

from profiler import load_timing_tree
from profiler.analysis.verdicts import STRAGGLER, judge_run


def test_the_example_writes_a_run_whose_slow_worker_is_named(tmp_path):
    completed = run_example("find_the_bottleneck.py", "--slow-ms", "15", "--steps", "30",
                            "--output", str(tmp_path), "--run-id", "slow")
    timers = tmp_path / "slow" / "slow_timers.json"
    assert f"wrote {timers}" in completed.stdout
    (straggler,) = judge_run(load_timing_tree(timers)).of_kind(STRAGGLER)
    assert straggler.evidence["worker_id"] == 3


def test_without_the_slow_env_no_worker_is_named(tmp_path):
    run_example("find_the_bottleneck.py", "--slow-ms", "0", "--steps", "30",
                "--output", str(tmp_path), "--run-id", "fixed")
    verdicts = judge_run(load_timing_tree(tmp_path / "fixed" / "fixed_timers.json"))
    assert not verdicts.of_kind(STRAGGLER)
