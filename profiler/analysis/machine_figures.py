"""What a dump says about the machine: the kernel's count of each process's waits for a core, its
Python threads, and the CPU other programs took of the run's cores.

The figures come from three sections (see docs/formats.md): the root's ``scheduling`` (the
trainer process and its Python threads, :mod:`profiler.recording.scheduling`), each worker's
``scheduling`` (summed by the trainer from the worker's payloads) and the root's ``machine_load``
(:mod:`profiler.recording.machine_load`). A section that is missing reads as None; one that is
damaged reads as None too, with a sentence in :attr:`MachineFigures.problems`.
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import Any

from profiler.analysis.worker_groups import compared_workers
from profiler.records import Record

__all__ = ["MachineFigures", "MachineLoad", "OutsideProcess", "ProcessMoment", "ProcessWaits", "PythonThread",
           "WaitsInBlock", "read_machine_figures"]


class ProcessWaits(Record):
    """A process's time waiting for a core (run-queue delay), on a core, and alive, in seconds."""

    label: str
    run_queue_seconds: float
    cpu_seconds: float
    wall_seconds: float
    involuntary_switches: int

    @property
    def waiting_share(self) -> float:
        """The share of its wall time the process waited, runnable, for a core."""
        return min(1.0, self.run_queue_seconds / self.wall_seconds) if self.wall_seconds > 0 else 0.0


class ProcessMoment(Record):
    """A moment of the run, in seconds since its figures start, with the process's CPU and
    run-queue seconds, and its main thread's CPU seconds (where the dump has them), from that
    start to it."""

    seconds: float
    cpu_seconds: float
    run_queue_seconds: float
    main_thread_cpu_seconds: float | None = None


class PythonThread(Record):
    """One Python thread of the trainer, alive at the dump or ended before it; when it began
    timing and when it ended, where the dump says (None: with the run, and at the dump)."""

    name: str
    cpu_seconds: float
    run_queue_seconds: float
    started: ProcessMoment | None = None
    ended: ProcessMoment | None = None


class WaitsInBlock(Record):
    """The trainer thread's waits for a core, and its time on one, inside the runs of one block
    that rlprof read (the first :data:`profiler.recording.block_waits.READ_ALL_FIRST`, then one in
    :data:`~profiler.recording.block_waits.READ_EVERY`): ``scheduling.in_blocks``."""

    block: str
    runs_read: int
    run_queue_seconds: float
    cpu_seconds: float | None = None  # None in a file that does not say it

    def over(self, runs: int) -> float:
        """The waits of ``runs`` runs of the block, at the mean of the runs read."""
        return self.run_queue_seconds / self.runs_read * runs if self.runs_read else 0.0

    def cpu_over(self, runs: int) -> float | None:
        """The thread's CPU time in ``runs`` runs of the block, at the mean of the runs read."""
        if self.cpu_seconds is None or not self.runs_read:
            return None
        return self.cpu_seconds / self.runs_read * runs


class OutsideProcess(Record):
    """A process outside the run, with the CPU time it used over the run."""

    pid: int
    name: str
    cpu_seconds: float


class MachineLoad(Record):
    """The run's cores over the run: how busy they were, and the busiest processes outside it."""

    cores: int
    wall_seconds: float
    busy_core_seconds: float
    load_average: float | None
    outside_processes: tuple[OutsideProcess, ...]
    run_processes_cpu_seconds: float | None = None
    """The CPU time of the run's own processes, measured or not by rlprof (see
    :mod:`profiler.recording.machine_load`); None in a dump without it."""


class MachineFigures(Record):
    """Everything :func:`read_machine_figures` found; None or empty where the file does not tell."""

    trainer: ProcessWaits | None
    threads: tuple[PythonThread, ...]
    workers: tuple[ProcessWaits | None, ...]
    machine: MachineLoad | None
    problems: list[str] = field(default_factory=list)
    in_blocks: dict[str, WaitsInBlock] = field(default_factory=dict)

    @property
    def every_process_measured(self) -> bool:
        """The trainer and every worker carry the kernel's count of their waits."""
        return self.trainer is not None and all(worker is not None for worker in self.workers)

    @property
    def trainer_waits(self) -> ProcessWaits | None:
        """The trainer's waits for a core as they hold up its steps: its main thread's, where the
        dump counted them over the whole run, else its process's.

        A process's run-queue delay is summed over its threads, and threads that wait at once
        (torch's intra-op pool beside the main thread, rlprof's own) count the same wall time
        again: a Stable-Baselines3 A2C trainer on a loaded 2-core machine summed 60.8 s of waits
        over its 60.5 s, its main thread 31.8 s."""
        trainer = self.trainer
        if trainer is None:
            return None
        main = next((thread for thread in self.threads
                     if thread.name == "MainThread" and thread.started is None and thread.ended is None), None)
        if main is None:
            return trainer
        return ProcessWaits(f"{trainer.label}'s main thread", main.run_queue_seconds, main.cpu_seconds,
                            trainer.wall_seconds, trainer.involuntary_switches)

    @property
    def trainer_native_cpu_seconds(self) -> float | None:
        """The trainer's CPU time outside its Python threads: its native threads' (torch's intra-op
        pool, a BLAS library's); None without the trainer's figures or its threads'."""
        if self.trainer is None or not self.threads:
            return None
        return max(0.0, self.trainer.cpu_seconds - sum(thread.cpu_seconds for thread in self.threads))

    @property
    def measured_workers(self) -> list[ProcessWaits]:
        return [worker for worker in self.workers if worker is not None]

    @property
    def run_cpu_seconds(self) -> float:
        """CPU time of the run's own processes (the trainer and the measured workers)."""
        trainer = self.trainer.cpu_seconds if self.trainer is not None else 0.0
        return trainer + sum(worker.cpu_seconds for worker in self.measured_workers)

    @property
    def outside_core_seconds(self) -> float | None:
        """CPU time other programs took of the run's cores over the run: the cores' busy time
        less the run's own (its processes' whole CPU time where the dump has it: the workers'
        start-up before their first env, a forkserver, are the run's too); None without the
        machine's figures or the trainer's."""
        if self.machine is None or self.trainer is None:
            return None
        own = max(self.run_cpu_seconds, self.machine.run_processes_cpu_seconds or 0.0)
        return max(0.0, self.machine.busy_core_seconds - own)


def read_machine_figures(tree: dict[str, Any]) -> MachineFigures:
    """Read the scheduling and machine-load sections of a normalized tree."""
    problems: list[str] = []
    root = tree.get("scheduling")
    trainer = _process_waits(root, "trainer", "scheduling", problems)
    threads = _threads(root, problems) if trainer is not None else ()
    workers = []
    for index, entry in enumerate(compared_workers(tree)):
        label = str(entry.get("name") or f"worker {entry.get('worker_id', index)}")
        workers.append(_process_waits(entry.get("scheduling"), label, f"{label}: scheduling", problems))
    in_blocks = _in_blocks(root, problems) if trainer is not None else {}
    return MachineFigures(trainer, threads, tuple(workers),
                          _machine_load(tree.get("machine_load"), problems), problems, in_blocks)


def _process_waits(value: Any, label: str, where: str, problems: list[str]) -> ProcessWaits | None:
    if value is None:
        return None
    figures = [value.get(key) if isinstance(value, dict) else None
               for key in ("run_queue_seconds", "cpu_seconds", "wall_seconds")]
    switches = value.get("involuntary_switches") if isinstance(value, dict) else None
    if not (all(_is_seconds(figure) for figure in figures) and _is_whole(switches)):
        problems.append(f"{where} needs run_queue_seconds, cpu_seconds and wall_seconds >= 0 and "
                        "whole involuntary_switches; ignored")
        return None
    return ProcessWaits(label, *(float(figure) for figure in figures), switches)


def _threads(value: dict[str, Any], problems: list[str]) -> tuple[PythonThread, ...]:
    entries = value.get("python_threads", [])
    threads = []
    for entry in entries if isinstance(entries, list) else [None]:
        if not (isinstance(entry, dict) and isinstance(entry.get("name"), str)
                and _is_seconds(entry.get("cpu_seconds")) and _is_seconds(entry.get("run_queue_seconds"))):
            problems.append("scheduling.python_threads is malformed; ignored")
            return ()
        threads.append(PythonThread(entry["name"], float(entry["cpu_seconds"]), float(entry["run_queue_seconds"]),
                                    _moment(entry, "started", "start", problems),
                                    _moment(entry, "ended", "end", problems)))
    return tuple(threads)


def _in_blocks(value: dict[str, Any], problems: list[str]) -> dict[str, WaitsInBlock]:
    entries = value.get("in_blocks", {})
    if not isinstance(entries, dict):
        problems.append("scheduling.in_blocks is not an object; ignored")
        return {}
    in_blocks = {}
    for block, entry in entries.items():
        runs = entry.get("runs_read") if isinstance(entry, dict) else None
        seconds = entry.get("run_queue_seconds") if isinstance(entry, dict) else None
        cpu = entry.get("cpu_seconds") if isinstance(entry, dict) else None
        if not (_is_whole(runs) and _is_seconds(seconds) and (cpu is None or _is_seconds(cpu))):
            problems.append(f"scheduling.in_blocks[{block!r}] needs whole runs_read, run_queue_seconds >= 0 and "
                            "cpu_seconds >= 0 where given; ignored")
            continue
        in_blocks[block] = WaitsInBlock(block, int(runs), float(seconds), None if cpu is None else float(cpu))
    return in_blocks


def _moment(entry: dict[str, Any], when: str, moment: str, problems: list[str]) -> ProcessMoment | None:
    """A thread's ``{when}_seconds`` with its ``process_at_{moment}`` figures (None where the
    dump has none: written before rlprof kept them, or unreadable)."""
    seconds, figures = entry.get(f"{when}_seconds"), entry.get(f"process_at_{moment}")
    if seconds is None and figures is None:
        return None
    cpu = figures.get("cpu_seconds") if isinstance(figures, dict) else None
    run_queue = figures.get("run_queue_seconds") if isinstance(figures, dict) else None
    if not all(_is_seconds(figure) for figure in (seconds, cpu, run_queue)):
        problems.append(f"scheduling.python_threads: {entry['name']}'s {when}_seconds and process_at_{moment} "
                        "are malformed; its whole run is read instead")
        return None
    main_thread = figures.get("main_thread_cpu_seconds")
    return ProcessMoment(float(seconds), float(cpu), float(run_queue),
                         float(main_thread) if _is_seconds(main_thread) else None)


def _machine_load(value: Any, problems: list[str]) -> MachineLoad | None:
    if value is None:
        return None
    try:
        cores = value["cores"]
        outside = tuple(OutsideProcess(int(entry["pid"]), str(entry["name"]), float(entry["cpu_seconds"]))
                        for entry in value["outside_processes"])
        load = value.get("load_average_1min")
        run_processes = value.get("run_processes_cpu_seconds")
        machine = MachineLoad(len(cores), float(value["wall_seconds"]), float(value["busy_core_seconds"]),
                              None if load is None else float(load), outside,
                              None if run_processes is None else float(run_processes))
    except (TypeError, KeyError, ValueError, AttributeError):
        machine = None
    if (machine is None or machine.cores < 1 or not _is_seconds(machine.wall_seconds)
            or not _is_seconds(machine.busy_core_seconds)
            or not (machine.run_processes_cpu_seconds is None or _is_seconds(machine.run_processes_cpu_seconds))):
        problems.append("machine_load needs cores, wall_seconds, busy_core_seconds and "
                        "outside_processes (and, where it has it, run_processes_cpu_seconds in seconds); ignored")
        return None
    return machine


def _is_whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_seconds(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value) and value >= 0)
