"""Verdicts on what the machine did to the run, from the kernel's own counts.

Where the dump carries the run-queue delay of every process (:mod:`profiler.analysis.machine_figures`),
the CPU verdicts quote it instead of inferring waits from time off the CPU, and tell the run's own
crowding of the cores from other programs' load. The rules, each with its thresholds:

``cpu_oversubscription`` (measured)
    The rule itself is :mod:`profiler.analysis.verdicts`' (the run's own CPU demand beyond its
    cores, a lower bound of what it costs); with the kernel's count at hand it quotes the process
    that waited the longest share of its wall time for a core (:func:`kernel_count`), and no longer
    reads time off the CPU as waiting ("likely").
``outside_load``
    Other programs used at least :data:`OUTSIDE_MIN_CORE_SHARE` of the run's cores over the run
    (the cores' busy time less the run's own CPU time), and the run's waits for a core beyond
    what its own crowding costs (the ``cpu_oversubscription`` cost, or nothing) cost at least
    :data:`CPU_MIN_COST_SHARE` of the wall time. The waits' cost is the trainer's run-queue delay
    (its main thread's, where the dump counted it: :attr:`MachineFigures.trainer_waits`) plus the
    largest worker's: the trainer's own waits hold up every step, and in lockstep a step waits at
    least for its most delayed worker; a lower bound. The busiest other programs are
    named, by the CPU time they used over the run.
``torch_threads`` (a finding: cost 0)
    The trainer ran torch with two or more intra-op threads (``torch.get_num_threads()`` as the
    program ended), beside env workers in processes of their own, and the run's busy processes
    and the pool's extra threads outnumber its cores; the trainer's CPU time outside its Python
    threads (the pool's, which spins between operations) kept at least
    :data:`TORCH_POOL_MIN_CORE_SHARE` of the cores busy over the training loop; and the run's
    waits for a core (as ``outside_load``'s) reach :data:`CPU_MIN_COST_SHARE` of the loop (judged
    on the loop, where the pool works, as the phase verdicts are: a short run is mostly start-up).
    What one thread would win is not in one run's figures: the CPU the pool used is not the time
    the others lost (cores it spun on may have been idle), and the waits would not all go. On 2
    cores, with 2 threads and with one, both pools using about half the cores: Stable-Baselines3's
    A2C over 8 ``SubprocVecEnv`` workers learned in 27% less time on one thread (medians of three
    runs, 5.32 against 3.88 s), a CleanRL-style PPO over 4 ``AsyncVectorEnv`` workers in 3% less
    (two runs each). So it is a finding that costs nothing, with the advice to try one thread and
    compare.
``gil_contention``
    Two or more Python threads of the trainer did real work (each at least
    :data:`GIL_MIN_THREAD_CPU_SHARE` of the process's CPU time, together at least
    :data:`GIL_MIN_PYTHON_CPU_SHARE` of it), yet the process ran on about one core at a time (at most
    :data:`GIL_MAX_CORES` cores on average) while holding or waiting for it most of the wall time (at
    least :data:`GIL_MIN_BUSY_SHARE`), on a machine with two cores or more: the threads queued for
    the GIL, not for a core. The cores used and the busy share are read over the time two or more
    of those threads ran at once, where the dump says when each began and ended: over the whole
    run, a long start-up on the main thread alone (imports, building the model) made a short
    spell of two threads look like one core's work. The cost, what spreading their CPU time over
    the cores would save (never more than all but the longest thread's), must reach
    :data:`CPU_MIN_COST_SHARE`.
"""

from __future__ import annotations

from typing import Any, Protocol

from profiler.analysis.machine_figures import MachineFigures, ProcessMoment, ProcessWaits, PythonThread
from profiler.analysis.text_format import format_percent, format_seconds
from profiler.analysis.untimed_gaps import loop_share, training_loop_seconds

__all__ = [
    "CPU_MIN_COST_SHARE",
    "GIL_CONTENTION",
    "GIL_MAX_CORES",
    "GIL_MIN_BUSY_SHARE",
    "GIL_MIN_PYTHON_CPU_SHARE",
    "GIL_MIN_THREAD_CPU_SHARE",
    "OUTSIDE_LOAD",
    "OUTSIDE_MIN_CORE_SHARE",
    "TORCH_POOL_MIN_CORE_SHARE",
    "TORCH_THREADS",
    "gil_contention",
    "kernel_count",
    "outside_load",
    "torch_threads",
]

CPU_MIN_COST_SHARE = 0.10
"""A CPU verdict (``cpu_oversubscription`` too) is told when the time it costs reaches 10% of the
wall time."""

OUTSIDE_MIN_CORE_SHARE = 0.10
"""Other programs' load is a verdict only when they used at least a tenth of the run's cores over
the run: below that, the waits are the run's own or the kernel's housekeeping."""

GIL_MIN_THREAD_CPU_SHARE = 0.10
"""A thread counts as working when it used at least 10% of the process's CPU time."""

GIL_MIN_PYTHON_CPU_SHARE = 0.80
"""... and the Python threads did at least 80% of the process's CPU work (native threads of a
library, which hold no GIL, did not)."""

GIL_MAX_CORES = 1.25
"""A process whose Python threads contend for the GIL runs on about one core: at most this many
cores' worth of CPU time per second of wall time (threads that release the GIL run on more)."""

GIL_MIN_BUSY_SHARE = 0.60
"""... and it held a core, or waited in the run queue for one, at least 60% of its wall time: a
process that mostly sleeps or waits on I/O is not held up by the GIL."""

TORCH_POOL_MIN_CORE_SHARE = 0.10
"""torch's intra-op pool is a finding only when the trainer's native threads kept at least a tenth
of the run's cores busy over the training loop."""

OUTSIDE_LOAD = "outside_load"
GIL_CONTENTION = "gil_contention"
TORCH_THREADS = "torch_threads"


class JudgedRun(Protocol):
    """What these rules read of the run being judged (``profiler.analysis.verdicts._Run``)."""

    measurements: Any
    tree: dict[str, Any]

    @property
    def wall(self) -> float: ...

    @property
    def step(self) -> Any: ...

    def share(self, seconds: float) -> float | None: ...

    def verdict(self, kind: str, title: str, cost: float, evidence: dict[str, Any],
                suggestion: str) -> Any: ...


def _wait_cost(run: JudgedRun, figures: MachineFigures) -> float:
    """What the run's waits for a core cost its wall time, at least (see the module docstring)."""
    trainer = figures.trainer_waits
    workers = max((worker.run_queue_seconds for worker in figures.measured_workers), default=0.0)
    return min(run.wall, (trainer.run_queue_seconds if trainer else 0.0) + workers)


def _most_waiting(figures: MachineFigures) -> ProcessWaits:
    trainer = figures.trainer_waits
    processes = [*figures.measured_workers, *([trainer] if trainer else [])]
    return max(processes, key=lambda process: (process.waiting_share, process.label))


def _waits_evidence(figures: MachineFigures) -> dict[str, Any]:
    trainer = figures.trainer_waits
    main_thread = [trainer] if trainer is not None and trainer is not figures.trainer else []
    processes = [*([figures.trainer] if figures.trainer else []), *main_thread, *figures.measured_workers]
    return {"run_queue_by_process": [
        {"process": process.label, "run_queue_seconds": process.run_queue_seconds,
         "wall_seconds": process.wall_seconds, "waiting_share": process.waiting_share,
         "involuntary_switches": process.involuntary_switches}
        for process in processes]}


def _waited(process: ProcessWaits) -> str:
    return (f"{process.label} waited {format_percent(process.waiting_share)} of its wall time for a "
            f"core ({format_seconds(process.run_queue_seconds)} of "
            f"{format_seconds(process.wall_seconds)}, the kernel's count)")


def kernel_count(title: str, evidence: dict[str, Any],
                 figures: MachineFigures) -> tuple[str, dict[str, Any]]:
    """The ``cpu_oversubscription`` verdict's title and evidence with the kernel's count of the
    waits added: which process waited the longest share of its wall time for a core."""
    evidence = {**evidence, "measured_by": "cores floor, waits from run-queue delay (schedstat)",
                **_waits_evidence(figures)}
    return f"{title}; {_waited(_most_waiting(figures))}", evidence


def outside_load(run: JudgedRun, figures: MachineFigures, own_cost: float) -> list[Any]:
    """The ``outside_load`` verdict: the run's waits for a core beyond what its own processes
    cost each other (``own_cost``, the ``cpu_oversubscription`` verdict's cost, or 0)."""
    machine = figures.machine
    outside = figures.outside_core_seconds
    if machine is None or outside is None or figures.trainer is None or machine.wall_seconds <= 0:
        return []
    cores = run.measurements.cores_available or machine.cores
    core_share = outside / (machine.cores * machine.wall_seconds)
    workers = len(figures.workers)
    cost = max(0.0, _wait_cost(run, figures) - own_cost)
    if core_share < OUTSIDE_MIN_CORE_SHARE or (run.share(cost) or 0.0) < CPU_MIN_COST_SHARE:
        return []
    named = [process for process in machine.outside_processes if process.cpu_seconds > 0][:3]
    led_by = (", led by " + ", ".join(f"{process.name} (pid {process.pid}, "
                                       f"{format_seconds(process.cpu_seconds)} of CPU)"
                                       for process in named) if named else "")
    load = (f", load average {machine.load_average:.1f}" if machine.load_average is not None else "")
    cores_taken = outside / machine.wall_seconds
    left = max(0.0, cores - cores_taken)
    evidence = {"cores": machine.cores, "outside_core_seconds": outside,
                "outside_share_of_cores": core_share, "run_cpu_seconds": figures.run_cpu_seconds,
                "run_processes_cpu_seconds": machine.run_processes_cpu_seconds,
                "busy_core_seconds": machine.busy_core_seconds, "load_average_1min": machine.load_average,
                "waits_cost_seconds": _wait_cost(run, figures), "run_own_waits_seconds": own_cost,
                "outside_processes": [{"pid": process.pid, "name": process.name,
                                       "cpu_seconds": process.cpu_seconds}
                                      for process in machine.outside_processes],
                **_waits_evidence(figures)}
    fewer = (f"; or, sharing the machine, run fewer busy processes: the others leave the run "
             f"{left:.1f} of the {cores} cores for its {workers + 1} processes"
             if workers and left < workers + 1 else "")
    return [run.verdict(
        OUTSIDE_LOAD,
        f"other programs took the run's cores: they kept {cores_taken:.2g} of its {machine.cores} "
        f"cores busy over the run{led_by}{load}; {_waited(_most_waiting(figures))}",
        cost, evidence,
        "Run on a quieter machine, or keep the run and the other programs on separate cores "
        "(`taskset -c` for one of them, or os.sched_setaffinity)" + fewer + ".")]


def torch_threads(run: JudgedRun, figures: MachineFigures) -> list[Any]:
    """The ``torch_threads`` finding: torch's intra-op pool in the trainer kept cores busy beside
    env workers that waited for cores (see the module docstring)."""
    threads = run.measurements.torch_threads
    native = figures.trainer_native_cpu_seconds
    workers = figures.measured_workers
    cores = run.measurements.cores_available or (figures.machine.cores if figures.machine else None)
    if threads is None or threads < 2 or native is None or not workers or cores is None:
        return []
    busy = run.measurements.busy_processes or len(workers) + 1
    if busy + threads - 1 <= cores:
        return []  # the pool and the run's busy processes each have a core
    # Judged on the training loop, where the pool works: a short run is mostly start-up.
    loop = training_loop_seconds(run.tree)
    pool_share = native / (cores * loop) if loop > 0 else 0.0
    waits = _wait_cost(run, figures)
    if pool_share < TORCH_POOL_MIN_CORE_SHARE or (loop_share(run.tree, waits) or 0.0) < CPU_MIN_COST_SHARE:
        return []
    evidence = {"torch_threads": threads, "cores": cores, "busy_processes": busy, "workers": len(workers),
                "trainer_cpu_seconds": figures.trainer.cpu_seconds if figures.trainer else None,
                "trainer_native_cpu_seconds": native, "native_share_of_loop_cores": pool_share,
                "training_loop_seconds": loop, "waits_cost_seconds": waits, **_waits_evidence(figures)}
    return [run.verdict(
        TORCH_THREADS,
        f"torch's intra-op threads compete with the env workers for cores: torch ran {threads} threads "
        f"in the trainer beside its {len(workers)} env workers on {cores} cores, and the trainer's "
        f"threads other than its Python ones used {format_seconds(native)} of CPU "
        f"({format_percent(pool_share)} of the cores over the training loop); "
        f"{_waited(_most_waiting(figures))}",
        0.0, evidence,
        "Try torch.set_num_threads(1) in the trainer (or OMP_NUM_THREADS=1) and compare: the pool's "
        "threads spin between operations on cores that the env workers and the trainer's main thread "
        "wait for, and a small network's tensors are too small for them to pay. What one thread wins "
        "depends on how much of that CPU the others needed, which one run cannot tell: rlprof counts "
        "it at nothing. A network large enough to gain from the pool wants cores of its own: env "
        f"workers and torch threads together at most {cores}.")]


def gil_contention(run: JudgedRun, figures: MachineFigures) -> list[Any]:
    """The ``gil_contention`` verdict: the trainer's Python threads queued for the GIL."""
    trainer = figures.trainer
    cores = run.measurements.cores_available
    if trainer is None or not figures.threads or cores is None or cores < 2 or trainer.wall_seconds <= 0:
        return []
    process_cpu = trainer.cpu_seconds
    working = [thread for thread in figures.threads
               if thread.cpu_seconds >= GIL_MIN_THREAD_CPU_SHARE * process_cpu > 0]
    python_cpu = sum(thread.cpu_seconds for thread in working)
    if len(working) < 2 or python_cpu < GIL_MIN_PYTHON_CPU_SHARE * process_cpu:
        return []
    main_thread = next((thread for thread in figures.threads if thread.name == "MainThread" and thread.started is None),
                       None)
    together = _time_together(working, trainer, main_thread)
    if (main_thread in working and together.main_thread_cpu_seconds is not None
            and together.main_thread_cpu_seconds < GIL_MIN_THREAD_CPU_SHARE * together.cpu_seconds):
        # The main thread did next to nothing while the others ran (it waited in join(), say):
        # it took no turns at the GIL then.
        working = [thread for thread in working if thread is not main_thread]
        if len(working) < 2:
            return []
        together = _time_together(working, trainer, None)
    if together.seconds <= 0:
        return []
    cores_used = together.cpu_seconds / together.seconds
    busy_share = (together.cpu_seconds + together.run_queue_seconds) / together.seconds
    if cores_used > GIL_MAX_CORES or busy_share < GIL_MIN_BUSY_SHARE:
        return []
    parallel = min(len(working), cores)
    # Spread over the cores, their work would still take the longest thread's CPU time (the main
    # thread's counted only while the others ran, where the dump says).
    cpu_together = [together.main_thread_cpu_seconds
                    if thread is main_thread and together.main_thread_cpu_seconds is not None
                    else thread.cpu_seconds for thread in working]
    cost = min(run.wall, together.cpu_seconds * (1.0 - 1.0 / parallel), sum(cpu_together) - max(cpu_together))
    if (run.share(cost) or 0.0) < CPU_MIN_COST_SHARE:
        return []
    names = ", ".join(f"{thread.name} ({format_seconds(thread.cpu_seconds)})" for thread in working[:4])
    evidence = {"threads": [{"name": thread.name, "cpu_seconds": thread.cpu_seconds,
                             "run_queue_seconds": thread.run_queue_seconds} for thread in working],
                "process_cpu_seconds": process_cpu, "process_wall_seconds": trainer.wall_seconds,
                "seconds_together": together.seconds, "cores_used": cores_used, "cores_available": cores,
                "process_run_queue_seconds": trainer.run_queue_seconds}
    return [run.verdict(
        GIL_CONTENTION,
        f"the trainer's Python threads take turns at the GIL: {len(working)} threads worked "
        f"({names}) but in the {format_seconds(together.seconds)} they ran together the process used "
        f"{cores_used:.2g} of its {cores} cores, busy {format_percent(min(1.0, busy_share))} of that "
        "time: they waited for the interpreter's lock, not for a core",
        cost, evidence,
        f"Threads run Python one at a time. Run the work of these threads in processes (env "
        f"workers as subprocesses, a SubprocessEnvManager or Gymnasium's AsyncVectorEnv), which "
        f"could use {parallel} cores; or make the threads' work release the GIL (NumPy on large "
        f"arrays, compiled code).")]


def _time_together(threads: list[PythonThread], trainer: ProcessWaits,
                   main_thread: PythonThread | None) -> ProcessMoment:
    """How long two or more of ``threads`` ran at once, with the process's CPU and run-queue
    seconds over that time (summed over each spell of it), from when each began timing and ended;
    and the main thread's CPU seconds over it, where every moment has them.

    A thread whose dump has no such moments (the main thread, a dump written before rlprof kept
    them) ran from the start to the dump: with none, this is the whole run."""
    start = ProcessMoment(0.0, 0.0, 0.0, 0.0)
    end = ProcessMoment(trainer.wall_seconds, trainer.cpu_seconds, trainer.run_queue_seconds,
                        main_thread.cpu_seconds if main_thread is not None else None)
    changes = sorted([(thread.started or start, 1) for thread in threads]
                     + [(thread.ended or end, -1) for thread in threads],
                     key=lambda change: (change[0].seconds, change[1]))
    seconds = cpu = run_queue = 0.0
    main_thread_cpu: float | None = 0.0
    running, previous = 0, start
    for moment, change in changes:
        if running >= 2:
            seconds += max(0.0, moment.seconds - previous.seconds)
            cpu += max(0.0, moment.cpu_seconds - previous.cpu_seconds)
            run_queue += max(0.0, moment.run_queue_seconds - previous.run_queue_seconds)
            if main_thread_cpu is not None and None not in (moment.main_thread_cpu_seconds,
                                                            previous.main_thread_cpu_seconds):
                main_thread_cpu += max(0.0, moment.main_thread_cpu_seconds - previous.main_thread_cpu_seconds)
            else:
                main_thread_cpu = None
        running += change
        previous = moment
    return ProcessMoment(seconds, cpu, run_queue, main_thread_cpu)
