"""Stable-Baselines3's ten-line PPO, as its docs show it. It knows nothing of rlprof.

``--vec-env subproc`` steps the envs in ``SubprocVecEnv`` workers, else ``DummyVecEnv``.
``--n-steps N``, ``--n-epochs E`` and ``--batch-size B``: PPO's (64, 2 and 64 unless told).
``--eval-freq N --eval-episodes M`` evaluates the policy with SB3's ``EvalCallback`` on an env of
its own every N steps of each training env, M episodes each time.
``--hand-timers FILE`` writes the time ``learn`` took, measured by hand, as JSON (for
benchmarks/run_overhead.py and loop_parts.py), and the part of it its rollouts took (a callback's
``_on_rollout_start`` to ``_on_rollout_end``: the policy's calls, the env steps, the buffer).
"""

import argparse
import json
import time

import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import BaseCallback, EvalCallback
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv


class RolloutTimer(BaseCallback):
    """Sums the time SB3's rollouts take, by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.seconds = 0.0
        self._started = 0.0

    def _on_rollout_start(self) -> None:
        self._started = time.perf_counter()

    def _on_rollout_end(self) -> None:
        self.seconds += time.perf_counter() - self._started

    def _on_step(self) -> bool:
        return True


if __name__ == "__main__":  # SubprocVecEnv's workers start by forkserver: they import this file
    parser = argparse.ArgumentParser()
    parser.add_argument("--timesteps", type=int, default=256)
    parser.add_argument("--n-steps", type=int, default=64)
    parser.add_argument("--n-epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--vec-env", choices=("dummy", "subproc"), default="dummy")
    parser.add_argument("--hand-timers", default=None)
    parser.add_argument("--eval-freq", type=int, default=None)
    parser.add_argument("--eval-episodes", type=int, default=5)
    args = parser.parse_args()

    torch.set_num_threads(1)
    vec_env_cls = SubprocVecEnv if args.vec_env == "subproc" else DummyVecEnv
    env = make_vec_env("CartPole-v1", n_envs=4, seed=0, vec_env_cls=vec_env_cls)
    model = PPO("MlpPolicy", env, n_steps=args.n_steps, batch_size=args.batch_size, n_epochs=args.n_epochs, seed=0,
                device="cpu")
    callbacks = []
    if args.eval_freq:
        callbacks.append(EvalCallback(make_vec_env("CartPole-v1", n_envs=1, seed=1), eval_freq=args.eval_freq,
                                      n_eval_episodes=args.eval_episodes, verbose=0))
    rollout_timer = RolloutTimer()
    if args.hand_timers:
        callbacks.append(rollout_timer)
    started = time.perf_counter()
    callback = callbacks[0] if len(callbacks) == 1 else (callbacks or None)
    model.learn(total_timesteps=args.timesteps, callback=callback)
    learn_seconds = time.perf_counter() - started
    action, _ = model.predict(env.reset(), deterministic=True)
    env.close()
    if args.hand_timers:
        with open(args.hand_timers, "w") as file:
            json.dump({"training": learn_seconds, "rollout": rollout_timer.seconds}, file)
    print("actions:", action.tolist())
    print("parameter sum:", float(sum(parameter.sum() for parameter in model.policy.parameters())))
