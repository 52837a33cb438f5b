"""What profiling changes in a vector step besides instructions: events per step, profiling on vs off.

    python benchmarks/profiling_events.py                          # CartPole-v1 x2 and x8
    python benchmarks/profiling_events.py --rows busy-50us:4 --rounds 24
    python benchmarks/profiling_events.py --syscalls               # and system calls, with strace -f

``benchmarks/profiling_overhead.py`` says how much profiling costs in place; the callgrind
benchmarks (``worker_step_instructions.py``, ``trainer_step_instructions.py``) count its
instructions, which predict a fraction of that. This one counts, per vector step, what callgrind
does not see, for the trainer and for all its workers together, with profiling on and off
(SubprocessEnvManager at default settings, two managers stepping in alternate rounds, fresh ones
every few rounds, as ``profiling_overhead.py`` does):

* CPU time (``/proc/<pid>/task/*/schedstat``, every thread of the process, kernel time included);
* voluntary and involuntary context switches (``/proc/<pid>/task/*/status``): a thread that
  profiling started and that wakes, or a wait more, shows here;
* minor page faults (``/proc/<pid>/stat``): memory profiling touches for the first time;
* garbage collections (``gc.get_stats()``, in the trainer and, through an attribute the envs are
  given, in each worker): objects profiling allocates and keeps;
* threads, at the end of the rounds;
* with ``--syscalls``, system calls per step of the whole process tree (``strace -f -c`` over
  one manager stepping, on and off, the steps' difference over two lengths).

Each figure is the median over rounds of its value per vector step, off and on, and the median
of the per-round differences with their quartiles. Counts are immune to the machine's load; CPU
time is not, quite (a step that finds its caches emptied by other processes runs longer: see
``worker_step_instructions.py --cold``). Linux only. Printed, never asserted.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchmark_envs import ENVS, steps_per_second  # noqa: E402
from envmanager import SubprocessEnvManager  # noqa: E402
from profiling_overhead import parse_row  # noqa: E402
from trainer_step_instructions import strace_counts  # noqa: E402

ROUNDS_PER_PAIR = 4
FIGURES = ("cpu_us", "voluntary", "involuntary", "minor_faults", "collections")


def counting_collections(factory: Callable[[], Any]) -> Callable[[], Any]:
    """``factory``'s env, given ``gc_collections()``: its worker's garbage collections so far
    (read with ``envs.call("gc_collections")``)."""

    def make() -> Any:
        env = factory()
        env.unwrapped.gc_collections = _collections
        return env

    return make


def _collections() -> int:
    return sum(generation["collections"] for generation in gc.get_stats())


def process_figures(pid: int) -> list[float]:
    """CPU microseconds, voluntary and involuntary context switches (all threads) and minor faults
    of one process so far."""
    cpu = voluntary = involuntary = 0
    for thread in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{thread}/schedstat") as schedstat:
            cpu += int(schedstat.read().split()[0])
        with open(f"/proc/{pid}/task/{thread}/status") as status:
            for line in status:
                if line.startswith("voluntary_ctxt_switches"):
                    voluntary += int(line.split()[1])
                elif line.startswith("nonvoluntary_ctxt_switches"):
                    involuntary += int(line.split()[1])
    with open(f"/proc/{pid}/stat") as stat:
        minor_faults = int(stat.read().rsplit(")", 1)[1].split()[7])
    return [cpu / 1e3, voluntary, involuntary, minor_faults]


def snapshot(envs: SubprocessEnvManager) -> tuple[list[float], list[float]]:
    """The trainer's figures and its workers' together, in the order of :data:`FIGURES`."""
    trainer = process_figures(os.getpid()) + [_collections()]
    workers = [0.0] * len(FIGURES)
    for handle in envs._pool.workers:
        for index, value in enumerate(process_figures(handle.process.pid)):
            workers[index] += value
    workers[-1] = sum(envs.call("gc_collections"))
    return trainer, workers


def threads(envs: SubprocessEnvManager) -> tuple[int, int]:
    """Threads of the trainer, and of all workers together."""
    return (len(os.listdir(f"/proc/{os.getpid()}/task")),
            sum(len(os.listdir(f"/proc/{handle.process.pid}/task")) for handle in envs._pool.workers))


def measure_row(env_name: str, num_envs: int, rounds: int, steps: int) -> None:
    factory = counting_collections(ENVS[env_name])
    per_round: dict[bool, list[list[float]]] = {True: [], False: []}
    thread_counts = {}
    for first_round in range(0, rounds, ROUNDS_PER_PAIR):
        pair = {profiling: SubprocessEnvManager([factory] * num_envs, profiling=profiling) for profiling in (True, False)}
        try:
            for envs in pair.values():
                envs.reset(seed=0)
                steps_per_second(envs, num_envs, max(5, steps // 5))  # warm up
            for round_index in range(first_round, min(rounds, first_round + ROUNDS_PER_PAIR)):
                for profiling in (True, False) if round_index % 2 else (False, True):
                    envs = pair[profiling]
                    trainer_before, workers_before = snapshot(envs)
                    steps_per_second(envs, num_envs, steps)
                    trainer_after, workers_after = snapshot(envs)
                    per_round[profiling].append(
                        [(after - before) / steps for before, after in zip(trainer_before, trainer_after)]
                        + [(after - before) / steps for before, after in zip(workers_before, workers_after)]
                    )
            thread_counts = {profiling: threads(envs) for profiling, envs in pair.items()}
        finally:
            for envs in pair.values():
                envs.close()
    print(f"{env_name} x{num_envs}: per vector step, off / on / on minus off (median of rounds, quartiles)")
    labels = [f"trainer {name}" for name in FIGURES] + [f"workers {name}" for name in FIGURES]
    for index, label in enumerate(labels):
        off = statistics.median(values[index] for values in per_round[False])
        on = statistics.median(values[index] for values in per_round[True])
        differences = [on_round[index] - off_round[index] for on_round, off_round in zip(per_round[True], per_round[False])]
        low, middle, high = statistics.quantiles(differences, n=4)
        print(f"  {label:<22} {off:10.3f} {on:10.3f} {statistics.median(differences):+9.3f} ({low:+.3f} .. {high:+.3f})")
    print(f"  threads (trainer, workers): off {thread_counts[False]}, on {thread_counts[True]}", flush=True)


def one_manager(profiling: bool, env_name: str, num_envs: int, steps: int) -> None:
    """What ``--syscalls`` runs under strace: one manager stepping ``steps`` times."""
    with SubprocessEnvManager([ENVS[env_name]] * num_envs, profiling=profiling) as envs:
        envs.reset(seed=0)
        steps_per_second(envs, num_envs, steps)


def system_calls(profiling: bool, env_name: str, num_envs: int, steps: int) -> dict[str, int]:
    """System calls of the whole process tree of one manager stepping ``steps`` times."""
    with tempfile.TemporaryDirectory() as folder:
        summary = Path(folder) / "summary"
        command = [sys.executable, __file__, "--one", "on" if profiling else "off", env_name, str(num_envs), str(steps)]
        subprocess.run(["strace", "-f", "-c", "-o", str(summary), "--", *command], capture_output=True, check=True)
        return strace_counts(summary.read_text())


def print_system_calls(env_name: str, num_envs: int, fewer: int, more: int) -> None:
    print(f"{env_name} x{num_envs}: system calls per vector step, trainer and workers (strace -f -c), off / on")
    per_step = {}
    for profiling in (False, True):
        few = system_calls(profiling, env_name, num_envs, fewer)
        many = system_calls(profiling, env_name, num_envs, more)
        per_step[profiling] = {name: (many.get(name, 0) - few.get(name, 0)) / (more - fewer) for name in many}
    for name in sorted(set(per_step[False]) | set(per_step[True]), key=lambda name: -per_step[True].get(name, 0)):
        off, on = per_step[False].get(name, 0.0), per_step[True].get(name, 0.0)
        if abs(off) >= 0.005 or abs(on) >= 0.005:
            print(f"  {name:<20} {off:8.3f} {on:8.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", nargs="+", type=parse_row, default=[("CartPole-v1", 2), ("CartPole-v1", 8)],
                        help="rows as ENV:N (default: CartPole-v1:2 CartPole-v1:8)")
    parser.add_argument("--rounds", type=int, default=16, help="rounds per row")
    parser.add_argument("--steps", type=int, default=400, help="vector steps per round")
    parser.add_argument("--syscalls", action="store_true", help="also system calls per step, with strace -f")
    parser.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        mode, env_name, num_envs, steps = arguments.one
        one_manager(mode == "on", env_name, int(num_envs), int(steps))
        return
    for env_name, num_envs in arguments.rows:
        measure_row(env_name, num_envs, arguments.rounds, arguments.steps)
        if arguments.syscalls:
            print_system_calls(env_name, num_envs, 1000, 3000)


if __name__ == "__main__":
    main()
