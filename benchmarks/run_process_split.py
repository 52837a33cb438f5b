"""Where ``rlprof run``'s extra CPU goes, process by process, for SB3's PPO over ``SubprocVecEnv``.

``run_breakdown.py`` splits the trainer's own CPU by phase and lumps every other process with the
trainer's teardown ("workers+end"). This script splits that lump: each process of the run notes
its own ``getrusage`` at its end, through a ``sitecustomize`` module this script puts first on
``PYTHONPATH`` (it changes nothing else in the run):

- **trainer**: the trainer process up to its ``atexit`` hooks (rlprof's set-up, the program, its
  exit: what ``run_breakdown.py`` splits further);
- **teardown**: the trainer's interpreter teardown after those hooks (its ``wait4`` total less
  the above);
- **forkserver**: multiprocessing's fork server (under ``rlprof run`` it preloads rlprof's worker
  side; see ``envmanager.instrumentation.environments._preload_in_forkserver``);
- **workers**: the env worker processes, summed, from their fork to their ``_exit_function``
  (SB3's workers import the program's main module, torch and SB3 included, once each);
- **tracker**: multiprocessing's resource tracker.

Beside CPU seconds (user + system: which another program's load sways), counts the load does
not move: minor page faults and voluntary context switches (a thread's wake-up that found the GIL
or a core taken, a blocking read). Medians of interleaved rounds; "extra" is the variant's median
less ``python``'s.

    python3 benchmarks/run_process_split.py [--rounds 3] [--timesteps 2048]
                                            [--variant "--no-stack-sampler" ...]

Each ``--variant`` adds one ``rlprof run`` with those options (a string of options) beside the
default one, to share out the extra between the stack sampler, the framework phases and the
timeline. The instructions of each process (callgrind follows the forkserver's workers) are in
docs/run.md's figures; a run under valgrind takes a quarter of an hour here.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run_breakdown import _become_subreaper, _reap_orphans  # noqa: E402 - the forkserver outlives the trainer
from run_overhead import PROGRAMS, child_environment, compile_rlprof  # noqa: E402 - shared with the whole-run benchmark

KINDS = ("trainer", "teardown", "forkserver", "workers", "tracker")
FIGURES = (("cpu", "CPU seconds", "{:10.3f}"), ("minflt", "page faults", "{:10.0f}"),
           ("nvcsw", "voluntary switches", "{:10.0f}"))

# Each process writes KIND.PID.json into $RUSAGE_SPLIT_DIR at its end. A worker of multiprocessing
# (a child of the fork server, whose command line is "-c ...") never runs atexit: it leaves through
# os._exit after multiprocessing.util._exit_function, which is wrapped in the child at its fork.
SITECUSTOMIZE = '''
import os, sys
_folder = os.environ.get("RUSAGE_SPLIT_DIR")
if _folder:
    import atexit, json, resource

    def _note(kind):
        usage = resource.getrusage(resource.RUSAGE_SELF)
        figures = {"cpu": usage.ru_utime + usage.ru_stime, "minflt": usage.ru_minflt,
                   "nvcsw": usage.ru_nvcsw}
        with open(os.path.join(_folder, f"{kind}.{os.getpid()}.json"), "w") as file:
            json.dump(figures, file)

    def _kind():
        if sys.argv and sys.argv[0] != "-c":
            return "trainer"
        return "forkserver" if "multiprocessing.forkserver" in sys.modules else "tracker"

    atexit.register(lambda: _note(_kind()))

    def _in_child():
        if not (sys.argv and sys.argv[0] == "-c"):
            return
        from multiprocessing import util
        exit_function = util._exit_function

        def noted_exit_function(*args, **kwargs):
            try:
                return exit_function(*args, **kwargs)
            finally:
                _note("workers")

        util._exit_function = noted_exit_function

    os.register_at_fork(after_in_child=_in_child)
'''


def run_once(command: list[str], environment: dict[str, str], folder: Path) -> dict[str, dict[str, float]]:
    """One run: each kind of process's figures, summed over its processes."""
    folder.mkdir(parents=True)
    process = subprocess.Popen(command, env={**environment, "RUSAGE_SPLIT_DIR": str(folder)}, cwd=folder,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(process.pid, 0)
    if status:
        raise RuntimeError(f"{' '.join(command)} failed ({status})")
    _reap_orphans()  # the fork server and the resource tracker end after the trainer: their notes come then
    kinds: dict[str, dict[str, float]] = {kind: {key: 0.0 for key, _, _ in FIGURES} for kind in KINDS}
    for noted in folder.glob("*.json"):
        kind = noted.name.split(".")[0]
        for key, value in json.loads(noted.read_text()).items():
            kinds[kind][key] += value
    whole = {"cpu": usage.ru_utime + usage.ru_stime, "minflt": usage.ru_minflt, "nvcsw": usage.ru_nvcsw}
    kinds["teardown"] = {key: whole[key] - kinds["trainer"][key] for key in whole}
    return kinds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--timesteps", type=int, default=2048)
    parser.add_argument("--variant", action="append", default=[], metavar="OPTIONS",
                        help="also run rlprof run with these options (one string)")
    options = parser.parse_args()
    compile_rlprof()
    _become_subreaper()
    program = [str(PROGRAMS / "sb3_ppo.py"), "--timesteps", str(options.timesteps), "--n-steps", "128",
               "--vec-env", "subproc"]
    with tempfile.TemporaryDirectory(prefix="rlprof-process-split-") as name:
        folder = Path(name)
        site = folder / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        environment = child_environment(folder)
        environment["PYTHONPATH"] = os.pathsep.join([str(site), environment["PYTHONPATH"]])
        variants = {"python": [sys.executable, *program]}
        for extra in ["", *options.variant]:
            variants[f"rlprof run {extra}".strip()] = [
                sys.executable, "-m", "profiler", "run", "--summaries-dir", "runs", *extra.split(), *program]
        runs: dict[str, list[dict[str, dict[str, float]]]] = {label: [] for label in variants}
        for round_number in range(options.rounds):
            labels = list(variants) if round_number % 2 == 0 else list(reversed(variants))
            for label in labels:
                runs[label].append(run_once(variants[label], environment, folder / f"{round_number}-{len(runs[label])}-"
                                            f"{abs(hash(label))}"))
            print(f"  round {round_number + 1}/{options.rounds} done", file=sys.stderr, flush=True)
    print(f"SB3 PPO, SubprocVecEnv x4 CartPole, {options.timesteps} steps: each process's figures, medians of "
          f"{options.rounds} interleaved rounds ({os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f})")
    for key, title, cell in FIGURES:
        print(f"\n  {title:34}" + "".join(f"{kind:>12}" for kind in (*KINDS, "all")))
        medians = {label: {kind: statistics.median(run[kind][key] for run in rows) for kind in KINDS}
                   for label, rows in runs.items()}
        for label, rows in runs.items():
            medians[label]["all"] = statistics.median(sum(run[kind][key] for kind in KINDS) for run in rows)
            print(f"  {label:34}" + "".join(f"  {cell.format(medians[label][kind])}" for kind in (*KINDS, "all")))
        for label in runs:
            if label != "python":
                print(f"  {'extra, ' + label:34}" + "".join(
                    f"  {cell.format(medians[label][kind] - medians['python'][kind]).replace(' -', '-')}"
                    for kind in (*KINDS, "all")))


if __name__ == "__main__":
    main()
