"""What does ``rlprof run`` cost a real PPO run, and do its phases agree with hand timers?

Three unedited programs, each run as a real process, in turn, round after round (interleaved; the
order of the variants alternates from round to round):

- a CleanRL-style PPO (``tests/profiler/automatic/programs/cleanrl_torch_ppo.py``: torch on the
  CPU, 4 CartPole envs in a ``SyncVectorEnv``, CleanRL's 128 steps per rollout, 4 epochs of 4
  minibatches); goal (issue 23): ``rlprof run`` within 1.03x of plain ``python``;
- the same program over ``AsyncVectorEnv`` (``--async-envs``: the envs in worker processes,
  instrumented where they run); goal 1.03x;
- Stable-Baselines3's PPO over ``SubprocVecEnv`` (4 CartPole envs, ``programs/sb3_ppo.py``);
  goal 1.05x.

Each program runs 32,768 steps unless told otherwise: some 6 to 9 s of training loop on a 2-core
machine, about three quarters of the process. A shorter run is mostly start-up (importing torch,
starting workers), which costs the same under both, so its ratio says less about the loop: at
8,192 steps the ``AsyncVectorEnv`` program's process took 1.015x (30 rounds) while its loop took
1.058x, and at 32,768 steps 1.081x (8 rounds). The goals are for a training run, whose loop is
most of it.

Each under plain ``python`` and under ``rlprof run`` with no flags (the full run adds
``rlprof run --no-stack-sampler``, ``--no-framework-phases --no-stack-sampler``, ``--no-timeline``
and ``--no-timeline --no-stack-sampler``, to tell the costs apart: the timeline's spans are
written, traced and analysed at the exit, a cost that grows with the run). Ratios are medians of per-round ratios to plain ``python`` of the same round, so
machine noise that slows a whole round cancels. Each wall goal is judged on the median's
distribution-free interval (:func:`median_interval`: the extremes of 5 rounds hold the median at
94%, the 2nd and 10th of 11 at 98.8%): met when the whole interval is under the goal, not met when
it is all above, and otherwise left undecided by the rounds run, which a shared machine's swings
of several percent from run to run often leave it. Two walls: the whole process (what the user waits
for: rlprof's start-up, its files and its analysis included) and the training loop as the program
times itself (``--hand-timers``); and the process CPU time, less swayed by other work on a shared
machine.

From the default ``rlprof run`` of each round, also:

- **unexplained**: ``untimed.unexplained_share`` of the analysis — wall time in no block and not
  named by the stack sampler (goal <= 10%);
- for the CleanRL programs, rlprof's phases against the program's hand timers in the same run
  (goal: each within 5%): **policy** — the ``Agent.get_action_and_value (no grad)`` block against
  a timer around that call; **update** — the ``update`` phase (one block per optimizer step and
  the loop between them) against a timer around the epochs' loop; **env step** — the
  ``vector.step`` block against a timer around ``envs.step(...)``.

Runs from a checkout without installing rlprof: the programs run with the repository on
``PYTHONPATH`` and ``rlprof run`` as ``python -m profiler run``; where rlprof's entry points are
not installed (they connect ``profiler`` to ``envmanager``'s environment instrumentation), a
temporary ``.dist-info`` holding them, read from ``pyproject.toml``, goes on ``PYTHONPATH`` too.
The policy runs on the CPU (``CUDA_VISIBLE_DEVICES`` empty), on a GPU machine too. The first line
says whether rlprof's timers run on their compiled C core: a checkout that was never built runs
them in pure Python (``python3 setup.py build_ext --inplace`` builds the core in place).

    python3 benchmarks/run_overhead.py --quick     # 5 rounds of short runs: about 2 minutes
    python3 benchmarks/run_overhead.py [--rounds 5] [--total-timesteps 32768] [--sb3-timesteps 32768]
                                       [--only cleanrl-sync|cleanrl-async|sb3]
"""

from __future__ import annotations

import argparse
import compileall
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the analysis reads the dumps in this process

from profiler.analysis.analyze import analyze_run  # noqa: E402
from profiler.timing import accelerator  # noqa: E402
from profiler.analysis.training_phases import training_phases  # noqa: E402
from profiler.tree.timer_json import load_timing_tree  # noqa: E402

PROGRAMS = ROOT / "tests" / "profiler" / "automatic" / "programs"

GOAL_UNEXPLAINED = 0.10
"""Issue 23: at most 10% of the wall time unexplained."""
GOAL_PHASE_AGREEMENT = 0.05
"""Issue 23: policy, update and env-step time within 5% of hand timers placed in the same run."""

QUICK_VARIANTS = {"python": None, "rlprof run": ()}
FULL_VARIANTS = {
    **QUICK_VARIANTS,
    "rlprof run --no-stack-sampler": ("--no-stack-sampler",),
    "rlprof run, no phases, no sampler": ("--no-framework-phases", "--no-stack-sampler"),
    "rlprof run --no-timeline": ("--no-timeline",),
    "rlprof run, no timeline, no sampler": ("--no-timeline", "--no-stack-sampler"),
}
POLICY_BLOCK = "Agent.get_action_and_value (no grad)"


@dataclass(frozen=True)
class Program:
    key: str
    title: str
    path: Path
    arguments: tuple[str, ...]
    wall_goal: float
    hand_phases: bool


def programs(options: argparse.Namespace) -> list[Program]:
    cleanrl = ("--total-timesteps", str(options.total_timesteps), "--num-steps", "128",
               "--update-epochs", "4", "--num-minibatches", "4")
    listed = [
        Program("cleanrl-sync", f"CleanRL-style PPO, SyncVectorEnv x4 CartPole, CPU torch, "
                f"{options.total_timesteps} steps", PROGRAMS / "cleanrl_torch_ppo.py", cleanrl, 1.03, True),
        Program("cleanrl-async", f"CleanRL-style PPO, AsyncVectorEnv x4 CartPole, CPU torch, "
                f"{options.total_timesteps} steps", PROGRAMS / "cleanrl_torch_ppo.py", (*cleanrl, "--async-envs"),
                1.03, True),
        Program("sb3", f"SB3 PPO, SubprocVecEnv x4 CartPole, {options.sb3_timesteps} steps", PROGRAMS / "sb3_ppo.py",
                ("--timesteps", str(options.sb3_timesteps), "--n-steps", "128", "--vec-env", "subproc"), 1.05, False),
    ]
    return [program for program in listed if options.only in (None, program.key)]


def child_environment(folder: Path) -> dict[str, str]:
    """The programs' environment: the repository importable, rlprof's entry points findable, the
    policy on the CPU, and Stable-Baselines3's log folder inside ``folder`` (SB3 makes one per
    run, in the system's temporary folder unless ``SB3_LOGDIR`` names one)."""
    paths = [str(ROOT)]
    if not list(entry_points(group="rlprof.environments")):
        paths.append(str(_entry_points_folder(folder)))
    if os.environ.get("PYTHONPATH"):
        paths.append(os.environ["PYTHONPATH"])
    return {**os.environ, "PYTHONPATH": os.pathsep.join(paths), "CUDA_VISIBLE_DEVICES": "",
            "SB3_LOGDIR": str(folder / "sb3_logs")}


def checkout_environment(environment: dict[str, str], checkout: Path) -> dict[str, str]:
    """``environment`` with another checkout of rlprof first on ``PYTHONPATH`` (``--against``), its
    bytecode written first: its processes then import that checkout's rlprof."""
    compile_rlprof(checkout)
    return {**environment, "PYTHONPATH": os.pathsep.join([str(checkout.resolve()), environment["PYTHONPATH"]])}


def _entry_points_folder(folder: Path) -> Path:
    """A folder holding a ``.dist-info`` with rlprof's entry points (from ``pyproject.toml``), for a
    checkout that is not installed: ``importlib.metadata`` finds them on ``PYTHONPATH``."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    info = folder / "entry_points" / f"rlprof_checkout-{project.get('version', '0')}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    version = project.get("version", "0")
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: rlprof-checkout\nVersion: {version}\n")
    groups = project.get("entry-points", {})
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in members.items()) + "\n"
        for group, members in groups.items()))
    return info.parent


def compile_rlprof(checkout: Path = ROOT) -> None:
    """Write the bytecode caches of rlprof's checkout (this one by default) once: a checkout never
    imported before (or a shell with ``PYTHONDONTWRITEBYTECODE``) would otherwise compile rlprof's
    modules in every run, a cost an installed rlprof does not pay."""
    for package in ("profiler", "envmanager"):
        compileall.compile_dir(checkout / package, quiet=1)


def fixed_cost(environment: dict[str, str], folder: Path, rounds: int = 3) -> tuple[float, float]:
    """``rlprof run``'s cost whatever the program does (its imports, files and analysis), in wall
    and CPU seconds: ``rlprof run`` of a script that only imports torch, Gymnasium and numpy, less
    ``python`` of it (interleaved, medians)."""
    script = folder / "imports_only.py"
    script.write_text("import gymnasium, numpy, torch\n")
    walls, cpus = [], []
    for round_number in range(rounds):
        figures = {}
        for variant in (("python",), ("rlprof",)) if round_number % 2 == 0 else (("rlprof",), ("python",)):
            command = ([sys.executable, str(script)] if variant == ("python",) else
                       [sys.executable, "-m", "profiler", "run", "--summaries-dir",
                        str(folder / f"fixed{round_number}"), str(script)])
            cpu_before, started = _children_cpu(), time.perf_counter()
            subprocess.run(command, check=True, cwd=folder, env=environment,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            figures[variant] = (time.perf_counter() - started, _children_cpu() - cpu_before)
        walls.append(figures[("rlprof",)][0] - figures[("python",)][0])
        cpus.append(figures[("rlprof",)][1] - figures[("python",)][1])
    return statistics.median(walls), statistics.median(cpus)


def run_once(program: Program, options: tuple[str, ...] | None, folder: Path, environment: dict[str, str]) -> dict:
    """One run: its process wall and CPU time, the program's own timers, and (under the default
    ``rlprof run``) the dumped tree."""
    hand_file = folder / "hand.json"
    if options is None:
        command = [sys.executable, str(program.path)]
    else:
        command = [sys.executable, "-m", "profiler", "run", *options, "--summaries-dir", str(folder / "out"),
                   "--run-id", "run", str(program.path)]
    cpu_before = _children_cpu()
    started = time.perf_counter()
    subprocess.run([*command, *program.arguments, "--hand-timers", str(hand_file)], check=True, cwd=folder,
                   env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result = {"wall": time.perf_counter() - started, "cpu": _children_cpu() - cpu_before,
              "hand": json.loads(hand_file.read_text())}
    if options == ():
        result["tree"] = load_timing_tree(folder / "out" / "run_timers.json")
    return result


def _children_cpu() -> float:
    """CPU seconds of the processes this one waited for (the run and the workers it waited for)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(programs_measured: list[Program], variants: dict, rounds: int, environment: dict[str, str],
            folder: Path) -> dict[str, dict[str, list[dict]]]:
    runs = {program.key: {label: [] for label in variants} for program in programs_measured}
    for round_number in range(rounds):
        order = list(variants) if round_number % 2 == 0 else list(reversed(variants))
        for program in programs_measured:
            for label in order:
                with tempfile.TemporaryDirectory(dir=folder) as run_folder:
                    runs[program.key][label].append(run_once(program, variants[label], Path(run_folder), environment))
        print(f"  round {round_number + 1}/{rounds} done", file=sys.stderr, flush=True)
    return runs


def round_ratios(runs: dict[str, list[dict]], label: str, figure) -> list[float]:
    return [figure(run) / figure(base) for run, base in zip(runs[label], runs["python"])]


def median_ratio(runs: dict[str, list[dict]], label: str, figure) -> float:
    return statistics.median(round_ratios(runs, label, figure))


def median_interval(values: list[float], coverage: float = 0.95) -> tuple[float, float, float]:
    """``(low, high, its coverage)``: the narrowest pair of order statistics ``x(k), x(n+1-k)`` that
    holds the median of what the values were drawn from with at least ``coverage`` probability,
    or the smallest and largest value when there are too few values for that.

    Distribution-free: each independent value lies below the true median with probability 1/2, so
    the interval misses it only when fewer than ``k`` values fall on one side,
    ``2 * P(Binomial(n, 1/2) <= k - 1)``. Five rounds give at most 94% (their extremes); eleven,
    the 2nd and 10th of them at 98.8%. What it says: a goal above ``high`` is met and one below
    ``low`` missed whatever the machine's noise did in these rounds; between them, these rounds do
    not decide it.
    """
    ordered = sorted(values)
    count = len(ordered)
    if count == 0:
        raise ValueError("median_interval() needs at least one value")

    def holds(k: int) -> float:
        return 1 - 2 * sum(math.comb(count, below) for below in range(k)) / 2 ** count

    k = max((k for k in range(1, (count + 1) // 2 + 1) if holds(k) >= coverage), default=1)
    return ordered[k - 1], ordered[count - k], holds(k)


def goal_verdict(ratios: list[float], goal: float) -> str:
    """The median's interval against an upper goal: met, NOT met, or undecided by these rounds."""
    low, high, held = median_interval(ratios)
    if high <= goal:
        decided = "met"
    elif low > goal:
        decided = "NOT met"
    else:
        decided = "undecided by these rounds"
    return f"{held:.0%} interval {low:.3f}-{high:.3f}: {decided}"


def print_walls(program: Program, runs: dict[str, list[dict]]) -> None:
    print(f"\n{program.title}")
    print(f"  {'':36} {'process wall':>13} {'ratio':>7} {'training loop':>14} {'ratio':>7} "
          f"{'process CPU':>12} {'ratio':>7}")
    for label in runs:
        wall = statistics.median(run["wall"] for run in runs[label])
        loop = statistics.median(run["hand"]["training"] for run in runs[label])
        cpu = statistics.median(run["cpu"] for run in runs[label])
        print(f"  {label:36} {wall:12.2f}s {median_ratio(runs, label, lambda run: run['wall']):6.3f}x "
              f"{loop:13.2f}s {median_ratio(runs, label, lambda run: run['hand']['training']):6.3f}x "
              f"{cpu:11.2f}s {median_ratio(runs, label, lambda run: run['cpu']):6.3f}x")
    wall_ratios = round_ratios(runs, "rlprof run", lambda run: run["wall"])
    loop_ratios = round_ratios(runs, "rlprof run", lambda run: run["hand"]["training"])
    print(f"  goal: `rlprof run` <= {program.wall_goal:.2f}x plain python -> process wall "
          f"{statistics.median(wall_ratios):.3f}x ({goal_verdict(wall_ratios, program.wall_goal)}), "
          f"training loop {statistics.median(loop_ratios):.3f}x ({goal_verdict(loop_ratios, program.wall_goal)})")
    outside = statistics.median((run["wall"] - run["hand"]["training"]) - (base["wall"] - base["hand"]["training"])
                                for run, base in zip(runs["rlprof run"], runs["python"]))
    print(f"  outside the training loop `rlprof run` adds {outside:.2f} s (its imports, its files and the "
          f"analysis: a fixed cost, whatever the run's length)")
    analyses = [analyze_run(run["tree"]) for run in runs["rlprof run"]]
    unexplained = statistics.median(analysis.unexplained_share for analysis in analyses)
    untimed = statistics.median(analysis.untimed_share for analysis in analyses)
    print(f"  untimed (in no block): {untimed:.1%} of wall; unexplained (and not named by the sampler): "
          f"{unexplained:.1%}, goal <= {GOAL_UNEXPLAINED:.0%} ({_verdict(unexplained <= GOAL_UNEXPLAINED)})")


def print_phases(runs: dict[str, list[dict]]) -> None:
    print("  rlprof's phases against the program's hand timers, in the same `rlprof run`:")
    for phase, hand_key, figure in (("policy", "policy", _policy_seconds), ("update", "update", _update_seconds),
                                    ("env step", "env_step", _env_seconds)):
        rlprof = [figure(run["tree"]) for run in runs["rlprof run"]]
        hand = [run["hand"][hand_key] for run in runs["rlprof run"]]
        ratio = statistics.median(mine / theirs for mine, theirs in zip(rlprof, hand))
        print(f"    {phase:9} rlprof {statistics.median(rlprof):7.3f}s  hand {statistics.median(hand):7.3f}s  "
              f"ratio {ratio:.3f} (goal within {GOAL_PHASE_AGREEMENT:.0%} of 1: "
              f"{_verdict(abs(ratio - 1) <= GOAL_PHASE_AGREEMENT)})")


def _policy_seconds(tree: dict) -> float:
    phases = training_phases(tree)
    return sum(block.seconds for block in phases.policy if block.name == POLICY_BLOCK) if phases else 0.0


def _update_seconds(tree: dict) -> float:
    phases = training_phases(tree)
    return phases.update_seconds if phases else 0.0


def _env_seconds(tree: dict) -> float:
    phases = training_phases(tree)
    return phases.env_seconds if phases else 0.0


def _verdict(met: bool) -> str:
    return "met" if met else "NOT met"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="5 rounds of short runs, python and rlprof run only "
                             "(about 2 minutes on a quiet 16-core machine)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--total-timesteps", type=int, default=None, help="CleanRL's (32768; 2048 with --quick)")
    parser.add_argument("--sb3-timesteps", type=int, default=None, help="SB3's (32768; 2048 with --quick)")
    parser.add_argument("--only", choices=("cleanrl-sync", "cleanrl-async", "sb3"), default=None)
    options = parser.parse_args()
    default_steps = 2048 if options.quick else 32768
    options.total_timesteps = options.total_timesteps or default_steps
    options.sb3_timesteps = options.sb3_timesteps or default_steps
    variants = QUICK_VARIANTS if options.quick else FULL_VARIANTS
    started = time.perf_counter()
    print(f"rlprof run overhead: median of {options.rounds} interleaved rounds, ratios to plain python "
          f"(python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f})")
    core = ("compiled C core" if accelerator.extension is not None
            else f"pure-Python timers: {accelerator.unavailable_reason}; "
                 "`python3 setup.py build_ext --inplace` builds it")
    print(f"timers: {core}")
    with tempfile.TemporaryDirectory(prefix="rlprof-run-overhead-") as name:
        folder = Path(name)
        environment = child_environment(folder)
        compile_rlprof()
        measured = programs(options)
        runs = measure(measured, variants, options.rounds, environment, folder)
        fixed = None if options.quick else fixed_cost(environment, folder)
    for program in measured:
        print_walls(program, runs[program.key])
        if program.hand_phases:
            print_phases(runs[program.key])
    if fixed is not None:
        print(f"\nrlprof run's fixed cost, whatever the program (its imports, files and analysis): "
              f"{fixed[0]:.2f} s wall, {fixed[1]:.2f} s CPU (rlprof run of a script importing torch, "
              f"Gymnasium and numpy, less python of it)")
    print(f"\n(done in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
