"""What ``rlprof run`` (no flags) costs a CleanRL-style script, and whether its env time is right.

    python benchmarks/run_environments.py [--rounds 5] [--total-timesteps 40000] [--vector sync]

The script (``tests/envmanager/programs/cleanrl_style_ppo.py``: 4 CartPole envs, a numpy policy,
CleanRL's loop) runs as a fresh process, in alternating rounds (who goes first rotates), under:

* ``python``: the program as it is;
* ``rlprof run``: the same command under ``python -m profiler run`` (files written, analysis
  printed: all of what a user pays).

Printed: the median wall time of each and the median of the per-round ratios (goal, issue 23:
<= 1.03x), beside the CPU time of the whole process tree (user + system, workers included: on a
machine other work keeps busy, a steadier figure than the wall time) and the script's own steps
per second (its ``SPS:`` line). ``rlprof run`` also pays a fixed cost, whatever the program
(imports, analysis, trace and report): measured as ``rlprof run`` of an empty script less
``python`` of it, and printed apart (rlprof's imports include numpy and Gymnasium, which the
script imports anyway, so the figure less that cost slightly flatters rlprof).

Then the env-step time against hand timers placed in the same run: a copy of the script with
``time.perf_counter()`` summed around its ``envs.step(...)`` line prints that sum, and the
``vector.step`` block of the dump of the same run is set against it (goal: within 5%). With
``--vector async`` the copy builds ``AsyncVectorEnv`` instead, whose workers are then timed in place.
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "tests" / "envmanager" / "programs" / "cleanrl_style_ppo.py"
WALL_GOAL = 1.03
ENV_STEP_GOAL = 0.05
STEP_LINE = "            next_obs, reward, terminations, truncations, infos = envs.step(action)\n"
HAND_TIMED = (
    "            _hand_start = time.perf_counter()\n"
    + STEP_LINE
    + "            hand_env_step_seconds += time.perf_counter() - _hand_start\n"
)


def hand_timed_copy(folder: Path, vector: str) -> Path:
    """The script with a hand timer around its vector step, printing the sum at its end."""
    source = SCRIPT.read_text()
    assert STEP_LINE in source, "the script's step line moved: update STEP_LINE"
    source = source.replace(STEP_LINE, HAND_TIMED)
    source = source.replace("    global_step = 0\n", "    global_step = 0\n    hand_env_step_seconds = 0.0\n")
    source = source.replace('    print("SPS:"', '    print("HAND env step seconds:", hand_env_step_seconds)\n    print("SPS:"')
    if vector == "async":
        source = source.replace("gym.vector.SyncVectorEnv(", "gym.vector.AsyncVectorEnv(")
    target = folder / "cleanrl_hand_timed.py"
    target.write_text(source)
    return target


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(command: list[str], folder: Path) -> tuple[float, float, str]:
    """Wall time, CPU time of the process and every process it waited for, and its stdout."""
    start, cpu_start = time.perf_counter(), cpu_of_children()
    result = subprocess.run(command, cwd=folder, capture_output=True, text=True, timeout=900)
    wall, cpu = time.perf_counter() - start, cpu_of_children() - cpu_start
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{result.stderr[-2000:]}")
    return wall, cpu, result.stdout


def sps(stdout: str) -> int:
    return int(re.search(r"^SPS: (\d+)", stdout, re.M).group(1))


def block_total(node: dict, name: str) -> float:
    own = node["total"] if node["name"] == name and not node.get("is_parallel") else 0.0
    return own + sum(block_total(child, name) for child in node["children"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--total-timesteps", type=int, default=40000)
    parser.add_argument("--vector", choices=("sync", "async"), default="sync")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="rlprof-bench-") as name:
        folder = Path(name)
        script = hand_timed_copy(folder, options.vector)
        arguments = [str(script), "--num-envs", "4", "--total-timesteps", str(options.total_timesteps)]
        variants = {
            "python": lambda round_: [sys.executable, *arguments],
            "rlprof run": lambda round_: [sys.executable, "-m", "profiler", "run", "--summaries-dir",
                                          f"run{round_}", *arguments],
        }
        (folder / "empty.py").write_text("")
        fixed = []
        for round_ in range(3):
            bare = run([sys.executable, "empty.py"], folder)
            under = run([sys.executable, "-m", "profiler", "run", "--summaries-dir", f"empty{round_}", "empty.py"],
                        folder)
            fixed.append((under[0] - bare[0], under[1] - bare[1]))
        walls: dict[str, list[float]] = {name: [] for name in variants}
        cpus: dict[str, list[float]] = {name: [] for name in variants}
        rates: dict[str, list[int]] = {name: [] for name in variants}
        env_step_ratios: list[float] = []
        for round_ in range(options.rounds):
            order = list(variants) if round_ % 2 == 0 else list(reversed(variants))
            for variant in order:
                wall, cpu, stdout = run(variants[variant](round_), folder)
                walls[variant].append(wall)
                cpus[variant].append(cpu)
                rates[variant].append(sps(stdout))
                if variant == "rlprof run":
                    hand = float(re.search(r"^HAND env step seconds: (\S+)", stdout, re.M).group(1))
                    tree = json.loads((folder / f"run{round_}" / "cleanrl_hand_timed_timers.json").read_text())
                    env_step_ratios.append(block_total(tree, "vector.step") / hand)
            print(f"round {round_ + 1}: python {walls['python'][-1]:.2f} s, rlprof run "
                  f"{walls['rlprof run'][-1]:.2f} s", flush=True)
    ratios = [timed / plain for plain, timed in zip(walls["python"], walls["rlprof run"])]
    rate_ratios = [plain / timed for plain, timed in zip(rates["python"], rates["rlprof run"])]
    print(f"\nCleanRL-style script, {options.vector} vector env of 4 CartPole envs, "
          f"{options.total_timesteps} steps, {options.rounds} interleaved rounds (medians):")
    print(f"  {'':<12}{'wall':>9}{'cpu':>9}{'SPS':>9}")
    for variant in variants:
        print(f"  {variant:<12}{statistics.median(walls[variant]):>8.2f}s{statistics.median(cpus[variant]):>8.2f}s"
              f"{statistics.median(rates[variant]):>9}")
    fixed_wall, fixed_cpu = (statistics.median(figures) for figures in zip(*fixed))
    print(f"  rlprof run's fixed cost (an empty script, less python's): {fixed_wall:.2f} s wall, {fixed_cpu:.2f} s cpu")
    cpu_ratios = [timed / plain for plain, timed in zip(cpus["python"], cpus["rlprof run"])]
    cpu_beyond_fixed = [(timed - fixed_cpu) / plain for plain, timed in zip(cpus["python"], cpus["rlprof run"])]
    print(f"  wall time, rlprof run / python: {statistics.median(ratios):.3f}x (goal <= {WALL_GOAL}x)")
    print(f"  cpu time, rlprof run / python: {statistics.median(cpu_ratios):.3f}x; "
          f"less the fixed cost: {statistics.median(cpu_beyond_fixed):.3f}x")
    print(f"  the script's own time per step (SPS ratio): {statistics.median(rate_ratios):.3f}x")
    print(f"  vector.step block / hand timer around envs.step, same run: "
          f"{statistics.median(env_step_ratios):.3f} (goal within {ENV_STEP_GOAL:.0%})")


if __name__ == "__main__":
    main()
