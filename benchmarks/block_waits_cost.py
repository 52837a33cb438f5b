"""What reading the trainer's waits for a core inside its vector steps costs a step.

    python benchmarks/block_waits_cost.py [--rounds 9] [--runs 70000]

``rlprof run`` reads the kernel's count of the stepping thread's waits for a core (``schedstat``)
and its CPU clock around each of a run's first vector steps, then around one step in
:data:`~profiler.recording.block_waits.READ_EVERY` (:mod:`profiler.recording.block_waits`): this
measures the long run's cost, after those first steps. It times, in one process, rounds of ``--runs`` empty
runs as the vector step reads them (``start()``, then ``end()`` where it read) against the same
loop without reading, interleaved, the order alternating from round to round. Printed: medians
over rounds of the nanoseconds a run, its extra over the loop without reading, and a read's
(the two ``pread`` s of a run read, with their checks). Goal: under 1 us a step, against the tens
to thousands of microseconds a vector step of workers takes (CartPole over ``AsyncVectorEnv``:
about 100 us on 2 cores).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from profiler.recording import scheduling  # noqa: E402
from profiler.recording.block_waits import READ_ALL_FIRST, READ_EVERY, BlockWaits  # noqa: E402
from profiler.timing import timers  # noqa: E402

GOAL_NANOSECONDS = 1000


def read_runs(waits: BlockWaits, runs: int) -> float:
    """Seconds for ``runs`` empty runs, each as the vector step reads it."""
    start = time.perf_counter()
    for _ in range(runs):
        before = waits.start()
        if before is not None:
            waits.end(before)
    return time.perf_counter() - start


def plain_runs(waits: BlockWaits, runs: int) -> float:
    """Seconds for ``runs`` empty runs of the same loop, nothing read."""
    start = time.perf_counter()
    for _ in range(runs):
        before = None
        if before is not None:
            waits.end(before)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--runs", type=int, default=70_000)
    args = parser.parse_args()
    if not scheduling.schedstat_available():
        print("no schedstat here (not Linux, or a kernel without it): nothing is read, nothing to measure")
        return
    waits = BlockWaits("vector.step", timers.get_timer_stack_for_thread(threading.current_thread()))
    read_runs(waits, READ_ALL_FIRST)  # the first steps, each read: past them, one in READ_EVERY
    first_read = waits.runs_read
    read, plain = [], []
    for round_index in range(args.rounds):
        ways = [(read_runs, read), (plain_runs, plain)]
        for way, seconds in ways if round_index % 2 == 0 else reversed(ways):
            seconds.append(way(waits, args.runs) / args.runs * 1e9)
    assert waits.runs_read - first_read >= args.rounds * args.runs // READ_EVERY  # every read counted: none refused
    read_ns, plain_ns = statistics.median(read), statistics.median(plain)
    extra = statistics.median(r - p for r, p in zip(read, plain))
    load = os.getloadavg()[0]
    print(f"reading the waits for a core around one run in {READ_EVERY}: median of {args.rounds} interleaved rounds "
          f"of {args.runs} runs (load average {load:.1f})")
    print(f"  a run, read as the vector step reads it: {read_ns:7.1f} ns")
    print(f"  a run of the same loop, nothing read:    {plain_ns:7.1f} ns")
    print(f"  extra per run (vector step):             {extra:7.1f} ns   goal < {GOAL_NANOSECONDS} ns: "
          f"{'met' if extra < GOAL_NANOSECONDS else 'not met'}")
    print(f"  per {READ_EVERY} runs (one read, six let pass):   {extra * READ_EVERY:7.1f} ns")


if __name__ == "__main__":
    main()
