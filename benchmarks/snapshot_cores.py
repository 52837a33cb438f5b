"""A 50-node payload from the worker's snapshot to the trainer's merged tree, on each core, in
``nullcontext()`` costs measured in the same run: the figure issue 27 sets a goal for.

    python benchmarks/snapshot_cores.py [--rounds 2000] [--nodes 50]

Each round, for each core in turn: the same blocks run (so every row is taken and every node
zeroed), then one payload makes the whole trip timed: ``snapshot_and_flush`` in the worker
(its blocks run and its rows taken on the C core, ``take_rows`` in C, or on the Python
core, ``payload.take_rows_in_python``, switched with ``block_hooks.use_compiled_core``),
pickled and unpickled as a pipe does (``ForkingPickler.dumps``, ``pickle.loads``), and
``TimerMerger.merge_payload`` in the trainer (its rows checked on the same core: ``check_rows``
in C, or ``payload.row_ids_in_python``). The merger adds the rows it holds in bulk every
few payloads (a fold), so a trip's figure is the median, over windows of payloads that each end
with a fold, of the window's mean (as ``benchmarks/merge_cost.py`` takes it): the folds are counted, spread over the payloads they add. A ``with nullcontext():``
block is timed in the same rounds, and the ratio of the two medians is the figure.

Goal (issue 27): snapshot to merged within 100 ``nullcontext()`` costs. The snapshot, the
largest stage and the one the C core takes over, is printed apart. Where the accelerator is not
loaded (not built, or ``RLPROF_PURE_PYTHON=1``) only the Python row is measured.
"""

from __future__ import annotations

import argparse
import contextlib
import pickle
import statistics
import sys
import time
from multiprocessing.reduction import ForkingPickler
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from merge_cost import payloads_per_fold, run_blocks, windowed_us  # noqa: E402

from profiler.multiprocess import merge, payload  # noqa: E402
from profiler.timing import accelerator, block_hooks  # noqa: E402
from profiler.timing.timer_node import accelerated  # noqa: E402
from profiler.timing.timers import TimerStack  # noqa: E402

GOAL_NULLCONTEXT_COSTS = 100.0
"""Issue 27: a 50-node payload from snapshot to merged within 100 ``nullcontext()`` costs."""


def nullcontext_ns(number: int = 2000) -> float:
    nullcontext = contextlib.nullcontext
    started = time.perf_counter()
    for _ in range(number):
        with nullcontext():
            pass
    return (time.perf_counter() - started) / number * 1e9


class Trip:
    """One worker's stack and one trainer's merger, timing each payload's stages."""

    def __init__(self, label: str, compiled: bool, nodes: int) -> None:
        self.compiled = compiled
        self.nodes = nodes
        self.worker = TimerStack(f"worker, {label}")
        self.merger = merge.TimerMerger(TimerStack(f"trainer, {label}"))
        self.snapshots: list[float] = []
        self.trips: list[float] = []

    def one_payload(self) -> None:
        block_hooks.use_compiled_core(self.compiled)  # the snapshot takes its rows on the core in force
        run_blocks(self.worker, self.nodes)
        clock = time.perf_counter
        started = clock()
        taken = payload.snapshot_and_flush(self.worker)
        snapped = clock()
        received = pickle.loads(ForkingPickler.dumps(taken))
        self.merger.merge_payload(0, received)
        merged = clock()
        self.snapshots.append(snapped - started)
        self.trips.append(merged - started)

    def figures_us(self) -> tuple[float, float]:
        """(snapshot, snapshot to merged) per payload, folds spread over the payloads they add;
        the first payload, which declares every name, left out."""
        window = 2 * payloads_per_fold(self.nodes)
        return windowed_us(self.snapshots[1:], window), windowed_us(self.trips[1:], window)


def measure(rounds: int, nodes: int) -> tuple[float, dict[str, tuple[float, float]]]:
    """The ``nullcontext()`` block's nanoseconds, and each core's (snapshot, trip) microseconds."""
    cores = {"Python core": False}
    if accelerator.extension is not None:
        cores = {"C core": True, **cores}
    trips = [Trip(label, compiled, nodes) for label, compiled in cores.items()]
    floor: list[float] = []
    default = accelerated()
    try:
        for _ in range(rounds):
            for trip in trips:
                trip.one_payload()
            block_hooks.use_compiled_core(default)
            floor.append(nullcontext_ns(200))
    finally:
        block_hooks.use_compiled_core(default)
    return statistics.median(floor), {label: trip.figures_us() for label, trip in zip(cores, trips)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--nodes", type=int, default=50)
    arguments = parser.parse_args()
    floor_ns, figures = measure(arguments.rounds, arguments.nodes)
    if accelerator.extension is None:
        print(f"(C row left out: {accelerator.unavailable_reason})")
    print(f"{arguments.nodes}-node payload, {arguments.rounds} rounds; nullcontext() block: {floor_ns:.1f} ns")
    print(f"{'rows taken on':18} {'snapshot us':>11} {'to merged us':>12} {'nullcontext() costs':>20}")
    for label, (snapshot_us, trip_us) in figures.items():
        costs = trip_us * 1000 / floor_ns
        met = "met" if costs <= GOAL_NULLCONTEXT_COSTS else "NOT met"
        print(
            f"{label:18} {snapshot_us:11.2f} {trip_us:12.2f} {costs:20.0f}"
            f"   goal <= {GOAL_NULLCONTEXT_COSTS:.0f}: {met}"
        )


if __name__ == "__main__":
    main()
