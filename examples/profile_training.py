"""Profile a training loop over SubprocessEnvManager, then see where the time went.

    python examples/profile_training.py [OUTPUT_DIR]

The same thing ``rlprof demo`` does, in a dozen lines: time your own blocks, step envs in
subprocesses (their time is merged in, per worker), write the run's files, print the analysis.
"""

import sys

import gymnasium as gym
import numpy as np

from envmanager import SubprocessEnvManager
from profiler import hierarchical_timer, load_timing_tree, timed, write_timing_tree
from profiler.recording import events
from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.export import write_export


@timed
def policy(observations: np.ndarray) -> np.ndarray:
    return (observations[:, 2] > 0).astype(np.int64)  # push towards the side the pole leans


def main(output_dir: str = "runs/example") -> None:
    events.start_recording()  # optional: also keep a timeline for the trace
    with SubprocessEnvManager([lambda: gym.make("CartPole-v1")] * 4, flush_every=50) as envs:
        observations, _ = envs.reset(seed=0)
        for _ in range(500):
            with hierarchical_timer("step"):
                observations, *_ = envs.step(policy(observations))
    timers_path = write_timing_tree(f"{output_dir}/example_timers.json")
    tree = load_timing_tree(timers_path)
    write_export(tree, "chrome", f"{output_dir}/example_trace.json.gz")
    write_export(tree, "html", f"{output_dir}/example_report.html")
    print(render_analysis(analyze_run(tree)))


if __name__ == "__main__":
    main(*sys.argv[1:])
