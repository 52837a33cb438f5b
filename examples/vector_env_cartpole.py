"""Run 4 CartPoles in subprocesses with SubprocessEnvManager, a drop-in for AsyncVectorEnv.

CartPole's step costs microseconds, so the round trips between processes are the cost:
``envs_per_worker="auto"`` runs one worker process per core this process may use, the envs
spread evenly over them (on 2 cores, 2 envs each).

python examples/vector_env_cartpole.py
"""

import gymnasium as gym
import numpy as np

from envmanager import SubprocessEnvManager


def main(steps: int = 200) -> None:
    # Exactly what you would pass to gymnasium.vector.AsyncVectorEnv; one process per core.
    envs = SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 4, envs_per_worker="auto")
    observations, infos = envs.reset(seed=42)
    episodes, total_reward = 0, 0.0
    for _ in range(steps):
        actions = (observations[:, 2] > 0).astype(np.int64)  # push towards the side the pole leans
        observations, rewards, terminations, truncations, infos = envs.step(actions)
        total_reward += rewards.sum()
        episodes += int((terminations | truncations).sum())
    envs.close()
    print(f"{steps} steps x {envs.num_envs} envs in {len(envs.worker_env_ranges)} worker processes: "
          f"{episodes} episodes ended, total reward {total_reward:.0f}")


if __name__ == "__main__":
    main()
