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


def one_worker_loop(profiling: bool, steps: int, env_name: str) -> None:
    """``steps`` steps of one worker of one env, as ``_WorkerLoop.serve`` runs them, minus the pipes."""
    import gymnasium as gym
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
    for _ in range(steps):
        sequence, command, body = protocol.decode(request)
        ok, reply, timer_payload, finished_at = runner.answer(command, body)
        protocol.encode((sequence, ok, reply, timer_payload, finished_at))


def instructions(profiling: bool, steps: int, env_name: str) -> int:
    """The instructions valgrind counts in one worker loop of ``steps`` steps (start-up included)."""
    loop = [sys.executable, __file__, "--one", "on" if profiling else "off", str(steps), env_name]
    # One hash seed for every run (the same dict layouts, the same work), and numpy's BLAS without
    # its threads, whose spinning callgrind would count.
    environment = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    # Once without valgrind first: the modules' bytecode is then cached, so neither count
    # includes compiling them (which varies with what the other run left).
    subprocess.run(loop, capture_output=True, check=True, env=environment)
    with tempfile.TemporaryDirectory() as folder:
        result = subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/out", *loop],
                                capture_output=True, text=True, check=True, env=environment)
    return int(re.search(r"Collected : (\d+)", result.stderr).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", action="append", help="CartPole-v1, trivial, ... (default: both)")
    parser.add_argument("--steps", type=int, nargs=2, default=(1000, 3000), help="the two numbers of steps")
    parser.add_argument("--one", nargs=3, metavar=("MODE", "STEPS", "ENV"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        mode, steps, env_name = arguments.one
        one_worker_loop(mode == "on", int(steps), env_name)
        return
    sys.path.insert(0, str(Path(__file__).parent))
    fewer, more = arguments.steps
    print("instructions per worker step (callgrind), profiling off / on / added")
    for env_name in arguments.env or ["CartPole-v1", "trivial"]:
        per_step = {}
        for profiling in (False, True):
            per_step[profiling] = (instructions(profiling, more, env_name)
                                   - instructions(profiling, fewer, env_name)) / (more - fewer)
        added = per_step[True] - per_step[False]
        print(f"  {env_name:12s} {per_step[False]:9.0f} {per_step[True]:9.0f} {added:+8.0f}"
              f"  ({added / per_step[False]:+.1%}; goal: near 0)")


if __name__ == "__main__":
    main()
