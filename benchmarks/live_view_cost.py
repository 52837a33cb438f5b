"""What the live view costs a run, side by side with what the profiling it shows costs.

    python3 benchmarks/live_view_cost.py --quick             # ~1 min: 5 rounds of 3 short runs
    python3 benchmarks/live_view_cost.py                     # ~3 min: 9 rounds
    python3 benchmarks/live_view_cost.py --env busy-1ms --envs 8 --rounds 12

(from the repository root; with the repository on ``PYTHONPATH`` when rlprof is not installed.)

A *run* is a training loop of a fixed number of vector steps — a ``policy.act`` block, then
``envs.step`` — over a SubprocessEnvManager of ``--envs`` envs, sized once so that it lasts about
``--seconds``. Three arms make the same run in turn, in rounds (who goes first rotates):

* **off**: a manager with profiling off (and ``profiler.disable()``: the loop's block untimed);
* **profiling**: a manager with profiling on;
* **profiling + view**: the same profiled manager with the live view up, refreshed every second
  as ``rlprof run --live`` does: its panel drawn in full at each refresh, as on a terminal, on one
  that shows nothing (with rich installed; else, or with ``--lines``, plain lines to /dev/null).

Each run's **wall** time and **CPU** time — the trainer process's, every thread of it (the view's
thread included), plus its worker processes' — are measured. Per round:

* profiling costs: profiling over off, minus 1 (wall, CPU);
* the live view costs: profiling + view over profiling, minus 1 (wall, CPU).

Printed as they come, then the medians of the per-round figures with their quartiles, next to the
goal of issue 29: **the view costs no more than the profiling it shows**, in wall and in CPU time.
The same in CPU seconds per second of run: what profiling adds (profiling minus off), against what
the view's own thread takes (its refreshes and drawing, counted on that thread: the figure least
swayed by other work on the machine).
Then one refresh alone — a dump of the live timers, the window, the figures, the verdicts —
timed on the trainer's tree at the end (its thread's CPU time, median of 20), and its share of the
1-second interval; and, with rich installed, what drawing those figures as the panel adds.

Printed, never asserted: it depends on the machine. On a machine shared with other work, wall
times swing by tens of percent either way; the CPU figures are less swayed.
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))  # rlprof from the checkout, not installed

import numpy as np  # noqa: E402
import psutil  # noqa: E402
from benchmark_envs import ENVS  # noqa: E402

import profiler  # noqa: E402
from envmanager.subprocess_env_manager import SubprocessEnvManager  # noqa: E402
from profiler.integrations.live_render import rich_panel  # noqa: E402
from profiler.integrations.live_view import LiveView, in_process_reader  # noqa: E402

ARMS = ("off", "profiling", "profiling + view")


class TerminalSink(io.TextIOBase):
    """A terminal that shows nothing: the view's panel is drawn on it in full at each refresh, as
    on a real terminal, and thrown away."""

    def isatty(self) -> bool:
        return True

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)


class CountedView(LiveView):
    """The live view, counting the CPU time its refreshes (drawing included) take on its thread."""

    cpu_seconds = 0.0

    def refresh(self) -> Any:
        started = time.thread_time()
        try:
            return super().refresh()
        finally:
            self.cpu_seconds += time.thread_time() - started


class Run:
    """One arm's manager, and what a run of ``steps`` vector steps on it costs."""

    def __init__(self, envs: SubprocessEnvManager, profiled: bool) -> None:
        self.envs = envs
        self.profiled = profiled
        self.workers = [psutil.Process(pid) for pid in _worker_pids(envs)]
        self.actions = np.zeros(envs.num_envs, dtype=np.int64)

    def cpu_seconds(self) -> float:
        """CPU time so far of this process (all its threads) and of the manager's workers."""
        own = psutil.Process().cpu_times()
        total = own.user + own.system
        for worker in self.workers:
            times = worker.cpu_times()
            total += times.user + times.system
        return total

    def loop(self, steps: int) -> None:
        envs, actions, timer = self.envs, self.actions, profiler.hierarchical_timer
        for _ in range(steps):
            with timer("policy.act"):
                pass
            envs.step(actions)

    def measure(self, steps: int, live_view: str | None, stream: Any) -> tuple[float, float, float]:
        """Wall and CPU seconds of ``steps`` vector steps, with the live view up in ``live_view``
        mode (``"panel"`` or ``"lines"``) when given, and the CPU seconds of the view's refreshes."""
        if self.profiled:
            profiler.enable()
        else:
            profiler.disable()
        view = (CountedView(in_process_reader(), stream=stream, mode=live_view, measure_memory=True)
                if live_view else None)
        try:
            cpu_started, started = self.cpu_seconds(), time.perf_counter()
            if view is not None:
                view.start()
            self.loop(steps)
            if view is not None:
                view.stop()
            return (time.perf_counter() - started, self.cpu_seconds() - cpu_started,
                    0.0 if view is None else view.cpu_seconds)
        finally:
            profiler.enable()


def _worker_pids(envs: SubprocessEnvManager) -> list[int]:
    return [handle.process.pid for handle in envs._pool.workers]


def steps_for(run: Run, seconds: float) -> int:
    """Vector steps that take about ``seconds`` on the profiled manager (a short trial first)."""
    trial = 200
    wall, _, _ = run.measure(trial, live_view=None, stream=None)
    return max(trial, int(trial * seconds / wall))


def quartiles(values: list[float]) -> str:
    if len(values) < 2:
        return f"{values[0] * 100:+6.1f}%"
    low, median, high = statistics.quantiles(values, n=4)
    return f"{median * 100:+6.1f}%  (quartiles {low * 100:+.1f}% .. {high * 100:+.1f}%)"


def one_refresh_seconds(run: Run, stream: Any) -> tuple[float, float | None]:
    """CPU seconds of one refresh on the profiled run's tree, and of drawing its figures as the
    terminal's panel (None without rich): medians of 20."""
    view = LiveView(in_process_reader(), stream=stream, mode="lines", measure_memory=True)
    seconds, drawing = [], []
    try:
        from rich.console import Console

        console: Any = Console(file=stream, force_terminal=True, width=120)
    except ImportError:
        console = None
    for _ in range(20):
        run.loop(10)
        started = time.thread_time()
        view.refresh()
        seconds.append(time.thread_time() - started)
        if console is not None:
            started = time.thread_time()
            console.print(rich_panel(view.latest, "rlprof live"))
            drawing.append(time.thread_time() - started)
    return statistics.median(seconds), statistics.median(drawing) if drawing else None


def _has_rich() -> bool:
    try:
        import rich  # noqa: F401 - only asked whether it is installed
    except ImportError:
        return False
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env", default="CartPole-v1", choices=sorted(ENVS))
    parser.add_argument("--envs", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=None, help="rounds of three runs (default 9, --quick 5)")
    parser.add_argument("--seconds", type=float, default=None,
                        help="seconds a run lasts, about (default 5, --quick 3)")
    parser.add_argument("--quick", action="store_true", help="5 rounds of 3-second runs: about a minute")
    parser.add_argument("--lines", action="store_true",
                        help="the view prints plain lines (as in a pipe) rather than drawing the panel")
    options = parser.parse_args()
    view_mode = "lines" if options.lines or not _has_rich() else "panel"
    rounds = options.rounds or (5 if options.quick else 9)
    seconds = options.seconds or (3.0 if options.quick else 5.0)
    env_fns = [ENVS[options.env]] * options.envs
    profiler.reset_timers()
    unprofiled = Run(SubprocessEnvManager(env_fns, profiling=False), profiled=False)
    profiled = Run(SubprocessEnvManager(env_fns), profiled=True)
    devnull = open(os.devnull, "w")
    sink = TerminalSink() if view_mode == "panel" else devnull
    costs: dict[str, list[float]] = {"profiling wall": [], "profiling CPU": [], "view wall": [], "view CPU": []}
    # CPU seconds per second of run: what profiling adds (on minus off), what the view's own
    # thread takes (counted on it: the least swayed by the neighbours).
    per_second: dict[str, list[float]] = {"profiling": [], "view": []}
    try:
        unprofiled.envs.reset(seed=0)
        profiled.envs.reset(seed=0)
        steps = steps_for(profiled, seconds)
        drawn = "draws its panel (rich) on a terminal" if view_mode == "panel" else "prints plain lines"
        print(f"{options.env} x{options.envs}: runs of {steps:,} vector steps (~{seconds:g} s), {rounds} "
              f"rounds, the three arms in turn; cost = over the arm before, minus 1; the view {drawn}",
              flush=True)
        print(f"{'round':>5}  {'off wall/CPU':>15}  {'profiling':>15}  {'profiling + view':>16}"
              f"  {'profiling costs':>19}  {'the view costs':>19}", flush=True)
        for round_number in range(rounds):
            order = ARMS[round_number % 3:] + ARMS[:round_number % 3]
            measured: dict[str, tuple[float, float, float]] = {}
            for arm in order:
                run = unprofiled if arm == "off" else profiled
                measured[arm] = run.measure(steps, view_mode if arm == "profiling + view" else None, sink)
            (off_wall, off_cpu, _), (on_wall, on_cpu, _), (view_wall, view_cpu, view_own) = (
                measured[arm] for arm in ARMS)
            per_second["profiling"].append((on_cpu - off_cpu) / on_wall)
            per_second["view"].append(view_own / view_wall)
            costs["profiling wall"].append(on_wall / off_wall - 1)
            costs["profiling CPU"].append(on_cpu / off_cpu - 1)
            costs["view wall"].append(view_wall / on_wall - 1)
            costs["view CPU"].append(view_cpu / on_cpu - 1)
            print(f"{round_number + 1:>5}  {off_wall:6.2f}s {off_cpu:6.2f}s  {on_wall:6.2f}s {on_cpu:6.2f}s  "
                  f"{view_wall:7.2f}s {view_cpu:6.2f}s  "
                  f"wall {costs['profiling wall'][-1] * 100:+5.1f}% CPU {costs['profiling CPU'][-1] * 100:+5.1f}%  "
                  f"wall {costs['view wall'][-1] * 100:+5.1f}% CPU {costs['view CPU'][-1] * 100:+5.1f}%",
                  flush=True)
        refresh, drawing = one_refresh_seconds(profiled, devnull)
    finally:
        unprofiled.envs.close()
        profiled.envs.close()
        devnull.close()
    print(f"\nmedians of {rounds} rounds (wall: the run's wall time; CPU: trainer process + workers)")
    print(f"  profiling costs  wall {quartiles(costs['profiling wall'])}")
    print(f"                   CPU  {quartiles(costs['profiling CPU'])}")
    print(f"  the view costs   wall {quartiles(costs['view wall'])}")
    print(f"                   CPU  {quartiles(costs['view CPU'])}")
    wall_ok = statistics.median(costs["view wall"]) <= max(statistics.median(costs["profiling wall"]), 0.0)
    cpu_ok = statistics.median(costs["view CPU"]) <= max(statistics.median(costs["profiling CPU"]), 0.0)
    print(f"  goal (issue 29): the view costs no more than the profiling it shows -- "
          f"wall {'met' if wall_ok else 'NOT met'}, CPU {'met' if cpu_ok else 'NOT met'}")
    print(f"  CPU per second of run: profiling adds {statistics.median(per_second['profiling']) * 1e3:.1f} ms, "
          f"the view's own thread takes {statistics.median(per_second['view']) * 1e3:.1f} ms "
          f"(medians; goal: the view's no more)")
    print(f"  one refresh: {refresh * 1e3:.2f} ms of CPU = {refresh * 100:.2f}% of its 1 s interval"
          + ("" if drawing is None else
             f"; drawing it as the terminal's panel (rich) {drawing * 1e3:.2f} ms more = {drawing * 100:.2f}%"))


if __name__ == "__main__":
    main()
