"""What timing an env in place costs each of its steps in a worker process, measured in one process.

    python benchmarks/worker_step_cost.py [--rounds 9] [--steps 20000] [--env CartPole-v1]
    python benchmarks/worker_step_cost.py --loop instrumented --steps 20000   # one loop, for callgrind

An ``AsyncVectorEnv`` or ``SubprocVecEnv`` worker timed in place by ``rlprof run``
(``envmanager.instrumentation.timed_env``, worker mode) runs each env call through the timed
``step``/``reset``: the ``env.step`` block (a span on the worker's timeline, as ``rlprof run``
records one), the finish stamp, the CPU sample, and once a second a shipment over rlprof's
channel (here to a forked process that reads and drops it, as the trainer's reader would). This
script runs that loop in this process — the env's own steps, its resets at episode ends — three
ways, in alternating rounds (who goes first rotates):

* ``plain``: the env as the program built it;
* ``instrumented``: timed in place, as ``rlprof run`` times a worker (timeline recorded, the
  worker's stack sampler off: ``benchmarks/worker_stack_sampler.py`` measures that apart);
* ``instrumented+sampler``: the same with the worker's stack sampler on, as ``rlprof run``
  starts it by default.

Printed: the median CPU time of the stepping process per env step (``time.process_time``: the
machine's other work does not count in it; the stack sampler's thread does, as it does in a
worker), and the median per-round cost over ``plain`` in nanoseconds per step.

``--loop NAME`` runs one loop of ``--steps`` steps and prints nothing else: run it under
``valgrind --tool=callgrind`` with two step counts, and the difference of the instruction counts
over the difference of the steps is the per-step instruction count, free of the machine's load::

    valgrind --tool=callgrind --callgrind-out-file=/tmp/a.out python benchmarks/worker_step_cost.py --loop instrumented --steps 4000
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import tempfile
import time
from typing import Any

import gymnasium as gym

from profiler.recording import events
from profiler.timing import timers

from envmanager.instrumentation.timed_env import WorkerIdentity, instrument_env

LOOPS = ("plain", "instrumented", "instrumented+sampler")


def start_drain() -> tuple[str, int]:
    """A forked process listening where a worker ships, reading and dropping everything."""
    folder = tempfile.mkdtemp(prefix="rlprof-bench-")
    address = os.path.join(folder, "channel")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(address)
    listener.listen(16)
    pid = os.fork()
    if pid == 0:
        try:
            while True:
                peer, _ = listener.accept()
                while peer.recv(1 << 16):
                    pass
                peer.close()
        finally:
            os._exit(0)
    listener.close()
    return address, pid


def build(loop: str, address: str) -> Any:
    env = gym.make(ENV_ID)
    env.reset(seed=0)
    if loop != "plain":
        identity = WorkerIdentity(address, 0, 0, True, None, sample_stack=loop.endswith("sampler"))
        instrument_env(env, identity)
    return env


def run_loop(env: Any, steps: int) -> None:
    action_space = env.action_space
    action_space.seed(0)
    actions = [action_space.sample() for _ in range(64)]
    step, reset = env.step, env.reset
    for index in range(steps):
        _, _, terminated, truncated, _ = step(actions[index & 63])
        if terminated or truncated:
            reset()


def cpu_seconds_per_step(env: Any, steps: int) -> float:
    start = time.process_time()
    run_loop(env, steps)
    return (time.process_time() - start) / steps


ENV_ID = "CartPole-v1"


def main() -> None:
    global ENV_ID
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--steps", type=int, default=20000)
    parser.add_argument("--env", default=ENV_ID)
    parser.add_argument("--loop", choices=LOOPS, help="run one loop only (for callgrind)")
    arguments = parser.parse_args()
    ENV_ID = arguments.env
    events.start_recording()  # as rlprof run records the timeline (a worker records its own)
    address, drain = start_drain()
    # A fork's child forgets the parent's worker shipping: each loop below is its own "worker",
    # built in a forked child so that every loop starts with its own shipping and sampler.
    if arguments.loop:
        env = build(arguments.loop, address)
        run_loop(env, arguments.steps)
        env.close()
        os.kill(drain, 9)
        return
    figures: dict[str, list[float]] = {loop: [] for loop in LOOPS}
    for round_number in range(arguments.rounds):
        order = LOOPS[round_number % len(LOOPS):] + LOOPS[:round_number % len(LOOPS)]
        for loop in order:
            reader, writer = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(reader)
                env = build(loop, address)
                run_loop(env, 500)  # warm: the blocks exist, the caches are filled
                figure = cpu_seconds_per_step(env, arguments.steps)
                env.close()
                os.write(writer, repr(figure).encode())
                os._exit(0)
            os.close(writer)
            with os.fdopen(reader) as pipe:
                figures[loop].append(float(pipe.read()))
            os.waitpid(pid, 0)
    os.kill(drain, 9)
    os.waitpid(drain, 0)
    plain = figures["plain"]
    print(f"{ENV_ID}, {arguments.steps} steps a round, {arguments.rounds} rounds; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    for loop in LOOPS:
        over = [(value - base) * 1e9 for value, base in zip(figures[loop], plain)]
        line = f"{loop:>22}: {statistics.median(figures[loop]) * 1e9:8.0f} ns/step CPU"
        if loop != "plain":
            line += f"   +{statistics.median(over):6.0f} ns/step over plain"
        print(line)


if __name__ == "__main__":
    timers.reset_timers()
    main()
