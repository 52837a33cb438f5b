"""Where a vectorized environment step's time went, and which worker is the straggler.

The env manager names its blocks by a fixed convention (documented in docs/cli.md), and this
module finds them wherever they sit in the tree:

* ``vector.step`` — the trainer's whole vectorized step; its children ``vector.send_actions``,
  ``vector.wait_for_workers`` and ``vector.receive_results`` (decoding included), and the merged
  worker block ``env.step`` (``is_parallel``: the workers' own time, summed over them);
* ``vector.reset`` — the same with ``env.reset``;
* Unity ML-Agents files: ``env_step`` with the merged ``worker_root`` (no send/wait split).

The trainer's step is split into four parts that add up to its total:

* **env compute** — the mean worker's compute (merged worker time / number of workers), which the
  trainer spends waiting (it cannot be longer than the wait);
* **waiting on the slowest worker** — the rest of the wait: what imbalance between workers costs;
* **transport** — sending actions and receiving (and decoding) results;
* **other** — the trainer's own work inside the step.

The per-worker report reads the ``workers`` section (one tree per worker): each worker's mean step
time, its slowest step, and the straggler — the worker with the highest mean — with how far it is
above the mean of all workers (the same figures as ``TimerMerger.straggler_summary``). The slowest
step is the nodes' per-call ``max`` when the timers record it; otherwise the merger's ``peak_mean``
(the slowest flush interval's mean per step: the slowest single step when workers flush every
step); otherwise it is left out, never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from profiler.block_stats import walk_nodes

__all__ = [
    "MAX_PER_CALL",
    "PEAK_INTERVAL_MEAN",
    "ENV_COMPUTE",
    "STEP_LAYOUTS",
    "TRANSPORT",
    "WAITING",
    "StepBreakdown",
    "StepLayout",
    "StepPart",
    "WorkerReport",
    "WorkerSteps",
    "step_breakdowns",
    "worker_report",
]


@dataclass(frozen=True)
class StepLayout:
    """The block names of one kind of vectorized step."""

    step: str
    worker_block: str
    wait: str | None
    transport: tuple[str, ...]
    rest_label: str


_RLPROF_TRANSPORT = ("vector.send_actions", "vector.receive_results")
STEP_LAYOUTS = (
    StepLayout("vector.step", "env.step", "vector.wait_for_workers", _RLPROF_TRANSPORT,
               "other trainer work in the step"),
    StepLayout("vector.reset", "env.reset", "vector.wait_for_workers", _RLPROF_TRANSPORT,
               "other trainer work in the reset"),
    StepLayout("env_step", "worker_root", None, (),
               "send, wait and receive (not split in ML-Agents files)"),
)

IMBALANCED_WAIT_ABOVE = 0.25
"""The step verdict calls workers imbalanced when waiting on the slowest adds over 25% to compute."""

ENV_COMPUTE = "env compute (mean worker)"
WAITING = "waiting on the slowest worker"
TRANSPORT = "transport (send/receive/decode)"

BALANCED_BELOW = 0.05
"""A slowest worker within 5% of the mean is called balanced rather than a straggler."""


@dataclass
class StepPart:
    """One slice of the trainer's step time."""

    label: str
    seconds: float


@dataclass
class StepBreakdown:
    """The trainer's time in one kind of vectorized step, split into parts that sum to ``total``."""

    block: str
    calls: int
    total: float
    parts: list[StepPart]
    worker_block: str
    worker_time: float
    worker_calls: int
    workers: int
    verdict: str

    def share(self, part: StepPart) -> float | None:
        return part.seconds / self.total if self.total > 0 else None

    def per_call(self, part: StepPart) -> float:
        return part.seconds / self.calls if self.calls else 0.0


MAX_PER_CALL = "max per call"
PEAK_INTERVAL_MEAN = "peak interval mean"


@dataclass
class WorkerSteps:
    """One worker's steps: how many, their total, mean and (when recorded) slowest.

    ``max_kind`` says what ``max_time`` is: :data:`MAX_PER_CALL` or :data:`PEAK_INTERVAL_MEAN`.
    """

    label: str
    worker_id: Any
    steps: int
    total: float
    max_time: float | None = None
    max_kind: str | None = None

    @property
    def mean(self) -> float:
        return self.total / self.steps if self.steps else 0.0


@dataclass
class WorkerReport:
    """The workers' step times side by side, with the straggler named."""

    block: str
    workers: list[WorkerSteps]
    mean: float
    straggler: WorkerSteps | None

    @property
    def straggler_gap(self) -> float:
        """Seconds per step the straggler is above the mean of all workers."""
        return self.straggler.mean - self.mean if self.straggler else 0.0

    @property
    def straggler_gap_share(self) -> float | None:
        return self.straggler_gap / self.mean if self.straggler and self.mean > 0 else None

    @property
    def balanced(self) -> bool:
        share = self.straggler_gap_share
        return share is not None and share < BALANCED_BELOW


def step_breakdowns(tree: dict[str, Any]) -> list[StepBreakdown]:
    """The breakdown of every kind of vectorized step found in ``tree`` (empty when none ran)."""
    breakdowns = []
    for layout in STEP_LAYOUTS:
        breakdown = _breakdown(tree, layout)
        if breakdown is not None:
            breakdowns.append(breakdown)
    return breakdowns


def _breakdown(tree: dict[str, Any], layout: StepLayout) -> StepBreakdown | None:
    steps = [node for _, node in walk_nodes(tree) if node["name"] == layout.step]
    calls = sum(node["count"] for node in steps)
    if not calls:
        return None
    total = sum(node["total"] for node in steps)
    children: dict[str, dict[str, float]] = {}
    for node in steps:
        for child in node["children"]:
            figures = children.setdefault(child["name"], {"total": 0.0, "count": 0})
            figures["total"] += child["total"]
            figures["count"] += child["count"]
    worker_figures = children.get(layout.worker_block, {"total": 0.0, "count": 0})
    worker_time, worker_calls = worker_figures["total"], int(worker_figures["count"])
    workers = _worker_count(tree, layout.worker_block, worker_calls, calls)
    mean_compute = worker_time / workers

    transport = sum(children.get(name, {"total": 0.0})["total"] for name in layout.transport)
    if layout.wait is not None:
        waited = children.get(layout.wait, {"total": 0.0})["total"]
        compute = min(waited, mean_compute)
        parts = [StepPart(ENV_COMPUTE, compute), StepPart(WAITING, waited - compute)]
    else:
        compute = min(max(0.0, total - transport), mean_compute)
        parts = [StepPart(ENV_COMPUTE, compute)]
    if layout.transport:
        parts.append(StepPart(TRANSPORT, transport))
    parts.append(StepPart(layout.rest_label, max(0.0, total - sum(part.seconds for part in parts))))
    return StepBreakdown(
        block=layout.step,
        calls=calls,
        total=total,
        parts=parts,
        worker_block=layout.worker_block,
        worker_time=worker_time,
        worker_calls=worker_calls,
        workers=workers,
        verdict=_verdict(parts, has_workers=worker_calls > 0),
    )


def _worker_count(tree: dict[str, Any], worker_block: str, worker_calls: int, calls: int) -> int:
    """How many workers shared the merged time: from the per-worker trees, else from the counts.

    Without a ``workers`` section, merged calls per trainer call is the number of workers that
    stepped each time (exact when each worker hosts one environment).
    """
    per_worker = [
        worker for worker in tree.get("workers", [])
        if any(node["name"] == worker_block and node["count"] for _, node in walk_nodes(worker))
    ]
    if per_worker:
        return len(per_worker)
    return max(1, round(worker_calls / calls))


def _verdict(parts: list[StepPart], *, has_workers: bool) -> str:
    by_label = {part.label: part.seconds for part in parts}
    compute = by_label.get(ENV_COMPUTE, 0.0)
    waiting = by_label.get(WAITING, 0.0)
    transport = by_label.get(TRANSPORT, 0.0)
    if not has_workers:
        return "no merged worker time under this block: env compute cannot be told apart"
    if transport > compute:
        return "the pipe costs more than the environments: transport exceeds env compute"
    if waiting > IMBALANCED_WAIT_ABOVE * compute:
        return (f"workers are imbalanced: waiting on the slowest worker adds "
                f"{waiting / compute:.0%} to the mean worker's compute" if compute > 0 else
                "workers are imbalanced: the trainer waits with no worker compute to show for it")
    largest = max(parts, key=lambda part: part.seconds)
    return f"largest part: {largest.label}"


def worker_report(tree: dict[str, Any], block: str = "env.step") -> WorkerReport | None:
    """Each worker's ``block`` times from the ``workers`` section; ``None`` when it is absent."""
    trees = tree.get("workers")
    if not trees:
        return None
    workers = []
    for index, worker in enumerate(trees):
        nodes = [node for _, node in walk_nodes(worker) if node["name"] == block]
        steps = sum(node["count"] for node in nodes)
        if not steps:
            continue
        workers.append(WorkerSteps(
            label=str(worker.get("name") or f"worker {worker.get('worker_id', index)}"),
            worker_id=worker.get("worker_id", index),
            steps=steps,
            total=sum(node["total"] for node in nodes),
        ))
        workers[-1].max_time, workers[-1].max_kind = _slowest_step(worker, nodes, block)
    if not workers:
        return WorkerReport(block=block, workers=[], mean=0.0, straggler=None)
    mean = sum(worker.mean for worker in workers) / len(workers)
    straggler = max(workers, key=lambda worker: worker.mean) if len(workers) > 1 else None
    return WorkerReport(block=block, workers=workers, mean=mean, straggler=straggler)


def _slowest_step(
    worker: dict[str, Any], nodes: list[dict[str, Any]], block: str
) -> tuple[float | None, str | None]:
    """The worker's slowest ``block`` call, and what kind of figure it is (see module docstring)."""
    maxima = [node.get("max") for node in nodes]
    if all(_is_number(value) for value in maxima):
        return float(max(maxima)), MAX_PER_CALL  # type: ignore[type-var]
    peaks = worker.get("peak_mean")
    if isinstance(peaks, dict) and _is_number(peaks.get(block)):
        return float(peaks[block]), PEAK_INTERVAL_MEAN
    return None, None


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
