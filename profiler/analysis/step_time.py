"""Where a vectorized environment step's time went, and which worker is the straggler.

Env managers name their blocks by a convention (documented in docs/cli.md), and this module finds
them wherever they sit in the tree. Three layouts are known:

* rlprof's ``SubprocessEnvManager``: ``env_manager.step`` with children ``send_actions``,
  ``wait_for_workers``, ``receive_results`` (decoding included) and the workers' merged
  ``env.step``/``env.reset`` blocks (``is_parallel``: their own time, summed over workers);
  ``env_manager.reset`` likewise, sending with ``send_resets``;
* the generic names: ``vector.step`` / ``vector.reset`` with ``vector.send_actions``,
  ``vector.wait_for_workers``, ``vector.receive_results`` and the merged worker blocks;
* Unity ML-Agents files: ``env_step`` with the merged ``worker_root`` (no send/wait split),
  directly or inside the ``workers`` block ML-Agents' trainer merges it in. A ``worker_root`` is
  a worker's whole tree since its last reset, idle time included, so its timed children are the
  workers' compute.

The trainer's step is split into parts that add up to its total:

* **env compute** — the mean worker's compute (merged worker time / number of workers), which the
  trainer spends waiting (it cannot be longer than the wait);
* **waiting on the slowest worker** — how much longer the slowest worker computed than the mean
  one (from the ``workers`` section), as far as the wait covers it;
* **rest of the wait** — the wait left over: pipe latency, waking up, scheduling. Without a
  ``workers`` section it cannot be told apart from the straggler and the two are one part;
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

from profiler.analysis.block_stats import walk_nodes

__all__ = [
    "ENV_COMPUTE",
    "MAX_PER_CALL",
    "PEAK_INTERVAL_MEAN",
    "STEP_LAYOUTS",
    "TRANSPORT",
    "WAIT_LATENCY",
    "WAITING",
    "WAITING_ONLY",
    "WAITING_UNSPLIT",
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
    worker_blocks: tuple[str, ...]
    wait: str | None
    transport: tuple[str, ...]
    rest_label: str
    worker_blocks_are_roots: bool = False
    """Whether the worker blocks are whole worker trees, whose own total includes idle time."""


_WORKER_BLOCKS = ("env.step", "env.reset")  # autoresets run inside a step, so both count
_MANAGER_TRANSPORT = ("send_actions", "send_resets", "receive_results")
_VECTOR_TRANSPORT = ("vector.send_actions", "vector.send_resets", "vector.receive_results")
STEP_LAYOUTS = (
    StepLayout("env_manager.step", _WORKER_BLOCKS, "wait_for_workers", _MANAGER_TRANSPORT,
               "other trainer work in the step"),
    StepLayout("env_manager.reset", _WORKER_BLOCKS, "wait_for_workers", _MANAGER_TRANSPORT,
               "other trainer work in the reset"),
    StepLayout("vector.step", _WORKER_BLOCKS, "vector.wait_for_workers", _VECTOR_TRANSPORT,
               "other trainer work in the step"),
    StepLayout("vector.reset", _WORKER_BLOCKS, "vector.wait_for_workers", _VECTOR_TRANSPORT,
               "other trainer work in the reset"),
    StepLayout("env_step", ("worker_root",), None, (),
               "send, wait and receive (not split in ML-Agents files)",
               worker_blocks_are_roots=True),
)

ENV_COMPUTE = "env compute (mean worker)"
WAITING = "waiting on the slowest worker"
WAIT_LATENCY = "rest of the wait (pipe latency, wake-up)"
WAITING_UNSPLIT = "waiting beyond the mean compute (straggler or latency)"
WAITING_ONLY = "waiting for workers (their time is merged elsewhere)"
TRANSPORT = "transport (send/receive/decode)"

IMBALANCED_WAIT_ABOVE = 0.25
"""The step verdict calls workers imbalanced when waiting on the slowest adds over 25% to compute."""

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
    worker_blocks: tuple[str, ...]
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
    child_totals: dict[str, float] = {}
    worker_time, worker_calls = 0.0, 0
    worker_blocks_found: set[str] = set()
    for node in steps:
        for child in node["children"]:
            child_totals[child["name"]] = child_totals.get(child["name"], 0.0) + child["total"]
        for worker_node in _worker_nodes(node, layout.worker_blocks):
            worker_blocks_found.add(worker_node["name"])
            worker_calls += worker_node["count"]
            if layout.worker_blocks_are_roots:
                worker_time += sum(child["total"] for child in worker_node["children"])
            else:
                worker_time += worker_node["total"]
    per_worker = _per_worker_compute(tree, layout.worker_blocks)
    workers = len(per_worker) or max(1, round(worker_calls / calls))
    mean_compute = worker_time / workers

    transport = sum(child_totals.get(name, 0.0) for name in layout.transport)
    if layout.wait is not None and not worker_calls:
        # The workers' time landed under another block: nothing to split the wait by.
        parts = [StepPart(WAITING_ONLY, child_totals.get(layout.wait, 0.0))]
    elif layout.wait is not None:
        waited = child_totals.get(layout.wait, 0.0)
        compute = min(waited, mean_compute)
        parts = [StepPart(ENV_COMPUTE, compute)] + _split_the_wait(waited - compute, per_worker)
    else:
        parts = [StepPart(ENV_COMPUTE, min(max(0.0, total - transport), mean_compute))]
    if layout.transport:
        parts.append(StepPart(TRANSPORT, transport))
    parts.append(StepPart(layout.rest_label, max(0.0, total - sum(part.seconds for part in parts))))
    return StepBreakdown(
        block=layout.step,
        calls=calls,
        total=total,
        parts=parts,
        worker_blocks=tuple(name for name in layout.worker_blocks if name in worker_blocks_found),
        worker_time=worker_time,
        worker_calls=worker_calls,
        workers=workers,
        verdict=_verdict(parts, has_workers=worker_calls > 0),
    )


def _worker_nodes(node: dict[str, Any], worker_blocks: tuple[str, ...]) -> list[dict[str, Any]]:
    """The merged worker blocks inside a step, wherever the trainer merged them (not below one)."""
    found = []
    for child in node["children"]:
        if child["name"] in worker_blocks:
            found.append(child)
        else:
            found.extend(_worker_nodes(child, worker_blocks))
    return found


def _per_worker_compute(tree: dict[str, Any], worker_blocks: tuple[str, ...]) -> list[float]:
    """Each worker's total time in ``worker_blocks``, from the ``workers`` section (if any)."""
    totals = []
    for worker in tree.get("workers", []):
        nodes = [node for _, node in walk_nodes(worker) if node["name"] in worker_blocks]
        if any(node["count"] for node in nodes):
            totals.append(sum(node["total"] for node in nodes))
    return totals


def _split_the_wait(beyond_compute: float, per_worker: list[float]) -> list[StepPart]:
    """Split the wait beyond the mean compute into straggling and the rest (latency).

    The slowest worker computing longer than the mean one accounts for at most its excess; what
    the wait holds beyond that is the pipe's round trip and waking up. Without per-worker trees
    the two cannot be told apart, and are reported as one part.
    """
    if not per_worker:
        return [StepPart(WAITING_UNSPLIT, beyond_compute)]
    excess = max(per_worker) - sum(per_worker) / len(per_worker)
    straggling = min(beyond_compute, excess)
    return [StepPart(WAITING, straggling), StepPart(WAIT_LATENCY, beyond_compute - straggling)]


def _verdict(parts: list[StepPart], *, has_workers: bool) -> str:
    seconds = {part.label: part.seconds for part in parts}
    compute = seconds.get(ENV_COMPUTE, 0.0)
    waiting = seconds.get(WAITING, 0.0)
    pipe = seconds.get(TRANSPORT, 0.0) + seconds.get(WAIT_LATENCY, 0.0)
    if not has_workers:
        return "no worker time merged under this block: env compute cannot be told apart"
    if pipe > compute:
        return ("the pipe costs more than the environments: transport and wait latency "
                "exceed env compute")
    if waiting > IMBALANCED_WAIT_ABOVE * compute:
        return (f"workers are imbalanced: waiting on the slowest worker adds "
                f"{waiting / compute:.0%} to the mean worker's compute")
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
