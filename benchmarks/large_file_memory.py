"""How much memory do ``rlprof analyze`` and ``rlprof convert --to chrome`` need for a large file?

A long recorded run writes a timer file of hundreds of megabytes, almost all of it the timeline.
This script makes such a file the way a run does — a trainer loop with the timeline recording, and
worker stacks whose payloads (timeline included) a ``TimerMerger`` merges — then runs each command
in a fresh process and prints its peak RSS, beside the floor: a fresh process doing nothing but
``json.load`` of the same file, which any reader of the file pays. Figures are medians over
``--repeats`` runs, the commands taking turns.

The file is measured twice: as ``write_timing_tree`` writes it (indented) and rewritten compact,
as other writers do (no whitespace: the same data in a third of the bytes, so more memory per
byte of file).

Goals (issue 8, item 18): peak RSS of ``analyze`` at most 1.3x the ``json.load`` floor, and of
``convert --to chrome`` at most 1.6x; both at most the memory check's estimate
(``profiler.tree.memory_check.read_memory_estimate``), so that a file the check lets through fits.
Before this work, on the files this script makes (200 MB indented, 70 MB compact): analyze 792 MB
and 666 MB, convert 1268 MB and 1268 MB (the issue's 204 MB file: 2.0 GB and 4.2 GB).

    python benchmarks/large_file_memory.py [--megabytes 200] [--repeats 3] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

PEAK_RSS_OF = """
import resource, sys
{body}
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
"""
BODIES = {
    "start-up (no file)": "from profiler.cli.commands import main",
    "json.load (floor)": "import json\njson.load(open(sys.argv[1], encoding='utf-8'))",
    "rlprof analyze": (
        "import contextlib, io\nfrom profiler.cli.commands import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['analyze', sys.argv[1]])\n"
        "assert code == 0, code"
    ),
    "rlprof convert --to chrome": (
        "import contextlib, io\nfrom profiler.cli.commands import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = main(['convert', sys.argv[1], '--to', 'chrome', '-o', sys.argv[2]])\n"
        "assert code == 0, code"
    ),
}
GOALS = {"rlprof analyze": 1.3, "rlprof convert --to chrome": 1.6}

WORKERS = 8
BLOCKS_PER_STEP = 6  # spans per trainer step (policy.act, env_manager.step and its 4 children)
BYTES_PER_SPAN = 125  # about what one span takes in the indented JSON file


def make_large_run(path: Path, megabytes: float) -> None:
    """Write a recorded run of about ``megabytes`` MB to ``path``, through rlprof's own API."""
    from profiler import TimerMerger, TimerStack, hierarchical_timer, set_gauge, write_timing_tree
    from profiler.recording import events
    from profiler.multiprocess.payload import snapshot_and_flush

    spans_wanted = int(megabytes * 1e6 / BYTES_PER_SPAN)
    # Each step records BLOCKS_PER_STEP trainer spans and 2 spans in each worker.
    steps = spans_wanted // (BLOCKS_PER_STEP + 2 * WORKERS)
    events.start_recording(capacity=steps * BLOCKS_PER_STEP + 1)
    merger = TimerMerger(timeline_capacity=steps * 2 + 1)
    workers = [TimerStack(f"worker {index}") for index in range(WORKERS)]
    for step in range(steps):
        with hierarchical_timer("policy.act"):
            set_gauge("loss", 1.0 / (step + 1))
        with hierarchical_timer("env_manager.step"):
            with hierarchical_timer("send_actions"):
                pass
            with hierarchical_timer("wait_for_workers"):
                for worker in workers:
                    with hierarchical_timer("env.step", worker):
                        with hierarchical_timer("physics", worker):
                            pass
            with hierarchical_timer("receive_results"):
                pass
            if step % 1000 == 999 or step == steps - 1:
                for worker_id, worker in enumerate(workers):
                    merger.merge_payload(worker_id, snapshot_and_flush(worker))
    write_timing_tree(path)
    events.stop_recording()


def peak_rss(name: str, run_file: Path, output: Path) -> int:
    script = PEAK_RSS_OF.format(body=BODIES[name])
    environment = {**os.environ, "RLPROF_SKIP_MEMORY_CHECK": "1"}
    result = subprocess.run(
        [sys.executable, "-c", script, str(run_file), str(output)],
        capture_output=True, text=True, check=True, env=environment,
    )
    return int(result.stdout.split()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--megabytes", type=float, default=200.0, help="size of the generated file")
    parser.add_argument("--repeats", type=int, default=3, help="runs of each command")
    parser.add_argument("--keep", type=Path, default=None, help="folder to leave the files in")
    arguments = parser.parse_args()

    with tempfile.TemporaryDirectory() as scratch:
        folder = arguments.keep or Path(scratch)
        folder.mkdir(parents=True, exist_ok=True)
        indented = folder / "large_timers.json"
        subprocess.run(
            [sys.executable, __file__, "--make", str(indented), str(arguments.megabytes)], check=True
        )
        compact = folder / "large_compact_timers.json"
        subprocess.run(
            [sys.executable, "-c", "import json, sys; json.dump(json.load(open(sys.argv[1])), "
             "open(sys.argv[2], 'w'), separators=(',', ':'))", str(indented), str(compact)],
            check=True,
        )
        for run_file in (indented, compact):
            measure(run_file, folder / "trace.json", arguments.repeats)


def measure(run_file: Path, output: Path, repeats: int) -> None:
    from profiler.tree.memory_check import read_memory_estimate

    size = run_file.stat().st_size
    estimate = read_memory_estimate(run_file)
    samples: dict[str, list[int]] = {name: [] for name in BODIES}
    for _ in range(repeats):
        for name in BODIES:
            samples[name].append(peak_rss(name, run_file, output))
    floor = statistics.median(samples["json.load (floor)"])
    start_up = statistics.median(samples["start-up (no file)"])
    print(f"\n{run_file.name}: {size / 1e6:.0f} MB; the memory check estimates {estimate / 1e6:.0f} MB; "
          f"medians of {repeats} runs")
    print(f"{'command':28} {'peak RSS':>10} {'x file':>7} {'x floor':>8}  goal")
    for name, values in samples.items():
        peak = statistics.median(values)
        goal = GOALS.get(name)
        verdict = ""
        if goal is not None:
            # The check compares the estimate with what the process can still get, on top of
            # what it already uses; so does this.
            met = peak <= goal * floor and peak - start_up <= estimate
            verdict = f"<= {goal}x floor, <= start-up + estimate: {'met' if met else 'MISSED'}"
        print(f"{name:28} {peak / 1e6:7.0f} MB {peak / size:6.1f}x {peak / floor:7.2f}x  {verdict}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--make":
        make_large_run(Path(sys.argv[2]), float(sys.argv[3]))
    else:
        main()
