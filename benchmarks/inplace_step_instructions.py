"""What timing an env in place adds to a worker's env step, in instructions: immune to the machine's load.

    python benchmarks/inplace_step_instructions.py
    python benchmarks/inplace_step_instructions.py --steps 2000 6000 --keep /tmp/inplace

The env of a CleanRL-style program (``RecordEpisodeStatistics`` around ``gymnasium.make("CartPole-v1")``)
is stepped in one process as Gymnasium's ``AsyncVectorEnv`` worker steps it (a ``reset`` after the
step that ended an episode), without the worker's pipes, under ``valgrind --tool=callgrind``: plain,
timed as a worker's env (:func:`envmanager.instrumentation.timed_env.instrument_env`, the step in
C where the step path's helper is), timed with the timeline recorded, and that again with the
worker's shipment at the env's close pickled as the channel pickles it (sent nowhere); for two
numbers of steps. The difference of the two counts over the difference of steps is one step's
instructions, start-up and the env's construction cancelled out.

What this leaves out of the in-place worker that ``benchmarks/instrumented_step_instructions.py
--vector Async`` counts: the pipes' reads and writes, which are the program's own, and a
garbage collection that falls in one count and not the other. The shipment is in the last row
only, once at the close (the flush interval is made huge). ``benchmarks/worker_step_instructions.py``
counts the same for rlprof's own ``SubprocessEnvManager`` worker (no timeline, no shipment,
``CartPole-v1`` without the wrapper): comparable with the ``timed`` row.

The runs are made alike: one hash seed, no BLAS threads, the CPU sampler seeded, and no call
counted as slow (under valgrind every call is; a slow call has the next one measured). Needs
valgrind on the PATH; ``--one MODE STEPS`` runs one loop without it. Goal (printed, never
asserted): the instructions added near zero next to the step's own.
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

ROOT = Path(__file__).resolve().parent.parent
MODES = ("python", "timed", "timed with timeline", "timeline, shipped")


class PicklingEnd:
    """A channel end that pickles each message as :class:`~envmanager.instrumentation.channel.WorkerEnd`
    does and sends it nowhere: the shipment's cost in this one process."""

    __slots__ = ()

    def send(self, message: object) -> None:
        from multiprocessing.reduction import ForkingPickler

        bytes(ForkingPickler.dumps(message))

    def close(self) -> None:
        pass


def one_loop(mode: str, steps: int) -> None:
    """``steps`` env calls after a reset and a warm-up, as Gymnasium's worker makes them; then the
    process left at once (``os._exit``)."""
    import gymnasium as gym
    import numpy as np

    sys.path.insert(0, str(ROOT))
    from envmanager.instrumentation import timed_env
    from envmanager.measurement import env_time

    env = gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
    if mode != "python":
        # Under valgrind every call is slow enough to count as slow, and a slow call has the next
        # one measured: the CPU sampler would measure every call here and about one in 32 in a worker.
        env_time.EXACT_ABOVE_SECONDS = math.inf
        timed_env.FLUSH_INTERVAL_SECONDS = 1e12  # no shipment while stepping
        identity = timed_env.WorkerIdentity(
            address=os.path.join(tempfile.gettempdir(), "no-trainer-here"), vector_id=0, index=0,
            record_timeline=mode != "timed", memory_sampling=None,
        )
        shipping = timed_env.worker_shipping(identity)
        shipping.cpu_sampler = env_time.CpuSampler(seed=0)  # the same calls measured
        if mode == "timeline, shipped":
            shipping.connection, shipping.lost = PicklingEnd(), False
        timed_env.instrument_env(env, identity)
    env.reset(seed=1)
    actions = [np.int64(0), np.int64(1)]
    ended = False
    for number in range(20 + steps):
        if ended:
            env.reset()
            ended = False
        else:
            _, _, terminated, truncated, _ = env.step(actions[number % 2])
            ended = terminated or truncated
    env.close()  # a worker's last shipment, where it has a channel: every step's span and stamp pickled
    sys.stdout.flush()
    os._exit(0)


def instructions(mode: str, steps: int, keep: Path | None) -> int:
    """The instructions valgrind counts in one loop of ``steps`` steps (start-up included)."""
    loop = [sys.executable, __file__, "--one", mode, str(steps)]
    environment = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    # Once without valgrind first: the modules' bytecode is then cached, so no count includes
    # compiling them.
    subprocess.run(loop, capture_output=True, check=True, env=environment)
    with tempfile.TemporaryDirectory() as folder:
        output = Path(keep or folder, f"{mode.replace(' ', '_')}_{steps}")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={output}", *loop],
                       capture_output=True, check=True, env=environment)
        return int(re.search(r"^totals: (\d+)", output.read_text(), re.MULTILINE).group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs=2, default=(2000, 6000), help="the two numbers of steps")
    parser.add_argument("--keep", type=Path, help="keep the callgrind outputs in this folder (callgrind_annotate them)")
    parser.add_argument("--one", nargs=2, metavar=("MODE", "STEPS"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        one_loop(arguments.one[0], int(arguments.one[1]))
        return
    if arguments.keep:
        arguments.keep.mkdir(parents=True, exist_ok=True)
    fewer, more = arguments.steps
    print("instructions per env step of RecordEpisodeStatistics(CartPole-v1), as an AsyncVectorEnv worker "
          "steps it, without the pipes (callgrind)")
    plain = None
    for mode in MODES:
        per_step = (instructions(mode, more, arguments.keep) - instructions(mode, fewer, arguments.keep)) / (more - fewer)
        if plain is None:
            plain = per_step
            print(f"  {mode:20s} {per_step:9.0f}")
        else:
            added = per_step - plain
            print(f"  {mode:20s} {per_step:9.0f}  adds {added:+6.0f} ({added / plain:+.1%}; goal: near 0)")


if __name__ == "__main__":
    main()
