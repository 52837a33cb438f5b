"""What the framework phases cost a training loop, in one process: installed and removed round by round.

``rlprof run`` times PyTorch's phases (the policy's calls, the update, backward, the optimizer
step; ``profiler.automatic.torch_phases``). Across processes (``run_overhead.py``) their cost is
lost in the machine's noise; here one process runs the CleanRL-style loop of
``benchmarks/sampler_wakeups.py`` (the program's own ``Agent``, 4 CartPole envs in a
``SyncVectorEnv``, one thread for torch) and installs the phases for every other turn (the order
alternating), so both arms run the same objects on the same core state; after each install the
phases are brought to their steady state, untimed (:func:`install_warm`). Three turns: a whole PPO
iteration (128 vector steps, 4 epochs of 4 minibatches), 128 policy calls under ``no_grad``
alone, and the iteration's update alone (16 minibatches over one rollout's observations).
Printed: the medians of the trainer thread's CPU time (``time.thread_time``, which other
processes' work does not count in) per turn, phases off and on, the median per-round ratio, and
the extra per call.

``--count-calls N --phases on|off`` makes N policy calls and exits, for
``valgrind --tool=cachegrind --cache-sim=yes``: two call counts, the difference of the counts over
the difference of the calls, gives the instructions and cache misses the phases add to one call.

    python3 benchmarks/phases_loop_cost.py [--rounds 40]
    valgrind --tool=cachegrind --cache-sim=yes python3 benchmarks/phases_loop_cost.py --count-calls 300 --phases on
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402
from sampler_wakeups import Loop  # noqa: E402

from profiler.automatic import torch_phases  # noqa: E402

POLICY_CALLS = 128
MINIBATCHES = 16  # Loop.update's over a rollout: 4 epochs of 4


def policy_calls(loop: Loop, calls: int = POLICY_CALLS) -> None:
    for _ in range(calls):
        with torch.no_grad():
            loop.agent.get_action_and_value(loop.observations)


def install_warm(loop: Loop) -> None:
    """Install the phases and bring them to where a run's phases are after its first calls.

    Uninstalling forgets the model method found and the callers read, and the first calls after an
    install find them again (the calling frames read, the method wrapped on its class, a profile
    function watching the call that was found): a few hundred microseconds, once per run in a real
    one, but once per turn here. Left in the turn, they came to about 2 µs a policy call over 128
    calls and 10 µs a minibatch over 16 (medians of runs before and after this warm-up, on the
    2-core machine). So :meth:`Loop.warm_up` runs untimed after each install."""
    torch_phases.install_torch_phases(torch)
    loop.warm_up()


def compare(turn: Callable[[], None], rounds: int, warm: Callable[[], None]) -> tuple[float, float, float]:
    """Median CPU seconds of ``turn`` with the phases off and on (installed and warmed by
    ``warm``), and the median per-round ratio."""
    cpu: dict[bool, list[float]] = {False: [], True: []}
    for round_number in range(rounds):
        for phases in ((False, True) if round_number % 2 == 0 else (True, False)):
            if phases:
                warm()
            started = time.thread_time()
            turn()
            cpu[phases].append(time.thread_time() - started)
            if phases:
                torch_phases.uninstall_torch_phases()
    ratio = statistics.median(on / off for on, off in zip(cpu[True], cpu[False]))
    return statistics.median(cpu[False]), statistics.median(cpu[True]), ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--count-calls", type=int, default=None, metavar="N",
                        help="make N policy calls and exit (for cachegrind)")
    parser.add_argument("--phases", choices=("on", "off"), default="on", help="with --count-calls")
    options = parser.parse_args()
    loop = Loop()
    if options.count_calls is not None:
        if options.phases == "on":
            torch_phases.install_torch_phases(torch)
        policy_calls(loop, 50)  # warm-up: the phases' names are cached at the first calls
        policy_calls(loop, options.count_calls)
        return
    for _ in range(2):  # warm-up
        loop.iteration()
    batch, actions = loop.rollout()  # a rollout's 512 observations: 16 minibatches of 128
    turns = [
        ("PPO iteration", lambda: loop.iteration(), 1, "iteration"),
        (f"{POLICY_CALLS} policy calls", lambda: policy_calls(loop), POLICY_CALLS, "policy call"),
        (f"{MINIBATCHES} minibatch updates", lambda: loop.update(batch, actions), MINIBATCHES, "minibatch"),
    ]
    print(f"torch phases off and on, trainer thread CPU, {options.rounds} interleaved rounds "
          f"(C pass-through: {torch_phases.compiled_pass_through()})")
    for label, turn, calls, unit in turns:
        off, on, ratio = compare(turn, options.rounds, lambda: install_warm(loop))
        print(f"  {label:22} off {off * 1e3:7.2f} ms  on {on * 1e3:7.2f} ms  {ratio:.4f}x  "
              f"+{(on - off) / calls * 1e6:.1f} us a {unit}")


if __name__ == "__main__":
    main()
