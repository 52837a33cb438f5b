"""What ``rlprof run`` adds to each Ray task or actor call in a worker: the wrapper that times the
call as a block and ships the worker's timers once a second (``profiler.integrations.ray_worker_setup``).

    python benchmarks/ray_worker_task_cost.py [--rounds 7] [--calls 200000]

A no-op function is called directly and through the wrapper (no driver to ship to: a shipment is
then a snapshot and no send), in alternating rounds; printed: the median time per call of each and
the difference, the wrapper's cost per call, set beside Ray's own cost of a task call (hundreds of
microseconds: ``benchmarks/ray_throughput.py``). No Ray cluster is started.
"""

from __future__ import annotations

import argparse
import statistics
import time

from profiler.integrations.ray_worker_setup import _timed_task, _WorkerProcess


def nothing() -> None:
    return None


def per_call(function, calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=200_000)
    arguments = parser.parse_args()
    wrapped = _timed_task(_WorkerProcess(None), nothing, "nothing", "")
    direct, timed = [], []
    for round_number in range(arguments.rounds):
        variants = [(direct, nothing), (timed, wrapped)]
        for results, function in variants if round_number % 2 == 0 else reversed(variants):
            results.append(per_call(function, arguments.calls))
    plain, through = statistics.median(direct), statistics.median(timed)
    print(f"per call, median of {arguments.rounds} rounds of {arguments.calls:,}: direct {plain * 1e6:.2f} us, "
          f"through rlprof's wrapper {through * 1e6:.2f} us: the wrapper costs {(through - plain) * 1e6:.2f} us a call")


if __name__ == "__main__":
    main()
