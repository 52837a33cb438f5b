"""What reading the trainer's waits for a core inside its vector steps costs a step.

    python benchmarks/block_waits_cost.py [--rounds 20] [--steps 4000] [--envs 4] [--vector async|sb3]

``rlprof run`` reads the kernel's count of the stepping thread's waits for a core (``schedstat``)
and its CPU clock around each of its first :data:`~profiler.recording.block_waits.READ_ALL_FIRST`
vector steps, then around one step in :data:`~profiler.recording.block_waits.READ_EVERY`
(:mod:`profiler.recording.block_waits`). The reads cost more where a step makes them (its thread
just woke, its caches cold) than in a tight loop, so this measures them there: an
``AsyncVectorEnv`` (or SB3 ``SubprocVecEnv``) of CartPole envs (fork), timed in place as ``rlprof
run`` does, stepped with the reads and with the reads switched off (``BlockWaits.start`` returning
None: every other part of the timing is the same), in alternating rounds. Printed: medians over
rounds of the trainer thread's CPU time per vector step (``time.thread_time``: the machine's other
work does not count in it) over the first steps, all read, and over the steps after them, and the
median per-round extra of the reads. Goal: under 1 us a step after the first steps, against the
hundreds of microseconds a vector step of workers takes.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from vector_step_cost import build  # noqa: E402

from envmanager.instrumentation import instrument_environments  # noqa: E402
from profiler.recording import events, scheduling  # noqa: E402
from profiler.recording.block_waits import READ_ALL_FIRST, READ_EVERY, BlockWaits  # noqa: E402
from profiler.timing import timers  # noqa: E402

GOAL_MICROSECONDS = 1.0
WAYS = ("reads", "no reads")
_READ_START = BlockWaits.start


def _not_read(self: BlockWaits) -> None:
    return None


def stepped(venv: Any, actions: Any, steps: int) -> float:
    """The trainer thread's CPU seconds per step over ``steps`` steps."""
    cpu = time.thread_time()
    for _ in range(steps):
        venv.step(actions)
    return (time.thread_time() - cpu) / steps


def one_round(vector: str, envs: int, steps: int, reads: bool) -> tuple[float, float]:
    """(CPU per step over the first steps, CPU per step over the next ``steps``) of a vector env
    timed in place, with the reads or without them."""
    BlockWaits.start = _READ_START if reads else _not_read  # type: ignore[method-assign]
    instrumentation = instrument_environments()
    try:
        venv = build(vector, envs)
        actions = np.array([index % 2 for index in range(envs)])
        venv.reset()
        first = stepped(venv, actions, READ_ALL_FIRST)
        after = stepped(venv, actions, steps)
        venv.close()
    finally:
        instrumentation.finish()
        BlockWaits.start = _READ_START  # type: ignore[method-assign]
    return first, after


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=4000)
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--vector", choices=("async", "sb3"), default="async")
    args = parser.parse_args()
    if not scheduling.schedstat_available():
        print("no schedstat here (not Linux, or a kernel without it): nothing is read, nothing to measure")
        return
    events.start_recording()  # as rlprof run records the timeline
    figures: dict[str, list[tuple[float, float]]] = {way: [] for way in WAYS}
    for round_number in range(args.rounds):
        for way in WAYS if round_number % 2 == 0 else WAYS[::-1]:
            timers.reset_timers()
            figures[way].append(one_round(args.vector, args.envs, args.steps, way == "reads"))
    print(f"{args.vector}: {args.envs} CartPole envs timed in place, {args.rounds} interleaved rounds of "
          f"{READ_ALL_FIRST} + {args.steps} vector steps; load average {os.getloadavg()[0]:.2f}")
    for phase, label in enumerate((f"the first {READ_ALL_FIRST} steps, each read",
                                   f"the steps after, one in {READ_EVERY} read")):
        reads, plain = (statistics.median(round_[phase] for round_ in figures[way]) * 1e6 for way in WAYS)
        extra = statistics.median((mine[phase] - base[phase]) * 1e6
                                  for mine, base in zip(figures["reads"], figures["no reads"]))
        verdict = ""
        if phase == 1:
            verdict = f"   goal < {GOAL_MICROSECONDS:.0f} us: {'met' if extra < GOAL_MICROSECONDS else 'not met'}"
        print(f"  {label}: trainer {reads:6.1f} us CPU/step with the reads, {plain:6.1f} without: "
              f"{extra:+.2f} us a step{verdict}")


if __name__ == "__main__":
    main()
