"""Profile a plain ``multiprocessing.Pool``: each task ships its own timings back with its result.

    python examples/multiprocessing_pool.py                      # 4 workers, 32 tasks
    python examples/multiprocessing_pool.py --workers 8 --tasks 100 --out pool_timers.json
    python examples/multiprocessing_pool.py --timeline           # also record spans

No env manager involved: the pattern works for any worker code. In the worker, time blocks as
usual and return ``snapshot_and_flush()`` next to the result; in the parent, hand every payload
to one ``TimerMerger``. The merged tree (with a ``workers`` section per pool process) is written
as timer JSON, ready for ``rlprof analyze`` or ``rlprof report``.
"""

from __future__ import annotations

import argparse
import multiprocessing
from pathlib import Path
from typing import Any

from profiler import (
    TimerMerger,
    hierarchical_timer,
    set_gauge,
    snapshot_and_flush,
    write_timing_tree,
)
from profiler.recording import events

_worker_id = -1  # set in each pool process by assign_worker_id


def assign_worker_id(next_id: Any, record_timeline: bool) -> None:
    """Pool initializer: number the pool's processes 0, 1, 2... so their trees can be told apart."""
    global _worker_id
    with next_id.get_lock():
        _worker_id = next_id.value
        next_id.value += 1
    if record_timeline:
        events.start_recording()  # a spawned process does not inherit the parent's recording


def simulate(task: int) -> tuple[int, float, tuple[Any, ...]]:
    """One unit of work, timed in the worker; returns (worker id, result, timer payload)."""
    size = 20_000 + 15_000 * (task % 4)  # uneven tasks, so the workers differ
    with hierarchical_timer("task"):
        with hierarchical_timer("simulate"):
            result = float(sum(index * index for index in range(size)))
        with hierarchical_timer("summarize"):
            result = result ** 0.5
    set_gauge("task_size", size)
    return _worker_id, result, snapshot_and_flush()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--tasks", type=int, default=32)
    parser.add_argument("--out", type=Path, default=Path("pool_timers.json"))
    parser.add_argument("--timeline", action="store_true", help="record spans for a trace")
    arguments = parser.parse_args()

    if arguments.timeline:
        events.start_recording()
    merger = TimerMerger()
    next_id = multiprocessing.Value("i", 0)
    with multiprocessing.Pool(
        arguments.workers, initializer=assign_worker_id, initargs=(next_id, arguments.timeline)
    ) as pool:
        with hierarchical_timer("pool.map"):
            for worker_id, _, payload in pool.imap_unordered(simulate, range(arguments.tasks)):
                merger.merge_payload(worker_id, payload)

    path = write_timing_tree(arguments.out)
    print(f"wrote {path}")
    slowest = merger.slowest_worker("task")
    if slowest is not None:
        print(
            f"task: mean {slowest.mean * 1e3:.2f} ms over {len(slowest.workers)} workers, slowest "
            f"worker {slowest.worker_id} at {slowest.max * 1e3:.2f} ms (+{slowest.gap * 1e3:.2f} ms)"
        )


if __name__ == "__main__":
    main()
