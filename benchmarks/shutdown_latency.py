"""How long does it take for workers (and the helper processes their envs run) to be gone?

Each env here runs a helper process (``sleep``), as an env driving a simulator does, and hangs
when stepped with action 1.  The script prints, for each situation, the median seconds until
``close()`` returns (every worker and helper is then gone) or, for a killed trainer, until no
worker and no helper is left; next to the goal and to what it was before issue 8:

* ``close()`` of an idle manager, and ``close(terminate=True)``;
* ``close()`` while a step is pending and one worker hangs in it: goal within
  ``REPLY_GRACE_SECONDS`` (1 s) + 0.5 s; it used to wait ``CLOSE_GRACE_SECONDS`` (10 s);
* the trainer killed with SIGKILL while its workers hang in a step: goal within
  ``GRACE_BEFORE_KILL_SECONDS`` (2 s) + 1 s; the workers used to stay forever.  Once with
  the manager built by the main thread (the kernel's parent-death signal and the lifeline
  both act) and once by a thread that has ended (the lifeline alone).

    python benchmarks/shutdown_latency.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import warnings
from typing import Any, Callable

import gymnasium as gym
import numpy as np
import psutil
from gymnasium import spaces

from envmanager import SubprocessEnvManager
from envmanager.lifetime.lifeline import GRACE_BEFORE_KILL_SECONDS
from envmanager.transport.pool import CLOSE_GRACE_SECONDS, REPLY_GRACE_SECONDS


class SimulatorEnv(gym.Env):
    """Runs a helper process from its first reset, stops it in ``close()``; action 1 hangs."""

    def __init__(self) -> None:
        self.observation_space = spaces.Box(0, 1, shape=(2,), dtype=np.float32)
        self.action_space = spaces.Discrete(2)
        self.helper: subprocess.Popen | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        super().reset(seed=seed)
        if self.helper is None:
            self.helper = subprocess.Popen(["sleep", "600"])
        return np.zeros(2, dtype=np.float32), {}

    def step(self, action: Any) -> tuple:
        if action == 1:
            time.sleep(600)
        return np.zeros(2, dtype=np.float32), 0.0, False, False, {}

    def close(self) -> None:
        if self.helper is not None:
            self.helper.kill()
            self.helper.wait()


def started_manager() -> SubprocessEnvManager:
    envs = SubprocessEnvManager([SimulatorEnv] * 2, context="fork")
    envs.reset(seed=0)
    return envs


def seconds_to_close(prepare: Callable[[SubprocessEnvManager], None], **close_options: Any) -> float:
    envs = started_manager()
    prepare(envs)
    started = time.monotonic()
    envs.close(**close_options)
    return time.monotonic() - started


def seconds_until_gone_after_trainer_kill(built_by: str) -> float:
    trainer = subprocess.Popen(
        [sys.executable, __file__, "--hung-trainer", built_by],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )
    pids = json.loads(trainer.stdout.readline())
    watched = [psutil.Process(pid) for pid in pids]
    trainer.send_signal(signal.SIGKILL)
    started = time.monotonic()
    try:
        while any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in watched):
            if time.monotonic() - started > 30:
                return float("inf")
            time.sleep(0.01)
        return time.monotonic() - started
    finally:
        for process in watched:
            try:
                process.kill()
            except psutil.Error:
                pass
        trainer.wait()


def hung_trainer(built_by: str) -> None:
    """The child run by the measure above: workers hang in a step; report their pids."""
    if built_by == "thread":
        built: list[SubprocessEnvManager] = []
        builder = threading.Thread(target=lambda: built.append(started_manager()))
        builder.start()
        builder.join()
        envs = built[0]
    else:
        envs = started_manager()
    pids = [h.process.pid for h in envs._pool.workers]
    helpers = [child.pid for pid in pids for child in psutil.Process(pid).children()]
    envs.step_async(np.array([1, 1]))
    time.sleep(0.3)
    print(json.dumps(pids + helpers), flush=True)
    time.sleep(600)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--hung-trainer", choices=["main", "thread"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hung_trainer:
        hung_trainer(args.hung_trainer)
        return

    def nothing(envs: SubprocessEnvManager) -> None:
        pass

    def pending_step_one_hung(envs: SubprocessEnvManager) -> None:
        envs.step_async(np.array([0, 1]))

    situations: list[tuple[str, Callable[[], float], str]] = [
        ("close(), idle", lambda: seconds_to_close(nothing), "-"),
        ("close(terminate=True), idle", lambda: seconds_to_close(nothing, terminate=True), "-"),
        (
            "close(), a step pending, one worker hung",
            lambda: seconds_to_close(pending_step_one_hung),
            f"<= {REPLY_GRACE_SECONDS + 0.5:.1f} s (was {CLOSE_GRACE_SECONDS:.0f} s)",
        ),
        (
            "trainer SIGKILLed, workers hung: all gone",
            lambda: seconds_until_gone_after_trainer_kill("main"),
            f"<= {GRACE_BEFORE_KILL_SECONDS + 1:.1f} s (was: never)",
        ),
        (
            "... manager built by an ended thread",
            lambda: seconds_until_gone_after_trainer_kill("thread"),
            f"<= {GRACE_BEFORE_KILL_SECONDS + 1:.1f} s (was: never)",
        ),
    ]
    samples: dict[str, list[float]] = {label: [] for label, _, _ in situations}
    for _ in range(args.repeats):  # interleaved, so load changes hit every situation alike
        for label, measure, _ in situations:
            samples[label].append(measure())
    print(f"{'situation':45} {'median s':>9} {'max s':>7}  goal")
    for label, _, goal in situations:
        values = samples[label]
        print(f"{label:45} {statistics.median(values):9.3f} {max(values):7.3f}  {goal}")


if __name__ == "__main__":
    warnings.simplefilter("ignore")  # gymnasium's "closing while waiting" warning
    main()
