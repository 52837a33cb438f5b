"""A training loop over 4 CartPole workers, one of them slowed down: find it with `rlprof analyze`.

    python examples/find_the_bottleneck.py --slow-ms 5 --run-id slow    # worker 3 sleeps 5 ms a step
    python examples/find_the_bottleneck.py --slow-ms 0 --run-id fixed   # the same loop, fixed
    rlprof analyze runs/slow/slow_timers.json
    rlprof diff runs/slow/slow_timers.json runs/fixed/fixed_timers.json

Each run writes ``runs/<run-id>/<run-id>_timers.json`` when the env manager closes (docs/cli.md
walks through what `rlprof` makes of them).
"""

import argparse
import time

import gymnasium as gym
import numpy as np

from envmanager import SubprocessEnvManager
from profiler import hierarchical_timer


class SlowDown(gym.Wrapper):
    """Sleeps ``seconds`` in every step: an env on a slow disk, a slow level, a slow machine."""

    def __init__(self, env: gym.Env, seconds: float) -> None:
        super().__init__(env)
        self.seconds = seconds

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)


def make_env(slow_seconds: float):
    if slow_seconds > 0:
        return lambda: SlowDown(gym.make("CartPole-v1"), slow_seconds)
    return lambda: gym.make("CartPole-v1")


def train(slow_seconds: float, steps: int, output: str, run_id: str) -> None:
    envs = SubprocessEnvManager(
        [make_env(0.0)] * 3 + [make_env(slow_seconds)],
        autoreset_mode="same_step",
        summaries_dir=f"{output}/{run_id}",
        run_id=run_id,
    )
    observations, _ = envs.reset(seed=0)
    weights = np.zeros(4)
    seen = []
    with hierarchical_timer("train"):
        for step in range(steps):
            with hierarchical_timer("policy.act"):
                actions = (observations @ weights + observations[:, 2] > 0).astype(np.int64)
            observations, rewards, terminations, truncations, _ = envs.step(actions)
            seen.append(observations)
            if step % 50 == 49:
                with hierarchical_timer("policy.update"):
                    batch = np.concatenate(seen)
                    weights = np.linalg.lstsq(batch, batch[:, 3], rcond=None)[0] * 0.01
                    seen.clear()
    envs.close()  # writes {output}/{run_id}/{run_id}_timers.json
    print(f"wrote {output}/{run_id}/{run_id}_timers.json")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--slow-ms", type=float, default=5.0, help="extra milliseconds worker 3 sleeps a step")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--output", default="runs")
    parser.add_argument("--run-id", default="slow")
    arguments = parser.parse_args()
    train(arguments.slow_ms / 1000, arguments.steps, arguments.output, arguments.run_id)
