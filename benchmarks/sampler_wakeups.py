"""Do rlprof's periodic wake-ups slow a training loop? The trainer's stack sampler on and off, in one process.

``rlprof run`` has one thread in the trainer that wakes on a timer: the stack sampler
(``profiler.automatic.stack_sampler``, 50 looks a second at first, thinning to 10; docs/run.md,
"What rlprof runs beside your program"). Across processes (``run_overhead.py``), the loop's time swings by more than the
sampler could cost on a shared machine; here one process runs the CleanRL-style PPO loop of
``tests/profiler/automatic/programs/cleanrl_torch_ppo.py`` (its ``Agent``, 4 CartPole envs in a
``SyncVectorEnv``, one thread for torch; one turn is one iteration: 128 vector steps, 4 epochs of
4 minibatches) under each variant in turn, the order alternating from round to round:

- **off**, and **off again** (the same, to show how far the machine alone moves a figure);
- the **sampler** at 100, 50 and 20 looks a second (started before the turn, stopped after it),
  waiting in C where its C wait was built (a look that finds a block open does not take the GIL),
  and at 50 looks a second waiting in **Python** (every look takes the GIL), as without the build;
- a **bare thread** that only wakes 100 times a second (a wake-up with no work).

Each ratio is the median of per-round ratios to "off" of the same round, wall and CPU time of the
process. Two more columns, from the trainer thread's own scheduler figures
(``/proc/self/task/<id>/schedstat``, Linux), say what a wake-up does to the trainer whatever the
machine's load: how many more times per turn the trainer was put back on a core than with "off"
(each look that takes the GIL from it makes it wait and be woken again, and on a loaded machine
every such wake-up may queue for a core), and its time **off the CPU and not queued** — wall less
its CPU time less its run-queue wait: the GIL waits. Run it alone, or under ``rlprof run --no-stack-sampler`` to have the framework phases and
the timeline on as in a real run:

    python3 benchmarks/sampler_wakeups.py [--rounds 80]
    python3 -m profiler run --no-stack-sampler benchmarks/sampler_wakeups.py [--rounds 80]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch import nn, optim  # noqa: E402

from profiler.automatic import stack_sampler  # noqa: E402
from profiler.automatic.stack_sampler import StackSampler  # noqa: E402

PROGRAM = ROOT / "tests" / "profiler" / "automatic" / "programs" / "cleanrl_torch_ppo.py"


def trainer_schedule() -> tuple[float, float, int]:
    """This thread's CPU seconds, seconds queued for a core and times put on a core, from Linux's
    schedstat; zeros elsewhere."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat") as file:
            cpu, queued, slices = map(int, file.read().split())
    except OSError:
        return 0.0, 0.0, 0
    return cpu / 1e9, queued / 1e9, slices


class BareThread:
    """A thread that wakes every ``interval`` seconds and does nothing."""

    def __init__(self, interval: float) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)
        self._thread.start()

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def sampler(interval: float, python_wait: bool = False) -> StackSampler:
    """A sampler at one rate (no thinning out), waiting in C where built unless ``python_wait``."""
    compiled = stack_sampler._block_watch  # noqa: SLF001
    if python_wait:
        stack_sampler._block_watch = None  # noqa: SLF001 - read once, at start()
    try:
        return StackSampler(interval=interval, longest_interval=interval).start()
    finally:
        stack_sampler._block_watch = compiled  # noqa: SLF001


VARIANTS = {
    "off": None,
    "off again": None,
    "sampler, 100 looks/s": lambda: sampler(0.01),
    "sampler, 50 looks/s": lambda: sampler(0.02),
    "sampler, 50 looks/s, Python wait": lambda: sampler(0.02, python_wait=True),
    "sampler, 20 looks/s": lambda: sampler(0.05),
    "bare thread, 100 wake-ups/s": lambda: BareThread(0.01),
}


class Loop:
    """CleanRL's PPO iteration over the program's own ``Agent`` and env factory."""

    def __init__(self) -> None:
        if str(PROGRAM.parent) not in sys.path:  # the program imports its folder's slow_steps, as when run
            sys.path.insert(0, str(PROGRAM.parent))
        spec = importlib.util.spec_from_file_location("cleanrl_torch_ppo", PROGRAM)
        program = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(program)
        torch.set_num_threads(1)
        self.envs = gym.vector.SyncVectorEnv([program.make_env("CartPole-v1") for _ in range(4)])
        self.agent = program.Agent(self.envs)
        self.optimizer = optim.Adam(self.agent.parameters(), lr=2.5e-4, eps=1e-5)
        observations, _ = self.envs.reset(seed=1)
        self.observations = torch.Tensor(observations)

    def iteration(self) -> None:
        self.update(*self.rollout())

    def rollout(self) -> tuple[torch.Tensor, torch.Tensor]:
        """128 vector steps, the policy called on each: the observations and actions seen."""
        stored, actions = [], []
        for _ in range(128):
            with torch.no_grad():
                action, _, _, _ = self.agent.get_action_and_value(self.observations)
            stored.append(self.observations)
            actions.append(action)
            observations, _, _, _, _ = self.envs.step(action.cpu().numpy())
            self.observations = torch.Tensor(observations)
        return torch.cat(stored), torch.cat(actions).long()

    def warm_up(self) -> None:
        """One policy call and one small minibatch per epoch, for freshly installed framework
        phases: their first calls find the model method and read the callers again (a few hundred
        microseconds, once per run in a real one), which a benchmark's timed turn must not hold."""
        with torch.no_grad():
            self.agent.get_action_and_value(self.observations)
        self.update(self.observations, torch.zeros(len(self.observations), dtype=torch.long))

    def update(self, batch: torch.Tensor, batch_actions: torch.Tensor) -> None:
        """4 epochs over ``batch`` in minibatches of 128: 16 optimizer steps for a rollout's 512."""
        for _ in range(4):
            order = np.random.permutation(len(batch))
            for start in range(0, len(batch), 128):
                chosen = order[start:start + 128]
                _, log_probability, entropy, value = self.agent.get_action_and_value(batch[chosen],
                                                                                     batch_actions[chosen])
                loss = -log_probability.mean() + value.pow(2).mean() - 0.01 * entropy.mean()
                self.optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(self.agent.parameters(), 0.5)
                self.optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=80)
    options = parser.parse_args()
    loop = Loop()
    for _ in range(2):  # warm-up
        loop.iteration()
    figures: dict[str, list[tuple[float, float, int, float]]] = {label: [] for label in VARIANTS}
    for round_number in range(options.rounds):
        order = list(VARIANTS) if round_number % 2 == 0 else list(reversed(VARIANTS))
        for label in order:
            running = VARIANTS[label]() if VARIANTS[label] is not None else None
            wall, cpu = time.perf_counter(), time.process_time()
            trainer_cpu, queued, slices = trainer_schedule()
            loop.iteration()
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            trainer_cpu_after, queued_after, slices_after = trainer_schedule()
            off_cpu = wall - (trainer_cpu_after - trainer_cpu) - (queued_after - queued)
            figures[label].append((wall, cpu, slices_after - slices, off_cpu))
            if running is not None:
                running.stop()
    print(f"One PPO iteration per turn, {options.rounds} interleaved rounds ({os.cpu_count()} cores, "
          f"load average at the end {os.getloadavg()[0]:.1f})")
    for label, runs in figures.items():
        wall = statistics.median(run[0] / base[0] for run, base in zip(runs, figures["off"]))
        cpu = statistics.median(run[1] / base[1] for run, base in zip(runs, figures["off"]))
        rescheduled = statistics.median(run[2] - base[2] for run, base in zip(runs, figures["off"]))
        off_cpu = statistics.median(run[3] for run in runs)
        print(f"  {label:34} {statistics.median(run[0] for run in runs) * 1000:7.1f} ms  "
              f"wall {wall:.3f}x  CPU {cpu:.3f}x  put on a core {rescheduled:+5.0f}  "
              f"off the CPU, not queued {off_cpu * 1000:5.1f} ms")


if __name__ == "__main__":
    main()
