"""Where ``rlprof run``'s cost goes, part by part, in ONE process: the timeline, the stack sampler,
both, neither; then the exit's parts on the dump those turns made.

``run_overhead.py`` compares whole processes, whose figures a shared machine sways by more than
the parts cost. Here one process runs the CleanRL-style PPO iteration of
``benchmarks/sampler_wakeups.py`` (the program's own ``Agent``, 4 CartPole envs in a
``SyncVectorEnv``, one torch thread; 128 vector steps, 4 epochs of 4 minibatches) under each
variant in turn, the order alternating from round to round. Run it under ``rlprof run`` with the
sampler off, so that the envs are instrumented and the framework phases are on as in a real run:

    python3 -m profiler run --no-stack-sampler benchmarks/run_parts.py [--rounds 30]

The variants switch, between turns, what ``rlprof run`` switches with ``--no-timeline`` and
``--no-stack-sampler``:

- **timeline + sampler** (``rlprof run``), **timeline**, **sampler**, **neither**, and **neither
  again** (the same as neither: how far the machine alone moves a figure);
- **no framework phases**: neither, and torch's phases uninstalled for the turn (``rlprof run
  --no-framework-phases``): what the policy's, the update's and the optimizer's blocks cost (they
  are installed again after it and warmed, untimed, by ``Loop.warm_up``, as every reinstall is);
- **Python pass-through**: neither, and torch's phases installed with nested module calls passed
  on by the Python wrapper instead of the C pass-through (what ``_module_call_core.c`` saves; the
  same as "neither" where it was not built). ``benchmarks/phases_instructions.py`` counts the same
  in instructions, which the machine's load does not move.

Per variant: the median CPU seconds of the process per turn (``time.process_time``: the sampler's
thread included), its ratio to "neither" in the same round (median of the rounds' ratios), and
the spans one turn records. Then the exit, on the dump all these turns made (its timeline holds
every span recorded, up to the ring's 100,000): CPU seconds of writing the timers file, reading it back, the trace, the
HTML report and the analysis, each with the timeline and the untimed samples in the tree and with
them taken out, medians of a few repetitions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
from sampler_wakeups import Loop  # noqa: E402

from profiler.analysis.analyze import AnalyzeOptions, analyze_run, render_analysis  # noqa: E402
from profiler.automatic.stack_sampler import StackSampler  # noqa: E402
from profiler.automatic.torch_phases import (  # noqa: E402
    compiled_pass_through,
    install_torch_phases,
    uninstall_torch_phases,
    use_compiled_pass_through,
)
from profiler.export import write_export  # noqa: E402
from profiler.recording import events  # noqa: E402
from profiler.timing import block_hooks, timer_node, timers  # noqa: E402
from profiler.tree.timer_json import load_timing_tree, write_timing_tree  # noqa: E402

PYTHON_PASS_THROUGH = "Python pass-through"
VARIANTS: dict[str, tuple[bool, bool, bool | str]] = {  # label: (timeline, sampler, framework phases)
    "timeline + sampler": (True, True, True),
    "timeline": (True, False, True),
    "sampler": (False, True, True),
    "neither": (False, False, True),
    "neither again": (False, False, True),
    "no framework phases": (False, False, False),
    PYTHON_PASS_THROUGH: (False, False, PYTHON_PASS_THROUGH),
}


def spans_recorded() -> int:
    timeline = timers.current_thread_stack().timeline
    return 0 if timeline is None else timeline.spans_recorded


def record_spans(recording: bool) -> None:
    if recording:
        events.start_recording()
    else:
        events.stop_recording()


def reinstall_phases(loop: Loop, compiled: bool) -> None:
    uninstall_torch_phases()
    use_compiled_pass_through(compiled)
    install_torch_phases(torch)
    loop.warm_up()  # untimed: the first calls after an install find the model method again


def turn(loop: Loop, timeline: bool, sampler: bool, phases: bool | str) -> tuple[float, float, int]:
    """One iteration under a variant: (CPU seconds, wall seconds, spans recorded)."""
    record_spans(timeline)
    compiled = compiled_pass_through()
    if not phases:
        uninstall_torch_phases()
    elif phases == PYTHON_PASS_THROUGH:
        reinstall_phases(loop, False)
    running = StackSampler(interval=0.01).start() if sampler else None
    spans = spans_recorded()
    cpu, wall = time.process_time(), time.perf_counter()
    loop.iteration()
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    spans = spans_recorded() - spans
    if running is not None:
        running.stop()
    if not phases:
        install_torch_phases(torch)
        loop.warm_up()
    elif phases == PYTHON_PASS_THROUGH:
        reinstall_phases(loop, compiled)
    return cpu, wall, spans


def cpu_of(step: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.process_time()
        step()
        times.append(time.process_time() - start)
    return statistics.median(times)


def block_costs(rounds: int = 7, blocks: int = 100_000) -> dict[tuple[bool, bool], float]:
    """CPU nanoseconds per ``with hierarchical_timer(...)`` block, by (C core, recording), medians
    of interleaved rounds: what one span costs the program beyond a plain block."""
    cores = [True, False] if timer_node.COMPILED_ENTER is not None else [False]
    costs: dict[tuple[bool, bool], list[float]] = {(core, record): [] for core in cores for record in (False, True)}
    hierarchical_timer = timers.hierarchical_timer
    was_recording = events.is_recording()
    for _ in range(rounds):
        for core, record in costs:
            block_hooks.use_compiled_core(core)
            record_spans(record)
            with hierarchical_timer("block costs"):
                start = time.process_time()
                for _ in range(blocks):
                    with hierarchical_timer("block"):
                        pass
                costs[(core, record)].append((time.process_time() - start) / blocks * 1e9)
    block_hooks.use_compiled_core(cores[0])
    record_spans(was_recording)
    return {key: statistics.median(values) for key, values in costs.items()}


def sampler_look_cost(looks: int = 20_000) -> float:
    """CPU microseconds of one of the sampler's looks outside any block (the frames fetched, the
    place found and counted), taken here on the program's own thread at this script's depth."""
    sampler = StackSampler(interval=0.01)
    ident = threading.get_ident()
    start = time.process_time()
    for _ in range(looks):
        frame = sys._current_frames().get(ident)  # noqa: SLF001 - as the sampler does
        place = sampler._place(frame)  # noqa: SLF001
        counts = sampler.places.get(place)
        if counts is None:
            sampler.places[place] = [1, 0.0]
        else:
            counts[0] += 1
    del frame
    return (time.process_time() - start) / looks * 1e6


def exit_parts(repeats: int) -> None:
    """The exit's parts, on this process's dump, with and without the timeline and samples."""
    events.start_recording()
    sampler = StackSampler(interval=0.01).start()  # registers the dump's untimed_samples section
    sampler.stop()
    with tempfile.TemporaryDirectory(prefix="rlprof-run-parts-") as name:
        _time_exit_parts(Path(name), repeats)


def _time_exit_parts(folder: Path, repeats: int) -> None:
    timers_file = folder / "run_timers.json"
    write_timing_tree(timers_file)
    full = load_timing_tree(timers_file)
    bare = {key: value for key, value in full.items() if key not in ("timeline", "untimed_samples")}
    spans = sum(len(thread["spans"]) for process in full.get("timeline", {}).get("processes", [])
                for thread in process["threads"])
    print(f"\nThe exit, on this dump ({spans} spans; CPU ms, median of {repeats}):")
    print(f"  {'part':34} {'as dumped':>10} {'no timeline, no samples':>24}")
    rows = [
        ("timers file written", lambda tree: write_timing_tree(timers_file), None),
        ("timers file read back", lambda tree: load_timing_tree(timers_file), None),
        ("trace (.json.gz)", lambda tree: write_export(tree, "chrome", folder / "trace.json.gz"), "tree"),
        ("HTML report", lambda tree: write_export(tree, "html", folder / "report.html"), "tree"),
        ("analysis printed", lambda tree: render_analysis(analyze_run(tree, AnalyzeOptions(top=10)),
                                                         title="run"), "tree"),
    ]
    for label, step, takes_tree in rows:
        with_all = cpu_of(lambda: step(full), repeats) * 1000
        without = cpu_of(lambda: step(bare), repeats) * 1000 if takes_tree else float("nan")
        print(f"  {label:34} {with_all:10.1f} {without:24.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--exit-repeats", type=int, default=3)
    options = parser.parse_args()
    loop = Loop()
    for _ in range(2):  # warm-up
        loop.iteration()
    figures: dict[str, list[tuple[float, float, int]]] = {label: [] for label in VARIANTS}
    load_before = os.getloadavg()[0]
    for round_number in range(options.rounds):
        order = list(VARIANTS) if round_number % 2 == 0 else list(reversed(VARIANTS))
        for label in order:
            figures[label].append(turn(loop, *VARIANTS[label]))
    print(f"One PPO iteration per turn, {options.rounds} interleaved rounds ({os.cpu_count()} cores, "
          f"load average {load_before:.1f} -> {os.getloadavg()[0]:.1f}; "
          f"{'C accelerator' if timer_node.accelerated() else 'pure-Python core'})")
    print(f"  {'variant':20} {'CPU ms':>8} {'CPU x':>7} {'wall ms':>8} {'wall x':>7} {'spans':>6}")
    base = figures["neither"]
    for label, runs in figures.items():
        cpu = statistics.median(run[0] / other[0] for run, other in zip(runs, base))
        wall = statistics.median(run[1] / other[1] for run, other in zip(runs, base))
        print(f"  {label:20} {statistics.median(run[0] for run in runs) * 1000:8.1f} {cpu:7.3f} "
              f"{statistics.median(run[1] for run in runs) * 1000:8.1f} {wall:7.3f} "
              f"{statistics.median(run[2] for run in runs):6.0f}")
    spans = statistics.median(run[2] for run in figures["timeline"])
    turn_cpu = statistics.median(run[0] for run in base)
    looks = statistics.median(run[1] for run in figures["sampler"]) / 0.01
    exit_parts(options.exit_repeats)  # before block_costs, whose blocks would fill the timeline
    costs = block_costs()
    look = sampler_look_cost()
    print("\nPer block (CPU ns, median of 7; spans per turn x the extra a span costs, against a turn):")
    for core in sorted({core for core, _ in costs}, reverse=True):
        plain, recorded = costs[(core, False)], costs[(core, True)]
        extra = spans * (recorded - plain) * 1e-9
        print(f"  {'C core' if core else 'Python core':12} plain {plain:6.0f}  recording {recorded:6.0f}  "
              f"-> {spans:.0f} spans a turn: {extra * 1000:.2f} ms, {extra / turn_cpu:.2%} of a turn")
    print(f"One look of the sampler: {look:.1f} us CPU; {looks:.0f} looks a turn: "
          f"{look * looks / 1000:.2f} ms, {look * looks * 1e-6 / turn_cpu:.2%} of a turn")


if __name__ == "__main__":
    main()
