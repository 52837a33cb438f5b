"""The env wrapper the programs in this folder share, as a user's scripts would share a module
beside them: each step takes longer, as a costly simulator's or a slower level's would. Like the
programs, it knows nothing of rlprof."""

import time

import gymnasium as gym


class SlowStep(gym.Wrapper):
    """Stands for a slower env: each step takes ``seconds`` longer."""

    def __init__(self, env, seconds):
        super().__init__(env)
        self.seconds = seconds

    def step(self, action):
        time.sleep(self.seconds)
        return self.env.step(action)
