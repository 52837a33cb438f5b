"""A worker's snapshot on each core: ``snapshot_and_flush`` of a 50-node tree taking its rows with
the C accelerator's ``take_rows`` and with the Python reference, side by side in one run.

Each round snapshots one tree per core, in turn, after the same blocks ran in both (so every row
is taken and every node zeroed); each figure is the median over rounds, beside the cost of a
``with nullcontext():`` block measured in the same rounds. Goal (issue 27): a 50-node payload from
snapshot to merged within 100 ``nullcontext()`` costs; ``benchmarks/merge_cost.py`` measures the
whole trip, this script the snapshot, its largest stage.

    python benchmarks/snapshot_cores.py [--rounds 2000] [--nodes 50]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from merge_cost import run_blocks  # noqa: E402

from profiler.multiprocess import payload  # noqa: E402
from profiler.timing import accelerator  # noqa: E402
from profiler.timing.timers import TimerStack  # noqa: E402


def nullcontext_ns(number: int = 2000) -> float:
    nullcontext = contextlib.nullcontext
    started = time.perf_counter()
    for _ in range(number):
        with nullcontext():
            pass
    return (time.perf_counter() - started) / number * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=50)
    arguments = parser.parse_args()
    if accelerator.extension is None:
        raise SystemExit(f"the C accelerator is not loaded ({accelerator.unavailable_reason}): nothing to compare")
    takers = {"C take_rows": accelerator.extension.take_rows, "Python take_rows": payload.take_rows_in_python}
    stacks = {label: TimerStack(label) for label in takers}
    samples: dict[str, list[float]] = {label: [] for label in takers}
    floor: list[float] = []
    default = payload._take_rows
    try:
        for _ in range(arguments.rounds):
            for label, take_rows in takers.items():
                run_blocks(stacks[label], arguments.nodes)
                payload._take_rows = take_rows
                started = time.perf_counter()
                payload.snapshot_and_flush(stacks[label])
                samples[label].append((time.perf_counter() - started) * 1e6)
            floor.append(nullcontext_ns(200))
    finally:
        payload._take_rows = default
    floor_ns = statistics.median(floor)
    print(f"{arguments.nodes}-node snapshot_and_flush, median of {arguments.rounds} rounds; "
          f"nullcontext() block: {floor_ns:.1f} ns")
    print(f"{'rows taken by':18} {'us':>7} {'nullcontext() costs':>20}")
    for label, values in samples.items():
        microseconds = statistics.median(values)
        print(f"{label:18} {microseconds:7.2f} {microseconds * 1000 / floor_ns:20.0f}")


if __name__ == "__main__":
    main()
