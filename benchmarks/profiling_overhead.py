"""What profiling costs a vector step: SubprocessEnvManager with profiling on vs off, side by side.

    python benchmarks/profiling_overhead.py                  # every row (a few minutes)
    python benchmarks/profiling_overhead.py --rows CartPole-v1:4 --rounds 120
    python benchmarks/vector_throughput.py --overhead        # the same

The rows are those of ``benchmarks/vector_throughput.py``: CartPole-v1 and the synthetic envs
doing ~50 us and ~1 ms of CPU work per step, with 2, 4 and 8 envs, at default settings. Per row
the two managers step in short rounds, in turn (who goes first alternates), and a fresh pair is
built every few rounds: on a machine with fewer cores than processes, where the scheduler
happens to place one manager's workers can make it several percent faster or slower for its
whole life. A row's figure is the median of the per-round ratios, with its quartiles:

* wall: the rate with profiling off over the rate with it on, minus 1;
* CPU: the CPU time per vector step of the trainer and all workers together, on over off,
  minus 1 (Linux: ``/proc/<pid>/schedstat``; left out elsewhere);
* added CPU per step: what profiling added to the trainer's CPU time per vector step (its own
  thread's clock) and to all its workers' together, in microseconds, median of per-round
  differences: which side a cost is on, and a figure less swayed by how the scheduler happened
  to overlap the processes than the wall time.

Goal (issue 12): at most 2 % on every row. Printed, never asserted: it depends on the machine.

Then the trainer's share alone, inside real steps: one profiled manager steps in rounds that
alternate between its timed step and its untimed one (its step block set aside; the workers time
their env calls either way), so both arms run on the same processes, placed on the same cores.
Two managers built alike differ by a few microseconds per step on this project's machine, even
with their processes pinned to the same cores, which is as much as the trainer's share itself;
one manager toggled does not. Per row: what the step's timing added to the trainer's CPU time
per step, and to the wall time of a step (median of per-round differences, quartiles).

Then it breaks what profiling adds to a vector step into its parts, each run alone in this
process (best of several repeats) and set against what the same code does unprofiled: the
trainer's step block and its three parts with the critical path's stamps (kept as they are and
counted in bulk, that count shown on its own too), and per worker
its env call's timing (the real guard a worker wraps each env call in, CPU sampling included)
and the stamp and flush check of its reply. Timed alone, in a hot loop, a part costs less than
it does inside a real step, where the caches are cold after the other processes ran: the sum
is a floor, not the whole cost.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
import timeit
from pathlib import Path
from typing import Any, Callable

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from envmanager import SubprocessEnvManager  # noqa: E402
from envmanager.measurement.critical_path import CriticalPath  # noqa: E402
from envmanager.measurement.env_time import CpuSampler  # noqa: E402
from envmanager.transport.env_calls import make_env_calls  # noqa: E402
from profiler.timing import timers  # noqa: E402
from profiler.timing.phased_block import FOLD_AT_RUNS, PhasedBlock  # noqa: E402
from profiler.multiprocess.payload import WorkerTimers  # noqa: E402
from benchmark_envs import ENVS, steps_per_second  # noqa: E402

GOAL = 0.02
"""Issue 12: profiling on costs at most 2 % against off, on every row."""

ROWS = [(env_name, num_envs) for env_name in ("CartPole-v1", "busy-50us", "busy-1ms") for num_envs in (2, 4, 8)]
STEPS_PER_ROUND = {"CartPole-v1": 300, "busy-50us": 150, "busy-1ms": 20}
"""Short rounds, many of them: a burst of load from the machine then hits few rounds."""
ROUNDS_PER_PAIR = 4


class RowFigures:
    """One row's per-round figures: wall (off rate / on rate), CPU per step (on / off), and
    what profiling added per step to the trainer's CPU time and to all workers' together."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []
        self.step_seconds_off: list[float] = []
        self.trainer_added: list[float] = []
        self.workers_added: list[float] = []


def measure_row(env_name: str, num_envs: int, rounds: int, steps: int) -> RowFigures:
    """Profiling on vs off on one row: ``rounds`` rounds of ``steps`` vector steps each."""
    env_fns = [ENVS[env_name]] * num_envs
    figures = RowFigures()
    for first_round in range(0, rounds, ROUNDS_PER_PAIR):
        on, off = SubprocessEnvManager(env_fns), SubprocessEnvManager(env_fns, profiling=False)
        try:
            for envs in (on, off):
                envs.reset(seed=0)
                steps_per_second(envs, num_envs, max(5, steps // 5))  # warm up
            for round_index in range(first_round, min(rounds, first_round + ROUNDS_PER_PAIR)):
                pair = (on, off) if round_index % 2 else (off, on)
                rates, trainer, workers = {}, {}, {}
                for envs in pair:
                    trainer_before, workers_before = time.thread_time(), _worker_cpu_seconds(envs)
                    rates[envs] = steps_per_second(envs, num_envs, steps)
                    trainer[envs] = (time.thread_time() - trainer_before) / steps
                    workers[envs] = (_worker_cpu_seconds(envs) - workers_before) / steps
                figures.wall.append(rates[off] / rates[on])
                figures.step_seconds_off.append(num_envs / rates[off])
                figures.trainer_added.append(trainer[on] - trainer[off])
                if workers[off] > 0:  # 0.0: no per-process CPU clock fine enough here
                    figures.cpu.append((trainer[on] + workers[on]) / (trainer[off] + workers[off]))
                    figures.workers_added.append(workers[on] - workers[off])
        finally:
            on.close()
            off.close()
    return figures


def measure_trainer_in_situ(env_name: str, num_envs: int, rounds: int, steps: int) -> RowFigures:
    """The trainer's step timing alone, inside real steps: one profiled manager, its step timed
    and untimed in alternate rounds (``wall``: timed over untimed seconds per step;
    ``trainer_added``: the trainer's CPU seconds per step, timed minus untimed)."""
    figures = RowFigures()
    for first_round in range(0, rounds, ROUNDS_PER_PAIR):
        envs = SubprocessEnvManager([ENVS[env_name]] * num_envs)
        record = envs._step_record
        try:
            envs.reset(seed=0)
            steps_per_second(envs, num_envs, max(5, steps // 5))  # warm up
            for round_index in range(first_round, min(rounds, first_round + ROUNDS_PER_PAIR)):
                seconds, trainer = {}, {}
                for timed in (True, False) if round_index % 2 else (False, True):
                    # Without its step record the manager's step takes its unprofiled path.
                    envs._step_record = record if timed else None
                    trainer_before = time.thread_time()
                    seconds[timed] = num_envs / steps_per_second(envs, num_envs, steps)
                    trainer[timed] = (time.thread_time() - trainer_before) / steps
                figures.wall.append(seconds[True] / seconds[False])
                figures.step_seconds_off.append(seconds[False])
                figures.trainer_added.append(trainer[True] - trainer[False])
        finally:
            envs._step_record = record
            envs.close()
    return figures


def print_trainer_in_situ(rows: list[tuple[str, int]], rounds: int | None) -> None:
    print(
        "\nthe trainer's step timing alone, inside real steps: one profiled manager, its step timed "
        "and untimed in alternate rounds; median of per-round figures (quartiles)"
    )
    print(f"{'env':<12} {'n':>2} {'step untimed':>12}  {'trainer CPU added per step':<30} {'wall: timed/untimed - 1':<28}")
    for env_name, num_envs in rows:
        figures = measure_trainer_in_situ(env_name, num_envs, *_rounds_and_steps(env_name, rounds))
        step_us = statistics.median(figures.step_seconds_off) * 1e6
        print(
            f"{env_name:<12} {num_envs:>2} {step_us:10.0f}us  {_median_and_quartiles_us(figures.trainer_added):<30} "
            f"{_median_and_quartiles(figures.wall):<28}",
            flush=True,
        )


def _worker_cpu_seconds(envs: SubprocessEnvManager) -> float:
    """CPU time used so far by the manager's workers, to the nanosecond.

    ``/proc/<pid>/schedstat`` (Linux) counts nanoseconds on a CPU; elsewhere nothing as fine is
    at hand (psutil counts clock ticks), so the CPU figure is left out (0.0). The trainer's own
    is ``time.thread_time()``, as fine.
    """
    total = 0.0
    for handle in envs._pool.workers:
        try:
            with open(f"/proc/{handle.process.pid}/schedstat") as schedstat:
                total += int(schedstat.read().split()[0]) / 1e9
        except OSError:
            return 0.0
    return total


def _rounds_and_steps(env_name: str, rounds: int | None) -> tuple[int, int]:
    """A row's rounds (``rounds``, or the default for its env) and steps per round."""
    row_rounds = rounds if rounds is not None else (16 if env_name == "busy-1ms" else 24)
    return row_rounds, STEPS_PER_ROUND.get(env_name, 100)


def _median_and_quartiles(ratios: list[float]) -> str:
    """Per-round ratios as a change: ``+1.2% (-0.3% .. +2.5%)``."""
    return _summary([ratio - 1 for ratio in ratios], lambda value: f"{value:+.1%}", width=7)


def _median_and_quartiles_us(differences: list[float]) -> str:
    """Per-round differences in seconds, as microseconds: ``+1.20us (+0.80 .. +1.90)``."""
    return _summary([seconds * 1e6 for seconds in differences], lambda value: f"{value:+.2f}", width=6, unit="us")


def _summary(values: list[float], show: Callable[[float], str], width: int, unit: str = "") -> str:
    """The median of ``values`` (right-aligned to ``width``), then their quartiles where there
    are two values or more."""
    median = f"{show(statistics.median(values)):>{width}}{unit}"
    if len(values) < 2:
        return median
    low, _, high = statistics.quantiles(values, n=4)
    return f"{median} ({show(low)} .. {show(high)})"


def print_rows(rows: list[tuple[str, int]], rounds: int | None) -> dict[tuple[str, int], RowFigures]:
    print(
        f"profiling on vs off at default settings, fresh managers every {ROUNDS_PER_PAIR} rounds; "
        "median of per-round ratios (quartiles)"
    )
    print(
        f"{'env':<12} {'n':>2} {'step off':>10}  {'wall: off/on - 1':<28} {'CPU per step: on/off - 1':<28} "
        f"{'added CPU per step: trainer, workers':<37} goal"
    )
    measured = {}
    for env_name, num_envs in rows:
        figures = measure_row(env_name, num_envs, *_rounds_and_steps(env_name, rounds))
        measured[(env_name, num_envs)] = figures
        step_us = statistics.median(figures.step_seconds_off) * 1e6
        cpu = _median_and_quartiles(figures.cpu) if figures.cpu else "n/a"
        added = f"{statistics.median(figures.trainer_added) * 1e6:+6.2f}us"
        added += f", {statistics.median(figures.workers_added) * 1e6:+6.2f}us" if figures.workers_added else ", n/a"
        print(
            f"{env_name:<12} {num_envs:>2} {step_us:8.0f}us  {_median_and_quartiles(figures.wall):<28} "
            f"{cpu:<28} {added:<37} <= {GOAL:.0%}",
            flush=True,
        )
    worst_key, worst = max(
        ((key, statistics.median(figures.wall) - 1) for key, figures in measured.items()), key=lambda item: item[1]
    )
    print(f"worst row, wall: {worst_key[0]} x{worst_key[1]} {worst:+.1%}   goal <= {GOAL:.0%} on every row")
    return measured


def profiling_costs(workers: int) -> dict[str, float]:
    """Seconds per vector step of each part profiling adds, measured here (best of several
    repeats), each against what the same code does with profiling off.

    The worker parts run in every worker at once: a step waits for one worker's share while
    there are cores for all, and the CPU does all of them when the workers outnumber the cores.
    """

    def best(function: Callable[[], Any], number: int = 50_000) -> float:
        return min(timeit.repeat(function, number=number, repeat=5)) / number

    critical_path = CriticalPath(workers, timers.get_timer_stack_for_thread(threading.current_thread()))
    step_block = PhasedBlock(
        "env_manager.step", ("send_actions", "wait_for_workers", "receive_results"),
        lambda runs: critical_path.count_steps(runs[:, 4:]),  # each run's stamps after the step's four
    )
    ready_at = [1.0 + index * 1e-4 for index in range(workers)]

    def timed_step_parts() -> None:
        # What the manager's step does to time itself, its parts and whom it waited for last
        # (see SubprocessEnvManager.step): the run and the stamps are kept, counted in bulk.
        clock = step_block.open()
        node = step_block.node
        sent = clock()  # type: ignore[misc]
        waited = clock()  # type: ignore[misc]
        end = clock()  # type: ignore[misc]
        step_block.stack.current = step_block.parent  # type: ignore[union-attr]
        runs = step_block.runs
        runs.append((node._start, sent, waited, end, sent, *ready_at))  # type: ignore[union-attr]
        if len(runs) >= FOLD_AT_RUNS:
            step_block.fold()

    def fold_held_runs() -> None:
        step_block.runs.extend([(1.0, 1.1, 1.2, 1.3, 1.1, *ready_at)] * FOLD_AT_RUNS)
        step_block.fold()

    env = _NoWorkEnv()
    _, profiled_step = make_env_calls(None, True, CpuSampler())
    _, plain_step = make_env_calls(None, False, CpuSampler())
    action = np.int64(0)
    worker_timers = WorkerTimers()
    now, perf_counter = timers.now, time.perf_counter

    def stamp_and_flush_check() -> None:
        # A profiled worker stamps its reply on the timers' clock, which also tells if a flush is due.
        if now() < worker_timers.quiet_until:
            return

    return {
        f"trainer: step, 3 parts, last of {workers}": best(timed_step_parts),
        "  of which the bulk count, per step": best(fold_held_runs, number=20) / FOLD_AT_RUNS,
        "each worker: env.step timed, CPU sampled": best(lambda: profiled_step(env, action))
        - best(lambda: plain_step(env, action)),
        "each worker: reply stamp and flush check": best(stamp_and_flush_check) - best(perf_counter),
    }


class _NoWorkEnv:
    """An env whose step does nothing: what remains of a guarded call is the guard."""

    def step(self, action: Any) -> None:
        return None


def print_breakdown(measured: dict[tuple[str, int], RowFigures]) -> None:
    """What profiling adds per vector step, part by part, against the rows' steps."""
    for num_envs in sorted({num_envs for _, num_envs in measured}):
        costs = profiling_costs(num_envs)
        steps = {
            env_name: statistics.median(figures.step_seconds_off)
            for (env_name, size), figures in measured.items()
            if size == num_envs
        }
        print(f"\nwhat profiling adds per vector step with {num_envs} workers, each part alone, best of 5:")
        header = "  ".join(f"{'% ' + name:>14}" for name in steps)
        print(f"  {'part':<46} {'us':>6}  {header}")
        trainer = worker = 0.0
        for label, seconds in costs.items():
            shares = "  ".join(f"{seconds / step:14.2%}" for step in steps.values())
            print(f"  {label:<46} {seconds * 1e6:6.2f}  {shares}")
            if label.startswith(" "):
                continue  # a share of the line above, already in the sum
            if label.startswith("trainer"):
                trainer += seconds
            else:
                worker += seconds
        # All workers' parts together: what the CPU does per step when the workers outnumber the cores.
        total = trainer + num_envs * worker
        shares = "  ".join(f"{total / step:14.2%}" for step in steps.values())
        print(f"  {'sum: trainer + all workers (CPU per step)':<46} {total * 1e6:6.2f}  {shares}")


def parse_row(text: str) -> tuple[str, int]:
    env_name, _, size = text.partition(":")
    if env_name not in ENVS or not size.isdigit():
        raise argparse.ArgumentTypeError(f"a row is ENV:N with ENV one of {', '.join(ENVS)}, got {text!r}")
    return env_name, int(size)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", type=parse_row, default=ROWS, help="rows as ENV:N (default: all)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per row (default 24, 16 for busy-1ms)")
    arguments = parser.parse_args(argv)
    measured = print_rows(arguments.rows, arguments.rounds)
    print_trainer_in_situ(arguments.rows, arguments.rounds)
    print_breakdown(measured)


if __name__ == "__main__":
    main()
