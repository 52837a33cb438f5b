"""What ``rlprof run``'s zero-edit instrumentation adds to a vector step, in instructions: in the
trainer and in the env workers, immune to the machine's load.

    python benchmarks/instrumented_step_instructions.py                 # Async and Sync, 4 CartPole envs
    python benchmarks/instrumented_step_instructions.py --vector Async --steps 200 600 --keep /tmp/cg
    python benchmarks/instrumented_step_instructions.py --vector SB3 --steps 100 300   # SB3's PPO rollout

A step loop over Gymnasium's ``AsyncVectorEnv`` (forked workers) or ``SyncVectorEnv`` of 4
CartPole envs (``RecordEpisodeStatistics`` around each, as the CleanRL-style program builds them)
runs under ``valgrind --tool=callgrind``, which follows the forked workers: each process's count
lands in its own file. It runs plain (``python``) and under ``rlprof run``'s own ``main`` (the
envs instrumented where they run, the vector step timed, the timeline recorded, the framework
phases watching for torch, which the loop never imports), for two numbers of steps; the difference
of the two counts over the difference of steps is one vector step's instructions in the trainer
and in all workers together, start-up and set-up cancelled out. The loop closes its envs and leaves
with the interpreter's own ``_exit`` (``posix._exit``: ``rlprof run`` puts a function in front of
``os._exit`` that ends the run first, :mod:`profiler.cli.immediate_exit`), so neither count holds
``rlprof run``'s exit (its files, its analysis), whose cost grows with the spans recorded.

``--vector SB3`` counts Stable-Baselines3's step instead: its PPO (``MlpPolicy``, CPU torch, one
thread) over ``make_vec_env``'s ``SubprocVecEnv`` of 4 CartPole envs (forked workers), learning
for one rollout of as many vector steps as counted, then one update of one minibatch (the whole
rollout, one epoch; the update's math grows with the steps, its blocks do not). A vector step is
then what ``collect_rollouts`` does per step: the policy's forward (a torch module call, timed by
the framework phases under ``rlprof run``), the vector env's ``step`` (``step_async`` and
``step_wait``, timed on the trainer's side; each env's ``step`` timed in its worker), the rollout
buffer; plus the rollout's share of the one update. Torch's import makes each run slow under
valgrind (minutes).

What rlprof does once a second or so rather than once a step is left out of the per-step figures,
as under valgrind a second holds a few steps only: the workers' shipments (their interval is made
huge here, so each ships once, at the close: what the trainer does with the spans and stamps of
every step still counts; ``benchmarks/step_path_costs.py`` prints a shipment's cost), the
trainer's samples of its workers' CPU and memory (one, made huge too) and the stack samplers
(``--no-stack-sampler``; ``benchmarks/sampler_wakeups.py`` and ``worker_stack_sampler.py`` print
their cost per look). ``--parts`` adds the variants ``rlprof run --no-timeline`` and, for the
trainer, the vector step blocks alone, to split the extra.

Beside each figure, ``gc``: the part of it spent in garbage collections (a collection falls in
one count and not the other: a worker that keeps a span per step collects sooner than one that
keeps nothing, once in many steps; read the figures with and without it).

Goal (printed, never asserted): what rlprof adds near zero next to the step's own instructions.
Needs valgrind on the PATH; ``--one MODE VECTOR STEPS`` runs one loop without it.
"""

from __future__ import annotations

import argparse
import os
import posix
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = {
    # label: rlprof run's options, or None for plain python
    "python": None,
    "rlprof run": ["--no-stack-sampler"],
    "rlprof run --no-timeline": ["--no-stack-sampler", "--no-timeline"],
}
NUM_ENVS = 4


def step_loop(vector: str, steps: int) -> None:
    """``steps`` vector steps after a reset and a warm-up; then the envs closed and the process
    left at once (``posix._exit``), before any exit of ``rlprof run``."""
    import gymnasium as gym
    import numpy as np

    def make_env():  # noqa: ANN202 - CleanRL's thunk
        return gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))

    cls = gym.vector.AsyncVectorEnv if vector == "Async" else gym.vector.SyncVectorEnv
    envs = cls([make_env for _ in range(NUM_ENVS)])
    envs.reset(seed=1)
    actions = [np.zeros(NUM_ENVS, dtype=np.int64), np.ones(NUM_ENVS, dtype=np.int64)]
    step = envs.step
    for number in range(20 + steps):
        step(actions[number % 2])
    envs.close()
    sys.stdout.flush()
    posix._exit(0)


def sb3_loop(steps: int) -> None:
    """SB3's PPO over a forked ``SubprocVecEnv`` of 4 CartPole envs: one rollout of ``steps``
    vector steps and one update of one minibatch; then the envs closed and the process left at
    once (``posix._exit``), before any exit of ``rlprof run``."""
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import SubprocVecEnv

    torch.set_num_threads(1)
    env = make_vec_env("CartPole-v1", n_envs=NUM_ENVS, seed=0, vec_env_cls=SubprocVecEnv,
                       vec_env_kwargs={"start_method": "fork"})
    model = PPO("MlpPolicy", env, n_steps=steps, batch_size=steps * NUM_ENVS, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=steps * NUM_ENVS)
    env.close()
    sys.stdout.flush()
    posix._exit(0)


def one_run(mode: str, vector: str, steps: int) -> None:
    """One measured process: the loop plain, or under ``rlprof run`` with ``mode``'s options."""
    options = MODES[mode]
    if options is None:
        if vector == "SB3":
            sb3_loop(steps)
        else:
            step_loop(vector, steps)
        return
    sys.path.insert(0, str(ROOT))
    from envmanager.instrumentation import timed_env, vector_env_record
    from envmanager.measurement import env_time
    from profiler.cli import commands
    from profiler.recording import machine_load

    timed_env.FLUSH_INTERVAL_SECONDS = 1e12  # one shipment, at the close: per second, not per step
    vector_env_record.RESOURCE_INTERVAL_SECONDS = 1e12  # the workers' CPU and memory: one sample
    # Under valgrind every env call is slow enough to count as slow, and a slow call has the next
    # one's CPU time measured: here, as in a real worker, about one call in 32 is.
    env_time.EXACT_ABOVE_SECONDS = float("inf")
    machine_load._process_cpu = dict  # the machine's processes, listed at the start: their number varies
    with tempfile.TemporaryDirectory() as folder:
        commands.main(["run", *options, "--summaries-dir", folder, "--run-id", "loop", __file__,
                       "--loop", vector, str(steps)])


def _environment() -> dict[str, str]:
    # One hash seed for every run (the same dict layouts, the same work), numpy's BLAS without its
    # threads, whose spinning callgrind would count, and bytecode written, so that the run before
    # each count caches it and no count holds compiling a module.
    environment = {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}
    environment.pop("PYTHONDONTWRITEBYTECODE", None)
    return environment


def instructions(mode: str, vector: str, steps: int, keep: Path | None) -> tuple[int, int, int, int]:
    """The instructions valgrind counts in the trainer, and in all its workers, of one run; then
    those of their garbage collections."""
    command = [sys.executable, __file__, "--one", mode, vector, str(steps)]
    # Once without valgrind first: the modules' bytecode is then cached, so neither count
    # includes compiling them.
    subprocess.run(command, capture_output=True, check=True, env=_environment())
    with tempfile.TemporaryDirectory() as name:
        folder = keep / f"{mode.replace(' ', '_')}_{vector}_{steps}" if keep is not None else Path(name)
        folder.mkdir(parents=True, exist_ok=True)
        process = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={folder}/cg.%p", *command],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                                   env=_environment())
        _, errors = process.communicate()
        if process.returncode:
            raise RuntimeError(f"{mode} {vector} {steps}: valgrind exited with {process.returncode}:\n{errors[-2000:]}")
        trainer = workers = trainer_collections = worker_collections = 0
        for output in folder.glob("cg.*"):
            total, collections = _total(output), _collections(output)
            if output.name == f"cg.{process.pid}":
                trainer, trainer_collections = total, collections
            else:
                workers += total
                worker_collections += collections
    return trainer, workers, trainer_collections, worker_collections


def _total(output: Path) -> int:
    """A callgrind output's instruction count (its ``totals:`` or ``summary:`` line)."""
    for line in output.read_text().splitlines():
        found = re.match(r"(?:totals|summary): (\d+)", line)
        if found:
            return int(found.group(1))
    raise RuntimeError(f"no total in {output}")


def _collections(output: Path) -> int:
    """The instructions of the garbage collections in a callgrind output (``gc_collect_main``,
    inclusive). A collection is rare and costly: one that falls in one count and not the other
    moves a per-step figure by thousands of instructions, so it is shown apart."""
    annotated = subprocess.run(["callgrind_annotate", "--inclusive=yes", "--threshold=100", str(output)],
                               capture_output=True, text=True, check=True).stdout
    for line in annotated.splitlines():
        found = re.match(r"\s*([\d,]+) .*:gc_collect_main \[", line)
        if found:
            return int(found.group(1).replace(",", ""))
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vector", action="append", choices=("Async", "Sync", "SB3"),
                        help="Gymnasium's AsyncVectorEnv or SyncVectorEnv, or SB3's PPO over SubprocVecEnv (default: Async and Sync)")
    parser.add_argument("--steps", type=int, nargs=2, default=(200, 600), help="the two numbers of vector steps")
    parser.add_argument("--parts", action="store_true", help="also rlprof run --no-timeline")
    parser.add_argument("--keep", type=Path, help="keep the callgrind outputs in this folder (callgrind_annotate them)")
    parser.add_argument("--one", nargs=3, metavar=("MODE", "VECTOR", "STEPS"), help=argparse.SUPPRESS)
    parser.add_argument("--loop", nargs=2, metavar=("VECTOR", "STEPS"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.loop:
        if arguments.loop[0] == "SB3":
            sb3_loop(int(arguments.loop[1]))
        else:
            step_loop(arguments.loop[0], int(arguments.loop[1]))
        return
    if arguments.one:
        one_run(arguments.one[0], arguments.one[1], int(arguments.one[2]))
        return
    fewer, more = arguments.steps
    modes = list(MODES) if arguments.parts else ["python", "rlprof run"]
    print(f"instructions per vector step of {NUM_ENVS} CartPole envs (callgrind, {fewer} and {more} steps), "
          "in the trainer and in all workers together")
    for vector in arguments.vector or ["Async", "Sync"]:
        per_step: dict[str, tuple[float, ...]] = {}
        for mode in modes:
            few = instructions(mode, vector, fewer, arguments.keep)
            many = instructions(mode, vector, more, arguments.keep)
            per_step[mode] = tuple((many[index] - few[index]) / (more - fewer) for index in range(4))
            trainer, workers, trainer_collections, worker_collections = per_step[mode]
            label = "SB3 PPO SubprocVecEnv" if vector == "SB3" else f"{vector}VectorEnv"
            line = (f"  {label} {mode:26s} trainer {trainer:9.0f} (gc {trainer_collections:6.0f})"
                    f"  workers {workers:9.0f} (gc {worker_collections:6.0f})")
            if mode != "python":
                base_trainer, base_workers = per_step["python"][:2]
                line += (f"   adds: trainer {trainer - base_trainer:+8.0f} ({(trainer - base_trainer) / base_trainer:+.1%}),"
                         f" workers {workers - base_workers:+8.0f}"
                         + (f" ({(workers - base_workers) / base_workers:+.1%})" if base_workers else "")
                         + "  (goal: near 0)")
            print(line, flush=True)


if __name__ == "__main__":
    main()
