"""``rlprof demo``: a real, profiled training run over a :class:`SubprocessEnvManager`.

It trains :class:`~envmanager.demo.reinforce.LinearSoftmaxPolicy` on a Gymnasium environment in worker
subprocesses, then writes what a user of rlprof gets from any run — the timer JSON, the Chrome /
Perfetto trace and the HTML report under ``runs/<run_id>/`` — and prints ``rlprof analyze``'s
report of it: the verdicts (what limits the run, from :mod:`profiler.analysis.verdicts`, the same
ones the report opens with), then where the time went.

The ``rlprof`` command lives in :mod:`profiler.cli.commands`, which must not import ``envmanager``; this
module joins it as a plugin through the ``rlprof.commands`` entry-point group (see
``pyproject.toml``).
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
from tqdm import tqdm

import profiler
from envmanager.demo.reinforce import EpisodeBuffers, LinearSoftmaxPolicy
from envmanager.subprocess_env_manager import SubprocessEnvManager
from profiler import hierarchical_timer, set_gauge, timers_json_path
from profiler.recording import events
from profiler.analysis.analyze import AnalyzeOptions, analyze_run, render_analysis
from profiler.export import write_export

__all__ = ["DemoResult", "register", "run_demo", "train"]


@dataclass(frozen=True)
class DemoResult:
    """What a demo run produced: its files and how well the agent learned."""

    run_id: str
    output_dir: Path
    timers_path: Path
    trace_path: Path
    report_path: Path
    env_steps: int
    episodes: int
    first_returns: float
    last_returns: float


def make_env_factory(env_id: str):
    """A picklable zero-argument factory (lambdas in a loop would all capture the last value)."""
    return lambda: gym.make(env_id)


def train(
    env_id: str = "CartPole-v1",
    num_envs: int = 4,
    vector_steps: int = 2500,
    output_dir: str | Path = "runs",
    run_id: str | None = None,
    seed: int = 0,
    show_progress: bool = True,
    flush_every: int = 100,
) -> DemoResult:
    """Train for ``vector_steps`` steps of ``num_envs`` environments and write the run's files.

    The timeline is recorded from the start, so the trace shows every block of the trainer and
    of each worker; workers ship their timers every ``flush_every`` steps.
    """
    run_id = run_id or time.strftime("demo-%Y%m%d-%H%M%S")
    run_dir = Path(output_dir) / run_id
    profiler.reset_timers()
    events.start_recording()
    profiler.add_metadata("run_id", run_id)
    profiler.add_metadata("env_id", env_id)
    profiler.add_metadata("num_envs", num_envs)

    envs = SubprocessEnvManager(
        [make_env_factory(env_id)] * num_envs, autoreset_mode="same_step", flush_every=flush_every
    )
    episode_returns: list[float] = []
    try:
        policy = LinearSoftmaxPolicy(
            envs.single_observation_space.shape[0], int(envs.single_action_space.n),
            learning_rate=0.05, seed=seed,
        )
        buffers = EpisodeBuffers(num_envs)
        finished_episodes: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        with hierarchical_timer("train"):
            observations, _ = envs.reset(seed=seed)
            for _ in tqdm(range(vector_steps), desc="training", unit="step", disable=not show_progress):
                actions = policy.act(observations)
                next_observations, rewards, terminations, truncations, _ = envs.step(actions)
                with hierarchical_timer("record"):
                    finished = buffers.add(observations, actions, rewards, terminations | truncations)
                observations = next_observations
                for episode in finished:
                    episode_returns.append(float(episode[2].sum()))
                    set_gauge("episode_return", episode_returns[-1])
                finished_episodes.extend(finished)
                if len(finished_episodes) >= 2 * num_envs:
                    policy.update(finished_episodes, discount=0.99)
                    finished_episodes.clear()
    finally:
        envs.close()
        events.stop_recording()
    timers_path = profiler.write_timing_tree(timers_json_path(run_dir, run_id))
    # The trace and the report are made from the file just written, so all three agree.
    tree = profiler.load_timing_tree(timers_path)
    trace_path = write_export(tree, "chrome", run_dir / f"{run_id}_trace.json.gz")
    report_path = write_export(tree, "html", run_dir / f"{run_id}_report.html")
    window = max(1, len(episode_returns) // 10)
    return DemoResult(
        run_id=run_id,
        output_dir=run_dir,
        timers_path=timers_path,
        trace_path=trace_path,
        report_path=report_path,
        env_steps=vector_steps * num_envs,
        episodes=len(episode_returns),
        first_returns=float(np.mean(episode_returns[:window])) if episode_returns else 0.0,
        last_returns=float(np.mean(episode_returns[-window:])) if episode_returns else 0.0,
    )


def run_demo(arguments: argparse.Namespace) -> int:
    """The ``rlprof demo`` command: train, write the files, print the verdicts and the summary."""
    result = train(
        env_id=arguments.env_id,
        num_envs=arguments.num_envs,
        vector_steps=arguments.steps,
        output_dir=arguments.output,
        run_id=arguments.run_id,
        seed=arguments.seed,
        show_progress=not arguments.no_progress,
        flush_every=arguments.flush_every,
    )
    analysis = analyze_run(profiler.load_timing_tree(result.timers_path), AnalyzeOptions(top=8))
    print()
    print(render_analysis(analysis, title=result.run_id))
    print(
        f"\n{result.env_steps} env steps, {result.episodes} episodes; "
        f"mean return {result.first_returns:.1f} (first tenth) -> {result.last_returns:.1f} (last tenth)"
    )
    print(f"timers:  {result.timers_path}")
    print(f"trace:   {result.trace_path}  (open in https://ui.perfetto.dev or chrome://tracing)")
    print(f"report:  {result.report_path}  (open in a browser)")
    print(f"compare: rlprof diff {result.timers_path} <another run's timers.json>")
    return 0


def register(subparsers: Any) -> None:
    """Add the ``demo`` sub-command to the ``rlprof`` command line (an entry-point plugin)."""
    parser = subparsers.add_parser(
        "demo",
        help="train a small agent over SubprocessEnvManager and profile it",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("--env-id", default="CartPole-v1", help="Gymnasium id (discrete actions, flat observations)")
    parser.add_argument("--num-envs", type=_positive_int, default=4, help="environments in subprocesses (default 4)")
    parser.add_argument("--steps", type=_positive_int, default=2500, help="vector steps to train (default 2500)")
    parser.add_argument("--output", default="runs", help="folder for runs/<run_id>/ (default runs)")
    parser.add_argument("--run-id", default=None, help="name of the run (default demo-<date>-<time>)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flush-every", type=_positive_int, default=100, help="steps between worker flushes (default 100)")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.set_defaults(run=run_demo)


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="rlprof")
    register(parser.add_subparsers(required=True))
    parsed = parser.parse_args(["demo", *sys.argv[1:]])
    sys.exit(parsed.run(parsed))
