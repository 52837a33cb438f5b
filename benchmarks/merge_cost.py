"""What does shipping worker timers cost? Payload bytes and microseconds, worker to merged tree.

For timer trees of 10, 50 and 200 nodes it prints the pickled payload size and the median time of
each stage: ``snapshot_and_flush`` in the worker, pickle + send + receive + unpickle through a
real ``multiprocessing.Pipe``, and ``TimerMerger.merge_payload`` in the trainer (validation
included). Then the trainer-side merge cost per step for 1, 4, 16 and 64 workers each sending a
50-node payload every step, measured early and late in a run: it must grow with the number of
payloads, not with the run's length. Goal (issue 3): a 50-node payload under 2 KB and under
20 us from snapshot to merged.

Microseconds depend on the machine, so the script also prints the cost of the cheapest Python
``with`` block (``contextlib.nullcontext()``) measured in the same run: divide by it to compare
figures taken on different machines or under different load.

    python benchmarks/merge_cost.py [--repeats 300] [--steps 2000]
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import pickle
import statistics
import time
import timeit
from typing import Any

from profiler import hierarchical_timer
from profiler.merge import TimerMerger
from profiler.payload import snapshot_and_flush
from profiler.timers import TimerStack


def run_blocks(stack: TimerStack, nodes: int) -> None:
    """Time ``nodes`` distinct blocks once: groups of one parent and up to nine children,
    named like real ones (``env.step``-length names)."""
    made = 0
    group = 0
    while made < nodes:
        with hierarchical_timer(f"env.block{group:02d}", stack):
            made += 1
            for child in range(min(9, nodes - made)):
                with hierarchical_timer(f"env.child{child:02d}", stack):
                    pass
                made += 1
        group += 1


def median_us(samples: list[float]) -> float:
    return statistics.median(samples) * 1e6


def stage_costs(nodes: int, repeats: int) -> dict[str, float]:
    worker = TimerStack("worker")
    merger = TimerMerger(TimerStack("trainer"))
    sender, receiver = multiprocessing.Pipe()
    snapshot, transport, merge, sizes = [], [], [], []
    for _ in range(repeats):
        run_blocks(worker, nodes)
        started = time.perf_counter()
        payload = snapshot_and_flush(worker)
        snapped = time.perf_counter()
        sender.send(payload)  # pickles with multiprocessing's pickler, as a worker would
        received = receiver.recv()
        transported = time.perf_counter()
        merger.merge_payload(0, received)
        merged = time.perf_counter()
        snapshot.append(snapped - started)
        transport.append(transported - snapped)
        merge.append(merged - transported)
        sizes.append(len(pickle.dumps(payload)))
    sender.close()
    receiver.close()
    return {
        "bytes": statistics.median(sizes),
        "snapshot": median_us(snapshot),
        "transport": median_us(transport),
        "merge": median_us(merge),
    }


def merge_cost_per_step(workers: int, steps: int) -> tuple[float, float]:
    """Median trainer time (us) to merge one step's payloads, early (first 10% of steps) and late
    (last 10%), with ``workers`` workers each flushing a 50-node tree every step."""
    worker_stacks = [TimerStack(f"worker {index}") for index in range(workers)]
    merger = TimerMerger(TimerStack("trainer"))
    per_step: list[float] = []
    for _ in range(steps):
        payloads: list[Any] = []
        for stack in worker_stacks:
            run_blocks(stack, 50)
            payloads.append(snapshot_and_flush(stack))
        started = time.perf_counter()
        for worker_id, payload in enumerate(payloads):
            merger.merge_payload(worker_id, payload)
        per_step.append(time.perf_counter() - started)
    tenth = max(1, steps // 10)
    return median_us(per_step[:tenth]), median_us(per_step[-tenth:])


def nullcontext_ns() -> float:
    """Nanoseconds per ``with nullcontext():`` block, the floor benchmarks/timer_overhead.py uses."""
    floor = contextlib.nullcontext()

    def block() -> None:
        with floor:
            pass

    return min(timeit.repeat(block, number=100_000, repeat=5)) / 100_000 * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--repeats", type=int, default=300, help="payloads per tree size")
    parser.add_argument("--steps", type=int, default=400, help="steps per worker count")
    arguments = parser.parse_args()

    floor_ns = nullcontext_ns()
    print(f"machine speed: `with nullcontext()` costs {floor_ns:.0f} ns here\n")
    print(f"{'nodes':>5} {'bytes':>6} {'snapshot us':>12} {'pipe us':>8} {'merge us':>9} {'total us':>9} {'w/o pipe':>9}")
    for nodes in (10, 50, 200):
        costs = stage_costs(nodes, arguments.repeats)
        total = costs["snapshot"] + costs["transport"] + costs["merge"]
        print(
            f"{nodes:5d} {costs['bytes']:6.0f} {costs['snapshot']:12.1f} {costs['transport']:8.1f}"
            f" {costs['merge']:9.1f} {total:9.1f} {costs['snapshot'] + costs['merge']:9.1f}"
        )

    print(f"\n{'workers':>7} {'merge us/step early':>20} {'late':>8} {'us per payload':>15}")
    for workers in (1, 4, 16, 64):
        steps = max(20, arguments.steps // workers)
        early, late = merge_cost_per_step(workers, steps)
        print(f"{workers:7d} {early:20.1f} {late:8.1f} {late / workers:15.1f}")


if __name__ == "__main__":
    main()
