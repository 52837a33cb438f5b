"""What does shipping worker timers cost? Payload bytes and microseconds, worker to merged tree,
the current payload (version 4: names once, then columns of numbers) beside version 3 (every name
in every payload), measured in one run.

The merger holds a payload's rows and adds them into the trees in bulk, every
``FOLD_AT_ROWS`` rows a stream holds and whenever the figures are read (see ``profiler.multiprocess.merge``).
So a merge's cost is uneven: most payloads cost their validation, and one in every few also pays
for adding the rows of all of them. Every merge figure here is therefore a mean over whole
rounds of folds, the folds included, never a median of single merges (which would leave them out).

Part 1, for timer trees of 10, 50 and 200 nodes: the pickled payload's size and the time of each
stage, the two versions interleaved payload by payload: ``snapshot_and_flush`` in the worker;
pickling and unpickling as a pipe does (``ForkingPickler.dumps``, ``pickle.loads``: what
``Connection.send`` and ``recv`` run, without the system calls); ``TimerMerger.merge_payload`` in
the trainer (validation included), folds included. Each figure is the median, over windows of
payloads that each end with a fold, of the window's mean. Goal (issue 12): a 50-node payload from
snapshot to merged in at most 20 us. A real ``multiprocessing.Pipe`` trip of the same payload is
printed beside, for scale: it is paid by the reply the payload rides on anyway.

Part 2, many workers: fleets of 1 to 1,000 simulated workers each flush a 50-node tree every step,
and the trainer merges each payload as it arrives. Every fleet steps in every round (about 1,000
payloads a round each), so all see the same load, and its figures are read (folded into both
trees, as a dump does) once at the end, counted in its last round. The figure is the merge cost
per payload over the whole run (every merge and fold, over the payloads), and over the first and
the last round. A fleet of 1,000 workers gives each stream one payload a round, too few for a
stream's own fold: its rows wait for the merger's bound on rows held (``FOLD_AT_HELD_ROWS``) or
the read, whose cost then falls on few payloads. So the table is printed for each number of
rounds given (``--rounds``; by default 6 and 20: a read after 7 and after 21 payloads a worker,
7 s and 21 s of a run flushing at the default interval). Goal: flat from 1 to 1,000 workers: at
most 1.5 times the cost with one worker.

Part 3, where a 50-node payload's time goes (version 4), each stage timed apart in one loop:
the snapshot; pickling, and the part of it any message through a pipe pays (pickling ``None``);
the trainer's validation on its own, as the merger runs it (the payload's first reading); then
the whole merge, which validates again (on data now in cache) and holds the rows; then the fold,
which adds the rows of all the payloads held, per payload; and the fold's cost when it holds
1, 2, 4, 8, 20 and 40 payloads of the stream (a read of the figures folds whatever is held).

Microseconds depend on the machine and its load, so the script also prints the cost of the
cheapest Python ``with`` block (``contextlib.nullcontext()``) measured in the same run, and every
comparison is a ratio of figures measured side by side.

    python benchmarks/merge_cost.py [--repeats 2000] [--rounds 6 20]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import pickle
import statistics
import time
import timeit
from multiprocessing.reduction import ForkingPickler
from types import ModuleType
from typing import Any, Callable

from profiler import get_timer_tree, hierarchical_timer
from profiler.timing import timers
from profiler.multiprocess import merge as merge_v4
from profiler.multiprocess import payload as payload_v4
from profiler.timing.timers import TimerStack
from profiler.multiprocess.worker_stream import FOLD_AT_ROWS
from reference_payload import load_version_3

GOAL_SNAPSHOT_TO_MERGED_US = 20.0
GOAL_FLAT = 1.5  # cost per payload with N workers at most this many times the cost with one


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


def mean_us(samples: list[float]) -> float:
    return statistics.fmean(samples) * 1e6


def payloads_per_fold(nodes: int) -> int:
    """How many payloads of ``nodes`` rows a stream holds until it folds them."""
    return -(-FOLD_AT_ROWS // nodes)


def windowed_us(samples: list[float], window: int) -> float:
    """The median over consecutive windows of ``window`` samples of each window's mean: the
    cost per payload with the folds spread over the payloads they add, noise filtered."""
    if len(samples) < window:  # too few repeats for one window: the mean of them all
        return statistics.fmean(samples) * 1e6
    means = [statistics.fmean(samples[start : start + window]) for start in range(0, len(samples) - window + 1, window)]
    return statistics.median(means) * 1e6


class Version:
    """One payload version's worker and trainer, timing each stage of a payload's trip."""

    def __init__(self, name: str, payload: ModuleType, merge: ModuleType, nodes: int) -> None:
        self.name = name
        self.snapshot_and_flush: Callable[[TimerStack], Any] = payload.snapshot_and_flush
        self.worker = TimerStack(f"worker {name}")
        self.merger = merge.TimerMerger(TimerStack(f"trainer {name}"))
        self.nodes = nodes
        self.stages: dict[str, list[float]] = {"snapshot": [], "pickle": [], "merge": []}
        self.sizes: list[int] = []

    def one_payload(self) -> Any:
        run_blocks(self.worker, self.nodes)
        started = time.perf_counter()
        payload = self.snapshot_and_flush(self.worker)
        snapped = time.perf_counter()
        data = ForkingPickler.dumps(payload)  # what Connection.send pickles
        received = pickle.loads(data)  # what Connection.recv unpickles
        unpickled = time.perf_counter()
        self.merger.merge_payload(0, received)
        merged = time.perf_counter()
        self.stages["snapshot"].append(snapped - started)
        self.stages["pickle"].append(unpickled - snapped)
        self.stages["merge"].append(merged - unpickled)
        self.sizes.append(len(data))
        return payload

    def figures(self) -> dict[str, float]:
        """Each stage's cost per payload over windows of two folds (the first payload declared
        the names, so the windows start after it, when the stream held nothing)."""
        window = 2 * payloads_per_fold(self.nodes)
        figures = {stage: windowed_us(samples[1:], window) for stage, samples in self.stages.items()}
        figures["total"] = sum(figures.values())
        figures["bytes"] = statistics.median(self.sizes)
        return figures


def pipe_trip_us(payload: Any, repeats: int) -> float:
    """Median time to send ``payload`` through a real pipe and receive it, in this process."""
    sender, receiver = multiprocessing.Pipe()
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        sender.send(payload)
        receiver.recv()
        samples.append(time.perf_counter() - started)
    sender.close()
    receiver.close()
    return median_us(samples)


def stage_table(version_3: tuple[ModuleType, ModuleType] | None, repeats: int) -> None:
    print(
        f"{'nodes':>5} {'version':>7} {'bytes':>6} {'snapshot us':>12} {'pickle us':>10} {'merge us':>9}"
        f" {'total us':>9} {'v3/v4':>6} {'goal':>8} {'pipe trip us':>13}"
    )
    for nodes in (10, 50, 200):
        versions = [Version("v4", payload_v4, merge_v4, nodes)]
        if version_3 is not None:
            versions.append(Version("v3", *version_3, nodes))
        last_payload = None
        for _ in range(repeats):  # interleaved, so both see the same load
            for version in versions:
                payload = version.one_payload()
                if version.name == "v4":
                    last_payload = payload
        figures = {version.name: version.figures() for version in versions}
        for version in versions:
            costs = figures[version.name]
            ratio = f"{figures['v3']['total'] / costs['total']:6.2f}" if "v3" in figures and version.name == "v4" else ""
            goal = ""
            if nodes == 50 and version.name == "v4":
                met = "met" if costs["total"] <= GOAL_SNAPSHOT_TO_MERGED_US else "MISSED"
                goal = f"<= {GOAL_SNAPSHOT_TO_MERGED_US:.0f} {met}"
            pipe = f"{pipe_trip_us(last_payload, repeats):13.1f}" if version.name == "v4" else ""
            print(
                f"{nodes:5d} {version.name:>7} {costs['bytes']:6.0f} {costs['snapshot']:12.1f} "
                f"{costs['pickle']:10.1f} {costs['merge']:9.1f} {costs['total']:9.1f} {ratio:>6} "
                f"{goal:>8} {pipe}"
            )


class WorkerFleet:
    """``workers`` simulated workers of one payload version and the trainer merging their payloads,
    each merge timed."""

    def __init__(self, payload: ModuleType, merge: ModuleType, workers: int) -> None:
        self.snapshot_and_flush = payload.snapshot_and_flush
        self.stacks = [TimerStack(f"worker {index}") for index in range(workers)]
        self.merger = merge.TimerMerger(TimerStack("trainer"))
        self.rounds: list[list[float]] = []

    def step(self, record: bool) -> None:
        """Every worker flushes a 50-node tree, and the trainer merges each payload as it arrives."""
        samples = []
        clock = time.perf_counter
        for worker_id, stack in enumerate(self.stacks):
            run_blocks(stack, 50)
            received = pickle.loads(ForkingPickler.dumps(self.snapshot_and_flush(stack)))
            started = clock()
            self.merger.merge_payload(worker_id, received)
            samples.append(clock() - started)
        if record:
            self.rounds[-1].extend(samples)

    def read(self) -> None:
        """Fold what the merger holds into both trees, as a dump does, counted in the last round."""
        started = time.perf_counter()
        fold = getattr(self.merger, "fold", None)  # version 3 adds every payload as it comes
        if fold is not None:
            fold()
        self.rounds[-1][-1] += time.perf_counter() - started


def worker_table(version_3: tuple[ModuleType, ModuleType] | None, rounds: int) -> None:
    """Merge cost per payload for 1 to 1,000 workers, every fleet stepping in every round (so all
    see the same load), each fleet about 1,000 payloads a round; early is the first round after
    the one that declared the names, late the last."""
    versions = {"v4": (payload_v4, merge_v4)}
    if version_3 is not None:
        versions["v3"] = version_3
    counts = (1, 10, 100, 1000)
    fleets = {(name, workers): WorkerFleet(*modules, workers) for name, modules in versions.items() for workers in counts}
    for fleet in fleets.values():
        fleet.step(record=False)  # declares the names, creates the nodes
    for _ in range(rounds):
        for (_, workers), fleet in fleets.items():
            fleet.rounds.append([])
            for _ in range(1000 // workers):
                fleet.step(record=True)
    for fleet in fleets.values():
        fleet.read()
    print(f"\nthe figures read once, after {rounds + 1} payloads a worker")
    print(
        f"{'workers':>7} {'v4 us/payload':>14} {'early':>6} {'late':>6} {'x 1 worker':>11}"
        f" {'v3 us/payload':>14} {'early':>6} {'late':>6} {'x 1 worker':>11} {'goal':>14}"
    )
    base = {name: mean_us([sample for samples in fleets[name, 1].rounds for sample in samples]) for name in versions}
    for workers in counts:
        row = f"{workers:7d}"
        met = True
        for name in ("v4", "v3"):
            if name not in versions:
                row += f" {'':>14} {'':>6} {'':>6} {'':>11}"
                continue
            fleet = fleets[name, workers]
            overall = mean_us([sample for samples in fleet.rounds for sample in samples])
            early, late = mean_us(fleet.rounds[0]), mean_us(fleet.rounds[-1])
            growth = overall / base[name]
            if name == "v4":
                met = growth <= GOAL_FLAT
            row += f" {overall:14.1f} {early:6.1f} {late:6.1f} {growth:11.2f}"
        row += f" {'x <= ' + format(GOAL_FLAT, '.1f') + (' met' if met else ' MISSED'):>14}"
        print(row)


def merged_dump(payload: ModuleType, merge: ModuleType, workers: int, steps: int) -> list[Any]:
    """The trainer's merged blocks and worker entries after a run on a clock that ticks 2**-20 s
    (about 1 us) per reading, as JSON text: the same run gives the same text whatever the payload
    version. The ticks are powers of two so that every sum of them is exact: version 4 adds a
    node's figures in bulk, in another order than version 3, and the text must not differ by
    rounding."""
    readings = iter(range(10**9))
    previous = timers.set_clock(lambda: next(readings) * 2.0**-20)
    try:
        worker_stacks = [TimerStack(f"worker {index}") for index in range(workers)]
        trainer = TimerStack("trainer")
        merger = merge.TimerMerger(trainer)
        for step in range(steps):
            for worker_id, stack in enumerate(worker_stacks):
                with hierarchical_timer("worker.loop", stack):  # open across every flush
                    run_blocks(stack, 10 + 5 * (step % 3) + worker_id)  # blocks appear late
                    received = pickle.loads(ForkingPickler.dumps(payload.snapshot_and_flush(stack)))
                merger.merge_payload(worker_id, received, trainer.root)
        tree = get_timer_tree(trainer, mergers=[merger])
        entries = [{key: value for key, value in entry.items() if key != "manager_id"} for entry in tree["workers"]]
        return [json.dumps(tree["children"]), json.dumps(entries)]
    finally:
        timers.set_clock(previous)


def stage_breakdown(repeats: int) -> None:
    """Part 3: the median of each stage of a 50-node payload's trip, version 4, the fold apart:
    the script folds one payload before the stream would, so that no merge folds."""
    worker = TimerStack("worker, stages")
    merger = merge_v4.TimerMerger(TimerStack("trainer, stages"))
    stages: dict[str, list[float]] = {
        "snapshot": [],
        "pickle": [],
        "any message": [],
        "validation": [],
        "merge": [],
    }
    folds: list[float] = []  # per payload folded
    known_ids: tuple[int, ...] = ()  # the previous payload's row ids, which the merger keeps
    held = 0
    clock = time.perf_counter
    for _ in range(repeats):
        run_blocks(worker, 50)
        started = clock()
        payload = payload_v4.snapshot_and_flush(worker)
        snapped = clock()
        received = pickle.loads(ForkingPickler.dumps(payload))
        unpickled = clock()
        pickle.loads(ForkingPickler.dumps(None))
        nothing_sent = clock()
        payload_v4.check_header(received)
        row_ids = payload_v4.check_payload(received, payload_v4.check_declarations(received[7]), known_ids)
        validated = clock()
        merger.merge_payload(0, received)
        merged = clock()
        known_ids = row_ids
        for stage, seconds in zip(
            stages,
            (snapped - started, unpickled - snapped, nothing_sent - unpickled, validated - nothing_sent, merged - validated),
        ):
            stages[stage].append(seconds)
        held += 1
        if held == payloads_per_fold(50) - 1:
            started = clock()
            merger.fold()
            folds.append((clock() - started) / held)
            held = 0
    figures = {stage: median_us(samples) for stage, samples in stages.items()}
    print(
        f"\nwhere a 50-node payload's time goes (v4, median us): snapshot {figures['snapshot']:.1f}, "
        f"pickling {figures['pickle']:.1f} (of which {figures['any message']:.1f} any message pays), "
        f"validation on its own {figures['validation']:.1f}, then the merge, validating again and "
        f"holding the rows {figures['merge']:.1f}, and the fold that adds them "
        f"{median_us(folds):.1f} per payload ({payloads_per_fold(50) - 1} payloads a fold)"
    )
    fold_sizes = (1, 2, 4, 8, 20, 40)
    costs = {size: [] for size in fold_sizes}
    for _ in range(max(repeats // 100, 3)):
        for size in fold_sizes:  # interleaved, so all see the same load
            for _ in range(size):
                run_blocks(worker, 50)
                merger.merge_payload(0, pickle.loads(ForkingPickler.dumps(payload_v4.snapshot_and_flush(worker))))
            started = clock()
            merger.fold()
            costs[size].append(clock() - started)
    print(
        "a fold of a stream's 50-node payloads (a read folds what is held), median us per fold (per payload): "
        + ", ".join(
            f"{size} payloads {median_us(costs[size]):.1f} ({median_us(costs[size]) / size:.1f})" for size in fold_sizes
        )
    )


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
    parser.add_argument("--repeats", type=int, default=2000, help="payloads per tree size and version")
    parser.add_argument(
        "--rounds", type=int, nargs="+", default=[6, 20], help="rounds of about 1,000 payloads per worker count"
    )
    arguments = parser.parse_args()

    version_3 = load_version_3()
    floor_ns = nullcontext_ns()
    print(f"machine speed: `with nullcontext()` costs {floor_ns:.0f} ns here\n")
    stage_table(version_3, arguments.repeats)
    for rounds in arguments.rounds:
        worker_table(version_3, rounds)
    stage_breakdown(arguments.repeats)
    if version_3 is not None:
        same = merged_dump(payload_v4, merge_v4, 4, 30) == merged_dump(*version_3, 4, 30)
        print(f"\nmerged trees and worker entries of one run, v4 against v3: {'identical JSON' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    main()
