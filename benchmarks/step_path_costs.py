"""What the manager's own Python costs on the step path, piece by piece, in one process.

    python benchmarks/step_path_costs.py            # 41 interleaved rounds
    python benchmarks/step_path_costs.py --quick    # 15 rounds, rough

``benchmarks/step_floor.py`` measures the whole step against the pipe's floor; on a loaded
machine its figures are dominated by the scheduler. These are the pieces the trainer and the
worker add to it themselves, measured in-process, where the load matters less:

* the worker's ``env.step`` block (``envmanager/transport/env_calls.py``): a trivial env's step
  timed through the step timer, C helper (``_step_core.c``) and Python reference
  (``timed_calls.PythonStepTimer``), each as nanoseconds over the untimed call;
* the trainer's own CPU per step (``time.thread_time``: its system calls included, its sleep
  not): waiting with no timeout (the default), where ``WorkerPool.wait`` reads the reply's
  start as the wait (write, read: the raw round trip's system calls), against waiting with a
  timeout, where it polls first (write, poll, read);
* the table a fold of the step's held runs adds up (``phased_block.runs_table``): C, and its
  Python reference.

Each variant runs in alternating rounds; figures are medians over rounds. Goal (printed, never
asserted): the compiled step timer cheaper than its Python reference, the read-wait cheaper
than polling first.
"""

from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable

import numpy as np
from step_floor import TrivialEnv

from envmanager import SubprocessEnvManager
from envmanager.measurement.env_time import CpuSampler
from envmanager.transport import timed_calls
from envmanager.transport.env_calls import make_env_calls


def _per_call(function: Callable[[], None], calls: int) -> float:
    started = time.perf_counter()
    for _ in range(calls):
        function()
    return (time.perf_counter() - started) / calls * 1e9


def measure_env_step(rounds: int, calls: int) -> dict[str, list[float]]:
    """Nanoseconds per worker env call: untimed, timed in C, timed in Python."""
    env = TrivialEnv()
    variants = {"untimed": make_env_calls(None, False, CpuSampler(0))[1]}
    if timed_calls.compiled():
        variants["step timer, C"] = make_env_calls(None, True, CpuSampler(0))[1]
    default = timed_calls.compiled()
    timed_calls.use_compiled(False)
    variants["step timer, Python"] = make_env_calls(None, True, CpuSampler(0))[1]
    timed_calls.use_compiled(default)
    samples: dict[str, list[float]] = {label: [] for label in variants}
    for _ in range(rounds):
        for label, step in variants.items():
            samples[label].append(_per_call(lambda: step(env, 0), calls))
    return samples


def measure_trainer_step(rounds: int, calls: int) -> dict[str, list[float]]:
    """Nanoseconds of the trainer's own CPU per step (its thread's CPU time, system calls
    included; the worker's and the wait's sleep are not): waiting by reading the reply (no
    timeout, the default) against polling first (a timeout: ``WorkerPool.wait``'s poll loop)."""
    manager = SubprocessEnvManager([TrivialEnv])
    try:
        manager.reset(seed=0)
        actions = np.zeros(1, dtype=manager.action_space.dtype)
        variants = {"no timeout (read)": None, "a timeout (poll, read)": 3600.0}
        samples: dict[str, list[float]] = {label: [] for label in variants}
        for _ in range(rounds):
            for label, timeout in variants.items():
                manager.timeout = timeout
                started = time.thread_time()
                for _ in range(calls):
                    manager.step(actions)
                samples[label].append((time.thread_time() - started) / calls * 1e9)
        return samples
    finally:
        manager.close()


def measure_table(rounds: int, calls: int) -> dict[str, list[float]]:
    """Microseconds to turn 1024 held step runs into the table a fold adds up: C, Python."""
    from profiler.timing import accelerator
    from profiler.timing.phased_block import FOLD_AT_RUNS, runs_table, runs_table_in_python

    # A step's run: start, sent, waited, end, waiting since, the worker's reply stamp.
    offsets = (0.0, 1e-5, 5e-5, 6e-5, 1e-5, 4e-5)
    runs = [tuple(1000.0 + i * 1e-4 + offset for offset in offsets) for i in range(FOLD_AT_RUNS)]
    variants = {"Python reference": runs_table_in_python}
    if accelerator.extension is not None:
        variants["C"] = runs_table
    samples: dict[str, list[float]] = {label: [] for label in variants}
    for _ in range(rounds):
        for label, table in variants.items():
            samples[label].append(_per_call(lambda: table(runs, 6), calls) / 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds: rough figures, fast")
    args = parser.parse_args()
    rounds, calls = (15, 2000) if args.quick else (41, 5000)
    print(f"{rounds} interleaved rounds of {calls} calls, medians, ns per call")
    steps = measure_env_step(rounds, calls)
    untimed = steps["untimed"]
    for label, samples in steps.items():
        over = statistics.median(mine - base for mine, base in zip(samples, untimed))
        goal = "   goal: below the Python reference" if label == "step timer, C" else ""
        print(f"worker env step, {label:<20} {statistics.median(samples):7.0f}  (+{over:.0f} over untimed){goal}")
    for label, samples in measure_trainer_step(rounds, calls // 4).items():
        goal = "   goal: below polling first" if label.startswith("no timeout") else ""
        print(f"trainer CPU per step, {label:<24} {statistics.median(samples):7.0f}{goal}")
    for label, samples in measure_table(rounds, 20).items():
        goal = "   goal: below the Python reference" if label == "C" else ""
        print(f"fold's table of 1024 runs, {label:<16} {statistics.median(samples):7.1f} us{goal}")

if __name__ == "__main__":
    main()
