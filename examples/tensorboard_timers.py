"""Watch rlprof's figures in TensorBoard while a training loop runs, next to its own scalars.

    pip install 'rlprof[tensorboard]'
    python examples/tensorboard_timers.py [LOG_DIR]
    tensorboard --logdir runs/tensorboard_example

Every 50 vector steps, ``log_timers`` writes each block's mean time per call and share of the
wall time, each worker's step time, env steps per second and the verdicts' costs, at the same
global step as the training scalars, so a slowdown lines up with what caused it.
"""

import sys

import gymnasium as gym
import numpy as np
from tensorboardX import SummaryWriter

from envmanager import SubprocessEnvManager
from profiler import hierarchical_timer, timed
from profiler.integrations.tensorboard import log_timers

NUM_ENVS, VECTOR_STEPS, LOG_EVERY = 4, 300, 50


@timed
def policy(observations: np.ndarray) -> np.ndarray:
    return (observations[:, 2] > 0).astype(np.int64)  # push towards the side the pole leans


def main(log_dir: str = "runs/tensorboard_example") -> None:
    writer = SummaryWriter(log_dir)
    with SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * NUM_ENVS, flush_every=LOG_EVERY) as envs:
        observations, _ = envs.reset(seed=0)
        for step in range(1, VECTOR_STEPS + 1):
            with hierarchical_timer("step"):
                actions = policy(observations)
                observations, rewards, _, _, _ = envs.step(actions)
            global_step = step * NUM_ENVS
            writer.add_scalar("charts/mean_reward", float(rewards.mean()), global_step)
            if step % LOG_EVERY == 0:
                figures = log_timers(writer, step=global_step)
    writer.close()
    print(f"{len(figures)} rlprof figures per log, e.g. "
          f"env steps/s {figures['rlprof/env_steps_per_second']:.0f}; open: tensorboard --logdir {log_dir}")


if __name__ == "__main__":
    main(*sys.argv[1:])
