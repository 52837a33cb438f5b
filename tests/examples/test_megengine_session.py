"""The MegEngine-session example writes MegEngine's files and rlprof's, and names the leaking worker."""

from __future__ import annotations

from example_runner import run_example

from profiler import load_timing_tree


def test_the_session_example_writes_its_files_and_names_the_leak(tmp_path):
    completed = run_example("megengine_session.py", str(tmp_path))
    written = sorted(path.name.split(".", 1)[1] for path in tmp_path.iterdir())
    assert written == ["chrome_timeline.json", "memory_flow.svg", "report.html", "timers.json"]
    assert "[memory_leak] worker 1 leaks memory" in completed.stdout
    assert "Memory per process" in completed.stdout
    (timers,) = tmp_path.glob("*.timers.json")
    names = [process["name"] for process in load_timing_tree(timers)["memory"]["processes"]]
    assert names == ["trainer", "worker 0", "worker 1"]
