"""What MegEngine's ``with_scopes`` (every module call a block) costs a policy call, beside the
outermost-call blocks ``rlprof run`` and ``with_scopes`` always time.

The same policy call (a 5-layer MLP, ``Sequential`` of Linear/Tanh, batch 64, under
``torch.no_grad()``) runs under three cases, switched round after round (interleaved); each ratio
is the median of the per-round ratios to the plain call, so machine noise cancels:

* ``plain``: nothing installed;
* ``outermost blocks``: rlprof's torch hooks installed (``rlprof run``, ``Profiler(with_scopes=...)``
  before this change): the policy call is one block, its layers go straight through;
* ``module scopes``: ``set_module_scopes(True)`` as ``Profiler(with_scopes=True)`` sets it: the
  policy call and each of its 5 layer calls are blocks.

Goal: off (the two first cases) unchanged; on, about one block per layer call.

    python benchmarks/module_scopes_overhead.py [--rounds 9] [--calls 2000]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch  # noqa: E402

import profiler  # noqa: E402
from profiler.automatic import torch_phases  # noqa: E402

torch.manual_seed(0)
POLICY = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.Tanh(), torch.nn.Linear(32, 32), torch.nn.Tanh(),
                             torch.nn.Linear(32, 4))
OBSERVATIONS = torch.randn(64, 16)


def calls(count: int) -> float:
    start = time.perf_counter()
    with torch.no_grad():
        for _ in range(count):
            POLICY(OBSERVATIONS)
    return (time.perf_counter() - start) / count * 1e6


def case(label: str, count: int) -> float:
    profiler.reset_timers()
    if label == "plain":
        return calls(count)
    torch_phases.install_torch_phases(torch)
    previous = torch_phases.set_module_scopes(label == "module scopes")
    try:
        return calls(count)
    finally:
        torch_phases.set_module_scopes(previous)
        torch_phases.uninstall_torch_phases()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=2000)
    arguments = parser.parse_args()
    torch.set_num_threads(1)
    labels = ("plain", "outermost blocks", "module scopes")
    for label in labels:
        case(label, 50)  # warm-up
    samples: dict[str, list[float]] = {label: [] for label in labels}
    for _ in range(arguments.rounds):
        for label in labels:
            samples[label].append(case(label, arguments.calls))
    print(f"{'case':18} {'us/call':>8} {'x plain':>8}")
    for label in labels:
        ratio = statistics.median(value / base for value, base in zip(samples[label], samples["plain"]))
        print(f"{label:18} {statistics.median(samples[label]):8.1f} {ratio:8.2f}")
    per_layer = (statistics.median(samples["module scopes"]) - statistics.median(samples["outermost blocks"])) / 5
    print(f"\nmodule scopes add {per_layer:.2f} us per layer call (5 layer calls per policy call)")


if __name__ == "__main__":
    main()
