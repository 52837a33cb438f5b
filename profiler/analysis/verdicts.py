"""The verdict engine: what limits a dumped run, what it costs, the evidence, and what to change.

Figures are not the product; the verdict is. :func:`judge_run` turns a dumped run (the JSON-ready
tree, rlprof's or ML-Agents') into verdicts ranked by the wall time they cost. ``rlprof analyze``
(text and JSON), ``rlprof report`` and ``rlprof demo`` all print these, from this module only, so
they never disagree; every threshold is a named constant below, defined once.

A verdict must be supported by its evidence. The rules, each with its thresholds:

``straggler``
    A worker whose reply is the last one ready in far more than its fair share (1/N) of vector
    steps (:data:`STRAGGLER_LAST_SHARE_BEYOND_FAIR`), whose waits as last cost a meaningful share of
    the training loop (:data:`STRAGGLER_MIN_COST_SHARE`; the loop as ``transport_bound``'s), and
    whose own env compute, beyond the other
    workers', explains that wait (:data:`STRAGGLER_MIN_COMPUTE_EXPLAINED`) — a worker that is late
    because it is sent its actions last or wakes up late is not slow. Cost: the time the steps
    waited on it after every other worker had replied. Files without critical-path counters get a
    straggler inferred from env compute (:data:`INFERRED_STRAGGLER_MIN_EXCESS`), said so plainly.
    Otherwise a ``workers_balanced`` finding says so, with the figures. A mean ``env.step`` a few
    percent above the others' never makes a straggler. The advice tells an env that waits on
    something other than a CPU from one that computes (:mod:`profiler.analysis.straggler_cause`).
``cpu_oversubscription``
    More workers than cores, and either the envs need more CPU per vector step than the cores
    can give in the time the busiest worker alone would take — the env CPU per step summed over
    workers, over the cores available, exceeds the busiest worker's own CPU per step; that excess
    over every step is the cost, a lower bound — or, when other programs load the machine too,
    the workers' env calls spent their wall time off the CPU while their CPU work was a real load
    on the cores (:data:`CPU_MIN_DEMAND_SHARE`); the mean worker's time off the CPU is then the
    cost, and the title says "likely". Either cost must reach :data:`CPU_MIN_COST_SHARE`. Where
    the dump has the kernel's count of every process's waits for a core (run-queue delay), the
    title quotes the longest of them, and time off the CPU is no longer read as waiting: other
    programs' part of the waits is the ``outside_load`` verdict. Workers spread over several
    Ray nodes are judged node by node, each on its own cores (:mod:`profiler.analysis.node_load`):
    a crowded node is named among idle ones.
``transport_bound``
    The pipe — sending, receiving and decoding, and the wait beyond the workers' compute (latency,
    wake-up) — costs more than the env compute and at least :data:`TRANSPORT_MIN_SHARE` of the
    training loop (the wall time less the start-up and end, where the trainer's timeline tells
    them: :func:`~profiler.analysis.untimed_gaps.training_loop_seconds`), and the CPU is not
    the limit (with CPU oversubscribed the pipe looks slow too, because
    every process waits for a core). The trainer's own waits for a core inside its steps, where
    the dump has them (``scheduling.in_blocks``: the kernel's count read around one step in
    seven), are left out of the pipe's time weighed against the envs' and of its cost: woken
    workers or other programs held the core, the pipe did no work then. The step's split does not
    say which of its parts each wait fell in, so a pipe that outweighs the envs only with the
    waits in it is said among what the analysis cannot tell. For workers that are
    Ray actors (metadata ``worker_transport`` ``"ray"``) the transport is Ray's actor calls and
    object store round trips, and the advice is theirs.
``trainer_bound``
    The trainer's own blocks (their self time, outside the env manager's blocks) take at least
    :data:`TRAINER_MIN_SHARE` of the training loop and more than the vector steps; the top ones are
    named, each from :data:`TRAINER_BLOCK_MIN_SHARE` of the loop. Blocks that ran only before the
    loop's first step or after its last (a timed ``load_dataset``) are not the loop's, and left out.
``env_bound``
    The env compute inside the vector step takes at least :data:`ENV_MIN_SHARE` of the training loop
    and the CPU is not oversubscribed, nor taken by other programs (``outside_load``).
``outside_load``, ``torch_threads`` and ``gil_contention``
    Other programs' load on the run's cores, torch's intra-op threads taking the env workers'
    cores, and Python threads queued for the GIL: rules of
    :mod:`profiler.analysis.machine_verdicts`, from the kernel's counts where the dump has them.
``untimed``
    The wall time outside any block (the root's self time) is at least :data:`UNTIMED_MIN_SHARE`.
    Where the run sampled the trainer's stack (``rlprof run``), the verdict names the
    :data:`UNTIMED_PLACES_NAMED` places that took most of it, with their sampling error. Where the
    timeline tells the training loop from the run's start-up and end, it says how much fell in the
    loop, or, from :data:`UNTIMED_START_AND_END_SHARE` of it outside the loop, that it is paid once
    per run, and then also the part inside the loop where that part is at least
    :data:`UNTIMED_MIN_SHARE` of the loop. A run without vector steps (a program learning from a
    dataset) has its start-up told by its first policy call or update instead.
``policy_bound``, ``update_bound`` and ``rollout_with_grad``
    The phases ``rlprof run`` times without edits, in the user's terms (the policy's inference,
    the update): rules of :mod:`profiler.analysis.phase_verdicts`. Where one of the first two is
    told, ``trainer_bound`` is not: it would name the same blocks less precisely.
``memory_leak``
    A process's memory (RSS, from the samples in the dump's ``memory`` section) grew steadily: by
    at least :data:`LEAK_MIN_GROWTH_BYTES` and :data:`LEAK_MIN_GROWTH_SHARE` of where it started,
    with each quarter of its samples higher than the one before by at least
    :data:`LEAK_MIN_QUARTER_RISE_SHARE` of the mean rise per quarter — growth that goes on all run
    long, not a warm-up that levels off — over at least :data:`LEAK_MIN_SAMPLES` samples. It costs
    no wall time (its cost is 0), but a run that keeps it up ends out of memory; the blocks that
    kept the most, when allocations were tracked, are named.

What a file cannot tell (no critical path, no CPU time, no cores, no per-worker trees) is listed
in :attr:`RunVerdicts.cannot_tell`, in plain words, rather than guessed.

Why this module is long: every rule is here on purpose, so that one place decides what rlprof
tells a user (the CLI, the report, the demo and ``rlprof run`` print the same verdicts) and every
threshold is defined once. The figures the rules read are computed elsewhere
(:mod:`profiler.analysis.step_time`, :mod:`profiler.analysis.run_measurements`).
"""

from __future__ import annotations

import math
from dataclasses import field
from typing import TYPE_CHECKING, Any

from profiler.analysis.block_stats import walk_nodes
from profiler.analysis.machine_figures import MachineFigures, read_machine_figures
from profiler.analysis.device_report import GPU_IDLE, LAUNCH_ONLY, device_verdicts
from profiler.analysis.memory_advice import allocations_advice, made_by_rlprof_run, more_samples_advice
from profiler.analysis.machine_verdicts import (
    CPU_MIN_COST_SHARE,
    GIL_CONTENTION,
    OUTSIDE_LOAD,
    TORCH_THREADS,
    gil_contention,
    kernel_count,
    outside_load,
    torch_threads,
)
from profiler.analysis.node_load import judge_per_node
from profiler.analysis.phase_verdicts import (
    EVALUATION_BOUND, PHASE_KINDS, POLICY_BOUND, ROLLOUT_WITH_GRAD, UPDATE_BOUND, phase_verdicts,
)
from profiler.analysis.run_measurements import RunMeasurements, WorkerMeasurements, read_measurements
from profiler.analysis.run_settings import RunSettings, read_run_settings
from profiler.analysis.step_time import (
    ENV_COMPUTE,
    IN_TRAINER_ENV_BLOCKS,
    SINGLE_ENV_STEP_BLOCKS,
    STEP_LAYOUTS,
    TRANSPORT,
    WAIT_LATENCY,
    StepBreakdown,
    step_breakdowns,
    trainer_env_call_seconds,
    trainer_env_step_calls,
    trainer_nodes,
    trainer_step_blocks,
)
from profiler.analysis.straggler_cause import EnvTimeSplit, env_time_split
from profiler.analysis.text_format import MEBIBYTE, format_bytes, format_percent, format_seconds
from profiler.analysis.training_phases import training_start
from profiler.analysis.untimed_gaps import (
    UntimedGaps,
    blocks_outside_the_loop,
    loop_share,
    loop_share_text,
    training_loop_seconds,
    untimed_gaps,
)
from profiler.analysis.untimed_places import UntimedPlace, untimed_places
from profiler.records import Record

if TYPE_CHECKING:  # imported only for the runs that sampled their memory (see _memory_leaks)
    from profiler.analysis.memory_report import ProcessMemoryFigures

__all__ = [
    "CPU_MIN_COST_SHARE",
    "CPU_MIN_DEMAND_SHARE",
    "CPU_OVERSUBSCRIPTION",
    "ENV_BOUND",
    "ENV_MIN_SHARE",
    "GIL_CONTENTION",
    "INFERRED_STRAGGLER_MIN_EXCESS",
    "KINDS",
    "LEAK_MIN_GROWTH_BYTES",
    "LEAK_MIN_GROWTH_SHARE",
    "LEAK_MIN_QUARTER_RISE_SHARE",
    "LEAK_MIN_SAMPLES",
    "LEAK_TOP_BLOCKS",
    "MEMORY_LEAK",
    "OUTSIDE_LOAD",
    "STRAGGLER",
    "STRAGGLER_LAST_SHARE_BEYOND_FAIR",
    "STRAGGLER_MIN_COMPUTE_EXPLAINED",
    "STRAGGLER_MIN_COST_SHARE",
    "TRAINER_BLOCK_MIN_SHARE",
    "TRAINER_BOUND",
    "TRAINER_MIN_SHARE",
    "TRAINER_TOP_BLOCKS",
    "TORCH_THREADS",
    "TRANSPORT_BOUND",
    "TRANSPORT_MIN_SHARE",
    "UNEVEN_SPLIT_PER_ENV_TOLERANCE",
    "UNTIMED",
    "UNTIMED_MIN_SHARE",
    "WORKERS_BALANCED",
    "RunVerdicts",
    "Verdict",
    "judge_run",
]

# --- thresholds: each defined once, here ----------------------------------------------------------

STRAGGLER_LAST_SHARE_BEYOND_FAIR = 0.5
"""A straggler replies last in at least its fair share 1/N of the steps plus this fraction of the
rest: 75% of steps with 2 workers, 62.5% with 4, 56.25% with 8. Identical workers spread "last"
around 1/N; one slow worker is last in nearly every step."""

STRAGGLER_MIN_COST_SHARE = 0.05
"""A straggler's waits as last (after every other reply was in) add up to at least 5% of the
training loop; a worker that is often last by microseconds costs nothing worth naming."""

STRAGGLER_MIN_COMPUTE_EXPLAINED = 0.5
"""A straggler's env compute exceeds the other workers' mean by at least half of its waits as
last: its env is slow. A worker that is last by send order or wake-up computes no longer."""

INFERRED_STRAGGLER_MIN_EXCESS = 0.5
"""Without critical-path counters, a worker is inferred to be a straggler when it computed at
least 50% longer than the other workers' mean (and the extra costs STRAGGLER_MIN_COST_SHARE)."""

UNEVEN_SPLIT_PER_ENV_TOLERANCE = 1.25
"""A straggler that steps more envs than the others is told the split is uneven, not that its env
is slow, when its compute per env is at most 25% above the others' mean."""

CPU_MIN_DEMAND_SHARE = 0.05
"""When more workers than cores share the CPU but the cores floor does not explain the wall time
(other programs load the machine too), the workers' env time off the CPU is read as waiting for a
core only if their env CPU time is at least 5% of what the cores deliver over the steps: below
that, env work is too light a load, and its time off the CPU is sleep or I/O."""

TRANSPORT_MIN_SHARE = 0.10
"""The pipe is a verdict when the steps' time beyond the env compute is 10% of the training loop
(and the pipe's own work, the trainer's waits for a core left out, more than the env compute)."""

CORE_WAITS_SAID_FROM = 0.10
"""The pipe's verdict says how long the trainer waited for a core inside its steps, left out of
the pipe's time, when that is at least this share of the steps' time beyond the env compute."""

LARGE_OBSERVATION_BYTES = 16 * 1024
"""A vector step's observations (all its envs') are worth making smaller, or sending through shared
memory, from this many bytes: pickled, copied and unpickled at a nanosecond or two a byte, they
then cost as much as a round trip's own tens of microseconds. CartPole's four envs send 64."""

TRAINER_MIN_SHARE = 0.40
"""The trainer's own blocks are a verdict when they take 40% of the training loop (and more than
the steps)."""

TRAINER_TOP_BLOCKS = 3
"""How many of the trainer's blocks a trainer_bound verdict names, at the most."""

TRAINER_BLOCK_MIN_SHARE = 0.01
"""A trainer_bound verdict names its costliest block, and the next ones from 1% of the training loop."""

ENV_MIN_SHARE = 0.30
"""Env compute is a verdict when it takes 30% of the training loop."""

UNTIMED_MIN_SHARE = 0.10
"""Time outside any block is a verdict from 10% of the wall time."""

UNTIMED_PLACES_NAMED = 3
"""Places the ``untimed`` verdict names (the costliest), when the run sampled its stack."""

UNTIMED_START_AND_END_SHARE = 0.5
"""From this share of the untimed time before the training loop's first vector step and after
its last (start-up and end, where the timeline tells them), the ``untimed`` verdict says that
its time is paid once per run, not in the loop: the advice to time or cut the loop's lines would
point at the wrong place."""

LEAK_MIN_GROWTH_BYTES = 16 * 1024 * 1024
"""A memory leak is named from 16 MiB of growth (median of the last quarter of the samples over
the first): less is within what caches, arenas and lazy imports add to a healthy process."""

LEAK_MIN_GROWTH_SHARE = 0.10
"""... and from 10% of the process's memory at the start, so a 20 GB trainer is not called leaking
for what one more batch in flight takes."""

LEAK_MIN_QUARTER_RISE_SHARE = 0.25
"""Steady growth: each quarter of the samples sits above the one before by at least a quarter of
the mean rise per quarter. A warm-up rises in the first quarter and then stays flat."""

LEAK_MIN_SAMPLES = 8
"""Fewer samples than this say nothing about a trend."""

REPLAY_BUFFER_GAUGE = "sb3.replay_buffer.filled_mb"
"""The gauge ``rlprof run`` sets, while memory is sampled, to the MiB of a Stable-Baselines3
replay buffer's arrays filled so far (``profiler.automatic.sb3_phases``)."""

REPLAY_BUFFER_SLACK = 1.5
"""A trainer whose rise (its first sample to its last) is at most this many times what its replay
buffer filled meanwhile is not named a leak: the buffer's pages, resident as it fills, are most of
it (the rest: the arrays made to sample batches, the optimizer's state, the allocator's slack)."""

LEAK_TOP_BLOCKS = 3
"""How many of the leaking process's blocks (by bytes kept) a memory_leak verdict names."""

RAY_TRANSPORT = "ray"
"""The metadata ``worker_transport`` of a run whose env workers were Ray actors."""

# --- kinds ------------------------------------------------------------------------------------------

STRAGGLER = "straggler"
WORKERS_BALANCED = "workers_balanced"
CPU_OVERSUBSCRIPTION = "cpu_oversubscription"
TRANSPORT_BOUND = "transport_bound"
TRAINER_BOUND = "trainer_bound"
ENV_BOUND = "env_bound"
UNTIMED = "untimed"
MEMORY_LEAK = "memory_leak"
KINDS = (STRAGGLER, CPU_OVERSUBSCRIPTION, OUTSIDE_LOAD, TORCH_THREADS, GIL_CONTENTION, TRANSPORT_BOUND,
         *PHASE_KINDS, TRAINER_BOUND, ENV_BOUND, GPU_IDLE, LAUNCH_ONLY, UNTIMED, MEMORY_LEAK, WORKERS_BALANCED)
"""Every kind of verdict, in the order used to break ties of cost."""


class Verdict(Record):
    """One finding: what it is, the wall time it costs, the figures behind it, what to change.

    ``share`` is ``cost_seconds`` over the run's wall time (``None`` for a run of zero wall time).
    ``evidence`` holds plain JSON values (numbers, strings, lists, dicts), so it can be printed and
    dumped as it is.
    """

    kind: str
    title: str
    cost_seconds: float
    share: float | None
    evidence: dict[str, Any]
    suggestion: str

    def as_dict(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict (the shape ``rlprof analyze --format json`` prints)."""
        return {"kind": self.kind, "title": self.title, "cost_seconds": self.cost_seconds,
                "share": self.share, "evidence": self.evidence, "suggestion": self.suggestion}


class RunVerdicts(Record):
    """A run's verdicts, costliest first, and what its file cannot tell."""

    wall_seconds: float
    verdicts: tuple[Verdict, ...]
    cannot_tell: tuple[str, ...] = ()

    def of_kind(self, kind: str) -> list[Verdict]:
        return [verdict for verdict in self.verdicts if verdict.kind == kind]

    @property
    def kinds(self) -> list[str]:
        """The kinds present, in rank order."""
        return [verdict.kind for verdict in self.verdicts]

    def as_dict(self) -> dict[str, Any]:
        return {"wall_seconds": self.wall_seconds,
                "verdicts": [verdict.as_dict() for verdict in self.verdicts],
                "cannot_tell": list(self.cannot_tell)}


def judge_run(
    tree: dict[str, Any],
    measurements: RunMeasurements | None = None,
    breakdowns: list[StepBreakdown] | None = None,
    machine: MachineFigures | None = None,
) -> RunVerdicts:
    """The verdicts on a normalized timer tree (see :func:`profiler.load_timing_tree`).

    ``measurements``, ``breakdowns`` and ``machine`` may be passed when the caller has them
    already; they are read from ``tree`` otherwise.
    """
    measurements = measurements or read_measurements(tree)
    if breakdowns is None:
        breakdowns = step_breakdowns(tree, measurements)
    run = _Run(tree, measurements, breakdowns)
    machine = machine or read_machine_figures(tree)
    # Workers on several machines compete for their own machine's cores: judged per node.
    cpu = judge_per_node(run, lambda node_run: _cpu_oversubscription(node_run, machine))
    if cpu is None:
        cpu = _cpu_oversubscription(run, machine)
    # Other programs' load is a verdict of its own, beside what the run's design costs.
    outside = outside_load(run, machine, own_cost=sum(verdict.cost_seconds for verdict in cpu))
    pool = torch_threads(run, machine)
    phases = phase_verdicts(run)
    # A rollout run with grad puts the rollout's own code in the update blocks' self time: the
    # trainer's blocks would blame the update for it.
    named_a_phase = any(verdict.kind in (POLICY_BOUND, UPDATE_BOUND, EVALUATION_BOUND, ROLLOUT_WITH_GRAD)
                        for verdict in phases)
    gil = gil_contention(run, machine)
    verdicts = [*_workers(run, machine), *cpu, *outside, *pool, *gil,
                *_transport_bound(run, machine, cpu_limited=bool(cpu)), *phases,
                *([] if named_a_phase else _trainer_bound(run)),
                *_env_bound(run, machine, cpu_limited=bool(cpu or outside or pool), gil_bound=bool(gil)),
                *device_verdicts(run),
                *_untimed(run),
                *_memory_leaks(run)]
    verdicts.sort(key=lambda verdict: (-verdict.cost_seconds, KINDS.index(verdict.kind)))
    problems = measurements.problems + machine.problems + list(run.settings.problems)
    return RunVerdicts(run.wall, tuple(verdicts), tuple(run.cannot_tell + problems))


class _Run(Record):
    """What every rule reads: the tree, its measurements, the vector step, and notes of the unknown."""

    tree: dict[str, Any]
    measurements: RunMeasurements
    breakdowns: list[StepBreakdown]
    cannot_tell: list[str] = field(default_factory=list)

    @property
    def settings(self) -> RunSettings:
        """How the run was set up (shared memory, envs per worker, how it was started)."""
        return read_run_settings(self.tree)

    @property
    def wall(self) -> float:
        return float(self.tree["total"])

    @property
    def step(self) -> StepBreakdown | None:
        """The vectorized step the run spends most time in (resets are not steps)."""
        steps = [breakdown for breakdown in self.breakdowns if breakdown.is_vector_step]
        return max(steps, key=lambda breakdown: breakdown.total, default=None)

    @property
    def vector_steps(self) -> int:
        """Vector steps taken: from the critical-path counters, else the step block's calls."""
        counted = [path.vector_steps for _, path in self.measurements.critical_paths]
        if counted:
            return max(counted)
        return self.step.calls if self.step else 0

    @property
    def has_workers(self) -> bool:
        """The run's steps ran in workers (processes or threads): the file has their entries, or
        their blocks were merged under the step. A run without (a single process stepping its
        envs in place) is told nothing about workers it does not have."""
        return bool(self.measurements.workers) or (self.step is not None and self.step.worker_time > 0)

    def share(self, seconds: float) -> float | None:
        return seconds / self.wall if self.wall > 0 else None

    def verdict(self, kind: str, title: str, cost: float, evidence: dict[str, Any],
                suggestion: str) -> Verdict:
        return Verdict(kind, title, cost, self.share(cost), _json_ready(evidence), suggestion)


# --- straggler or balanced --------------------------------------------------------------------------


def _workers(run: _Run, machine: MachineFigures) -> list[Verdict]:
    workers = run.measurements.workers
    if run.step is None or len(workers) < 2:
        if run.has_workers and not run.measurements.has_workers_section:
            run.cannot_tell.append(
                "which worker holds up the step: this file has no workers section (no per-worker "
                "trees), so a straggler cannot be told from pipe latency")
        return []
    if run.measurements.every_worker_has_critical_path:
        if not any(worker.critical_path.vector_steps for worker in workers):  # type: ignore[union-attr]
            # No reply was counted: their timers never reached the trainer (their channel
            # entries say why), so nothing tells a straggler from balanced workers.
            run.cannot_tell.append(
                "which worker holds up the step: the critical path counted no vector step (the "
                "workers' timers did not reach the trainer; their channel entries say why)")
            return []
        return [_straggler_from_critical_path(run, workers, machine)]
    run.cannot_tell.append(
        "which worker each step waited on: this file has no critical-path counters (written by "
        "ML-Agents or an older rlprof); a straggler is inferred from env compute alone")
    return [_straggler_from_compute(run, workers, machine)]


def _compute_seconds(worker: WorkerMeasurements) -> float:
    """A worker's env compute (wall): its measured env time, else its busy time in its tree."""
    return worker.env_time.wall_seconds if worker.env_time is not None else worker.busy_seconds


def _excess_over_others(workers: list[WorkerMeasurements], worker: WorkerMeasurements) -> float:
    """Seconds ``worker`` computed beyond the mean of the other workers."""
    others = [_compute_seconds(other) for other in workers if other is not worker]
    return _compute_seconds(worker) - sum(others) / len(others)


def _env_time_split_of(worker: WorkerMeasurements, workers: list[WorkerMeasurements],
                       machine: MachineFigures) -> EnvTimeSplit | None:
    """Where ``worker``'s env time went, with its waits for a core where the dump counted them
    (the machine figures list the workers in the measurements' order)."""
    index = next(index for index, other in enumerate(workers) if other is worker)
    waits = machine.workers[index] if index < len(machine.workers) else None
    return env_time_split(worker.env_time, waits)


def _straggler_from_critical_path(run: _Run, workers: list[WorkerMeasurements], machine: MachineFigures) -> Verdict:
    count = len(workers)
    fair = 1.0 / count
    needed = fair + STRAGGLER_LAST_SHARE_BEYOND_FAIR * (1.0 - fair)
    most_last = max(workers, key=lambda worker: worker.critical_path.last_to_reply)  # type: ignore[union-attr]
    path = most_last.critical_path
    assert path is not None
    cost = path.wait_as_last_seconds
    excess = _excess_over_others(workers, most_last)
    evidence = {
        "worker": most_last.label,
        "worker_id": most_last.worker_id,
        "workers": count,
        "vector_steps": path.vector_steps,
        "last_to_reply": path.last_to_reply,
        "last_share": path.last_share,
        "fair_share": fair,
        "straggler_last_share_from": needed,
        "wait_as_last_seconds": cost,
        "wait_as_last_per_step_seconds": cost / path.last_to_reply if path.last_to_reply else 0.0,
        "env_compute_beyond_others_seconds": excess,
        "last_share_by_worker": {worker.label: worker.critical_path.last_share  # type: ignore[union-attr]
                                 for worker in workers},
    }
    if path.histogram_counts:
        evidence["wait_as_last_histogram"] = {"bounds_seconds": list(path.histogram_bounds_seconds),
                                              "counts": list(path.histogram_counts)}
    split = _env_time_split_of(most_last, workers, machine)
    often = path.last_share >= needed
    costly = (loop_share(run.tree, cost) or 0.0) >= STRAGGLER_MIN_COST_SHARE
    explained = excess >= STRAGGLER_MIN_COMPUTE_EXPLAINED * cost
    if often and costly and explained:
        return run.verdict(
            STRAGGLER,
            f"{most_last.label} holds up the vector step: its reply came last in "
            f"{format_percent(path.last_share)} of {path.vector_steps} steps (fair share "
            f"{format_percent(fair)}), and the steps waited {format_seconds(cost)} on it alone",
            cost, {**evidence, **(split.evidence() if split else {})},
            _straggler_advice(most_last, workers, run.vector_steps, run.settings, split))
    if not often:
        reason = (f"the worker most often last, {most_last.label}, is last in "
                  f"{format_percent(path.last_share)} of steps (fair share {format_percent(fair)}; a "
                  f"straggler is last in {format_percent(needed)}) and the steps waited "
                  f"{format_seconds(cost)} on it alone")
        return run.verdict(WORKERS_BALANCED, f"workers are balanced: {reason}", 0.0, evidence,
                           "Nothing to fix between workers.")
    # Last in most steps, yet no straggler: the title says which test it failed, or a reader
    # sees "balanced" beside "last in 90% of steps" and cannot tell why.
    reasons = []
    if not costly:
        reasons.append(f"the steps waited only {format_seconds(cost)} on it alone, "
                       f"{loop_share_text(run.tree, cost)} (a straggler's waits cost "
                       f"from {format_percent(STRAGGLER_MIN_COST_SHARE)})")
    if not explained:
        reasons.append(_lateness_not_by_its_env(excess, cost))
    costing = f", costing {format_seconds(cost)}" if costly else ""
    reason = (f"{most_last.label} replies last in {format_percent(path.last_share)} of steps (fair share "
              f"{format_percent(fair)}){costing}, but {', and '.join(reasons)}")
    return run.verdict(WORKERS_BALANCED, f"workers are balanced: {reason}", 0.0, evidence,
                       "Nothing to fix between workers.")


def _lateness_not_by_its_env(excess: float, cost: float) -> str:
    """Why a worker often last is not slow: its env computes no more than the others', or too
    little more to explain its waits as last (``excess`` below half of ``cost``)."""
    if excess <= 0.0:
        return ("its env computes no longer than the others': it is late by send order, wake-up or "
                "the pipe, not by its env")
    return (f"its env computes only {format_seconds(excess)} more than the others' mean, "
            f"{format_percent(excess / cost)} of its waits as last: it is late mostly by send order, "
            "wake-up or the pipe")


def _straggler_from_compute(run: _Run, workers: list[WorkerMeasurements], machine: MachineFigures) -> Verdict:
    slowest = max(workers, key=_compute_seconds)
    excess = _excess_over_others(workers, slowest)
    others_mean = _compute_seconds(slowest) - excess
    ratio = excess / others_mean if others_mean > 0 else 0.0
    # In lockstep every step waits for the slowest worker: what it computes beyond the others.
    cost = max(0.0, min(excess, run.step.total if run.step else 0.0))
    evidence = {
        "worker": slowest.label,
        "worker_id": slowest.worker_id,
        "workers": len(workers),
        "env_compute_seconds": _compute_seconds(slowest),
        "others_mean_env_compute_seconds": others_mean,
        "above_others": ratio,
        "straggler_above_others_from": INFERRED_STRAGGLER_MIN_EXCESS,
        "estimated_wait_seconds": cost,
        "critical_path": "not recorded in this file",
    }
    if ratio >= INFERRED_STRAGGLER_MIN_EXCESS and (loop_share(run.tree, cost) or 0.0) >= STRAGGLER_MIN_COST_SHARE:
        split = _env_time_split_of(slowest, workers, machine)
        return run.verdict(
            STRAGGLER,
            f"{slowest.label} likely holds up the vector step: it computed "
            f"{format_percent(ratio)} longer than the other workers (inferred from env compute; "
            "this file does not record which worker each step waited on)",
            cost, {**evidence, **(split.evidence() if split else {})},
            _straggler_advice(slowest, workers, run.vector_steps, run.settings, split))
    return run.verdict(
        WORKERS_BALANCED,
        f"workers are balanced by env compute: the slowest, {slowest.label}, computed "
        f"{format_percent(ratio)} longer than the others (a straggler from "
        f"{format_percent(INFERRED_STRAGGLER_MIN_EXCESS)}; this file does not record which worker "
        "each step waited on)",
        0.0, evidence, "Nothing to fix between workers.")


def _straggler_advice(worker: WorkerMeasurements, workers: list[WorkerMeasurements], steps: int,
                      settings: RunSettings, split: EnvTimeSplit | None) -> str:
    extra_envs = _more_envs_than_the_others(worker, workers, steps)
    if extra_envs is not None:
        mine, others = extra_envs
        return (f"{worker.label} steps {mine:.3g} envs per vector step where the other workers step "
                f"{others:.3g} on average, and its envs are no slower than theirs: the step waits "
                "for its extra env. Give every worker as many envs: a number of envs that is a "
                f"multiple of the workers ({settings.envs_per_worker_option('auto')} spreads them "
                "within one env of each other, so a multiple of the cores evens them).")
    label = worker.label
    if split is not None and split.blocked:
        return (f"{split.sentence(label)} Find what {label}'s env waits on in its step: a sleep, a "
                "file or network read, a lock, a simulator or a server in another process "
                f"(`rlprof report` shows {label}'s own blocks). Until it is fixed every vector step "
                "waits for it.")
    # Known to compute, a slow resource is not among the causes left.
    causes = "a costlier code path" if split is not None and split.core_wait_share is not None else "a slow resource"
    said = f"{split.sentence(label)} " if split is not None else ""
    return (f"{said}Find what makes {label}'s env slower than the others' (its seed or level, "
            f"longer episodes, {causes}; `rlprof report` shows {label}'s own blocks). "
            "Until it is fixed every vector step waits for it; spreading its envs over other "
            f"workers ({settings.envs_per_worker_option('k')}) evens the load.")


def _more_envs_than_the_others(
    worker: WorkerMeasurements, workers: list[WorkerMeasurements], steps: int
) -> tuple[float, float] | None:
    """``(its envs, the others' mean)`` per vector step when ``worker`` steps at least half an env
    more than the others on average and its envs compute no longer each (an uneven split of the
    envs, not a slow env); None otherwise, or when the env.step counts do not tell."""
    others = [other for other in workers if other is not worker]
    if steps <= 0 or not others or any(each.env_step_calls <= 0 for each in workers):
        return None
    mine = worker.env_step_calls / steps
    others_envs = sum(other.env_step_calls for other in others) / len(others) / steps
    per_env = _compute_seconds(worker) / worker.env_step_calls
    others_per_env = sum(_compute_seconds(other) / other.env_step_calls for other in others) / len(others)
    if mine >= others_envs + 0.5 and per_env <= UNEVEN_SPLIT_PER_ENV_TOLERANCE * others_per_env:
        return mine, others_envs
    return None


# --- CPU oversubscription ---------------------------------------------------------------------------


def _cpu_oversubscription(run: _Run, machine: MachineFigures) -> list[Verdict]:
    measurements = run.measurements
    step = run.step
    if step is None or not run.has_workers:
        return []
    measured = machine.every_process_measured and bool(machine.workers)
    if measurements.workers and not measured:
        run.cannot_tell.append(
            "how long each process waited for a core: this file has no run-queue delay (the "
            "kernel's schedstat, which rlprof records on Linux), so CPU contention is "
            "inferred from the env calls' time off the CPU")
    if not measurements.every_worker_has_env_time:
        run.cannot_tell.append(
            "CPU contention: this file does not record the workers' env CPU time, so a CPU with "
            "more busy processes than cores cannot be told from slow envs or a slow pipe")
        return []
    cores = measurements.cores_available
    if cores is None:
        run.cannot_tell.append(
            "CPU contention: this file does not record the cores the run could use")
        return []
    steps = run.vector_steps
    workers = len(measurements.workers)
    if not steps or workers <= cores:
        return []  # every worker could have a core of its own
    env_times = [worker.env_time for worker in measurements.workers if worker.env_time is not None]
    cpu_per_step = sum(env_time.cpu_seconds for env_time in env_times) / steps
    busiest_per_step = max(env_time.cpu_seconds for env_time in env_times) / steps
    floor_per_step = cpu_per_step / cores
    floor_cost = min(max(0.0, floor_per_step - busiest_per_step) * steps, step.total)
    off_cpu = min(sum(env_time.off_cpu_seconds for env_time in env_times) / workers, step.total)
    demand = cpu_per_step * step.calls / (cores * step.total) if step.total > 0 else 0.0
    busy = measurements.busy_processes
    evidence = {
        "cores_available": cores,
        "busy_processes": busy,
        "workers": workers,
        "vector_steps": steps,
        "env_cpu_per_step_seconds": cpu_per_step,
        "busiest_worker_cpu_per_step_seconds": busiest_per_step,
        "cores_floor_per_step_seconds": floor_per_step,
        "step_wall_per_step_seconds": step.total / step.calls,
        "env_cpu_share_of_cores": demand,
        "env_off_cpu_seconds_mean_worker": off_cpu,
        "env_cpu_share_of_env_wall": _cpu_share(measurements.workers),
    }
    crowd = (f"{busy} busy processes (workers and trainer) share {cores} cores"
             if busy is not None else f"{workers} workers share {cores} cores")
    if (run.share(floor_cost) or 0.0) >= CPU_MIN_COST_SHARE:
        cost = floor_cost
        evidence["measured_by"] = "cores floor"
        title = (f"the CPU is the limit: the envs need {format_seconds(cpu_per_step)} of CPU per "
                 f"vector step, {crowd}, so a step takes at least {format_seconds(floor_per_step)} "
                 f"where the busiest worker alone needs {format_seconds(busiest_per_step)}")
        if measured:
            title, evidence = kernel_count(title, evidence, machine)
    elif (not measured and demand >= CPU_MIN_DEMAND_SHARE
            and (run.share(off_cpu) or 0.0) >= CPU_MIN_COST_SHARE):
        cost = off_cpu
        evidence["measured_by"] = "time off the CPU"
        title = (f"the CPU is likely the limit: {crowd}, and the workers' env calls spent "
                 f"{format_percent(1.0 - (_cpu_share(measurements.workers) or 0.0))} of their wall "
                 "time off the CPU (waiting for a core; or sleeping, if the env sleeps or waits "
                 "on I/O)")
    else:
        return []
    envs = max(workers, round(sum(worker.env_step_calls for worker in measurements.workers) / steps))
    return [run.verdict(
        CPU_OVERSUBSCRIPTION, title, cost, evidence,
        f"More workers will not help, and the pipe is not the problem. Run as many worker "
        f"processes as cores: {run.settings.envs_per_worker_auto(min(cores, envs), envs)}; or "
        f"give the run more cores (other programs on the machine take them too), or make "
        f"env.step cheaper.")]


def _cpu_share(workers: list[WorkerMeasurements]) -> float | None:
    wall = sum(worker.env_time.wall_seconds for worker in workers if worker.env_time)
    cpu = sum(worker.env_time.cpu_seconds for worker in workers if worker.env_time)
    return cpu / wall if wall > 0 else None


# --- the pipe ---------------------------------------------------------------------------------------


def _transport_bound(run: _Run, machine: MachineFigures, *, cpu_limited: bool) -> list[Verdict]:
    step = run.step
    if step is None or cpu_limited or not step.worker_time:
        return []
    transport = step.seconds_of(TRANSPORT)
    latency = step.seconds_of(WAIT_LATENCY)
    compute = step.seconds_of(ENV_COMPUTE)
    if transport + latency <= compute or (loop_share(run.tree, transport + latency) or 0.0) < TRANSPORT_MIN_SHARE:
        return []
    # The trainer's waits for a core inside its steps are neither the pipe's work nor the envs'
    # (other programs, or the workers its sends woke, held the core), and the step's split does
    # not say in which part each fell. The pipe's own time is at least what is left with every
    # one of them taken out of it, and at least the trainer's time on a core in the steps less
    # its other work there (an SB3 wrapper's, the rest is sending, receiving, decoding): it is
    # the limit only if that outweighs the envs. Its share of the loop is of a loop that waited
    # as well.
    read = machine.in_blocks.get(step.block)
    waited = read.over(step.calls) if read is not None and read.runs_read else None
    on_core = (read.cpu_over(step.calls) if read is not None else None) or 0.0
    pipe = max(transport + latency - min(waited or 0.0, transport + latency),
               min(max(0.0, on_core - step.other_trainer_seconds), transport + latency))
    if pipe <= compute:
        run.cannot_tell.append(
            f"whether the pipe is the limit: it took {format_seconds((transport + latency) / step.calls)} per step "
            f"against {format_seconds(compute / step.calls)} of env compute, but inside the steps the trainer "
            f"waited {format_seconds((waited or 0.0) / step.calls)} per step for a core (the kernel's count; in "
            f"the pipe's parts or not) and ran {format_seconds(on_core / step.calls)} per step on one; on a "
            "machine with a core free for each of the run's busy processes the pipe's own time shows")
        return []
    receive = sum(seconds for name, seconds in step.transport_blocks.items() if "receive" in name)
    send = transport - receive
    cores = run.measurements.cores_available
    cpu_measured = run.measurements.every_worker_has_env_time and cores is not None
    envs = _envs(run, step)
    settings = run.settings
    evidence = {
        "block": step.block,
        "vector_steps": step.calls,
        "send_seconds": send,
        "receive_and_decode_seconds": receive,
        "wait_beyond_compute_seconds": latency,
        "env_compute_seconds": compute,
        "pipe_per_step_seconds": pipe / step.calls,
        "env_compute_per_step_seconds": compute / step.calls,
        "training_loop_seconds": training_loop_seconds(run.tree),
        "workers": step.workers,
        "envs": envs,
        "cpu_contention": "not the limit" if cpu_measured else "not measured in this file",
    }
    caveat = ("" if cpu_measured else " (this file does not record env CPU time: an oversubscribed "
              "CPU looks the same from the trainer)")
    if waited is not None:
        evidence["trainer_core_waits_seconds"] = waited
        if read.cpu_seconds is not None:  # type: ignore[union-attr]
            evidence["trainer_on_core_seconds"] = on_core
        evidence["core_waits_steps_read"] = read.runs_read  # type: ignore[union-attr]
        if waited >= CORE_WAITS_SAID_FROM * (transport + latency):
            caveat += (f"; inside the steps the trainer also waited {format_seconds(waited / step.calls)} per step "
                       "for a core (the kernel's count), left out of the pipe's time")
    if step.workers == 1:
        round_trips = ("one worker already carries every env: the round trip itself outweighs "
                       "these envs, so step them in the trainer process (gymnasium's "
                       "SyncVectorEnv) or give each step more envs")
    elif cores is not None:
        per_worker = max(2, math.ceil(envs / cores))
        round_trips = (f"{settings.envs_per_worker_option(per_worker)} (one round trip then carries "
                       f"{per_worker} envs; {math.ceil(envs / per_worker)} processes for {envs} envs "
                       f"on {cores} cores)")
        if envs > cores:
            round_trips += (f", or {settings.envs_per_worker_option('auto')} (one worker per core, "
                            f"{cores} for {envs} envs)")
    else:
        round_trips = (f"{settings.envs_per_worker_option('k')}, k about envs / cores (one round "
                       "trip then carries k envs)")
    receive_share = receive / transport if transport > 0 else 0.0
    smaller = (f"smaller observations (crop, downsample, uint8): receiving and decoding them is "
               f"{format_percent(receive_share)} of the transport")
    step_bytes = settings.observation_bytes * envs if settings.observation_bytes is not None else None
    if step_bytes is not None:
        evidence["observation_bytes_per_step"] = step_bytes
    small_observations = step_bytes is not None and step_bytes < LARGE_OBSERVATION_BYTES
    if (run.tree.get("metadata") or {}).get("worker_transport") == RAY_TRANSPORT:
        evidence["transport"] = "Ray actor calls and object store"
        what = ("the transport is the limit: Ray's actor calls, their object store round trips and "
                "the wait beyond the workers' compute take")
        data = (f"{smaller}; results over Ray's inline limit (100 KiB by default) go through the "
                "object store, and actors on other machines add the network: keep them on the "
                "trainer's machine where the cluster allows (a placement group, node affinity)")
    else:
        what = "the pipe is the limit: sending, receiving and the wait beyond the workers' compute take"
        shared = settings.shared_memory_advice()
        data = f"{shared} and {smaller}" if shared else smaller
    in_place = (run.tree.get("metadata") or {}).get("vector_envs_in_place")
    if in_place:
        # The program's own vector env (rlprof run timed it in place): advise in its terms.
        evidence["vector_env"] = in_place
        round_trips = (f"the pipe is {in_place}'s own: envs this cheap cost less stepped in the "
                       "trainer process (Gymnasium's SyncVectorEnv, SB3's DummyVecEnv), or several to "
                       "a worker process (rlprof's SubprocessEnvManager with envs_per_worker; "
                       "rlprof run --vector-env=async builds one in place of an AsyncVectorEnv)")
        if "AsyncVectorEnv" not in in_place:
            data = smaller
    if "SyncVectorEnv" in str((run.tree.get("metadata") or {}).get("vector_env_substitution", "")).split(", "):
        # The program's SyncVectorEnv has no pipe: --vector-env put this one there.
        evidence["transport"] = "rlprof's substitution (--vector-env replaced SyncVectorEnv)"
        what = ("this pipe is rlprof's substitution's, not your program's (--vector-env replaced "
                "SyncVectorEnv, which steps its envs in your process): " + what)
    if small_observations:  # their bytes cost the pipe next to nothing: only its round trips count
        advice = [round_trips]
    else:
        advice = [data, round_trips] if receive >= send else [round_trips, data]
    return [run.verdict(
        TRANSPORT_BOUND,
        f"{what} {format_seconds(pipe / step.calls)} per step against "
        f"{format_seconds(compute / step.calls)} of env compute{caveat}",
        pipe, evidence, ("Cut round trips: " if small_observations else "Cut round trips and bytes: ")
        + "; ".join(advice) + ".")]


def _envs(run: _Run, step: StepBreakdown) -> int:
    """Envs stepped per vector step: merged env.step calls per step, at least one per worker."""
    calls = sum(worker.env_step_calls for worker in run.measurements.workers)
    per_step = round(calls / step.calls) if calls else 0
    return max(step.workers, per_step)


# --- the trainer ------------------------------------------------------------------------------------

_ENV_SIDE_BLOCKS = frozenset(
    name for layout in STEP_LAYOUTS if layout.wait is not None
    for name in (layout.step, layout.wait, *layout.transport))
"""Blocks of a lockstep env manager: their subtrees are env-side time, not the trainer's code."""


def _trainer_blocks(tree: dict[str, Any]) -> dict[str, float]:
    """Self time of the trainer's own blocks, summed by name, outside the env manager's blocks and
    the env calls of an env the program steps itself.

    ML-Agents times its policy inside ``env_step``; the blocks under it are the trainer's, its own
    self time (sending, waiting, receiving) is not.
    """
    self_times: dict[str, float] = {}
    for node in trainer_nodes(tree, leave_out=_is_env_side):
        if node["name"] != "env_step":
            self_times[node["name"]] = self_times.get(node["name"], 0.0) + node["self"]
    return self_times


def _is_env_side(name: str) -> bool:
    """An env manager's block or an env call: what the envs cost the trainer, not its own code."""
    return name in _ENV_SIDE_BLOCKS or name in IN_TRAINER_ENV_BLOCKS or name.startswith("env_manager.")


def _trainer_bound(run: _Run) -> list[Verdict]:
    start_up_and_end = blocks_outside_the_loop(run.tree)  # judged on the loop: not the loop's
    blocks = {name: seconds for name, seconds in _trainer_blocks(run.tree).items() if name not in start_up_and_end}
    if not blocks:
        return []
    trainer = sum(blocks.values())
    # The vector steps; without any, the env calls of an env the program steps itself.
    env_calls = None if run.breakdowns else trainer_env_call_seconds(run.tree)
    steps = sum(breakdown.total for breakdown in run.breakdowns) if env_calls is None else env_calls
    if (loop_share(run.tree, trainer) or 0.0) < TRAINER_MIN_SHARE or trainer <= steps:
        return []
    ranked = sorted(blocks.items(), key=lambda item: (-item[1], item[0]))
    top = [ranked[0]] + [(name, seconds) for name, seconds in ranked[1:TRAINER_TOP_BLOCKS]
                         if (loop_share(run.tree, seconds) or 0.0) >= TRAINER_BLOCK_MIN_SHARE]
    named = ", ".join(f"{name} ({format_percent(loop_share(run.tree, seconds))})" for name, seconds in top)
    first, first_seconds = top[0]
    evidence = {
        "trainer_seconds": trainer,
        "env_steps_seconds": steps,
        "training_loop_seconds": training_loop_seconds(run.tree),
        "top_blocks": [{"block": name, "self_seconds": seconds, "share": run.share(seconds),
                        "loop_share": loop_share(run.tree, seconds)}
                       for name, seconds in top],
    }
    wrapper = any(node["name"] == first and not node.get("is_parallel") and node["children"]
                  for _, node in walk_nodes(run.tree))
    inside = (f" Its time outside its child blocks is not broken down: add blocks inside {first}."
              if wrapper else "")
    return [run.verdict(
        TRAINER_BOUND,
        f"the trainer's own code is the limit: its blocks take {loop_share_text(run.tree, trainer)}, "
        f"led by {named}",
        trainer, evidence,
        f"Speed up {first} first: it alone takes {format_seconds(first_seconds)}, "
        f"{loop_share_text(run.tree, first_seconds)}. Env-side changes "
        + ("(more workers, shared memory) can win back at most the steps' time, " if env_calls is None
           else "(a faster env, or several stepped together in a vector env) can win back at most its env calls' "
                "time, ")
        + f"{loop_share_text(run.tree, steps)}.{inside}")]


# --- the environments -------------------------------------------------------------------------------


def _env_bound(run: _Run, machine: MachineFigures, *, cpu_limited: bool, gil_bound: bool = False) -> list[Verdict]:
    step = run.step
    if step is None:
        return _single_env_bound(run, machine)
    if cpu_limited:
        return []
    compute = step.seconds_of(ENV_COMPUTE)
    if (loop_share(run.tree, compute) or 0.0) < ENV_MIN_SHARE:
        return []
    cores = run.measurements.cores_available
    busy = run.measurements.busy_processes
    evidence = {
        "block": step.block,
        "env_compute_seconds": compute,
        "env_compute_per_step_seconds": compute / step.calls,
        "step_share": compute / step.total if step.total > 0 else None,
        "training_loop_seconds": training_loop_seconds(run.tree),
        "workers": step.workers,
        "cores_available": cores,
        "busy_processes": busy,
    }
    if gil_bound:
        # Idle cores do not help threads that take turns at the GIL (the gil_contention verdict).
        advice = ("The envs' threads take turns at the GIL, so more threads would only queue for it: "
                  "step the envs in worker processes (SubprocessEnvManager, Gymnasium's "
                  "AsyncVectorEnv), or make env.step cheaper (blocks timed inside it show where).")
    elif cores is not None and busy is not None and busy < cores:
        advice = (f"{cores - busy} of {cores} cores are idle: add workers — env work scales with "
                  "workers while cores are free.")
    elif cores is not None and busy is not None:
        advice = ("Every core is in use: more workers would only share them. Make env.step "
                  "cheaper (blocks timed inside it show where its time goes).")
    else:
        unknown = ("how many processes were busy on its " + str(cores) + " cores"
                   if cores is not None else "the cores")
        advice = (f"Add workers while cores are idle (this file does not record {unknown}); "
                  "otherwise make env.step cheaper (blocks timed inside it show where).")
    return [run.verdict(
        ENV_BOUND,
        f"the environments are the limit: env compute takes {format_seconds(compute / step.calls)} "
        f"of each {format_seconds(step.total / step.calls)} step",
        compute, evidence, advice)]


def _single_env_bound(run: _Run, machine: MachineFigures) -> list[Verdict]:
    """``env_bound`` for a program that steps one env itself, in the trainer, with no vector env:
    its ``env.step`` and ``env.reset`` calls are the env side, and nothing runs beside them. The
    trainer waited for a core (the kernel's count, where the dump has it) for a share of its wall
    time, and as much of those calls' time, taken as spread evenly: the env is the limit only if
    its calls take ``ENV_MIN_SHARE`` of the loop without it (on a loaded machine, beside
    ``outside_load``, rather than instead of it)."""
    if trainer_step_blocks(run.tree) != SINGLE_ENV_STEP_BLOCKS:
        return []
    seconds = trainer_env_call_seconds(run.tree) or 0.0
    waiting = machine.trainer_waits.waiting_share if machine.trainer_waits is not None else 0.0
    if (loop_share(run.tree, seconds * (1.0 - waiting)) or 0.0) < ENV_MIN_SHARE:
        return []
    steps = trainer_env_step_calls(run.tree)
    cores = run.measurements.cores_available
    evidence = {"blocks": sorted(IN_TRAINER_ENV_BLOCKS), "env_call_seconds": seconds, "env_steps": steps,
                "trainer_waiting_share": waiting, "training_loop_seconds": training_loop_seconds(run.tree),
                "cores_available": cores}
    on_cores = f" on this machine's {cores} cores" if cores and cores > 1 else ""
    return [run.verdict(
        ENV_BOUND,
        f"the environment is the limit: the program's own env calls (env.step, env.reset) took "
        f"{loop_share_text(run.tree, seconds)} ({steps} steps, {format_seconds(seconds / max(steps, 1))} "
        "a step with its resets), in the trainer, one after another",
        seconds, evidence,
        f"Step several envs at once in worker processes (gymnasium.vector.AsyncVectorEnv, SB3's "
        f"SubprocVecEnv), so that their steps overlap each other and the policy{on_cores}; or make env.step "
        "cheaper (blocks timed inside it show where its time goes).")]


# --- time outside any block -------------------------------------------------------------------------


def _untimed(run: _Run) -> list[Verdict]:
    untimed = float(run.tree.get("self", 0.0))
    if (run.share(untimed) or 0.0) < UNTIMED_MIN_SHARE:
        return []
    evidence: dict[str, Any] = {"untimed_seconds": untimed, "wall_seconds": run.wall}
    gaps = untimed_gaps(run.tree)
    where = ""
    start_and_end = False
    loop_part: float | None = None  # the untimed seconds inside the loop, told beside start-up and end
    if gaps is not None:
        evidence.update(between_steps_seconds=gaps.between_steps, between_rollouts_seconds=gaps.between_rollouts,
                        start_and_end_seconds=gaps.elsewhere)
        start_and_end = gaps.elsewhere >= UNTIMED_START_AND_END_SHARE * untimed
        inside = gaps.between_steps + gaps.between_rollouts
        inside_where = (f"inside the training loop (between steps {format_seconds(gaps.between_steps)}, "
                        f"between rollouts {format_seconds(gaps.between_rollouts)})")
        if not start_and_end:
            where = f", {format_seconds(inside)} of it {inside_where}"
        else:
            where = (f", {format_seconds(gaps.elsewhere)} of it before the training loop's first step or "
                     f"after its last (start-up, end)")
            # Start-up can dwarf a part of the loop that is still the loop's own largest cost.
            inside_share = loop_share(run.tree, inside) or 0.0
            if inside_share >= UNTIMED_MIN_SHARE:
                loop_part = inside
                where += (f", and {format_seconds(inside)}, {format_percent(inside_share)} of the "
                          f"training loop, {inside_where}")
    sampled = untimed_places(run.tree)
    if not sampled.places:
        if sampled.sampled:
            evidence.update(samples=sampled.untimed_samples)
            why = f"nothing here says what it was: {sampled.no_place_found()}"
            to_name_it = "A longer run gives the stack sampler looks to name it."
        elif sampled.sampler_turned_off:
            why = "nothing here says what it was (the run's stack was not sampled: --no-stack-sampler)"
            to_name_it = "`rlprof run` without --no-stack-sampler samples the stack to name where it went."
        else:
            why = "nothing here says what it was"
            to_name_it = "`rlprof run` samples the stack to name where it went."
        advice = (_start_and_end_advice(run, loop_part) if start_and_end else
                  "Wrap the rest of the loop in hierarchical_timer blocks (logging, checkpoints, evaluation, "
                  "data handling); start-up before the first block, such as spawning workers, counts here too.")
        return [run.verdict(
            UNTIMED,
            f"{format_percent(run.share(untimed))} of the wall time ran outside any block "
            f"({format_seconds(untimed)}){where}: {why}",
            untimed, evidence, f"{advice} {to_name_it}")]
    top = sampled.places[:UNTIMED_PLACES_NAMED]
    evidence.update(unexplained_seconds=sampled.unexplained_seconds, samples=sampled.untimed_samples)
    start_up = _start_up_before_training(run, sampled.places) if gaps is None else 0.0
    if start_up >= UNTIMED_START_AND_END_SHARE * untimed:
        # No vector-step loop to tell start-up by (a program learning from a dataset): its first
        # policy call or update does, and the places last seen before it.
        evidence.update(start_up_seconds=start_up)
        where = f", {format_seconds(start_up)} of it before the program's first policy call or update (start-up)"
    named = ", ".join(_place_text(place) for place in top)
    in_loop = ([place for place in sampled.places if place.seen_during(*_loop_window(gaps, sampled.places))]
               if gaps is not None and (loop_part is not None or not start_and_end) else [])
    if in_loop:
        # The start-up's places would crowd out the loop's, which the advice is also about: each
        # is named apart, the part the title leads with first.
        outside_loop = [place for place in sampled.places if place not in in_loop][:UNTIMED_PLACES_NAMED]
        inside_loop = "inside the loop: " + ", ".join(_place_text(place) for place in in_loop[:UNTIMED_PLACES_NAMED])
        outside_text = ", ".join(_place_text(place) for place in outside_loop)
        if not outside_loop:
            named = inside_loop
        elif start_and_end:
            named = f"{outside_text}; {inside_loop}"
        else:
            named = f"{inside_loop}; before or after it: {outside_text}"
    if start_and_end:
        advice = _start_and_end_advice(run, loop_part)
    elif "start_up_seconds" in evidence:
        while_training = sum(place.seconds for place in sampled.places) - start_up
        advice = _start_up_advice(while_training if (run.share(while_training) or 0.0) >= UNTIMED_MIN_SHARE else None)
    else:
        advice = ("Those lines are the program's own code between the timed phases: wrap the costly ones "
                  "in hierarchical_timer blocks to follow them from run to run, or make them cheaper.")
    return [run.verdict(
        UNTIMED,
        f"{format_percent(run.share(untimed))} of the wall time ran outside any block "
        f"({format_seconds(untimed)}){where}; the stack samples place it: {named}",
        untimed, evidence, advice)]


def _loop_window(gaps: UntimedGaps, places: tuple[UntimedPlace, ...]) -> tuple[float, float]:
    """The training loop's start and end on the timeline's clock, for telling the sampled places
    in it from the start-up's. A long run's timeline holds only the loop's latest steps
    (:attr:`UntimedGaps.steps_held_share` below 1): the loop then began at the first look of the
    places seen while the held steps ran, which run every iteration; a line the loop ran only
    in its first iterations is still the loop's."""
    if gaps.steps_held_share >= 1.0:
        return gaps.loop_start, gaps.loop_end
    firsts = [place.first_look for place in places
              if place.first_look is not None and place.seen_during(gaps.loop_start, gaps.loop_end)]
    return min(firsts, default=gaps.loop_start), gaps.loop_end


def _start_up_before_training(run: _Run, places: tuple[UntimedPlace, ...]) -> float:
    """The untimed seconds of the places last seen before the program's first policy call or
    update (0 where the timeline does not tell when that was)."""
    began = training_start(run.tree)
    if began is None:
        return 0.0
    return sum(place.seconds for place in places if place.last_look is not None and place.last_look < began)


def _start_up_advice(while_training: float | None) -> str:
    """What to do about untimed time that is mostly start-up, before the program trained; and
    about the ``while_training`` seconds the samples place later, where they are a cost of their own."""
    advice = ("Most of it is the run's start-up, before it began to train (imports, building the model "
              "and the data): paid once per run, so a longer run spreads it. To cut it, time the costly "
              "lines in hierarchical_timer blocks and make them cheaper.")
    if while_training is None:
        return advice
    return (f"{advice} The {format_seconds(while_training)} the samples place after it ran while it trained, "
            "between its timed phases: wrap the costly lines in hierarchical_timer blocks to follow them, "
            "or make them cheaper.")


def _place_text(place: UntimedPlace) -> str:
    return f"{place.label} {format_seconds(place.seconds)} ± {format_seconds(place.error_seconds)}"


def _start_and_end_advice(run: _Run, loop_part: float | None) -> str:
    """What to do about untimed time that is mostly the run's start-up and end; and about its part
    inside the loop (``loop_part`` seconds), where that part is itself a cost of the loop."""
    advice = (f"Most of it is the run's start-up and end, outside the training loop (imports, building the "
              f"envs and the model, closing them, saving): paid once per run, so a longer run spreads it "
              f"(the loop took {format_seconds(training_loop_seconds(run.tree))} of the "
              f"{format_seconds(run.wall)} here). To cut it, time the costly lines in hierarchical_timer "
              "blocks and make them cheaper.")
    if loop_part is None:
        return advice
    return (f"{advice} The {format_seconds(loop_part)} inside the loop is paid at every step or rollout: "
            "it is the program's own code between its timed phases (choosing actions from the policy's "
            "output, storing the rollout, logging); wrap the costly lines in hierarchical_timer blocks to "
            "follow them, or make them cheaper.")


# --- memory that keeps growing -----------------------------------------------------------------------


def _memory_leaks(run: _Run) -> list[Verdict]:
    if not run.tree.get("memory"):  # memory_report is imported only for the runs that sampled it
        return []
    from profiler.analysis.memory_report import memory_report

    # Judged over the training loop where the timeline tells it: the start-up's imports and the
    # model's and buffers' construction grow a process too (importing torch, some 300 MiB), once.
    gaps = untimed_gaps(run.tree)
    loop = (gaps.loop_start, gaps.loop_end) if gaps is not None and gaps.loop_end > gaps.loop_start else None
    report = memory_report(run.tree, during=loop)
    if report is None:
        return []
    verdicts = []
    for process in report.processes:
        if process.samples < LEAK_MIN_SAMPLES:
            if process.samples > 1 and process.growth_bytes >= LEAK_MIN_GROWTH_BYTES:
                during, there = (" during the training loop", " there") if loop is not None else ("", "")
                run.cannot_tell.append(
                    f"whether {process.name}'s memory leaks: it grew {format_bytes(process.growth_bytes)}{during} "
                    f"but has only {process.samples} samples{there} (a trend needs {LEAK_MIN_SAMPLES}; "
                    f"{more_samples_advice(made_by_rlprof_run(run.tree))})")
            continue
        if not _grows_steadily(process):
            continue
        buffer_growth = _replay_buffer_growth(run.tree) if process.name == "trainer" else 0.0
        # The rise from the first sample to the last, as the buffer's fill is its whole range: the
        # quarter medians' growth leaves out the ends, most of it where steps come fast at first.
        if buffer_growth > 0 and process.rise_bytes <= REPLAY_BUFFER_SLACK * buffer_growth:
            run.cannot_tell.append(
                f"whether the trainer's memory leaks: it rose {format_bytes(process.rise_bytes)} while its replay "
                f"buffer filled {format_bytes(buffer_growth)} (Stable-Baselines3 allocates it with zeros, "
                "whose pages become resident as it fills): a buffer stops growing once full")
            continue
        verdicts.append(_leak_verdict(run, process, over_the_loop=loop is not None, buffer_growth=buffer_growth))
    return verdicts


def _replay_buffer_growth(tree: dict[str, Any]) -> float:
    """The bytes of its replay buffer that a Stable-Baselines3 program filled while its memory was
    sampled: the :data:`REPLAY_BUFFER_GAUGE`'s highest reading less its lowest (0 without one)."""
    gauge = (tree.get("gauges") or {}).get(REPLAY_BUFFER_GAUGE)
    if gauge is None or not (math.isfinite(gauge["max"]) and math.isfinite(gauge["min"])):
        return 0.0
    return max(gauge["max"] - gauge["min"], 0.0) * MEBIBYTE


def _grows_steadily(process: ProcessMemoryFigures) -> bool:
    growth = process.growth_bytes
    if growth < max(LEAK_MIN_GROWTH_BYTES, LEAK_MIN_GROWTH_SHARE * process.first_bytes):
        return False
    medians = process.quarter_medians
    least_rise = LEAK_MIN_QUARTER_RISE_SHARE * growth / (len(medians) - 1)
    return all(later - earlier >= least_rise for earlier, later in zip(medians, medians[1:]))


def _leak_verdict(run: _Run, process: ProcessMemoryFigures, over_the_loop: bool, buffer_growth: float) -> Verdict:
    kept = sorted((block for block in process.blocks if block.net_bytes > 0),
                  key=lambda block: (-block.net_bytes, block.path))[:LEAK_TOP_BLOCKS]
    rate = process.bytes_per_minute
    evidence: dict[str, Any] = {
        "process": process.name,
        "pid": process.pid,
        "samples": process.samples,
        "sampled_seconds": process.seconds,
        "start_bytes": process.quarter_medians[0],
        "end_bytes": process.quarter_medians[-1],
        "growth_bytes": process.growth_bytes,
        "growth_bytes_per_minute": rate,
        "quarter_median_bytes": list(process.quarter_medians),
        "leak_from_bytes": max(LEAK_MIN_GROWTH_BYTES, int(LEAK_MIN_GROWTH_SHARE * process.first_bytes)),
        "judged_over": "training loop" if over_the_loop else "run",
    }
    buffer_part = ""
    if buffer_growth > 0:
        rise = process.rise_bytes
        evidence["replay_buffer_filled_bytes"] = buffer_growth
        evidence["rise_bytes"] = rise
        buffer_part = (f" From its first sample to its last it rose {format_bytes(rise)}; its replay buffer "
                       f"filled {format_bytes(buffer_growth)} of that, and the other "
                       f"{format_bytes(rise - buffer_growth)} is what to look for.")
    if kept:
        evidence["blocks_keeping_most"] = [{"block": block.label, "net_bytes": block.net_bytes,
                                            "calls": block.calls} for block in kept]
        where = (f"Start with {kept[0].label}: its calls kept {format_bytes(kept[0].net_bytes)} of "
                 "Python memory that was still allocated when they returned.")
    else:
        advice = allocations_advice(made_by_rlprof_run(run.tree))
        where = f"{advice[0].upper()}{advice[1:]} to see which block keeps it."
    owner = ("its env keeps from every step (an episode history, an info log, a replay list, a "
             "cache without a bound)" if process.name.startswith("worker")
             else "the trainer keeps from every step (losses kept as tensors with their graphs, a "
             "history or a cache without a bound; a replay buffer still filling grows so too, up to "
             "its size)")
    per_minute = f" ({format_bytes(rate)} a minute)" if rate is not None else ""
    ended = (" over the training loop, and was still growing when it ended" if over_the_loop
             else ", and was still growing when the run ended")
    return run.verdict(
        MEMORY_LEAK,
        f"{process.name} leaks memory: it grew steadily by {format_bytes(process.growth_bytes)}"
        f"{per_minute}, from {format_bytes(process.quarter_medians[0])} to "
        f"{format_bytes(process.quarter_medians[-1])}{ended}",
        0.0, evidence,
        f"Find what {owner}; a run that keeps this up ends out of memory.{buffer_part} {where}")


def _json_ready(value: Any) -> Any:
    """Evidence as strict JSON values: non-finite floats (never expected) become None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(key): _json_ready(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_ready(item) for item in value]
    return value
