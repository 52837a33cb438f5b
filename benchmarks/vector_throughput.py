"""Env-steps per second: Gymnasium's AsyncVectorEnv against SubprocessEnvManager.

    python benchmarks/vector_throughput.py            # the full table (a few minutes)
    python benchmarks/vector_throughput.py --quick    # a rough table in well under a minute
    python benchmarks/vector_throughput.py --overhead # profiling on vs off, CartPole x4 only

For CartPole-v1 and a synthetic env doing ~50 us and ~1 ms of CPU work per step, with 2, 4
and 8 envs, it measures AsyncVectorEnv and our manager in several settings.  All variants of
one row are alive at once and measured in alternating rounds, so a burst of noise from the
machine hits every variant alike; the figure is the median round.  "ours" is the manager at
default settings (profiling on, shared memory, one env per worker); "ours epw=k" runs k envs
per worker process.

Goals (printed, never asserted, since they depend on the machine):
  * ours with profiling on, default settings: ratio to AsyncVectorEnv >= 1.0
  * profiling overhead (on vs off): <= 3 %
  * ours with envs_per_worker > 1 on CartPole: >= 2x AsyncVectorEnv

``--overhead`` measures the second goal closely on CartPole x4, where the per-step cost of
profiling shows most (the env itself costs microseconds): the two managers step in many short
interleaved rounds and the figure is the median of the per-round ratios, for the wall time and
for the CPU time of the trainer and of the workers (apart and together).  It then breaks what
profiling adds to a step into its parts, each timed alone in this process and set against the
vector step with profiling off.
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
import timeit
from typing import Any, Callable

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from gymnasium.vector import AsyncVectorEnv

from envmanager import SubprocessEnvManager
from envmanager.critical_path import CriticalPath
from envmanager.env_time import CpuSampler
from envmanager.profiling import ManagerProfiling
from profiler import timers
from profiler.payload import WorkerTimers


class BusyEnv(gym.Env):
    """Burns ``work_seconds`` of CPU per step: a stand-in for a physics simulator."""

    def __init__(self, work_seconds: float) -> None:
        self.observation_space = spaces.Box(-1, 1, shape=(8,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.work_seconds = work_seconds
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(8, dtype=np.float32), {}

    def step(self, action: Any) -> tuple:
        end = time.perf_counter() + self.work_seconds
        while time.perf_counter() < end:
            pass
        self.t += 1
        return np.full(8, self.t % 2, dtype=np.float32), 1.0, False, self.t >= 500, {}


ENVS: dict[str, Callable[[], gym.Env]] = {
    "CartPole-v1": lambda: gym.make("CartPole-v1"),
    "busy-50us": lambda: BusyEnv(50e-6),
    "busy-1ms": lambda: BusyEnv(1e-3),
}


def variants(num_envs: int) -> dict[str, Callable[[list], Any]]:
    """The vector envs compared in one row, by label; ours at default settings but for the label."""
    per_worker = max(2, num_envs // 2)
    return {
        ASYNC: lambda fns: AsyncVectorEnv(fns),
        OURS: lambda fns: SubprocessEnvManager(fns),
        OURS_OFF: lambda fns: SubprocessEnvManager(fns, profiling=False),
        f"ours epw={per_worker}": lambda fns: SubprocessEnvManager(fns, envs_per_worker=per_worker),
    }


ASYNC, OURS, OURS_OFF = "async", "ours", "ours profiling off"


def steps_per_second(envs: Any, num_envs: int, steps: int) -> float:
    actions = np.zeros(num_envs, dtype=np.int64)
    started = time.perf_counter()
    for _ in range(steps):
        envs.step(actions)
    return steps * num_envs / (time.perf_counter() - started)


def measure_row(env_name: str, num_envs: int, steps: int, rounds: int) -> dict[str, float]:
    return measure_variants([ENVS[env_name]] * num_envs, variants(num_envs), steps, rounds)


def measure_variants(
    env_fns: list, makers: dict[str, Callable[[list], Any]], steps: int, rounds: int
) -> dict[str, float]:
    """Env-steps per second of each vector env ``makers`` builds over ``env_fns``: all alive at
    once, measured in alternating rounds of ``steps`` steps; the median round, by label."""
    num_envs = len(env_fns)
    built = {label: make(env_fns) for label, make in makers.items()}
    samples: dict[str, list[float]] = {label: [] for label in built}
    try:
        for envs in built.values():
            envs.reset(seed=0)
            steps_per_second(envs, num_envs, max(10, steps // 10))  # warm up
        labels = list(built)
        for round_index in range(rounds):
            # Rotate who goes first, so no variant always runs right after the same neighbour.
            shift = round_index % len(labels)
            for label in labels[shift:] + labels[:shift]:
                samples[label].append(steps_per_second(built[label], num_envs, steps))
    finally:
        for envs in built.values():
            envs.close()
    return {label: statistics.median(values) for label, values in samples.items()}


def measure_overhead(rounds: int, steps: int, rounds_per_pair: int = 4) -> None:
    """Profiling on vs off on CartPole x4 at default settings, and the arrival tracking's parts.

    A fresh pair of managers is built every ``rounds_per_pair`` rounds: on a machine with fewer
    cores than processes, where the scheduler happens to place one manager's workers can make it
    10 % faster or slower for its whole life, whatever it runs, so the figure must come from many
    pairs, not from one.
    """
    num_envs = 4
    env_fns = [ENVS["CartPole-v1"]] * num_envs
    wall_ratios, cpu_ratios, trainer_ratios, worker_ratios, off_rates = [], [], [], [], []
    per_step: dict[str, list[float]] = {"trainer on": [], "trainer off": [], "workers on": [], "workers off": []}
    for first_round in range(0, rounds, rounds_per_pair):
        on, off = SubprocessEnvManager(env_fns), SubprocessEnvManager(env_fns, profiling=False)
        try:
            for envs in (on, off):
                envs.reset(seed=0)
                steps_per_second(envs, num_envs, steps // 5)  # warm up
            for round_index in range(first_round, min(rounds, first_round + rounds_per_pair)):
                pair = (on, off) if round_index % 2 else (off, on)
                rates, trainer_cpu, worker_cpu = {}, {}, {}
                for envs in pair:
                    trainer_before, workers_before = time.thread_time(), _worker_cpu_seconds(envs)
                    rates[envs] = steps_per_second(envs, num_envs, steps)
                    trainer_cpu[envs] = (time.thread_time() - trainer_before) / steps
                    worker_cpu[envs] = (_worker_cpu_seconds(envs) - workers_before) / steps
                wall_ratios.append(rates[off] / rates[on])
                off_rates.append(rates[off])
                if worker_cpu[off] > 0:  # 0.0: no per-process CPU clock fine enough here
                    cpu_ratios.append((trainer_cpu[on] + worker_cpu[on]) / (trainer_cpu[off] + worker_cpu[off]))
                    trainer_ratios.append(trainer_cpu[on] / trainer_cpu[off])
                    worker_ratios.append(worker_cpu[on] / worker_cpu[off])
                    for label, envs in (("on", on), ("off", off)):
                        per_step[f"trainer {label}"].append(trainer_cpu[envs])
                        per_step[f"workers {label}"].append(worker_cpu[envs])
        finally:
            on.close()
            off.close()
    vector_step = num_envs / statistics.median(off_rates)
    pairs = -(-rounds // rounds_per_pair)
    print(f"CartPole-v1 x{num_envs}, default settings, {rounds} interleaved rounds of {steps} steps, {pairs} manager pairs")
    print(f"  vector step, profiling off (median):        {vector_step * 1e6:8.1f} us")
    print(f"  profiling overhead (off/on - 1), wall:      {_median_and_quartiles(wall_ratios)}   goal <= 3%")
    if cpu_ratios:
        print(f"  CPU of trainer + workers per step, on/off:  {_median_and_quartiles(cpu_ratios)}   goal <= 3%")
        print(f"    trainer's CPU per step, on/off:           {_median_and_quartiles(trainer_ratios)}")
        print(f"    workers' CPU per step (all 4), on/off:    {_median_and_quartiles(worker_ratios)}")
        print("    CPU per vector step (median):  " + ",  ".join(
            f"{label} {statistics.median(values) * 1e6:.1f} us" for label, values in per_step.items()
        ))
    print("  what profiling adds per vector step, part by part (each timed alone here, best of 5):")
    for label, seconds in profiling_costs(num_envs).items():
        print(f"    {label:<52} {seconds * 1e6:6.2f} us  {seconds / vector_step:6.2%} of a step")


def _median_and_quartiles(ratios: list[float]) -> str:
    low, _, high = statistics.quantiles(ratios, n=4)
    return f"{statistics.median(ratios) - 1:+8.1%}   (quartiles {low - 1:+.1%} .. {high - 1:+.1%})"


def _worker_cpu_seconds(envs: SubprocessEnvManager) -> float:
    """CPU time used so far by the manager's workers, to the nanosecond.

    ``/proc/<pid>/schedstat`` (Linux) counts nanoseconds on a CPU; elsewhere nothing as fine is
    at hand (psutil counts clock ticks), so the CPU figure is left out (0.0).  The trainer's own
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


def profiling_costs(workers: int) -> dict[str, float]:
    """Seconds per vector step of each part profiling adds, measured here (best of several
    repeats), each against what the same code does with profiling off.

    The worker parts run in every worker at once: a step waits for one worker's share while
    there are cores for all, and the CPU does all of them when the workers outnumber the cores.
    """

    def best(function: Callable[[], Any], number: int = 100_000) -> float:
        return min(timeit.repeat(function, number=number, repeat=5)) / number

    timed, untimed = ManagerProfiling(True, None, "costs"), ManagerProfiling(False, None, "costs")

    def trainer_blocks(profiling: ManagerProfiling) -> Callable[[], None]:
        block = profiling.block

        def four_blocks() -> None:
            # The blocks of one manager step, as step, step_async and step_wait open them.
            with block("env_manager.step"):
                with block("send_actions"):
                    pass
                with block("wait_for_workers"):
                    pass
                with block("receive_results"):
                    pass

        return four_blocks

    critical_path = CriticalPath(workers, timers.get_timer_stack_for_thread(threading.current_thread()))
    stamps = [1.0 + index * 1e-4 for index in range(workers)]
    clock = time.perf_counter

    def trainer_arrivals() -> None:
        # What a step adds in the trainer: note when the wait began, find who was last.
        critical_path.record_step(stamps, clock())

    hierarchical_timer = timers.hierarchical_timer

    def env_block() -> None:
        with hierarchical_timer("env.step"):
            pass

    worker_timers = WorkerTimers()

    def stamp_and_flush_check() -> None:
        # A profiled worker's stamp is the timers' clock, which also tells if a flush is due.
        if timers.now() < worker_timers.quiet_until:
            return

    sampler = CpuSampler()

    def sampled_env_call() -> None:
        # As a worker's guard makes an env call (here one that does nothing).
        if sampler.countdown:
            sampler.countdown -= 1
            return _no_env_work()
        return sampler.measure(_no_env_work)

    return {
        "trainer: its four blocks (step, send, wait, receive)": (
            best(trainer_blocks(timed)) - best(trainer_blocks(untimed))
        ),
        f"trainer: when the wait began, who was last of {workers}": best(trainer_arrivals),
        "each worker: its env.step block": best(env_block),
        "each worker: stamp on the timers' clock, flush check": best(stamp_and_flush_check) - best(clock),
        "each worker: env call with its CPU time sampled": best(sampled_env_call) - best(_no_env_work),
    }


def _no_env_work() -> None:
    return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps and rounds: rough figures, fast")
    parser.add_argument(
        "--overhead", action="store_true", help="only profiling on vs off on CartPole x4, closely"
    )
    parser.add_argument("--rounds", type=int, default=120, help="rounds of --overhead")
    args = parser.parse_args()
    if args.overhead:
        measure_overhead(args.rounds, 500)
        return
    rounds = 3 if args.quick else 7
    rows = []
    print(f"{'env':<12} {'n':>2}  {'variant':<20} {'steps/s':>9}  {'vs async':>8}")
    for env_name in ENVS:
        steps = {"CartPole-v1": 2000, "busy-50us": 1000, "busy-1ms": 100}[env_name]
        if args.quick:
            steps //= 5
        for num_envs in (2, 4, 8):
            row = measure_row(env_name, num_envs, steps, rounds)
            rows.append((env_name, num_envs, row))
            for label, rate in row.items():
                print(
                    f"{env_name:<12} {num_envs:>2}  {label:<20} {rate:>9.0f}  {rate / row[ASYNC]:>8.2f}",
                    flush=True,
                )
    print_goals(rows)


def print_goals(rows: list[tuple[str, int, dict[str, float]]]) -> None:
    """The three goals, as measured in this run (medians over the rows)."""
    ratio = statistics.median(row[OURS] / row[ASYNC] for _, _, row in rows)
    overhead = statistics.median(row[OURS_OFF] / row[OURS] - 1 for _, _, row in rows)
    per_worker = statistics.median(
        next(rate for label, rate in row.items() if label.startswith("ours epw")) / row[ASYNC]
        for env_name, _, row in rows
        if env_name == "CartPole-v1"
    )
    print()
    print(f"ours (profiling on) / async, median over rows:      {ratio:.2f}   goal >= 1.00")
    print(f"profiling overhead (off vs on), median over rows:   {overhead:+.1%}   goal <= 3%")
    print(f"ours envs_per_worker>1 / async on CartPole, median: {per_worker:.2f}   goal >= 2.00")


if __name__ == "__main__":
    main()
