"""What does ``rlprof run`` cost a real PPO run, and how much of the run does it leave unexplained?

Two unedited programs, each run as a real process, in turn, round after round:

- a CleanRL-style PPO (``tests/profiler/automatic/programs/cleanrl_torch_ppo.py``: torch on the
  CPU, ``SyncVectorEnv`` of 4 CartPole envs, CleanRL's 128 steps, 4 epochs, 4 minibatches);
- Stable-Baselines3's PPO over ``SubprocVecEnv`` (4 CartPole envs, ``programs/sb3_ppo.py``).

Each under plain ``python`` and under ``rlprof run`` with no flags; and, to tell the costs apart,
``rlprof run --no-stack-sampler`` and ``rlprof run --no-framework-phases --no-stack-sampler``.
Figures are medians over rounds; ratios are medians of per-round ratios to plain ``python``, so
machine noise that slows a whole round cancels. Two walls are compared: the whole process (what
the user waits for: rlprof's start-up, its files and its analysis included) and the training loop
as the program times itself (``--hand-timers``).

From the default ``rlprof run`` of each round, also:

- **unexplained**: ``untimed.unexplained_share`` of ``rlprof analyze --format json`` — wall time
  in no block and not named by the stack sampler;
- for the CleanRL program, rlprof's **policy** (the ``(no grad)`` forward blocks: the rollout's
  inference calls) and **update** (the forward blocks with grad, ``backward``, ``Adam.step``,
  ``Adam.zero_grad``) against the program's hand timers around the same code. The hand timers
  hold more than the hooks see (sampling the action distribution; the loss arithmetic and
  gradient clipping between the hooked calls), so the ratio says how much of each phase the
  hooks name as blocks.

Process CPU time (the run's and the workers' it waited for) is shown beside the walls: on a
shared machine it is swayed less by other work than wall time is.

    python benchmarks/run_overhead.py [--rounds 5] [--total-timesteps 8192] [--sb3-timesteps 8192]
                                      [--only cleanrl|sb3]
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAMS = ROOT / "tests" / "profiler" / "automatic" / "programs"

GOAL_CLEANRL_WALL = 1.03
"""Issue 23: a CleanRL PPO under ``rlprof run`` within 1.03x of plain ``python``."""
GOAL_SB3_WALL = 1.05
"""Issue 23: an SB3 PPO under ``rlprof run`` within 1.05x of plain ``python``."""
GOAL_UNEXPLAINED = 0.10
"""Issue 23: at most 10% of the wall time unexplained."""
GOAL_PHASE_AGREEMENT = 0.05
"""Issue 23: policy and update time within 5% of hand timers placed in the same run."""

VARIANTS = {
    "python": None,
    "rlprof run": (),
    "rlprof run --no-stack-sampler": ("--no-stack-sampler",),
    "rlprof run, no phases, no sampler": ("--no-framework-phases", "--no-stack-sampler"),
}


def run_once(program: Path, arguments: list[str], options: tuple[str, ...] | None, folder: Path) -> dict:
    """One run: its process wall time, the program's own timers, and (under rlprof) the analysis."""
    hand_file = folder / "hand.json"
    if options is None:
        command = [sys.executable, str(program)]
    else:
        command = [sys.executable, "-m", "profiler", "run", *options, "--summaries-dir", str(folder / "out"),
                   "--run-id", "run", str(program)]
    cpu_before = _children_cpu()
    started = time.perf_counter()
    subprocess.run([*command, *arguments, "--hand-timers", str(hand_file)], check=True, cwd=folder,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result = {"wall": time.perf_counter() - started, "cpu": _children_cpu() - cpu_before,
              "hand": json.loads(hand_file.read_text())}
    if options == ():
        timers = folder / "out" / "run_timers.json"
        analysis = subprocess.run([sys.executable, "-m", "profiler", "analyze", "--format", "json", "--top", "0",
                                   str(timers)], check=True, capture_output=True, text=True)
        result["analysis"] = json.loads(analysis.stdout)
        result["tree"] = json.loads(timers.read_text())
    return result


def _children_cpu() -> float:
    """CPU seconds of the processes this one waited for (the run and the workers it waited for):
    less swayed than wall time by other work on a shared machine."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def phase_seconds(tree: dict) -> tuple[float, float]:
    """rlprof's policy (inference forward) and update (grad forward, backward, step, zero_grad)."""
    policy = update = 0.0
    for node in tree["children"]:
        name = node["name"]
        if name.endswith(".forward (no grad)"):
            policy += node["total"]
        elif name.endswith(".forward") or name in ("backward", "Adam.step", "Adam.zero_grad"):
            update += node["total"]
    return policy, update


def measure(program: Path, arguments: list[str], rounds: int) -> dict[str, list[dict]]:
    runs: dict[str, list[dict]] = {label: [] for label in VARIANTS}
    for round_number in range(rounds):
        for label, options in VARIANTS.items():
            with tempfile.TemporaryDirectory() as folder:
                runs[label].append(run_once(program, arguments, options, Path(folder)))
        print(f"  round {round_number + 1}/{rounds} done", file=sys.stderr)
    return runs


def ratio_to_python(runs: dict[str, list[dict]], label: str, key: str) -> float:
    def figure(run: dict) -> float:
        return run["hand"]["training"] if key == "training" else run[key]

    return statistics.median(figure(run) / figure(base) for run, base in zip(runs[label], runs["python"]))


def print_walls(title: str, runs: dict[str, list[dict]], goal: float) -> None:
    print(f"\n{title}")
    print(f"  {'':36} {'process wall':>13} {'ratio':>7} {'training loop':>14} {'ratio':>7} "
          f"{'process CPU':>12} {'ratio':>7}")
    for label in VARIANTS:
        wall = statistics.median(run["wall"] for run in runs[label])
        loop = statistics.median(run["hand"]["training"] for run in runs[label])
        cpu = statistics.median(run["cpu"] for run in runs[label])
        print(f"  {label:36} {wall:12.2f}s {ratio_to_python(runs, label, 'wall'):6.3f}x "
              f"{loop:13.2f}s {ratio_to_python(runs, label, 'training'):6.3f}x "
              f"{cpu:11.2f}s {ratio_to_python(runs, label, 'cpu'):6.3f}x")
    print(f"  goal <= {goal:.2f}x for `rlprof run` (no flags)")
    unexplained = statistics.median(run["analysis"]["untimed"]["unexplained_share"] for run in runs["rlprof run"])
    untimed = statistics.median(run["analysis"]["untimed"]["share"] for run in runs["rlprof run"])
    print(f"  untimed (in no block): {untimed:.1%} of wall; unexplained (and not named by the sampler): "
          f"{unexplained:.1%}, goal <= {GOAL_UNEXPLAINED:.0%}")


def print_phases(runs: dict[str, list[dict]]) -> None:
    print("  rlprof's blocks against the program's hand timers, in the same `rlprof run`:")
    for index, phase in enumerate(("policy", "update")):
        ratios = [phase_seconds(run["tree"])[index] / run["hand"][phase] for run in runs["rlprof run"]]
        rlprof = statistics.median(phase_seconds(run["tree"])[index] for run in runs["rlprof run"])
        hand = statistics.median(run["hand"][phase] for run in runs["rlprof run"])
        print(f"    {phase:7} rlprof {rlprof:7.3f}s  hand {hand:7.3f}s  ratio {statistics.median(ratios):.3f} "
              f"(goal within {GOAL_PHASE_AGREEMENT:.0%} of 1)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--total-timesteps", type=int, default=8192)
    parser.add_argument("--sb3-timesteps", type=int, default=8192)
    parser.add_argument("--only", choices=("cleanrl", "sb3"), default=None, help="run one program only")
    options = parser.parse_args()
    print(f"rlprof run overhead: median of {options.rounds} interleaved rounds, ratios to plain python")
    if options.only != "sb3":
        cleanrl = measure(PROGRAMS / "cleanrl_torch_ppo.py",
                          ["--total-timesteps", str(options.total_timesteps), "--num-steps", "128",
                           "--update-epochs", "4", "--num-minibatches", "4"], options.rounds)
        print_walls(f"CleanRL-style PPO, SyncVectorEnv x4 CartPole, CPU torch, {options.total_timesteps} steps",
                    cleanrl, GOAL_CLEANRL_WALL)
        print_phases(cleanrl)
    if options.only != "cleanrl":
        sb3 = measure(PROGRAMS / "sb3_ppo.py",
                      ["--timesteps", str(options.sb3_timesteps), "--n-steps", "128", "--vec-env", "subproc"],
                      options.rounds)
        print_walls(f"SB3 PPO, SubprocVecEnv x4 CartPole, {options.sb3_timesteps} steps", sb3, GOAL_SB3_WALL)


if __name__ == "__main__":
    main()
