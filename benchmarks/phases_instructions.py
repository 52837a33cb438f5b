"""What the framework phases cost a CleanRL policy call and a PPO minibatch update, in instructions.

Instruction counts (``valgrind --tool=callgrind``) do not move with the machine's load, which on
a shared machine sways CPU-time figures by more than the phases cost. One process per variant,
run under callgrind, builds the CleanRL-style loop of ``benchmarks/sampler_wakeups.py`` (the
program's own ``Agent``, 4 CartPole envs, one torch thread), records the timeline as ``rlprof run``
does, and counts, inside ``functools.reduce`` only (``--toggle-collect``, one dump each):

- ``--calls`` rollout policy calls, ``agent.get_action_and_value(obs)`` under ``torch.no_grad()``;
- ``--minibatches`` minibatch updates of 128 samples: the forward with grad, the loss,
  ``zero_grad``, ``backward``, gradient clipping and the optimizer's ``step``.

``--program sb3`` counts the same for Stable-Baselines3's PPO (``MlpPolicy``, 4 CartPole envs in a
``DummyVecEnv``, ``tests/profiler/automatic/programs/sb3_ppo.py``'s settings: 128 steps, minibatches
of 64, 2 epochs: one minibatch per 8 steps too) with its phases installed too
(:mod:`profiler.automatic.sb3_phases`): a rollout
step's policy call, ``policy(observations)`` under ``torch.no_grad()`` as ``collect_rollouts``
makes it, and a minibatch of ``train`` (inside its update, as ``train``'s block holds it):
``evaluate_actions``, the loss, ``zero_grad``, ``backward``, clipping and ``step``.

Variants: **off** (torch's phases not installed: what the program costs), **Python** (the phases,
nested module calls passed on by the Python wrapper) and **C** (passed on by
``profiler/automatic/_module_call_core.c``, where built). It prints instructions per policy call
and per minibatch, and what the phases add to each::

    python3 benchmarks/phases_instructions.py [--calls 300] [--minibatches 40] [--program sb3]

Run from an older checkout (``PYTHONPATH=that-checkout``, where the C path was not there yet), its
"Python" variant is that checkout's wrapper: a before/after figure.

A per-step figure of the loop: a CleanRL vector step makes one policy call; its PPO iteration
(128 steps, 4 epochs of 4 minibatches) one minibatch per 8 steps.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("off", "Python", "C")


def child(variant: str, calls: int, minibatches: int) -> None:
    """In the process callgrind counts: the loop, under ``variant``, inside two reduce calls."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    from sampler_wakeups import Loop

    from profiler.recording import events

    events.start_recording()
    loop = Loop()
    agent, observations = loop.agent, loop.observations
    batch = torch.cat([observations] * 32)
    actions = torch.zeros(len(batch), dtype=torch.long)
    if variant != "off":
        _install_torch_phases(variant, torch)

    def policy_call(_: object, __: object) -> None:
        with torch.no_grad():
            agent.get_action_and_value(observations)

    def minibatch(_: object, __: object) -> None:
        _, log_probability, entropy, value = agent.get_action_and_value(batch, actions)
        loss = -log_probability.mean() + value.pow(2).mean() - 0.01 * entropy.mean()
        loop.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
        loop.optimizer.step()

    _counted_loop(policy_call, minibatch, calls, minibatches, contextlib.nullcontext())


def _install_torch_phases(variant: str, torch: Any) -> None:
    """Install torch's phases, nested module calls passed on in C ("C") or in Python ("Python")."""
    from profiler.automatic import torch_phases

    choose = getattr(torch_phases, "use_compiled_pass_through", None)  # absent before the C path
    if choose is not None:
        choose(variant == "C")
    torch_phases.install_torch_phases(torch)


def sb3_child(variant: str, calls: int, minibatches: int) -> None:
    """:func:`child` for SB3's PPO: its rollout step's policy call and its train's minibatch."""
    import stable_baselines3
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    from profiler.automatic import sb3_phases, torch_phases
    from profiler.recording import events

    events.start_recording()
    torch.set_num_threads(1)
    model = PPO("MlpPolicy", make_vec_env("CartPole-v1", n_envs=4, seed=1), n_steps=128, batch_size=64,
                n_epochs=2, device="cpu", seed=1)  # as tests/profiler/automatic/programs/sb3_ppo.py
    policy = model.policy
    observations = torch.as_tensor(model.env.reset())
    batch = torch.cat([observations] * 16)
    actions = torch.zeros(len(batch), dtype=torch.long)
    holds_update = contextlib.nullcontext()
    if variant != "off":
        _install_torch_phases(variant, torch)
        sb3_phases.install_sb3_phases(stable_baselines3)
        holds_update = torch_phases.inside_update()  # what PPO.train's block says while it runs

    def policy_call(_: object, __: object) -> None:
        with torch.no_grad():
            policy(observations)

    def minibatch(_: object, __: object) -> None:
        values, log_probability, entropy = policy.evaluate_actions(batch, actions)
        loss = -log_probability.mean() + values.pow(2).mean() - 0.01 * entropy.mean()
        policy.optimizer.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(policy.parameters(), 0.5)
        policy.optimizer.step()

    _counted_loop(policy_call, minibatch, calls, minibatches, holds_update)


def _counted_loop(policy_call: Any, minibatch: Any, calls: int, minibatches: int, holds_update: Any) -> None:
    """Both programs' loop: a warm-up (the model method found and wrapped, names cached, the caller
    read), then the policy calls and the minibatches, each inside one ``functools.reduce`` (what
    callgrind counts); the minibatches inside ``holds_update`` (SB3's ``train`` block's say)."""
    import numpy as np

    from profiler.timing import timers

    np.random.seed(0)
    with timers.hierarchical_timer("loop"):
        with holds_update:
            for _ in range(20):
                policy_call(None, None)
                minibatch(None, None)
        functools.reduce(policy_call, range(calls), None)
        with holds_update:
            functools.reduce(minibatch, range(minibatches), None)


def _total(dump: Path) -> int:
    for line in dump.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise ValueError(f"no total in {dump}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--minibatches", type=int, default=40)
    parser.add_argument("--program", choices=("cleanrl", "sb3"), default="cleanrl",
                        help="CleanRL's agent (the default) or Stable-Baselines3's PPO policy")
    parser.add_argument("--child", choices=VARIANTS, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        (sb3_child if options.program == "sb3" else child)(options.child, options.calls, options.minibatches)
        return
    if shutil.which("valgrind") is None:
        sys.exit("phases_instructions: valgrind is not installed (apt-get install valgrind)")
    from profiler.automatic import torch_phases

    built = getattr(torch_phases, "_core", None) is not None
    variants = [variant for variant in VARIANTS if variant != "C" or built]
    with tempfile.TemporaryDirectory(prefix="rlprof-phases-instructions-") as name:
        running = {variant: _start(variant, options, Path(name)) for variant in variants}
        figures = {variant: _finish(variant, process, options, Path(name)) for variant, process in running.items()}
    print(f"Instructions (callgrind), {options.program}: {options.calls} rollout policy calls and "
          f"{options.minibatches} minibatch updates per variant, timeline recorded:")
    print(f"  {'variant':10} {'per policy call':>16} {'phases add':>11} {'per minibatch':>14} {'phases add':>11}")
    base_call, base_minibatch = figures["off"]
    for variant, (call, minibatch) in figures.items():
        print(f"  {variant:10} {call:16,.0f} {call - base_call:11,.0f} {minibatch:14,.0f} "
              f"{minibatch - base_minibatch:11,.0f}")
    for variant in variants[1:]:
        call, minibatch = figures[variant]
        per_step = (call - base_call) + (minibatch - base_minibatch) / 8
        program = "SB3 PPO" if options.program == "sb3" else "CleanRL"
        print(f"  {variant}: the phases add {per_step:,.0f} instructions per {program} vector step "
              f"(a policy call, and an eighth of a minibatch)")


def _start(variant: str, options: argparse.Namespace, folder: Path) -> subprocess.Popen:
    out = folder / f"callgrind.{variant}"
    command = ["valgrind", "--tool=callgrind", "--toggle-collect=functools_reduce",
               "--dump-after=functools_reduce", f"--callgrind-out-file={out}",
               sys.executable, __file__, "--child", variant, "--calls", str(options.calls),
               "--minibatches", str(options.minibatches), "--program", options.program]
    return subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            env={**os.environ, "PYTHONHASHSEED": "0"})


def _finish(variant: str, process: subprocess.Popen, options: argparse.Namespace,
            folder: Path) -> tuple[float, float]:
    _, errors = process.communicate()
    if process.returncode != 0:
        sys.exit(f"phases_instructions: the {variant} process failed: {errors.decode()[-2000:]}")
    out = folder / f"callgrind.{variant}"
    parts = sorted(glob.glob(f"{out}.*"), key=lambda name: int(name.rsplit(".", 1)[1]))
    # The last two: building SB3's PPO calls functools.reduce itself (a dump each), before the loop.
    policy, update = (_total(Path(part)) for part in parts[-2:])
    return policy / options.calls, update / options.minibatches


if __name__ == "__main__":
    main()
