"""What the manager's own Python costs on the step path, piece by piece, in one process.

    python benchmarks/step_path_costs.py            # 41 interleaved rounds
    python benchmarks/step_path_costs.py --quick    # 15 rounds, rough

``benchmarks/step_floor.py`` measures the whole step against the pipe's floor; on a loaded
machine its figures are dominated by the scheduler. These are the pieces the trainer and the
worker add to it themselves, measured in-process, where the load matters less:

* the worker's ``env.step`` block (``envmanager/transport/env_calls.py``): a trivial env's step
  timed through the step timer, C helper (``_step_core.c``) and Python reference
  (``timed_calls.PythonStepTimer``), each as nanoseconds over the untimed call;
* the trainer's wait for a reply that is ready (``WorkerPool.wait``): with the poller kept from the
  previous wait (the step path's case) and with a poller made and filled for the wait (as every
  step did before).

Each variant runs in alternating rounds; figures are medians over rounds. Goal (printed, never
asserted): the compiled step timer cheaper than its Python reference, the kept poller cheaper
than a fresh one.
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
from envmanager.transport import protocol, timed_calls
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


def measure_wait(rounds: int, calls: int) -> dict[str, list[float]]:
    """Nanoseconds per ``WorkerPool.wait`` on a reply that is ready: kept poller, fresh poller."""
    manager = SubprocessEnvManager([TrivialEnv])
    try:
        manager.reset(seed=0)
        pool = manager._pool
        actions = np.zeros(1, dtype=manager.action_space.dtype)
        pool.send(pool.workers, protocol.STEP, manager._batch.split_actions(actions, pool.workers))
        pool.wait(pool.workers, None, "step_wait")  # the reply is ready from here on

        def kept() -> None:
            pool.wait(pool.workers, None, "step_wait")

        def fresh() -> None:
            pool._kept_poll_key = []  # forgets the poller: the wait makes and fills one
            pool.wait(pool.workers, None, "step_wait")

        samples: dict[str, list[float]] = {"wait, kept poller": [], "wait, fresh poller": []}
        for _ in range(rounds):
            samples["wait, kept poller"].append(_per_call(kept, calls))
            samples["wait, fresh poller"].append(_per_call(fresh, calls))
        pool.collect(pool.workers, lambda handle, ok, body: None)
        return samples
    finally:
        manager.close()


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
    for label, samples in measure_wait(rounds, calls).items():
        goal = "   goal: below a fresh poller" if label == "wait, kept poller" else ""
        print(f"trainer {label:<33} {statistics.median(samples):7.0f}{goal}")


if __name__ == "__main__":
    main()
