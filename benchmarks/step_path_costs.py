"""What the manager's own Python costs on the step path, piece by piece, in one process.

    python benchmarks/step_path_costs.py            # 41 interleaved rounds
    python benchmarks/step_path_costs.py --quick    # 15 rounds, rough
    python benchmarks/step_path_costs.py --profiling-cpu-only --env CartPole-v1 --num-envs 2

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
  Python reference;
* where profiling-on's CPU per vector step goes, trainer side and worker side, on a row of
  ``benchmarks/vector_throughput.py`` (CartPole-v1 x2 by default, its worst): CPU time, not wall
  time, so the figures hold up better on a machine other programs load (the trainer's own thread
  clock, each worker's ``/proc/<pid>/schedstat``). The variants: profiling off; on, its step
  untimed (its step block set aside, the workers still timing their env calls); on; on with the
  step's stamps kept and counted by the Python references (``step_stamps``) instead of C. So ``on - off``
  splits into the trainer's step timing (``on - on untimed``), the rest of the trainer's
  (merging payloads, clocked on its own), and the workers' (env calls timed, replies stamped,
  payloads built and shipped: one payload's cost, measured here in-process, is printed per step
  at the default of one a second). A round's trainer CPU swings by microseconds per step with
  whether its waits slept (printed: its voluntary context switches per step), as much as what
  is measured: hence many rounds, and the quartiles.

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
from benchmark_envs import ENVS, steps_per_second
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


def _workers_cpu_seconds(manager: SubprocessEnvManager) -> float:
    """CPU seconds the manager's workers used so far, to the nanosecond (Linux schedstat)."""
    total = 0
    for handle in manager._pool.workers:
        with open(f"/proc/{handle.process.pid}/schedstat") as schedstat:
            total += int(schedstat.read().split()[0])
    return total / 1e9


class _ClockedSink:
    """The pool's timers sink, its calls clocked on the trainer's thread CPU clock: what
    merging the workers' payloads costs the trainer."""

    __slots__ = ("sink", "seconds", "payloads")

    def __init__(self, sink: Callable[[int, int, object], None]) -> None:
        self.sink, self.seconds, self.payloads = sink, 0.0, 0

    def __call__(self, worker: int, sequence: int, timers: object) -> None:
        started = time.thread_time()
        self.sink(worker, sequence, timers)
        self.seconds += time.thread_time() - started
        self.payloads += 1


PROFILING_OFF, ON_UNTIMED, ON, ON_PYTHON = "off", "on, step untimed", "on", "on, Python step stamps"


def measure_profiling_cpu(env_name: str, num_envs: int, rounds: int, steps: int) -> dict[str, dict[str, list[float]]]:
    """Per round and variant: the trainer's thread CPU and the workers' CPU per vector step, the
    trainer's merging of payloads per step (us), and how many of its waits per step slept (its
    voluntary context switches: a wait that sleeps costs a switch out and back in).

    Variants: profiling off; on, its step untimed (the step block set aside); on; and on with the
    step's stamps kept by the Python reference (``step_stamps``) where the C helper is in force.
    The three "on" share one manager, so they run on the same processes, placed on the same cores.
    A fresh set every 4 rounds (where the scheduler placed a manager's workers can sway it for its
    whole life); the order of a round rotates."""
    import resource

    from envmanager.measurement.critical_path import WAIT_BOUNDS_SECONDS, whole_steps_in_python
    from envmanager.transport.step_stamps import StepRecordInPython

    env_fns = [ENVS[env_name]] * num_envs
    labels = [PROFILING_OFF, ON_UNTIMED, ON]
    compiled_stamps = timed_calls.compiled()
    if compiled_stamps:
        labels.append(ON_PYTHON)
    figures: dict[str, dict[str, list[float]]] = {
        label: {"trainer": [], "workers": [], "merge": [], "slept": []} for label in labels
    }
    for first_round in range(0, rounds, 4):
        off = SubprocessEnvManager(env_fns, profiling=False)
        on = SubprocessEnvManager(env_fns)
        sink = on._pool.timers_sink = _ClockedSink(on._pool.timers_sink)
        record = on._step_record
        record_in_python = StepRecordInPython(on._profiling.step_block, on._pool.ready_at, WAIT_BOUNDS_SECONDS, None)
        critical_path = on._profiling.critical_path
        count_in_force = critical_path.count_whole_steps
        try:
            for manager in (off, on):
                manager.reset(seed=0)
                steps_per_second(manager, num_envs, max(10, steps // 5))  # warm up
            for round_index in range(first_round, min(rounds, first_round + 4)):
                shift = round_index % len(labels)
                for label in labels[shift:] + labels[:shift]:
                    manager = off if label == PROFILING_OFF else on
                    # Without its step record the manager's step takes its untimed path.
                    on._step_record = {ON_UNTIMED: None, ON_PYTHON: record_in_python}.get(label, record)
                    critical_path.count_whole_steps = whole_steps_in_python if label == ON_PYTHON else count_in_force
                    merged_before = sink.seconds
                    slept_before = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw
                    trainer_before, workers_before = time.thread_time(), _workers_cpu_seconds(manager)
                    steps_per_second(manager, num_envs, steps)
                    trainer = time.thread_time() - trainer_before
                    workers = _workers_cpu_seconds(manager) - workers_before
                    slept = resource.getrusage(resource.RUSAGE_THREAD).ru_nvcsw - slept_before
                    merged = sink.seconds - merged_before if manager is on else 0.0
                    figures[label]["trainer"].append(trainer / steps * 1e6)
                    figures[label]["workers"].append(workers / steps * 1e6)
                    figures[label]["merge"].append(merged / steps * 1e6)
                    figures[label]["slept"].append(slept / steps)
        finally:
            on._step_record = record
            critical_path.count_whole_steps = count_in_force
            on.close()
            off.close()
    return figures


def _quartiles(values: list[float]) -> str:
    low, middle, high = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):7.2f} ({low:.2f} .. {high:.2f})"


def measure_worker_payload(rounds: int) -> float:
    """Microseconds a worker spends on one timer payload of a worker's tree (env.step and
    env.reset blocks run): the snapshot, its env time and scheduling figures, and the pickle of
    the reply that carries it; what ``EnvRunner.answer`` does when a payload is due."""
    import pickle
    import threading

    from envmanager.measurement.env_time import CpuSampler as Sampler
    from profiler.multiprocess.payload import WorkerTimers
    from profiler.recording.scheduling import SchedulingSampler
    from profiler.timing import timers

    stack = timers.get_timer_stack_for_thread(threading.current_thread())
    worker_timers, cpu, scheduling = WorkerTimers(), Sampler(0), SchedulingSampler()
    samples = []
    for _ in range(rounds):
        for _ in range(3):
            for name in ("env.step", "env.reset"):
                with timers.hierarchical_timer(name, timer_stack=stack):
                    pass
        started = time.thread_time()
        payload = (worker_timers.final_payload(), *cpu.take(), scheduling.take(False))
        pickle.dumps((1, True, None, payload, 0.0), pickle.HIGHEST_PROTOCOL)
        samples.append((time.thread_time() - started) * 1e6)
    return statistics.median(samples)


def print_profiling_cpu(env_name: str, num_envs: int, rounds: int, steps: int) -> None:
    import os

    load = " ".join(f"{value:.2f}" for value in os.getloadavg())
    figures = measure_profiling_cpu(env_name, num_envs, rounds, steps)
    print(
        f"\nprofiling's CPU per vector step, {env_name} x{num_envs}, {rounds} rounds of {steps} steps "
        f"(load {load} before); us per step, median (quartiles)"
    )
    for label, sides in figures.items():
        print(
            f"  {label:<22} trainer {_quartiles(sides['trainer'])}   workers {_quartiles(sides['workers'])}"
            f"   trainer's waits that slept, per step {statistics.median(sides['slept']):.2f}"
        )

    def added(label: str, reference: str, side: str) -> list[float]:
        return [mine - theirs for mine, theirs in zip(figures[label][side], figures[reference][side])]

    off_total = [t + w for t, w in zip(figures[PROFILING_OFF]["trainer"], figures[PROFILING_OFF]["workers"])]
    on_total = [t + w for t, w in zip(figures[ON]["trainer"], figures[ON]["workers"])]
    print(f"  added by profiling, per step (median of per-round differences, quartiles):")
    print(f"    trainer, all                 {_quartiles(added(ON, PROFILING_OFF, 'trainer'))}")
    print(f"      its step timing            {_quartiles(added(ON, ON_UNTIMED, 'trainer'))}")
    if ON_PYTHON in figures:
        print(f"        the same, Python stamps  {_quartiles(added(ON_PYTHON, ON_UNTIMED, 'trainer'))}")
    merges = figures[ON]["merge"]
    print(f"      merging payloads (mean)    {statistics.fmean(merges):7.3f}")
    worker_payload = measure_worker_payload(200)
    steps_per_second_on = 1e6 / statistics.median(figures[ON]["trainer"])  # at most: trainer-bound
    print(
        f"    each worker, a payload       {worker_payload:7.1f} us, one a second (the default): "
        f"<= {worker_payload / steps_per_second_on:.3f} us per step at <= {steps_per_second_on:.0f} steps/s"
    )
    print(f"    workers, all together        {_quartiles(added(ON, PROFILING_OFF, 'workers'))}")
    print(
        f"    CPU per step, on / off - 1   {statistics.median(on / off - 1 for on, off in zip(on_total, off_total)):+.2%}"
        "   goal <= 2%"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds: rough figures, fast")
    parser.add_argument("--env", default="CartPole-v1", choices=list(ENVS), help="the row of the profiling CPU figures")
    parser.add_argument("--num-envs", type=int, default=2, help="... and its number of envs")
    parser.add_argument("--profiling-cpu-only", action="store_true", help="only the profiling CPU figures")
    args = parser.parse_args()
    rounds, calls = (15, 2000) if args.quick else (41, 5000)
    # Many rounds: a round's trainer CPU swings by microseconds per step with whether its waits
    # slept, as much as what is measured (the quartiles show it).
    cpu_rounds, cpu_steps = (24, 1000) if args.quick else (80, 1000)
    if args.profiling_cpu_only:
        print_profiling_cpu(args.env, args.num_envs, cpu_rounds, cpu_steps)
        return
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
    print_profiling_cpu(args.env, args.num_envs, cpu_rounds, cpu_steps)

if __name__ == "__main__":
    main()
