"""The profiled-training example writes the run's three files and prints the analysis."""

from __future__ import annotations

from example_runner import run_example

from profiler import load_timing_tree


def test_the_training_example_writes_timers_trace_and_report(tmp_path):
    completed = run_example("profile_training.py", str(tmp_path))
    assert "Where the env_manager.step time went" in completed.stdout
    tree = load_timing_tree(tmp_path / "example_timers.json")
    assert len(tree["workers"]) == 4
    counts = {"env.step": 0, "env.reset": 0}
    for worker in tree["workers"]:
        for child in worker["children"]:
            counts[child["name"]] += child["count"]
    # NEXT_STEP autoreset: the step after an episode ends resets that env instead of stepping it,
    # so 500 steps x 4 envs plus the 4 initial resets are all accounted for, none lost.
    assert counts["env.step"] + counts["env.reset"] == 500 * 4 + 4
    assert (tmp_path / "example_trace.json.gz").exists()
    assert (tmp_path / "example_report.html").exists()
