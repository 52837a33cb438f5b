"""Profile a training loop the MegEngine way: one Profiler session, memory sampled in every process.

    python examples/megengine_session.py [OUTPUT_DIR]

Two CartPole workers step under a ``Profiler`` session, built inside it so that they record and
sample too. One worker's env keeps a copy of every frame it renders in a debug history that is
never emptied: a memory leak. The session writes, under OUTPUT_DIR (default ``profile/``),
MegEngine's two files and rlprof's: ``{pid}.chrome_timeline.json`` (open in Perfetto: spans and memory
counters of every process), ``{pid}.memory_flow.svg``, ``{pid}.timers.json`` and
``{pid}.report.html``; then the analysis is printed, its memory section and verdicts included —
the leaking worker is named. See docs/from-megengine.md.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np

from envmanager import SubprocessEnvManager
from profiler import Profiler, hierarchical_timer, load_timing_tree, timed
from profiler.analysis.analyze import analyze_run, render_analysis

STEPS = 300
FRAME_BYTES = 128 * 1024


class FrameHistory(gym.Wrapper):
    """Keeps every step's rendered frame for debugging, and never lets one go."""

    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.frames: list[bytes] = []

    def step(self, action):
        self.frames.append(bytes([len(self.frames) % 256]) * FRAME_BYTES)  # a written, resident frame
        return self.env.step(action)


def make_env(keeps_frames: bool):
    def build() -> gym.Env:
        env = gym.make("CartPole-v1")
        return FrameHistory(env) if keeps_frames else env

    return build


@timed
def policy(observations: np.ndarray) -> np.ndarray:
    return (observations[:, 2] > 0).astype(np.int64)  # push towards the side the pole leans


def main(output_dir: str = "profile") -> None:
    formats = ["chrome_timeline.json", "memory_flow.svg", "timers.json", "report.html"]
    with Profiler(path=output_dir, formats=formats, sample_rate=4):
        envs = SubprocessEnvManager([make_env(False), make_env(True)], autoreset_mode="same_step")
        try:
            observations, _ = envs.reset(seed=0)
            for _ in range(STEPS):
                with hierarchical_timer("train_step"):
                    observations, *_ = envs.step(policy(observations))
        finally:
            envs.close()
    tree = load_timing_tree(Path(output_dir) / f"{os.getpid()}.timers.json")
    print(render_analysis(analyze_run(tree)))


if __name__ == "__main__":
    main(*sys.argv[1:])
