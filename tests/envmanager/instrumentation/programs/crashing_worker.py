"""An SB3 program whose second env raises in ``step``: the trainer's ``step`` gets ``EOFError``
and the program ends with it, its ``SubprocVecEnv`` left open (SB3's ``close`` would then wait
forever for the dead worker's reply)."""

import gymnasium as gym
from stable_baselines3.common.vec_env import SubprocVecEnv


class CrashingStep(gym.Wrapper):
    def step(self, action):
        raise RuntimeError("the env crashed in step")


def make(index):
    def build():
        env = gym.make("CartPole-v1")
        return CrashingStep(env) if index == 1 else env
    return build


if __name__ == "__main__":
    envs = SubprocVecEnv([make(index) for index in range(2)])
    envs.reset()
    envs.step([0, 0])
