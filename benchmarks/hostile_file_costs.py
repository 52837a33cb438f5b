"""Do crafted timer files cost rlprof time and memory in proportion to their size?

Issue 25 found four shapes of file whose cost grew faster than the file: n same-named siblings
converted to ML-Agents' layout (40,000: 85-184 s), one multi-megabyte block name in ``analyze``
(4 MB: 5.8 s), many workers sharing one pid in the Chrome export (40,000: 40-88 s), and a deep
tree of long names, whose ``analyze`` took about 100 times the file's size in memory.

For each of the first three this script times the operation at size n and at 4n, in turns
(``--repeats`` rounds, medians), and prints the ratio: linear cost gives about 4, quadratic 16.
For the deep tree it runs ``rlprof analyze`` in a fresh process and prints its peak RSS over the
file's size, beside the memory check's estimate (``read_memory_estimate``) over the file's size:
the file must fit in what the check foresees.

Goals: each time ratio at most 6 (4 is linear; the rest is noise and cache effects); the deep
tree's peak RSS at most the check's estimate.

    python benchmarks/hostile_file_costs.py [--size 10000] [--repeats 3]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from profiler.analysis.analyze import AnalyzeOptions, analyze_run, render_analysis
from profiler.export.chrome_trace import write_chrome_trace
from profiler.tree.memory_check import read_memory_estimate
from profiler.tree.mlagents_layout import to_mlagents_layout
from profiler.tree.timer_json import normalize_timing_tree

TIME_RATIO_GOAL = 6.0


def same_named_siblings(n: int) -> Callable[[], Any]:
    tree = normalize_timing_tree({"name": "root", "total": 1.0, "count": 1, "children": [
        {"name": "env.step", "total": 0.0, "count": 1, "children": []} for _ in range(n)]})
    return lambda: to_mlagents_layout(tree)


def one_long_block_name(n: int) -> Callable[[], Any]:
    tree = normalize_timing_tree({"name": "root", "total": 1.0, "count": 1, "children": [
        {"name": "b" * (n * 100), "total": 0.5, "count": 1, "children": []}]})
    return lambda: render_analysis(analyze_run(tree, AnalyzeOptions()), "table", title="run", width=100)


def workers_sharing_a_pid(n: int) -> Callable[[], Any]:
    tree = normalize_timing_tree({
        "name": "root", "total": 1.0, "count": 1, "children": [],
        "workers": [{"name": f"worker {index}", "worker_id": index, "pid": 5, "total": 0.1, "count": 1,
                     "children": []} for index in range(n)],
        "timeline": {"clock": "perf_counter", "processes": [
            {"pid": 5, "name": f"worker {index}",
             "threads": [{"tid": 1, "name": "MainThread", "spans": [["env.step", 1.0, 2.0]]}]}
            for index in range(n)]},
    })
    return lambda: write_chrome_trace(tree, io.BytesIO())


CASES = {
    "ML-Agents layout, n same-named siblings": same_named_siblings,
    "analyze, one block name of 100n characters": one_long_block_name,
    "Chrome export, n workers sharing a pid": workers_sharing_a_pid,
}


def seconds_of(operation: Callable[[], Any]) -> float:
    started = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()):
        operation()
    return time.perf_counter() - started


def time_ratios(size: int, repeats: int) -> None:
    print(f"time at 4n over time at n (n = {size}; linear gives 4, goal at most {TIME_RATIO_GOAL:g}):")
    for label, make in CASES.items():
        small, large = make(size), make(4 * size)
        small_times, large_times = [], []
        for _ in range(repeats):  # in turns, so that load on the machine hits both alike
            small_times.append(seconds_of(small))
            large_times.append(seconds_of(large))
        small_median, large_median = statistics.median(small_times), statistics.median(large_times)
        ratio = large_median / small_median
        verdict = "ok" if ratio <= TIME_RATIO_GOAL else "MISSED"
        print(f"  {label:<46} {small_median * 1e3:9.1f} ms {large_median * 1e3:9.1f} ms "
              f"ratio {ratio:5.1f}  {verdict}")


PEAK_RSS = """
import contextlib, io, resource, sys
from profiler.cli.commands import main
with contextlib.redirect_stdout(io.StringIO()):
    assert main(["analyze", sys.argv[1]]) == 0
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""


def deep_tree_memory(folder: Path, repeats: int) -> None:
    depth, name_length = 190, 100_000
    node: dict[str, Any] = {"name": "leaf", "total": 0.0, "count": 1, "children": []}
    for level in range(depth):
        node = {"name": chr(97 + level % 26) * name_length, "total": 1.0, "count": 1, "children": [node]}
    path = folder / "deep_timers.json"
    path.write_text(json.dumps(node))
    size = path.stat().st_size
    peaks = [
        int(subprocess.run([sys.executable, "-c", PEAK_RSS, str(path)], capture_output=True, text=True,
                           check=True).stdout)
        for _ in range(repeats)
    ]
    peak, estimate = statistics.median(peaks), read_memory_estimate(path)
    verdict = "ok" if peak <= estimate else "MISSED"
    print(f"rlprof analyze of a {depth}-deep tree of {name_length:,}-character names "
          f"({size / 1e6:.1f} MB): peak RSS {peak / size:.1f}x the file, the memory check's estimate "
          f"{estimate / size:.1f}x  {verdict}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000, help="n (default 10000)")
    parser.add_argument("--repeats", type=int, default=3, help="rounds, medians taken (default 3)")
    arguments = parser.parse_args()
    # The memory first: a child's peak RSS counts the parent's from before its exec, and the
    # timed cases leave this process large.
    with tempfile.TemporaryDirectory() as folder:
        deep_tree_memory(Path(folder), arguments.repeats)
    time_ratios(arguments.size, arguments.repeats)


if __name__ == "__main__":
    main()
