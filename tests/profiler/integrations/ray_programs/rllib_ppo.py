"""An RLlib PPO run as its users write it, not edited for rlprof: the new API stack, CartPole,
two env runners (Ray actors) and one learner on a Ray actor of its own, one training iteration.
It prints how many env steps it sampled."""

import ray
from ray.rllib.algorithms.ppo import PPOConfig

TRAIN_BATCH = 256

ray.init(num_cpus=2, include_dashboard=False)
config = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=2, num_envs_per_env_runner=1, num_cpus_per_env_runner=0.5)
    .learners(num_learners=1, num_cpus_per_learner=1)
    .training(train_batch_size_per_learner=TRAIN_BATCH, minibatch_size=64, num_epochs=1)
)
algorithm = config.build_algo()
result = algorithm.train()
print("sampled", result["env_runners"]["num_env_steps_sampled"])
algorithm.stop()
ray.shutdown()
