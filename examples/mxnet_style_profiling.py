"""Profile a training loop with MXNet's profiler API, running on rlprof.

    python examples/mxnet_style_profiling.py [OUTPUT_DIR]

The controls and objects of ``mxnet.profiler`` — ``set_config``, ``set_state``, ``pause``,
``dumps``, ``Domain``, ``Frame``, ``Task``, ``Counter``, ``Marker``, ``scope`` — imported from
``profiler``. The environments step in subprocesses, and their time is merged in per worker. No
``dump()`` call: the files are written when the program ends (and rewritten every half second
while it runs, so even a killed run leaves them).
"""

import sys

import gymnasium as gym
import numpy as np

import profiler
from envmanager import SubprocessEnvManager

STEPS = 200


def policy(observations: np.ndarray) -> np.ndarray:
    return (observations[:, 2] > 0).astype(np.int64)  # push towards the side the pole leans


def main(output_dir: str = "runs/mxnet_style") -> None:
    profiler.set_config(summaries_dir=output_dir, run_id="mxnet_style",
                        formats=["timers", "chrome", "html"],
                        continuous_dump=True, dump_period=0.5, profile_memory=True)
    profiler.set_state("run")

    rl = profiler.Domain("rl")
    iteration, update = rl.new_frame("iteration"), rl.new_task("update")
    episodes = rl.new_counter("episodes", value=0)
    checkpoint = rl.new_marker("checkpoint")

    with SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 2, flush_every=20) as envs:
        observations, _ = envs.reset(seed=0)
        for step in range(STEPS):
            with iteration:
                with profiler.scope("rollout"):
                    observations, _, terminated, truncated, _ = envs.step(policy(observations))
                episodes += int(np.sum(terminated | truncated))
                with update:
                    np.linalg.svd(np.random.default_rng(step).normal(size=(32, 32)))
            if step == STEPS // 2:
                checkpoint.mark("global")
                profiler.pause()  # an evaluation we do not want in the figures
                envs.step(policy(observations))
                profiler.resume()

    profiler.set_state("stop")
    print(profiler.dumps(sort_by="max"))


if __name__ == "__main__":
    main(*sys.argv[1:])
