"""SB3's PPO with a policy class defined in this script, saved and loaded back, as a user's
training script may; it knows nothing of rlprof.

``python sb3_script_policy_save.py OUT_DIR`` learns one rollout, saves the model (SB3 pickles the
policy class by value with cloudpickle: it is the script's own), loads it back, and prints the
loaded policy's class, its actions and the trained policy's values for a fixed batch of observations.
"""

import sys
from pathlib import Path

import numpy as np
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.policies import ActorCriticPolicy


class CriticFirstPolicy(ActorCriticPolicy):
    """A policy of the script's own, with a method of its own that calls the value network (rlprof
    times such a method of the program's as a model method)."""

    def value_of(self, obs):
        latent = self.mlp_extractor.forward_critic(self.extract_features(obs, self.vf_features_extractor))
        return self.value_net(latent)


if __name__ == "__main__":
    torch.set_num_threads(1)
    saved = Path(sys.argv[1]) / "model.zip"
    model = PPO(CriticFirstPolicy, "CartPole-v1", n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
    model.learn(total_timesteps=64)
    observations = np.linspace(-0.2, 0.2, 16, dtype=np.float32).reshape(4, 4)
    with torch.no_grad():
        values = model.policy.value_of(torch.as_tensor(observations))  # the script's own call of its method
    model.save(saved)
    loaded = PPO.load(saved, device="cpu")
    actions, _ = loaded.predict(observations, deterministic=True)
    print("class:", type(loaded.policy).__qualname__)
    print("actions:", actions.tolist())
    print("values:", values.flatten().tolist())
