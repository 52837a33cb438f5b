"""A profiled training loop on Ray: env workers as Ray actors, a timed learner actor.

    python examples/ray_rollouts.py [OUTPUT_FOLDER]

Joins the Ray cluster that ``RAY_ADDRESS`` names, or starts a local one, steps 4 CartPole envs in
2 Ray actors (RayEnvManager), and every 50 steps sends the collected rewards to a learner actor
whose ``update`` is timed with profiler.integrations.ray. The timer tree then holds the trainer's
blocks, the env workers' blocks under ``env_manager.step`` and the learner's under ``train``, one
tree per actor in the ``workers`` section, each naming the host it ran on. The file is written to
OUTPUT_FOLDER (default ``runs/ray``) and its verdicts printed, as ``rlprof analyze`` prints them.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import ray

from envmanager import RayEnvManager
from profiler import hierarchical_timer, load_timing_tree, write_timing_tree
from profiler.analysis.verdicts import judge_run
from profiler.integrations import ray as timed_ray

STEPS = 200
UPDATE_EVERY = 50


@timed_ray.remote(num_cpus=0.25)
class Learner:
    """Keeps a running mean of the rewards it is sent: the stand-in for a gradient step."""

    def __init__(self) -> None:
        self.mean_reward = 0.0
        self.updates = 0

    def update(self, rewards: np.ndarray) -> float:
        with hierarchical_timer("backward"):
            self.updates += 1
            self.mean_reward += (float(rewards.mean()) - self.mean_reward) / self.updates
        return self.mean_reward


def main(output_folder: str) -> None:
    ray.init(log_to_driver=False)  # the cluster RAY_ADDRESS names, else a local one
    try:
        with hierarchical_timer("start_workers"):
            learner = Learner.remote()
            envs = RayEnvManager([lambda: gym.make("CartPole-v1")] * 4, envs_per_worker=2, num_cpus=0.5)
        with envs:
            envs.reset(seed=0)
            collected = []
            for step in range(1, STEPS + 1):
                with hierarchical_timer("policy"):
                    actions = envs.action_space.sample()
                _, rewards, _, _, _ = envs.step(actions)
                collected.append(rewards)
                if step % UPDATE_EVERY == 0:
                    with hierarchical_timer("train"):
                        mean_reward = timed_ray.get(learner.update.remote(np.concatenate(collected)))
                    collected.clear()
        # Closed: the workers' last timers are merged. The thread's tree holds both managers'.
        path = write_timing_tree(f"{output_folder}/ray_rollouts_timers.json")
        print(f"mean reward {mean_reward:.2f}; timers written to {path}")
        tree = load_timing_tree(path)
        for worker in tree["workers"]:
            print(f"  {worker['name']} ({worker['manager']}) on {worker['host']}, pid {worker['pid']}")
        for verdict in judge_run(tree).verdicts:
            print(f"- {verdict.title}")
    finally:
        ray.shutdown()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/ray")
