"""What recording PyTorch's operators costs a training step, beside PyTorch's profiler alone.

The same small MLP step (forward, backward, SGD step on a batch of 64) runs under nine cases,
switched between cases round after round (interleaved), and each ratio is the median of the
per-round ratios to the plain loop, so machine noise cancels:

* ``plain``: the loop, nothing profiling it;
* ``rlprof blocks``: the loop inside rlprof blocks (``policy.forward``, ``policy.backward``,
  ``optimizer.step``), no operators;
* ``torch.profiler alone``: the plain loop inside ``torch.profiler.profile`` (CPU, record_shapes,
  with_flops, profile_memory: what rlprof asks for), the profiler stopped and its events listed
  (``prof.events()``, what ``key_averages`` and exports start from) at the round's end; and
  ``torch.profiler, unread``: the same, its events never read (the recording's cost alone);
* ``rlprof + operators``: the rlprof loop with ``profiler.gpu.torch_ops`` recording, the events
  folded into the tree (a ``get_timer_tree()``) at the round's end;
* ``torch.profiler, stacks``: ``torch.profiler alone`` with ``with_stack`` (its Python tracer) and
  the ``verbose`` config that fills each event's stack, read with ``prof.events()``; and
  ``rlprof + backtraces``: ``rlprof + operators`` with ``with_stack=True`` (what
  ``Profiler(with_backtrace=True)`` asks for), each operator's stack counted as it is folded;
* ``torch.profiler + exec trace``: ``torch.profiler alone`` with PyTorch's execution trace
  (``ExecutionTraceObserver``) beside it, its JSON file read back; and ``rlprof + outputs``:
  ``rlprof + operators`` with ``record_outputs=True`` (output shapes and tensor bytes, what
  ``Profiler(record_outputs=True)`` asks for), the trace folded into the operators.

Each round's time includes starting and stopping the profiler and reading its events, spread over
the round's steps. Goal (issue 24): operators folded into rlprof's tree cost about what PyTorch's
profiler costs alone; off, nothing (``rlprof blocks`` is rlprof's own block cost).

    python benchmarks/operator_overhead.py [--rounds 7] [--steps 100]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import profiler  # noqa: E402
from profiler import hierarchical_timer  # noqa: E402
from profiler.gpu import torch_ops  # noqa: E402

torch.manual_seed(0)
NETWORK = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Tanh(), torch.nn.Linear(64, 64),
                              torch.nn.Tanh(), torch.nn.Linear(64, 4))
OPTIMIZER = torch.optim.SGD(NETWORK.parameters(), lr=1e-3)
BATCH = torch.randn(64, 64)


def plain_step() -> None:
    loss = NETWORK(BATCH).pow(2).mean()
    OPTIMIZER.zero_grad()
    loss.backward()
    OPTIMIZER.step()


def rlprof_step() -> None:
    with hierarchical_timer("train_step"):
        with hierarchical_timer("policy.forward"):
            loss = NETWORK(BATCH).pow(2).mean()
        with hierarchical_timer("policy.backward"):
            OPTIMIZER.zero_grad()
            loss.backward()
        with hierarchical_timer("optimizer.step"):
            OPTIMIZER.step()


def plain_round(steps: int) -> None:
    for _ in range(steps):
        plain_step()


def rlprof_round(steps: int) -> None:
    for _ in range(steps):
        rlprof_step()


def torch_profiler_round(steps: int, read: bool = True, with_stack: bool = False,
                         execution_trace: bool = False) -> None:
    activities = [torch.profiler.ProfilerActivity.CPU]
    options = {"with_stack": True, "experimental_config": torch.profiler._ExperimentalConfig(verbose=True)} \
        if with_stack else {}
    if execution_trace:
        handle, trace_path = tempfile.mkstemp(suffix=".json")
        os.close(handle)
        options["execution_trace_observer"] = torch.profiler.ExecutionTraceObserver().register_callback(trace_path)
    with torch.profiler.profile(activities=activities, record_shapes=True, with_flops=True,
                                profile_memory=True, **options) as session:
        for _ in range(steps):
            plain_step()
    if read:
        session.events()
    if execution_trace:
        options["execution_trace_observer"].unregister_callback()
        with open(trace_path, encoding="utf-8") as file:
            json.load(file)
        os.unlink(trace_path)


def operators_round(steps: int, with_stack: bool = False, record_outputs: bool = False) -> None:
    torch_ops.start_operators(with_stack=with_stack, record_outputs=record_outputs)
    for _ in range(steps):
        rlprof_step()
    profiler.get_timer_tree()
    torch_ops.stop_operators()


CASES: dict[str, Callable[[int], None]] = {
    "plain": plain_round,
    "rlprof blocks": rlprof_round,
    "torch.profiler, unread": lambda steps: torch_profiler_round(steps, read=False),
    "torch.profiler alone": torch_profiler_round,
    "rlprof + operators": operators_round,
    "torch.profiler, stacks": lambda steps: torch_profiler_round(steps, with_stack=True),
    "rlprof + backtraces": lambda steps: operators_round(steps, with_stack=True),
    "torch.profiler + exec trace": lambda steps: torch_profiler_round(steps, execution_trace=True),
    "rlprof + outputs": lambda steps: operators_round(steps, record_outputs=True),
}


def measure(rounds: int, steps: int) -> dict[str, tuple[float, float]]:
    """(median microseconds per step, median ratio to plain) for each case."""
    for run in CASES.values():  # warm-up: lazy initialisation of torch and its profiler
        run(5)
    samples: dict[str, list[float]] = {label: [] for label in CASES}
    for _ in range(rounds):
        for label, run in CASES.items():
            profiler.reset_timers()
            start = time.perf_counter()
            run(steps)
            samples[label].append((time.perf_counter() - start) / steps * 1e6)
    plain = samples["plain"]
    return {
        label: (statistics.median(values), statistics.median(value / base for value, base in zip(values, plain)))
        for label, values in samples.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--steps", type=int, default=100, help="training steps per case per round")
    arguments = parser.parse_args()
    torch.set_num_threads(1)  # a steady figure on a shared machine
    results = measure(arguments.rounds, arguments.steps)
    print(f"{'case':28} {'us/step':>9} {'x plain':>8}")
    for label, (microseconds, ratio) in results.items():
        print(f"{label:28} {microseconds:9.1f} {ratio:8.2f}")
    alone, unread = results["torch.profiler alone"][1], results["torch.profiler, unread"][1]
    folded = results["rlprof + operators"][1]
    print(f"\nrlprof + operators / torch.profiler alone: {folded / alone:.2f} (goal: about 1)")
    print(f"rlprof + operators / torch.profiler, unread: {folded / unread:.2f}")
    stacks, backtraces = results["torch.profiler, stacks"][1], results["rlprof + backtraces"][1]
    print(f"rlprof + backtraces / torch.profiler, stacks: {backtraces / stacks:.2f}")
    traced, outputs = results["torch.profiler + exec trace"][1], results["rlprof + outputs"][1]
    print(f"rlprof + outputs / torch.profiler + exec trace: {outputs / traced:.2f}")
    print(f"rlprof + outputs / rlprof + operators: {outputs / folded:.2f} (what out_shapes and bandwidth add)")


if __name__ == "__main__":
    main()
