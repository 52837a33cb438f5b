"""What ``rlprof run``'s exit costs per recorded span, stage by stage, on a real run.

At the program's end ``rlprof run`` takes the dump (``get_timer_tree``: the timeline's spans
included), writes the timers JSON, reads it as the file holds it ("read back": from the dump,
``write_and_read_timing_tree``; a checkout from before that read the file back), writes the
Perfetto trace and the HTML report from what it read, and analyses the run. Each of these grows with the number of spans the run
recorded (the CleanRL program records about 9 per step of its 4 envs: 18,213 at 8192 steps). This
script runs the CleanRL PPO of
``run_overhead.py`` (``tests/profiler/automatic/programs/cleanrl_torch_ppo.py``: 4 CartPole envs,
128 steps per rollout, 4 epochs of 4 minibatches) under ``rlprof run``'s own ``main`` at two
lengths, each exit stage wrapped to be measured:

- **wall** (default): native runs, interleaved, the two lengths alternating; per stage the median
  seconds per run at each length and the cost per 1,000 spans (the difference between the lengths
  over the difference of their spans: the fixed part of each stage cancels). Wall figures on a
  shared machine are noisy: compare runs made side by side.
- **callgrind** (``--callgrind``): one run per length under ``valgrind --tool=callgrind``,
  instrumentation off until the exit starts, a dump at each stage's end (client requests through
  a tiny library built here from ``valgrind/callgrind.h``). Instruction counts, which the
  machine's load does not move; the dumps stay in ``--keep`` for ``callgrind_annotate``.

    python3 benchmarks/exit_span_cost.py [--rounds 5] [--lengths 2048 8192] [--callgrind [--keep DIR]]
                                         [--stack-sampler] [--profile] [--against CHECKOUT]

``--against`` measures another checkout of rlprof beside this one (its profiler and envmanager
first on ``PYTHONPATH``, C extensions built in place: say ``git archive BASE | tar -x -C /tmp/base``
and ``python setup.py build_ext --inplace`` there): before and after a change. ``--profile`` prints
``cProfile``'s top functions of one exit. The stack sampler is off unless ``--stack-sampler``: its
samples depend on timing, so the instruction counts would vary from run to run; it records no spans.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROGRAM = ROOT / "tests" / "profiler" / "automatic" / "programs" / "cleanrl_torch_ppo.py"
PROGRAM_ARGUMENTS = ("--num-steps", "128", "--update-epochs", "4", "--num-minibatches", "4")
STAGES = ("tree taken", "timers written", "read back", "trace", "report", "analysis")
EXIT_WALL = "exit wall"
"""The exit from its first stage's start to the analysis's end: the stages and what runs between
them (the exporters' imports, the lines printed)."""
MARKS_SOURCE = """
#include <valgrind/callgrind.h>
void marks_start(void) { CALLGRIND_ZERO_STATS; CALLGRIND_START_INSTRUMENTATION; }
void marks_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
void marks_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


# ---------------------------------------------------------------------------------------------
# The driver: one `rlprof run` in this process, its exit stages wrapped.


def _drive(length: int, out_folder: str, result_path: str, marks_library: str | None,
           stack_sampler: bool, profile_path: str | None) -> None:
    import cProfile
    import ctypes

    from profiler.analysis import analyze
    from profiler.cli import commands, run_program
    from profiler import export
    from profiler.tree import timer_json

    marks = ctypes.CDLL(marks_library) if marks_library else None
    seconds: dict[str, float] = dict.fromkeys(STAGES, 0.0)
    spans = [0]
    started = [False]
    exit_began = [0.0]
    profile = cProfile.Profile() if profile_path else None

    def staged(stage, function):  # noqa: ANN001, ANN202 - a stand-in with the function's signature
        def wrapper(*arguments, **keywords):  # noqa: ANN002, ANN003, ANN202
            if not started[0]:
                started[0] = True
                exit_began[0] = time.perf_counter()
                if marks is not None:
                    marks.marks_start()
                if profile is not None:
                    profile.enable()
            began = time.perf_counter()
            result = function(*arguments, **keywords)
            seconds[stage] += time.perf_counter() - began
            if marks is not None:
                marks.marks_dump(stage.encode())
            return result
        return wrapper

    get_timer_tree = timer_json.get_timer_tree

    def counted_tree(*arguments, **keywords):  # noqa: ANN002, ANN003, ANN202
        tree = get_timer_tree(*arguments, **keywords)
        timeline = tree.get("timeline") or {"processes": []}
        spans[0] = sum(len(thread.get("spans", [])) for process in timeline["processes"]
                       for thread in process.get("threads", []))
        return tree

    write_export = export.write_export

    def exported(tree, format_name, path, *rest, **keywords):  # noqa: ANN001, ANN002, ANN003, ANN202
        stage = {"chrome": "trace", "html": "report"}[format_name]
        return staged(stage, write_export)(tree, format_name, path, *rest, **keywords)

    analyze_run, render_analysis = analyze.analyze_run, analyze.render_analysis
    analysis_seconds = [0.0]

    def timed_analyze(*arguments, **keywords):  # noqa: ANN002, ANN003, ANN202
        began = time.perf_counter()
        result = analyze_run(*arguments, **keywords)
        analysis_seconds[0] = time.perf_counter() - began
        return result

    timer_json.get_timer_tree = staged("tree taken", counted_tree)
    if hasattr(timer_json, "write_and_read_timing_tree"):
        # The file's text, its write, and the tree as read from it (made from the dump, not the file).
        timer_json._section_texts = staged("timers written", timer_json._section_texts)  # noqa: SLF001
        timer_json.write_atomically = staged("timers written", timer_json.write_atomically)
        timer_json.normalize_timing_tree = staged("read back", timer_json.normalize_timing_tree)
    else:  # a checkout from before it (--against): the file written, then read back
        timer_json.write_tree = staged("timers written", timer_json.write_tree)
        run_program.load_timing_tree = staged("read back", run_program.load_timing_tree)
    export.write_export = exported
    analyze.analyze_run = timed_analyze

    def timed_render(*arguments, **keywords):  # noqa: ANN002, ANN003, ANN202
        began = time.perf_counter()
        result = render_analysis(*arguments, **keywords)
        seconds["analysis"] += analysis_seconds[0] + time.perf_counter() - began
        seconds[EXIT_WALL] = time.perf_counter() - exit_began[0]
        if marks is not None:
            marks.marks_dump(b"analysis")
            marks.marks_stop()
        if profile is not None:
            profile.disable()
            profile.dump_stats(profile_path)
        return result

    analyze.render_analysis = timed_render
    flags = [] if stack_sampler else ["--no-stack-sampler"]
    code = commands.main(["run", *flags, "--summaries-dir", out_folder, "--run-id", "run", str(PROGRAM),
                          "--total-timesteps", str(length), *PROGRAM_ARGUMENTS])
    Path(result_path).write_text(json.dumps({"code": code, "spans": spans[0], "seconds": seconds}))


# ---------------------------------------------------------------------------------------------
# The measurer.


def _build_marks(folder: Path) -> Path:
    source = folder / "marks.c"
    source.write_text(MARKS_SOURCE)
    library = folder / "libmarks.so"
    subprocess.run(["cc", "-O1", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    return library


def _run(length: int, folder: Path, *, stack_sampler: bool, valgrind_out: Path | None = None,
         marks: Path | None = None, profile: Path | None = None, checkout: Path | None = None) -> dict:
    out_folder = Path(tempfile.mkdtemp(dir=folder))
    result = out_folder / "result.json"
    command = [sys.executable, __file__, "--drive", str(length), str(out_folder / "files"), str(result),
               str(marks or ""), "1" if stack_sampler else "0", str(profile or "")]
    if valgrind_out is not None:
        command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={valgrind_out}",
                   *command]
    environment = dict(os.environ, PYTHONHASHSEED="0", CUDA_VISIBLE_DEVICES="")
    if checkout is not None:  # that checkout's profiler and envmanager come first on the path
        environment["PYTHONPATH"] = os.pathsep.join(filter(None, [str(checkout), os.environ.get("PYTHONPATH")]))
    completed = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env=environment, cwd=ROOT)
    if not result.exists():
        sys.exit(f"the run of {length} steps failed:\n{completed.stderr[-3000:]}")
    figures = json.loads(result.read_text())
    shutil.rmtree(out_folder)
    return figures


def _instructions(dump: Path) -> int:
    for line in dump.read_text().splitlines():
        if line.startswith(("summary:", "totals:")):
            return int(line.split()[1])
    raise ValueError(f"no totals in {dump}")


def _stage_dumps(base: Path) -> dict[str, int]:
    """Each dump's stage (the name given to the dump) and instructions."""
    counts = {}
    for dump in sorted(base.parent.glob(base.name + ".*"), key=lambda path: int(path.suffix[1:])):
        trigger = next(line for line in dump.read_text().splitlines() if line.startswith("desc: Trigger:"))
        stage = trigger.split("Client Request: ", 1)[-1].strip()
        counts[stage] = counts.get(stage, 0) + _instructions(dump)
    return counts


def _print_table(unit: str, lengths: list[int], spans: list[float], per_length: list[dict[str, float]],
                 scale: float) -> None:
    header = f"{unit:<15}" + "".join(f"{f'{length} steps':>14}" for length in lengths)
    print(f"{header}{f'per 1,000 spans':>18}")
    span_difference = spans[-1] - spans[0]
    rows = (*STAGES, "total", EXIT_WALL) if all(EXIT_WALL in figures for figures in per_length) else (*STAGES, "total")
    for stage in rows:
        values = [sum(figures[part] for part in STAGES) if stage == "total" else figures[stage]
                  for figures in per_length]
        per_thousand = (values[-1] - values[0]) / span_difference * 1000 if span_difference else float("nan")
        print(f"{stage:<15}" + "".join(f"{value * scale:>14.2f}" for value in values)
              + f"{per_thousand * scale:>18.3f}")
    print(f"{'spans':<15}" + "".join(f"{count:>14.0f}" for count in spans))


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--drive":
        _, _, length, out_folder, result, marks, sampler, profile = sys.argv
        _drive(int(length), out_folder, result, marks or None, sampler == "1", profile or None)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--lengths", type=int, nargs=2, default=[2048, 8192])
    parser.add_argument("--callgrind", action="store_true")
    parser.add_argument("--keep", type=Path, default=None, help="folder for the callgrind dumps")
    parser.add_argument("--stack-sampler", action="store_true")
    parser.add_argument("--against", type=Path, default=None, metavar="CHECKOUT",
                        help="another checkout of rlprof (C extensions built in place), measured beside this one")
    parser.add_argument("--profile", action="store_true",
                        help="cProfile of the exit of one run of the longer length: the top functions")
    options = parser.parse_args()
    lengths = sorted(options.lengths)
    variants: dict[str, Path | None] = {"this checkout": None}
    if options.against is not None:
        variants[f"against {options.against}"] = options.against.resolve()
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        if options.profile:
            import pstats

            _run(lengths[-1], folder, stack_sampler=options.stack_sampler, profile=folder / "exit.prof")
            pstats.Stats(str(folder / "exit.prof")).sort_stats("tottime").print_stats(30)
            return
        if options.callgrind:
            _callgrind(options, lengths, variants, folder)
            return
        runs = {(variant, length): [] for variant in variants for length in lengths}
        for round_index in range(options.rounds):
            turns = [(variant, length) for variant in variants for length in lengths]
            for variant, length in (turns if round_index % 2 == 0 else turns[::-1]):
                runs[variant, length].append(_run(length, folder, stack_sampler=options.stack_sampler,
                                                  checkout=variants[variant]))
        print(f"rlprof run's exit, wall milliseconds per stage (medians of {options.rounds} interleaved rounds)")
        for variant in variants:
            per_length = [{stage: statistics.median(run["seconds"][stage] for run in runs[variant, length])
                           for stage in (*STAGES, EXIT_WALL) if stage in runs[variant, length][0]["seconds"]}
                          for length in lengths]
            spans = [statistics.median(run["spans"] for run in runs[variant, length]) for length in lengths]
            print(f"\n{variant}")
            _print_table("milliseconds", lengths, spans, per_length, 1e3)


def _callgrind(options: argparse.Namespace, lengths: list[int], variants: dict[str, Path | None],
               folder: Path) -> None:
    """One run per variant and length under callgrind, two at a time (counts do not depend on load)."""
    from concurrent.futures import ThreadPoolExecutor

    marks = _build_marks(folder)
    keep = options.keep or folder
    keep.mkdir(parents=True, exist_ok=True)

    def measured(variant_index: int, length: int) -> tuple[dict[str, float], float]:
        base = keep / f"exit_{variant_index}_{length}.out"
        for old in keep.glob(base.name + "*"):
            old.unlink()
        figures = _run(length, folder, stack_sampler=options.stack_sampler, valgrind_out=base, marks=marks,
                       checkout=list(variants.values())[variant_index])
        counts = _stage_dumps(base)
        return {stage: float(counts.get(stage, 0)) for stage in STAGES}, figures["spans"]

    with ThreadPoolExecutor(max_workers=2) as pool:
        futures = {(index, length): pool.submit(measured, index, length)
                   for index in range(len(variants)) for length in lengths}
    print("rlprof run's exit under callgrind: instructions (millions) per stage")
    for index, variant in enumerate(variants):
        results = [futures[index, length].result() for length in lengths]
        print(f"\n{variant}")
        _print_table("M instructions", lengths, [spans for _, spans in results],
                     [counts for counts, _ in results], 1e-6)
    if options.keep:
        print(f"\ndumps: {keep}/exit_<variant>_<length>.out.<n> (callgrind_annotate)")


if __name__ == "__main__":
    main()
