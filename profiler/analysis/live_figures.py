"""What the live view shows of a run: its figures over the last window and since the start.

:func:`live_figures` reads two dumps — the run since its start, and the window of its last few
seconds (:func:`profiler.analysis.window.window_tree`) — and returns plain figures:

* **env steps per second** over the window and since the start: the env steps taken inside the
  vector steps (each worker's ``env.step`` calls merged under them) per second of wall time;
* **phase shares** of the window's wall time, which add up to 1:

  ========== ======================================================================================
  phase      what it holds
  ========== ======================================================================================
  policy     the trainer's blocks (self time, outside the env manager's) whose name says acting:
             :data:`POLICY_WORDS` (``policy.act``, ``forward``, ``collect_rollouts``...)
  update     the trainer's blocks whose name says learning: :data:`UPDATE_WORDS` (``update``,
             ``backward``, ``optimizer.step``, ``train``...)
  envs       the vector step's env compute and its wait on the workers (the last one included)
  transport  sending, receiving and decoding, and the wait beyond the workers' compute
  other      the trainer's other blocks, and its other work inside the step
  untimed    the wall time outside any block (the root's self time)
  ========== ======================================================================================

  The step's parts come from :func:`profiler.analysis.step_time.step_breakdowns`, the trainer's
  blocks as the ``trainer_bound`` verdict reads them, so the view and ``rlprof analyze`` agree;
* **per worker**, over the window: its mean ``env.step`` time and env steps per second, the share
  of vector steps it replied last in (the critical path), and its memory as of now (the
  ``resources.worker_<i>.rss_mb`` gauge, else its latest sample in the ``memory`` section);
* **the verdicts** of :func:`profiler.analysis.verdicts.judge_run` on the window: a verdict shows
  while its evidence holds over the window, and goes when it stops holding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from profiler.analysis.run_measurements import RunMeasurements, read_measurements
from profiler.analysis.step_time import (
    ENV_COMPUTE,
    TRANSPORT,
    WAIT_LATENCY,
    WAITING_ON_LAST,
    WAITING_ON_SLOWEST,
    WAITING_ONLY,
    WAITING_UNSPLIT,
    StepBreakdown,
    step_breakdowns,
)
from profiler.analysis.verdicts import Verdict, _trainer_blocks, judge_run
from profiler.analysis.text_format import MEBIBYTE
from profiler.analysis.worker_groups import compared_workers
from profiler.analysis.worker_report import worker_report

__all__ = [
    "PHASES",
    "POLICY_WORDS",
    "UPDATE_WORDS",
    "LiveFigures",
    "WorkerFigures",
    "live_figures",
    "phase_of_block",
]

PHASES = ("policy", "update", "envs", "transport", "other", "untimed")
"""The phases the wall time is split into, in the order they are shown."""

POLICY_WORDS = ("policy", "act", "forward", "rollout", "inference", "predict", "sample_action")
"""Words in a trainer block's name that make it part of the ``policy`` phase (checked after
:data:`UPDATE_WORDS`, so ``policy.update`` is an update)."""

UPDATE_WORDS = ("update", "backward", "optimizer", "optim", "train", "learn", "loss", "gradient")
"""Words in a trainer block's name that make it part of the ``update`` phase."""

_ENV_PARTS = (ENV_COMPUTE, WAITING_ON_LAST, WAITING_ON_SLOWEST, WAITING_UNSPLIT, WAITING_ONLY)
_TRANSPORT_PARTS = (TRANSPORT, WAIT_LATENCY)


@dataclass(frozen=True)
class WorkerFigures:
    """One worker over the window: ``None`` where the dump does not tell."""

    label: str
    worker_id: Any
    pid: int | None
    step_seconds: float | None
    steps_per_second: float | None
    last_share: float | None
    memory_bytes: float | None


@dataclass(frozen=True)
class LiveFigures:
    """The run's figures over the window and since the start (see the module docstring)."""

    elapsed_seconds: float
    window_seconds: float
    env_steps_per_second: float | None
    env_steps_per_second_since_start: float | None
    phase_shares: dict[str, float]
    workers: list[WorkerFigures]
    verdicts: list[Verdict]
    notes: list[str] = field(default_factory=list)


def phase_of_block(name: str) -> str:
    """The phase (``policy``, ``update`` or ``other``) of a trainer block, by its name."""
    lowered = name.lower()
    if any(word in lowered for word in UPDATE_WORDS):
        return "update"
    if any(word in lowered for word in POLICY_WORDS):
        return "policy"
    return "other"


def live_figures(since_start: dict[str, Any], window: dict[str, Any]) -> LiveFigures:
    """The figures of a normalized dump of the run so far and of its last window."""
    measurements = read_measurements(window)
    breakdowns = step_breakdowns(window, measurements)
    wall = float(window["total"])
    return LiveFigures(
        elapsed_seconds=float(since_start["total"]),
        window_seconds=wall,
        env_steps_per_second=_env_steps_per_second(window, breakdowns),
        env_steps_per_second_since_start=_env_steps_per_second(since_start),
        phase_shares=_phase_shares(window, breakdowns),
        workers=_workers(window, measurements),
        verdicts=list(judge_run(window, measurements, breakdowns).verdicts),
        notes=list(measurements.problems),
    )


def _env_steps_per_second(tree: dict[str, Any], breakdowns: list[StepBreakdown] | None = None) -> float | None:
    """Env steps inside vector steps per second of wall time (None when no vector step ran).

    The env steps are those the workers' timer payloads reported: a window in which vector steps
    ran but no payload came (shorter than the workers' ``flush_interval``, a second by default)
    does not know its env steps, and gets None rather than a rate of 0."""
    wall = float(tree["total"])
    steps = [breakdown for breakdown in (breakdowns if breakdowns is not None else step_breakdowns(tree))
             if breakdown.is_vector_step]
    env_steps = sum(step.worker_calls for step in steps)
    if not steps or wall <= 0 or (env_steps == 0 and sum(step.calls for step in steps) > 0):
        return None
    return env_steps / wall


def _phase_shares(tree: dict[str, Any], breakdowns: list[StepBreakdown]) -> dict[str, float]:
    """Seconds of each phase over the window's wall time; empty for a window of no wall time."""
    wall = float(tree["total"])
    if wall <= 0:
        return {}
    seconds = dict.fromkeys(PHASES, 0.0)
    for breakdown in breakdowns:
        for part in breakdown.parts:
            phase = ("envs" if part.label in _ENV_PARTS
                     else "transport" if part.label in _TRANSPORT_PARTS else "other")
            seconds[phase] += part.seconds
    for name, self_seconds in _trainer_blocks(tree).items():
        seconds[phase_of_block(name)] += self_seconds
    seconds["untimed"] = max(0.0, float(tree.get("self", 0.0)))
    return {phase: min(1.0, value / wall) for phase, value in seconds.items()}


def _workers(tree: dict[str, Any], measurements: RunMeasurements) -> list[WorkerFigures]:
    report = worker_report(tree, measurements=measurements)
    rows = {row.worker_id: row for row in report.workers} if report is not None else {}
    wall = float(tree["total"])
    pids = {entry.get("worker_id", index): entry.get("pid")
            for index, entry in enumerate(compared_workers(tree))}
    figures = []
    for worker in measurements.workers:
        row = rows.get(worker.worker_id)
        pid = pids.get(worker.worker_id)
        figures.append(WorkerFigures(
            label=worker.label,
            worker_id=worker.worker_id,
            pid=pid if isinstance(pid, int) and not isinstance(pid, bool) else None,
            step_seconds=row.mean if row is not None else None,
            steps_per_second=row.steps / wall if row is not None and wall > 0 else None,
            last_share=worker.critical_path.last_share if worker.critical_path else None,
            memory_bytes=_memory_bytes(tree, worker.worker_id),
        ))
    return figures


def _memory_bytes(tree: dict[str, Any], worker_id: Any) -> float | None:
    """The worker's resident memory as of now: its resources gauge, else its latest sample."""
    gauge = (tree.get("gauges") or {}).get(f"resources.worker_{worker_id}.rss_mb")
    if isinstance(gauge, dict) and isinstance(gauge.get("value"), (int, float)):
        return float(gauge["value"]) * MEBIBYTE
    for process in (tree.get("memory") or {}).get("processes", []):
        samples = process.get("samples") if isinstance(process, dict) else None
        if process.get("name") == f"worker {worker_id}" and isinstance(samples, list) and samples:
            latest = samples[-1]
            if isinstance(latest, list) and len(latest) > 1 and isinstance(latest[1], (int, float)):
                return float(latest[1])
    return None
