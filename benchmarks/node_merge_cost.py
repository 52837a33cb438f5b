"""What does merging cost the driver per second, with and without merging per node first?

A cost model on payloads built in-process (no Ray): ``workers`` simulated workers spread evenly
over ``nodes`` simulated nodes each flush a 12-block tree once a second (the default flush
interval), for ``--intervals`` seconds of run.

* **Without per-node merging** the driver merges every worker payload: ``workers`` a second.
* **With it** each node's :class:`~profiler.multiprocess.node_merge.NodeMerger` merges its
  workers' payloads and hands one payload over per interval; the driver merges ``nodes`` a second.
  The busiest node's merging is printed too: it runs on that node, beside its workers.

Every merge is timed as it runs, the folds included (a dump reads the figures, so each variant's
figures are read once at the end, counted in its last interval), except in the first interval,
whose payloads declare every block name once per stream: the figures are a run's steady state. Both variants run on the same
pre-built payloads, interleaved round by round (the order alternating), and each figure is the
median over ``--rounds`` rounds. The table gives microseconds of merging per second of run, and
that as a share of one core.

    python benchmarks/node_merge_cost.py [--intervals 11] [--rounds 3]

The goal (issue 28): the driver's cost grows with the nodes, not the workers: at 1,000 workers
over 32 nodes, at most a tenth of merging every worker payload.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Any

from profiler import hierarchical_timer
from profiler.multiprocess.merge import TimerMerger
from profiler.multiprocess.node_merge import NodeMerger
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing.timers import TimerStack

WORKERS = (1, 10, 100, 1000)
NODES = (1, 4, 32)
BLOCKS = 12  # a worker's tree: the 12-block tree of benchmarks/ray_throughput.py
GOAL_RATIO_AT_SCALE = 0.10  # with / without at 1,000 workers over 32 nodes


def one_interval(stack: TimerStack) -> tuple[Any, ...]:
    """A second of a worker's work: 12 distinct blocks (3 parents of 3 children), then its payload."""
    for group in range(3):
        with hierarchical_timer(f"env.block{group:02d}", stack):
            for child in range(3):
                with hierarchical_timer(f"env.child{child:02d}", stack):
                    pass
    return snapshot_and_flush(stack)


def build_payloads(workers: int, intervals: int) -> list[list[tuple[Any, ...]]]:
    """``payloads[interval][worker]``: each worker's stream, one payload an interval."""
    stacks = [TimerStack(f"worker {index}") for index in range(workers)]
    return [[one_interval(stack) for stack in stacks] for _ in range(intervals)]


def without_node_merging(payloads: list[list[tuple[Any, ...]]]) -> float:
    """Seconds the driver spends merging every worker payload, folds and final read included."""
    driver = TimerMerger(TimerStack("driver"))
    spent = 0.0
    for number, interval in enumerate(payloads):
        started = time.perf_counter()
        for worker, payload in enumerate(interval):
            driver.merge_payload(worker, payload)
        if number:
            spent += time.perf_counter() - started
    started = time.perf_counter()
    driver.fold()
    return spent + time.perf_counter() - started


def with_node_merging(payloads: list[list[tuple[Any, ...]]], nodes: int) -> tuple[float, float]:
    """Seconds the driver spends merging one payload per node per interval, and seconds the
    busiest node spends merging its workers' payloads and taking its own (worker ``i`` runs on
    node ``i % nodes``)."""
    node_mergers = [NodeMerger(f"node {index}") for index in range(nodes)]
    node_spent = [0.0] * nodes
    driver = TimerMerger(TimerStack("driver"))
    driver_spent = 0.0
    for number, interval in enumerate(payloads):
        taken = []
        for index, node in enumerate(node_mergers):
            started = time.perf_counter()
            for worker in range(index, len(interval), nodes):
                node.add(worker, interval[worker])
            taken.append(node.take())
            if number:
                node_spent[index] += time.perf_counter() - started
        started = time.perf_counter()
        for index, payload in enumerate(taken):
            if payload is not None:
                driver.merge_payload(index, payload)
        if number:
            driver_spent += time.perf_counter() - started
    started = time.perf_counter()
    driver.fold()
    return driver_spent + time.perf_counter() - started, max(node_spent)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--intervals", type=int, default=11, help="seconds of run simulated (one flush each)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per configuration (median)")
    options = parser.parse_args()
    # Seconds over the measured intervals (all but the first) -> microseconds per second of run.
    per_second = 1e6 / (options.intervals - 1)
    print(f"driver merge cost per second of run, each worker flushing a {BLOCKS}-block tree once a second")
    print(f"({options.intervals - 1} intervals measured after the first, median of {options.rounds} "
          "interleaved rounds)\n")
    header = (f"{'workers':>7} {'nodes':>5} | {'payloads/s to driver':>20} | {'driver us/s: all':>16} "
              f"{'per node':>9} {'ratio':>6} | {'share of a core: all':>20} {'per node':>9} | "
              f"{'busiest node us/s':>17}")
    print(header)
    print("-" * len(header))
    verdict = None
    for workers in WORKERS:
        payloads = build_payloads(workers, options.intervals)
        for nodes in NODES:
            if nodes > workers:
                continue
            direct, grouped, busiest = [], [], []
            for round_index in range(options.rounds):
                order = (0, 1) if round_index % 2 == 0 else (1, 0)
                for variant in order:
                    if variant == 0:
                        direct.append(without_node_merging(payloads))
                    else:
                        driver, node = with_node_merging(payloads, nodes)
                        grouped.append(driver)
                        busiest.append(node)
            all_us = statistics.median(direct) * per_second
            node_us = statistics.median(grouped) * per_second
            ratio = node_us / all_us
            print(f"{workers:7d} {nodes:5d} | {workers:>9d} -> {nodes:>7d} | {all_us:16,.0f} {node_us:9,.0f} "
                  f"{ratio:6.3f} | {all_us / 1e6:20.2%} {node_us / 1e6:9.2%} | "
                  f"{statistics.median(busiest) * per_second:17,.0f}")
            if (workers, nodes) == (WORKERS[-1], NODES[-1]):
                verdict = ratio
    if verdict is not None:
        met = "met" if verdict <= GOAL_RATIO_AT_SCALE else "MISSED"
        print(f"\n1,000 workers over 32 nodes: the driver merges at {verdict:.3f}x the cost of merging "
              f"every payload (goal <= {GOAL_RATIO_AT_SCALE}: {met})")


if __name__ == "__main__":
    main()
