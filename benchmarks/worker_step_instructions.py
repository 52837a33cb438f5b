"""What profiling adds to a worker's step, in instructions: immune to the machine's load.

    python benchmarks/worker_step_instructions.py                    # CartPole-v1 and a trivial env
    python benchmarks/worker_step_instructions.py --env trivial --steps 2000 4000

A worker's side of a step (:mod:`envmanager.transport.worker`: the request decoded, the env
stepped through its guard, the reply stamped and pickled) runs here in one process, without the
pipes, under ``valgrind --tool=callgrind``, profiling on and off, for two numbers of steps; the
difference of the two counts over the difference of steps is one step's instructions, start-up
and the env's construction cancelled out. Timer payloads are not shipped here (their cost is one
a second: ``benchmarks/step_path_costs.py`` prints it). The CPU sampler measures one env call in
about 32, as in a real worker. Goal (printed, never asserted): profiling's instructions near zero
next to the step's own.

``--cold`` counts cache misses too (callgrind's cache simulation, an L1 of 32 KiB for
code and 48 KiB for data and a last level of 2 MiB, as this project's 2-core machine has), with
every cache emptied between steps (a sweep over 8 MiB, counted in both runs alike): how a worker
steps when more processes than cores share them, where each step finds its code and data evicted
by the other processes' steps. There a step of a profiled worker costs several times what its
instructions say: each cache line of code or data profiling touches is a miss, at tens of
instructions' time each. The figure printed per step is, profiling on minus off, the instructions,
the first-level misses for code (I1) and data (D1), and the last-level ones (LL, code and data).

The runs are made alike: one hash seed, no BLAS threads, the CPU sampler seeded, and no call counted as slow
(under valgrind every call is; a slow call has the next one measured). Needs valgrind on the PATH; ``--one MODE STEPS ENV`` runs one worker loop without it (what each
valgrind run runs).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path


COLD_CACHES = ["--cache-sim=yes", "--I1=32768,8,64", "--D1=49152,12,64", "--LL=2097152,16,64"]
"""callgrind's cache simulation with this project's 2-core machine's caches (``lscpu``)."""
EVICTION_BYTES = 8 << 20
"""Swept between cold steps: four times the simulated last level, so no line of a step survives."""
COLD_EVENTS = ("Ir", "I1mr", "D1mr", "D1mw", "ILmr", "DLmr", "DLmw")


def one_worker_loop(profiling: bool, steps: int, env_name: str, cold: bool = False) -> None:
    """``steps`` steps of one worker of one env, as ``_WorkerLoop.serve`` runs them, minus the pipes
    (with ``cold``, every cache emptied before each step)."""
    import gymnasium as gym
    import numpy as np
    from gymnasium.vector import AutoresetMode
    from step_floor import TrivialEnv

    from envmanager.measurement import env_time
    from envmanager.transport import env_calls, protocol
    from envmanager.transport.worker import EnvFactories, EnvRunner, WorkerConfig, configure_profiling

    # Under valgrind every call is slow enough to count as slow, and a slow call has the next one
    # measured: the CPU sampler would measure every call here and about one in 32 in a worker.
    env_time.EXACT_ABOVE_SECONDS = env_calls.EXACT_ABOVE_SECONDS = math.inf

    def factory() -> gym.Env:
        return TrivialEnv() if env_name == "trivial" else gym.make(env_name)

    config = WorkerConfig(
        worker_index=0, first_env=0, num_envs=1, factories=EnvFactories([factory]),
        autoreset_mode=AutoresetMode.NEXT_STEP, observation_space=factory().observation_space,
        shared_buffer=None, permits=None, profiling=profiling, flush_every=None, flush_interval=1e9,
        record_timeline=False, memory_sampling=None, nvtx=None, inherited_connections=[], lifeline=None,
        signal_at_parent_death=False,
    )
    configure_profiling(config)
    runner = EnvRunner(config)
    runner.cpu_sampler = env_time.CpuSampler(seed=0)  # the same calls measured in every run
    runner.build_envs()
    runner.answer(protocol.RESET, ([0], None, None))
    request = protocol.encode((1, protocol.STEP, [0]))
    # One float64 per 64-byte line, added to: every line of the sweep is read and written.
    sweep = np.zeros(EVICTION_BYTES // 8)[:: 64 // 8] if cold else None
    for _ in range(steps):
        if sweep is not None:
            sweep += 1.0
        sequence, command, body = protocol.decode(request)
        ok, reply, timer_payload, finished_at = runner.answer(command, body)
        protocol.encode((sequence, ok, reply, timer_payload, finished_at))


def instructions(profiling: bool, steps: int, env_name: str) -> int:
    """The instructions valgrind counts in one worker loop of ``steps`` steps (start-up included)."""
    return callgrind_events(profiling, steps, env_name, cold=False)["Ir"]


def callgrind_events(profiling: bool, steps: int, env_name: str, cold: bool) -> dict[str, int]:
    """What valgrind counts in one worker loop of ``steps`` steps (start-up included): the
    instructions (``Ir``), and with ``cold`` the cache misses of :data:`COLD_EVENTS` too."""
    loop = [sys.executable, __file__, "--one", "on" if profiling else "off", str(steps), env_name]
    if cold:
        loop.append("--cold")
    # One hash seed for every run (the same dict layouts, the same work), and numpy's BLAS without
    # its threads, whose spinning callgrind would count.
    environment = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    # Once without valgrind first: the modules' bytecode is then cached, so neither count
    # includes compiling them (which varies with what the other run left).
    subprocess.run(loop, capture_output=True, check=True, env=environment)
    with tempfile.TemporaryDirectory() as folder:
        subprocess.run(["valgrind", "--tool=callgrind", *(COLD_CACHES if cold else []),
                        f"--callgrind-out-file={folder}/out", *loop],
                       capture_output=True, text=True, check=True, env=environment)
        output = Path(folder, "out").read_text()
    names = re.search(r"^events: (.*)$", output, re.MULTILINE).group(1).split()
    totals = re.search(r"^totals: (.*)$", output, re.MULTILINE).group(1).split()
    return dict(zip(names, map(int, totals)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", help="CartPole-v1, trivial, ... (default: both)")
    parser.add_argument("--steps", type=int, nargs=2, default=(1000, 3000), help="the two numbers of steps")
    parser.add_argument("--cold", action="store_true",
                        help="count cache misses too, every cache emptied between steps (see above)")
    parser.add_argument("--one", nargs=3, metavar=("MODE", "STEPS", "ENV"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        mode, steps, env_name = arguments.one
        one_worker_loop(mode == "on", int(steps), env_name, arguments.cold)
        return
    sys.path.insert(0, str(Path(__file__).parent))
    fewer, more = arguments.steps
    if arguments.cold:
        print_cold(arguments.env or ["CartPole-v1", "trivial"], fewer, more)
        return
    print("instructions per worker step (callgrind), profiling off / on / added")
    for env_name in arguments.env or ["CartPole-v1", "trivial"]:
        per_step = {}
        for profiling in (False, True):
            per_step[profiling] = (instructions(profiling, more, env_name)
                                   - instructions(profiling, fewer, env_name)) / (more - fewer)
        added = per_step[True] - per_step[False]
        print(f"  {env_name:12s} {per_step[False]:9.0f} {per_step[True]:9.0f} {added:+8.0f}"
              f"  ({added / per_step[False]:+.1%}; goal: near 0)")


def print_cold(env_names: list[str], fewer: int, more: int) -> None:
    """Per worker step with every cache emptied before it: instructions and misses, off / on / added."""
    print("per worker step, caches emptied between steps (callgrind's cache simulation): off / on / added")
    for env_name in env_names:
        per_step = {}
        for profiling in (False, True):
            few = callgrind_events(profiling, fewer, env_name, cold=True)
            many = callgrind_events(profiling, more, env_name, cold=True)
            per_step[profiling] = {event: (many[event] - few[event]) / (more - fewer) for event in COLD_EVENTS}
        print(f"  {env_name}")
        for event in COLD_EVENTS:
            off, on = per_step[False][event], per_step[True][event]
            # The sweep's own misses are in both (about one a line): only the added ones are the step's.
            print(f"    {event:5s} {off:11.1f} {on:11.1f} {on - off:+9.1f}")


if __name__ == "__main__":
    main()
