"""What each part of ``rlprof run`` costs the training loop, per vector step, on one core.

A PPO of ``run_overhead.py``: the CleanRL-style one over ``AsyncVectorEnv`` (``cleanrl-async``, the
default: 4 CartPole envs in worker processes, 128 steps per rollout, 4 epochs of 4 minibatches), the
same over ``SyncVectorEnv`` (``--program cleanrl-sync``: its envs in the trainer) or SB3's over
``SubprocVecEnv`` (``--program sb3``: 4 CartPole envs, 128 steps per rollout), under plain
``python``, ``rlprof run`` with no flags, ``rlprof run`` with each of its three in-loop parts
switched off alone (``--no-timeline``, ``--no-stack-sampler``, ``--no-framework-phases``) and with
all three off; interleaved rounds, the order reversed every other round.

Wall time swings by more than these costs on a machine shared with other work, so the runs take
docs/run.md's one-core priority method: this script moves itself into a session (and so an
autogroup) of its own at nice -20 and onto CPU 0, and every process of every run inherits that.
On one core the program's training loop (its own ``--hand-timers``) is the CPU time of all its
processes added up, trainer and workers, wake-ups and cache refills included, which instruction
counts miss. Figures: medians of the loop's microseconds per vector step, and the extra over
plain ``python`` of the same round (medians of per-round differences); "part's share" is
``rlprof run`` less the run with that part alone off. The loop is then split by the program's own
timers: CleanRL's policy calls, ``envs.step`` calls, updates and the rest; SB3's rollouts (a
callback's rollout start to end) and the rest of ``learn`` (the updates, the logging).

    python3 benchmarks/loop_parts.py [--rounds 6] [--total-timesteps 2048]
                                     [--program cleanrl-async|cleanrl-sync|sb3]

Needs the right to lower its nice value (root, or ``CAP_SYS_NICE``); without it the runs are
still pinned to one core, and the script says so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_overhead import child_environment, compile_rlprof, programs, run_once  # noqa: E402

VARIANTS = {
    "python": None,
    "rlprof run": (),
    "--no-timeline": ("--no-timeline",),
    "--no-stack-sampler": ("--no-stack-sampler",),
    "--no-framework-phases": ("--no-framework-phases",),
    "all three off": ("--no-timeline", "--no-stack-sampler", "--no-framework-phases"),
}
PARTS = {"timeline": "--no-timeline", "stack sampler": "--no-stack-sampler",
         "framework phases": "--no-framework-phases"}
NUM_ENVS = 4
SPLITS = {"cleanrl-async": ("policy", "env_step", "update", "rest"), "cleanrl-sync": ("policy", "env_step", "update", "rest"),
          "sb3": ("rollout", "rest")}
"""Per program, its hand timers (``--hand-timers``), then "rest": the loop's time outside them.
CleanRL's: its policy calls, ``envs.step`` calls and updates (the rest: the rollout's own lines,
rlprof's between); SB3's: its rollouts (the rest: its updates and logging)."""


def loop_split(hand: dict[str, float], vector_steps: int, split_parts: tuple[str, ...]) -> dict[str, float]:
    """The loop's parts as the program timed them, in microseconds a vector step."""
    split = {part: hand[part] / vector_steps * 1e6 for part in split_parts[:-1]}
    split["rest"] = hand["training"] / vector_steps * 1e6 - sum(split.values())
    return split


def take_one_core_with_priority() -> str:
    """Pin this process (and so every run it starts) to CPU 0, in an autogroup of its own at nice
    -20: its processes go before other sessions' and share one core, so the loop's time is their
    CPU added up. Says what it got."""
    os.setsid()
    os.sched_setaffinity(0, {0})
    try:
        Path("/proc/self/autogroup").write_text("-20")
        os.setpriority(os.PRIO_PROCESS, 0, -20)
    except OSError as error:
        return f"one core, no priority ({error.strerror})"
    return "one core (CPU 0), own autogroup at nice -20"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--total-timesteps", type=int, default=2048)
    parser.add_argument("--program", choices=tuple(SPLITS), default="cleanrl-async")
    options = parser.parse_args()
    options.sb3_timesteps, options.only = options.total_timesteps, options.program
    placement = take_one_core_with_priority()
    program = programs(options)[0]
    split_parts = SPLITS[options.program]
    vector_steps = options.total_timesteps // NUM_ENVS
    print(f"rlprof's parts in the training loop: {program.title}; {placement}; {options.rounds} interleaved "
          f"rounds; load average {os.getloadavg()[0]:.1f}")
    loops: dict[str, list[float]] = {label: [] for label in VARIANTS}
    # per variant, per round: the loop's split into the program's own timers, us a vector step
    splits: dict[str, list[dict[str, float]]] = {label: [] for label in VARIANTS}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rlprof-loop-parts-") as name:
        folder = Path(name)
        environment = child_environment(folder)
        compile_rlprof()
        for round_number in range(options.rounds):
            order = list(VARIANTS) if round_number % 2 == 0 else list(reversed(VARIANTS))
            for label in order:
                with tempfile.TemporaryDirectory(dir=folder) as run_folder:
                    run = run_once(program, VARIANTS[label], Path(run_folder), environment)
                loops[label].append(run["hand"]["training"] / vector_steps * 1e6)
                splits[label].append(loop_split(run["hand"], vector_steps, split_parts))
            print(f"  round {round_number + 1}/{options.rounds} done", file=sys.stderr, flush=True)
    plain = loops["python"]
    print(f"{'variant':24} {'loop us/step':>12} {'extra':>8} {'ratio':>7}   per round")
    for label, figures in loops.items():
        extra = statistics.median(mine - theirs for mine, theirs in zip(figures, plain))
        ratio = statistics.median(mine / theirs for mine, theirs in zip(figures, plain))
        rounds = " ".join(f"{figure:.0f}" for figure in figures)
        print(f"{label:24} {statistics.median(figures):12.0f} {extra:+8.0f} {ratio:7.3f}   {rounds}")
    full = loops["rlprof run"]
    print("each part's share (rlprof run less the run with that part alone off, median of rounds):")
    for part, label in PARTS.items():
        share = statistics.median(mine - theirs for mine, theirs in zip(full, loops[label]))
        print(f"  {part:18} {share:+6.0f} us a vector step")
    print("the loop split by the program's own timers, extra over python a vector step (us, median of rounds):")
    print(f"{'variant':24} " + " ".join(f"{part:>9}" for part in split_parts))
    for label in VARIANTS:
        extras = [statistics.median(mine[part] - theirs[part] for mine, theirs in zip(splits[label], splits["python"]))
                  for part in split_parts]
        print(f"{label:24} " + " ".join(f"{extra:+9.0f}" for extra in extras))
    print(f"(done in {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f})")


if __name__ == "__main__":
    main()
