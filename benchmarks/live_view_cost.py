"""What the live view costs a run, side by side with what the profiling it shows costs.

    python benchmarks/live_view_cost.py                      # 4 CartPole envs, 6 rounds (~1 min)
    python benchmarks/live_view_cost.py --env busy-1ms --envs 8 --rounds 10

Three arms step the same envs in turn, in rounds of ``--seconds`` each (who goes first rotates):
a SubprocessEnvManager with profiling off, one with profiling on, and the profiled one again with
the live view up (plain lines to /dev/null, refreshed every second as ``rlprof run --live`` does;
the panel costs the same figures plus rich's drawing). Per round, two ratios of steps per second:

* profiling: off over on, minus 1 — what the profiling itself costs;
* live view: on over on-with-the-view, minus 1 — what the view adds.

The medians (and quartiles) of the per-round ratios are printed. On a machine shared with other
work those swing by tens of percent either way, so the same rounds also count CPU time, which
the neighbours sway less: per second of the run, what profiling adds to the trainer thread's CPU
time (on minus off, per env step, times the steps per second), against what the view costs — its
own thread's CPU time, plus what it adds to the trainer thread's. Goal (issue 29): the view costs
no more than the profiling it shows (the workers' share of the profiling is not even counted).
Then one refresh alone — a dump of the live timers, the
window, the figures and the verdicts — timed on the trainer's tree at the end (its thread's CPU
time, median of 20), and its share of the 1-second interval: the view's cost is that work once a
second, on a thread of its own. Printed, never asserted: it depends on the machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from benchmark_envs import ENVS, steps_per_second  # noqa: E402

import profiler  # noqa: E402
from envmanager.subprocess_env_manager import SubprocessEnvManager  # noqa: E402
from profiler.integrations.live_view import LiveView, in_process_reader  # noqa: E402

STEPS_PER_CHUNK = 200


def rate_for(envs: Any, num_envs: int, seconds: float) -> tuple[float, float]:
    """Env steps per second over about ``seconds`` of stepping, and the trainer thread's CPU
    seconds per env step."""
    rates, end = [], time.monotonic() + seconds
    cpu_started = time.thread_time()
    while time.monotonic() < end:
        rates.append(steps_per_second(envs, num_envs, STEPS_PER_CHUNK))
    cpu = time.thread_time() - cpu_started
    return statistics.median(rates), cpu / (len(rates) * STEPS_PER_CHUNK * num_envs)


class CountedView:
    """A live view whose refreshes count the CPU time of the thread they run on."""

    def __init__(self, stream: Any) -> None:
        self.cpu_seconds = 0.0
        self.view = LiveView(in_process_reader(), stream=stream, mode="lines")
        refresh = self.view.refresh

        def counted_refresh() -> Any:
            started = time.thread_time()
            try:
                return refresh()
            finally:
                self.cpu_seconds += time.thread_time() - started

        self.view.refresh = counted_refresh  # type: ignore[method-assign]


def quartiles(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0] * 100:+.1f}%"
    low, median, high = statistics.quantiles(values, n=4)
    return f"{median * 100:+.1f}% (quartiles {low * 100:+.1f}% .. {high * 100:+.1f}%)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1", choices=sorted(ENVS))
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--seconds", type=float, default=3.0)
    options = parser.parse_args()
    env_fns = [ENVS[options.env]] * options.envs
    unprofiled = SubprocessEnvManager(env_fns, profiling=False)
    profiled = SubprocessEnvManager(env_fns)
    devnull = open(os.devnull, "w")
    profiling_costs, view_costs = [], []
    profiling_cpu, view_cpu, view_thread_cpu = [], [], []
    try:
        unprofiled.reset(seed=0)
        profiled.reset(seed=0)
        for round_number in range(options.rounds):
            rates: dict[str, float] = {}
            cpu_per_step: dict[str, float] = {}
            view_seconds = 0.0
            arms = ["off", "on", "on+view"]
            arms = arms[round_number % 3:] + arms[:round_number % 3]
            for arm in arms:
                if arm == "off":
                    rates[arm], cpu_per_step[arm] = rate_for(unprofiled, options.envs, options.seconds)
                elif arm == "on":
                    rates[arm], cpu_per_step[arm] = rate_for(profiled, options.envs, options.seconds)
                else:
                    counted = CountedView(devnull)
                    counted.view.start()
                    started = time.monotonic()
                    try:
                        rates[arm], cpu_per_step[arm] = rate_for(profiled, options.envs, options.seconds)
                    finally:
                        counted.view.stop()
                    view_seconds = counted.cpu_seconds / (time.monotonic() - started)
            profiling_costs.append(rates["off"] / rates["on"] - 1)
            view_costs.append(rates["on"] / rates["on+view"] - 1)
            profiling_cpu.append((cpu_per_step["on"] - cpu_per_step["off"]) * rates["on"])
            view_thread_cpu.append(view_seconds)
            view_cpu.append(view_seconds + (cpu_per_step["on+view"] - cpu_per_step["on"]) * rates["on+view"])
            print(f"round {round_number + 1}: off {rates['off']:,.0f}, on {rates['on']:,.0f}, "
                  f"on+view {rates['on+view']:,.0f} env steps/s", flush=True)
        refresh_seconds = []
        view = LiveView(in_process_reader(), stream=devnull, mode="lines")
        for _ in range(20):
            profiled.step([0] * options.envs)
            started = time.thread_time()
            view.refresh()
            refresh_seconds.append(time.thread_time() - started)
    finally:
        unprofiled.close()
        profiled.close()
        devnull.close()
    refresh = statistics.median(refresh_seconds)
    print(f"\n{options.env} x{options.envs}, {options.rounds} rounds of {options.seconds:g} s per arm "
          f"(medians of per-round ratios)")
    print(f"  profiling costs  {quartiles(profiling_costs)}")
    print(f"  live view costs  {quartiles(view_costs)}   goal: no more than the profiling")
    print(f"  CPU per second of run: profiling adds {statistics.median(profiling_cpu) * 1e3:.1f} ms "
          f"to the trainer thread, the live view {statistics.median(view_cpu) * 1e3:.1f} ms "
          f"(its thread and the trainer's; its thread alone {statistics.median(view_thread_cpu) * 1e3:.1f} "
          f"ms; medians)   goal: view <= profiling")
    print(f"  one refresh: {refresh * 1e3:.2f} ms of CPU = {refresh * 100:.2f}% of its 1 s interval")


if __name__ == "__main__":
    profiler.reset_timers()
    main()
