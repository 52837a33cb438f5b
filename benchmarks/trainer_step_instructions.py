"""The trainer's side of a vector step, in instructions and system calls: immune to the machine's load.

    python benchmarks/trainer_step_instructions.py                 # trivial x1 and CartPole x4
    python benchmarks/trainer_step_instructions.py --env trivial --steps 2000 4000
    python benchmarks/trainer_step_instructions.py --syscalls      # also system calls per step (strace)

The trainer runs ``SubprocessEnvManager.step`` in a loop under ``valgrind --tool=callgrind``, its
workers outside it (``spawn``: a worker is a fresh interpreter, which valgrind does not follow),
profiling off, on, and on with the timeline recorded (``timeline``, as ``rlprof run`` records it), for two numbers of steps; the difference of the two counts over the
difference of steps is one step's instructions in the trainer, start-up, the workers' start and
close cancelled out. Next to them, the trainer's end of a raw one-byte round trip (``send_bytes``
then ``recv_bytes``, as ``benchmarks/step_floor.py``'s ping-pong, through a two-way ``Pipe()`` and
through two one-way pipes as the manager's workers use). Timer payloads are not shipped here
(``flush_interval`` is made huge, so how many arrive does not depend on how slow valgrind makes
the trainer; ``benchmarks/step_path_costs.py`` prints their cost, one a second), nor is the scan
of the machine's processes a profiled manager makes as it starts (their number varies by run).

``--cold`` counts the trainer's cache misses too, every cache emptied before each step (as
``worker_step_instructions.py --cold`` does for a worker, with the same simulated caches): on a
machine with more processes than cores the trainer's caches are cold at every step.

``--syscalls`` counts the trainer's system calls per step the same way, with ``strace -c``: the
raw round trip makes one write and one read.

Goal (printed, never asserted): the trainer's step near the raw round trip's own instructions;
what profiling adds near zero. Needs valgrind (and strace for ``--syscalls``) on the PATH;
``--one VARIANT STEPS`` runs one loop without them (what each measured run runs).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from worker_step_instructions import COLD_CACHES, COLD_EVENTS, EVICTION_BYTES  # noqa: E402

PING_PONG, ONE_WAY = "pipe ping-pong", "one-way pipes ping-pong"
VARIANTS = {
    # label: (env, number of envs, profiling, timeline recorded)
    "trivial x1 off": ("trivial", 1, False, False),
    "trivial x1 on": ("trivial", 1, True, False),
    "trivial x1 timeline": ("trivial", 1, True, True),
    "CartPole x4 off": ("CartPole-v1", 4, False, False),
    "CartPole x4 on": ("CartPole-v1", 4, True, False),
    "CartPole x4 timeline": ("CartPole-v1", 4, True, True),
}


def one_loop(variant: str, steps: int, cold: bool = False) -> None:
    """``steps`` round trips of one variant, after a start and a warm-up that both counts share
    (with ``cold``, every cache emptied before each step of a manager)."""
    if variant in (PING_PONG, ONE_WAY):
        from step_floor import PipePingPong

        ping_pong = PipePingPong(context="spawn", duplex=variant == PING_PONG)
        try:
            ping_pong.run(20)
            ping_pong.run(steps)
        finally:
            ping_pong.close()
        return
    import gymnasium as gym
    import numpy as np
    from step_floor import TrivialEnv

    from envmanager import SubprocessEnvManager
    from profiler.recording import machine_load

    # A profiled manager lists the machine's processes as it starts (the dump's machine load):
    # their number varies from run to run, and with it the instructions, by more than a step's.
    machine_load._process_cpu = dict

    env_name, num_envs, profiling, timeline = VARIANTS[variant]
    if timeline:  # as rlprof run records it by default (a spawned worker records when told to)
        from profiler.recording import events

        events.start_recording()
    make = TrivialEnv if env_name == "trivial" else lambda: gym.make(env_name)
    with SubprocessEnvManager([make] * num_envs, context="spawn", profiling=profiling,
                              flush_interval=1e9) as envs:
        envs.reset(seed=0)
        actions = np.zeros(num_envs, dtype=envs.action_space.dtype)
        step = envs.step
        sweep = np.zeros(EVICTION_BYTES // 8)[:: 64 // 8] if cold else None
        for _ in range(20 + steps):
            if sweep is not None:
                sweep += 1.0
            step(actions)


def _environment() -> dict[str, str]:
    # One hash seed for every run (the same dict layouts, the same work), and numpy's BLAS without
    # its threads, whose spinning callgrind would count.
    return {**os.environ, "PYTHONHASHSEED": "0", "OPENBLAS_NUM_THREADS": "1"}


def _loop_command(variant: str, steps: int, cold: bool = False) -> list[str]:
    return [sys.executable, __file__, "--one", variant, str(steps), *(["--cold"] if cold else [])]


def instructions(variant: str, steps: int, keep: Path | None) -> int:
    """The instructions valgrind counts in the trainer of one loop of ``steps`` steps."""
    return callgrind_events(variant, steps, keep)["Ir"]


def callgrind_events(variant: str, steps: int, keep: Path | None, cold: bool = False) -> dict[str, int]:
    """What valgrind counts in the trainer of one loop of ``steps`` steps: its instructions
    (``Ir``), and with ``cold`` the cache misses of ``COLD_EVENTS`` too."""
    loop = _loop_command(variant, steps, cold)
    # Once without valgrind first: the modules' bytecode is then cached, so neither count
    # includes compiling them (which varies with what the other run left).
    subprocess.run(loop, capture_output=True, check=True, env=_environment())
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder) / "out" if keep is None else keep / f"{variant.replace(' ', '_')}_{steps}.out"
        subprocess.run(["valgrind", "--tool=callgrind", *(COLD_CACHES if cold else []),
                        f"--callgrind-out-file={out}", *loop],
                       capture_output=True, text=True, check=True, env=_environment())
        output = out.read_text()
    names = re.search(r"^events: (.*)$", output, re.MULTILINE).group(1).split()
    totals = re.search(r"^totals: (.*)$", output, re.MULTILINE).group(1).split()
    return dict(zip(names, map(int, totals)))


def system_calls(variant: str, steps: int) -> dict[str, int]:
    """How many of each system call the trainer's main thread makes in one loop (not followed:
    its other threads, which sleep through the steps, and its workers)."""
    with tempfile.TemporaryDirectory() as folder:
        summary = Path(folder) / "summary"
        subprocess.run(["strace", "-c", "-o", str(summary), "--", *_loop_command(variant, steps)],
                       capture_output=True, check=True, env=_environment())
        return strace_counts(summary.read_text())


def strace_counts(summary: str) -> dict[str, int]:
    """The calls of each system call in a summary ``strace -c`` wrote."""
    counts: dict[str, int] = {}
    for line in summary.splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[-1].isidentifier() and fields[-1] != "total" and fields[3].isdigit():
            counts[fields[-1]] = int(fields[3])
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--variant", action="append", choices=[PING_PONG, ONE_WAY, *VARIANTS],
                        help="what to measure (default: all)")
    parser.add_argument("--steps", type=int, nargs=2, default=(1000, 3000), help="the two numbers of steps")
    parser.add_argument("--keep", type=Path, help="keep the callgrind outputs in this folder (callgrind_annotate them)")
    parser.add_argument("--syscalls", action="store_true", help="also system calls per step, with strace")
    parser.add_argument("--cold", action="store_true",
                        help="count cache misses too, every cache emptied between steps (see above)")
    parser.add_argument("--one", nargs=2, metavar=("VARIANT", "STEPS"), help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.one:
        one_loop(arguments.one[0], int(arguments.one[1]), arguments.cold)
        return
    fewer, more = arguments.steps
    if arguments.keep is not None:
        arguments.keep.mkdir(parents=True, exist_ok=True)
    if arguments.cold:
        print_cold([variant for variant in arguments.variant or VARIANTS if variant in VARIANTS], fewer, more)
        return
    print("the trainer's instructions per vector step (callgrind), and x its end of a raw round trip")
    per_step: dict[str, float] = {}
    for variant in arguments.variant or [PING_PONG, ONE_WAY, *VARIANTS]:
        per_step[variant] = (instructions(variant, more, arguments.keep)
                             - instructions(variant, fewer, arguments.keep)) / (more - fewer)
        floor = per_step.get(PING_PONG)
        versus = f"  {per_step[variant] / floor:6.2f}x ping-pong" if floor else ""
        added = ""
        off_variant = variant.rsplit(" ", 1)[0] + " off"
        if variant != off_variant and off_variant in per_step:
            off = per_step[off_variant]
            added = f"  profiling adds {per_step[variant] - off:+7.0f} ({(per_step[variant] - off) / off:+.1%}; goal: near 0)"
        print(f"  {variant:26s} {per_step[variant]:9.0f}{versus}{added}", flush=True)
    if arguments.syscalls:
        print("the trainer's system calls per vector step (strace -c, its main thread)")
        for variant in arguments.variant or [PING_PONG, ONE_WAY, *VARIANTS]:
            few, many = system_calls(variant, fewer), system_calls(variant, more)
            calls = {name: (many.get(name, 0) - few.get(name, 0)) / (more - fewer) for name in many}
            shown = ", ".join(f"{name} {count:.2f}" for name, count in sorted(calls.items(), key=lambda kv: -kv[1])
                              if abs(count) >= 0.01)
            print(f"  {variant:26s} {sum(calls.values()):5.2f}: {shown}", flush=True)


def print_cold(variants: list[str], fewer: int, more: int) -> None:
    """Per trainer step with every cache emptied before it: instructions and misses, per variant."""
    print("the trainer's instructions and cache misses per vector step, caches emptied between steps")
    print(f"  {'':26s} " + " ".join(f"{event:>10s}" for event in COLD_EVENTS))
    per_step: dict[str, dict[str, float]] = {}
    for variant in variants:
        few, many = callgrind_events(variant, fewer, None, True), callgrind_events(variant, more, None, True)
        per_step[variant] = {event: (many[event] - few[event]) / (more - fewer) for event in COLD_EVENTS}
        print(f"  {variant:26s} " + " ".join(f"{per_step[variant][event]:10.1f}" for event in COLD_EVENTS), flush=True)
        if variant.endswith(" on") and variant[:-3] + " off" in per_step:
            off = per_step[variant[:-3] + " off"]
            added = " ".join(f"{per_step[variant][event] - off[event]:+10.1f}" for event in COLD_EVENTS)
            print(f"  {'  profiling adds':26s} {added}", flush=True)


if __name__ == "__main__":
    main()
