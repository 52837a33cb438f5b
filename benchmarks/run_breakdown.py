"""Where does ``rlprof run``'s extra time go? CPU seconds, phase by phase, for the programs of
``run_overhead.py``.

``run_overhead.py`` says how much longer a PPO run takes under ``rlprof run``; this script says
where that time goes, in CPU seconds (``getrusage``), which another process's load on a shared
machine sways far less than wall time. Each program runs, round after round (interleaved, the order
alternating), in a small driver process two ways:

- **python**: the driver runs the script as ``python`` would (``runpy``, ``__main__``);
- **rlprof run**: the driver calls ``rlprof run``'s own ``main`` on the script, with
  ``run_program._execute`` wrapped to note the CPU time when the program starts and ends.

The driver notes its own CPU time (``RUSAGE_SELF``) at four points and its children's
(``RUSAGE_CHILDREN``: the env worker processes, once the program has closed its envs and waited for
them) at the end, so each run splits into:

- **imports**: importing ``rlprof run``'s command line (``profiler.cli.commands``);
- **set-up**: from there to the program's first line (the plugins: the environments'
  instrumentation, the framework phases, the sampler; the start of the recording);
- **program**: the program itself, in the trainer (its own imports included: under ``rlprof run``
  some were already paid in the set-up);
- **exit**: from the program's end to ``rlprof run``'s (the workers' last timers, the timers, trace
  and report files, the analysis printed);
- **workers+end**: the CPU time of every process the program started (this script makes itself
  their subreaper, so the workers of a forkserver or an orphaned worker are counted too), and the
  driver's own end after its last mark (the interpreter's teardown).

Medians over the rounds; "extra" is rlprof's median less python's. Then, once per program:

- **rlprof's own imports**: CPU seconds of importing what ``rlprof run`` imports, after the
  program's libraries (numpy, Gymnasium, torch; SB3 for the SB3 program) are imported already —
  the import cost that is rlprof's alone (``python -X importtime`` of it with ``--importtime``);
- with ``--profile-exit``, ``cProfile`` of the exit path of one ``rlprof run``: the functions that
  took the most of it.

    python3 benchmarks/run_breakdown.py [--rounds 5] [--quick] [--only cleanrl-sync|cleanrl-async|sb3]
                                        [--profile-exit] [--importtime]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import runpy
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("imports", "set-up", "program", "exit", "workers+end")
PROGRAM_LIBRARIES = {"cleanrl-sync": "numpy, gymnasium, torch", "cleanrl-async": "numpy, gymnasium, torch",
                     "sb3": "numpy, gymnasium, torch, stable_baselines3"}


def _self_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def drive(mode: str, figures_file: str, out_folder: str, profile_exit: str | None, script: str,
          arguments: list[str]) -> None:
    """The driver process: run ``script`` plain or under ``rlprof run``, write the CPU marks."""
    marks = {"start": _self_cpu()}
    if mode == "python":
        marks["imported"] = marks["set-up"] = _self_cpu()
        saved_argv = sys.argv[:]
        sys.argv = [script, *arguments]
        sys.path[0] = str(Path(script).resolve().parent)
        try:
            runpy.run_path(script, run_name="__main__")
        finally:
            sys.argv = saved_argv
        marks["program"] = marks["exit"] = _self_cpu()
    else:
        from profiler.cli import commands, run_program

        marks["imported"] = _self_cpu()
        execute = run_program._execute
        exit_profile = None

        def timed_execute(program):  # noqa: ANN001, ANN202 - a stand-in with the same signature
            nonlocal exit_profile
            marks["set-up"] = _self_cpu()
            try:
                return execute(program)
            finally:
                marks["program"] = _self_cpu()
                if profile_exit:
                    import cProfile

                    exit_profile = cProfile.Profile()
                    exit_profile.enable()

        run_program._execute = timed_execute
        code = commands.main(["run", "--summaries-dir", out_folder, "--run-id", "run", script, *arguments])
        if exit_profile is not None:
            exit_profile.disable()
            exit_profile.dump_stats(profile_exit)
        marks["exit"] = _self_cpu()
        if code:
            raise SystemExit(code)
    figures = {"imports": marks["imported"] - marks["start"], "set-up": marks["set-up"] - marks["imported"],
               "program": marks["program"] - marks["set-up"], "exit": marks["exit"] - marks["program"],
               "self": _self_cpu() - marks["start"]}
    Path(figures_file).write_text(json.dumps(figures))


def own_imports(program_key: str, environment: dict[str, str], importtime: bool) -> float:
    """CPU seconds of importing ``rlprof run`` and loading its plugins, after the program's libraries."""
    code = (f"import {PROGRAM_LIBRARIES[program_key]}, resource, sys\n"
            "def cpu():\n"
            "    usage = resource.getrusage(resource.RUSAGE_SELF)\n"
            "    return usage.ru_utime + usage.ru_stime\n"
            "sys.stderr.write('-- rlprof from here --\\n')\n"
            "before = cpu()\n"
            "import profiler.cli.commands\n"
            "from profiler.cli.run_program import ENVIRONMENTS_GROUP, _load_plugin\n"
            "_load_plugin(ENVIRONMENTS_GROUP, sys.stderr)\n"
            "print(cpu() - before)\n")
    command = [sys.executable, *(["-X", "importtime"] if importtime else []), "-c", code]
    done = subprocess.run(command, check=True, capture_output=True, text=True, env=environment)
    if importtime:
        _print_importtime(done.stderr.split("-- rlprof from here --\n", 1)[-1])
    return float(done.stdout.strip())


def _print_importtime(report: str) -> None:
    """The packages that took the longest to import, by their own (self) time, in milliseconds."""
    totals: dict[str, int] = {}
    for line in report.splitlines():
        if not line.startswith("import time:") or "self [us]" in line:
            continue
        own, _, name = line.removeprefix("import time:").split("|")
        parts = name.strip().split(".")
        group = ".".join(parts[:2]) if parts[0] in ("profiler", "envmanager") else parts[0]
        totals[group] = totals.get(group, 0) + int(own)
    print(f"    -X importtime, own time by package ({sum(totals.values()) / 1000:.0f} ms in all):")
    for group, microseconds in sorted(totals.items(), key=lambda item: -item[1])[:12]:
        print(f"      {microseconds / 1000:7.1f} ms  {group}")


def _run_driver(mode: str, program, folder: Path, environment: dict[str, str],  # noqa: ANN001
                profile_exit: Path | None = None) -> dict[str, float]:
    with tempfile.TemporaryDirectory(dir=folder) as name:
        run_folder = Path(name)
        figures = run_folder / "figures.json"
        command = [sys.executable, __file__, "--drive", mode, str(figures), str(run_folder / "out"),
                   str(profile_exit or ""), str(program.path), *program.arguments]
        before = _children_cpu()
        subprocess.run(command, check=True, cwd=run_folder, env=environment,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        _reap_orphans()
        figures = json.loads(figures.read_text())
        figures["workers+end"] = _children_cpu() - before - figures.pop("self")
        return figures


def _become_subreaper() -> None:
    """Orphaned descendants (a forkserver's workers) become this process's children, so that their
    CPU time counts in ``RUSAGE_CHILDREN`` once reaped (Linux; elsewhere they are not counted)."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap_orphans(wait_seconds: float = 10.0) -> None:
    """Wait for the descendants left behind by the last run (this process has no other children)."""
    deadline = time.monotonic() + wait_seconds
    while time.monotonic() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.01)


def _print_exit_profile(path: Path, root: Path) -> None:
    import pstats

    stats = pstats.Stats(str(path))
    rows = sorted(((entry[3], key) for key, entry in stats.stats.items()
                   if str(root) in key[0] and not key[0].endswith("run_breakdown.py")), reverse=True)
    print("    cProfile of the exit path of one rlprof run (cumulative seconds, rlprof's functions):")
    for cumulative, (file_name, line, function) in rows[:18]:
        print(f"      {cumulative:7.3f} s  {Path(file_name).relative_to(root)}:{line} {function}")


def main() -> None:
    if sys.argv[1:2] == ["--drive"]:
        mode, figures_file, out_folder, profile_exit, script, *arguments = sys.argv[2:]
        drive(mode, figures_file, out_folder, profile_exit or None, script, arguments)
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import run_overhead

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="short runs (2048 steps, as run_overhead --quick)")
    parser.add_argument("--total-timesteps", type=int, default=None)
    parser.add_argument("--sb3-timesteps", type=int, default=None)
    parser.add_argument("--only", choices=("cleanrl-sync", "cleanrl-async", "sb3"), default=None)
    parser.add_argument("--profile-exit", action="store_true", help="cProfile the exit path of one run per program")
    parser.add_argument("--importtime", action="store_true", help="-X importtime of rlprof's own imports")
    options = parser.parse_args()
    default_steps = 2048 if options.quick else 8192
    options.total_timesteps = options.total_timesteps or default_steps
    options.sb3_timesteps = options.sb3_timesteps or default_steps
    started = time.perf_counter()
    print(f"rlprof run, where the extra time goes: CPU seconds, medians of {options.rounds} interleaved rounds "
          f"(python {sys.version.split()[0]}, {os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f})")
    _become_subreaper()
    with tempfile.TemporaryDirectory(prefix="rlprof-run-breakdown-") as name:
        folder = Path(name)
        environment = run_overhead.child_environment(folder)
        run_overhead.compile_rlprof()
        measured = run_overhead.programs(options)
        runs = {program.key: {"python": [], "rlprof run": []} for program in measured}
        for round_number in range(options.rounds):
            order = ("python", "rlprof run") if round_number % 2 == 0 else ("rlprof run", "python")
            for program in measured:
                for mode in order:
                    runs[program.key][mode].append(_run_driver(mode.split()[0], program, folder, environment))
            print(f"  round {round_number + 1}/{options.rounds} done", file=sys.stderr, flush=True)
        for program in measured:
            print(f"\n{program.title}")
            print(f"  {'CPU seconds':12}" + "".join(f"{phase:>12}" for phase in (*PHASES, "total")))
            medians = {}
            for mode, rows in runs[program.key].items():
                medians[mode] = {phase: statistics.median(row[phase] for row in rows) for phase in PHASES}
                medians[mode]["total"] = statistics.median(sum(row[phase] for phase in PHASES) for row in rows)
                print(f"  {mode:12}" + "".join(f"{medians[mode][phase]:12.3f}" for phase in (*PHASES, "total")))
            print(f"  {'extra':12}" + "".join(f"{medians['rlprof run'][phase] - medians['python'][phase]:+12.3f}"
                                              for phase in (*PHASES, "total")))
            print(f"  rlprof's own imports (after {PROGRAM_LIBRARIES[program.key]}): "
                  f"{own_imports(program.key, environment, options.importtime):.3f} s CPU")
            if options.profile_exit:
                profile = folder / f"{program.key}_exit.prof"
                _run_driver("rlprof", program, folder, environment, profile_exit=profile)
                _print_exit_profile(profile, run_overhead.ROOT)
    print(f"\n(done in {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
