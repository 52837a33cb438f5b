"""Where a vectorized environment step's time went: parts that add up to the step's total.

Env managers name their blocks by a convention (documented in docs/cli.md), and this module finds
them wherever they sit in the tree. Three layouts are known:

* rlprof's ``SubprocessEnvManager``: ``env_manager.step`` with children ``send_actions``,
  ``wait_for_workers``, ``receive_results`` (decoding included) and the workers' merged blocks;
  ``env_manager.reset`` likewise, sending with ``send_resets``;
* the generic names: ``vector.step`` / ``vector.reset`` with ``vector.send_actions``,
  ``vector.wait_for_workers``, ``vector.receive_results`` and the merged worker blocks;
* Unity ML-Agents files: ``env_step``, with the workers' trees merged as ``worker_root`` under
  the trainer's ``workers`` block (``env_step/workers/worker_root``); ML-Agents does not time
  send, wait and receive apart, and steps its workers asynchronously.

**Worker time** is every block that ran in a worker (``is_parallel``) anywhere under the step
block, outermost ones only (``env.step``, ``env.reset``, ``worker_root``, whatever the layout).
The **number of workers** comes from the ``workers`` section; without it, from merged calls per
step (which counts envs, not processes, when a worker hosts several envs: the note says so).

The trainer's step is split into parts that add up to its total, in this order:

* **env compute** — the mean worker's compute: worker time / workers. With several envs per worker
  that is the worker's whole measured time for its envs. It is never relabelled as transport:
  when it exceeds the wait (compute overlapping the trainer's sending and receiving), the excess
  is taken from transport, then from the trainer's other work, and a note says so;
* **waiting on the last worker** — when the file records the critical path: the time steps waited
  after the second-to-last reply, measured. Without it, **waiting on the slowest worker** is
  estimated as how much longer the slowest worker computed than the others' mean. Either comes
  first: env compute is then what fits in the rest of the wait (a step waits for the others'
  compute, then for the last worker alone). Without a ``workers`` section, straggling and pipe
  latency cannot be told apart and are one part;
* **rest of the wait** — pipe latency, waking up, scheduling;
* **transport** — sending actions and receiving (and decoding) results;
* **other** — the trainer's own work inside the step.

A vector step whose envs ran in the trainer (``env.step``/``env.reset`` blocks of its own under the
step, no wait block, no worker time: a ``SyncVectorEnv`` or ``DummyVecEnv`` as ``rlprof run`` times
it) is **env compute in the trainer's process** and other work, nothing else.

The parts are figures, not a judgement: :mod:`profiler.analysis.verdicts` decides what limits the run.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import field
from typing import Any, NamedTuple

from profiler.analysis.block_stats import THREAD_PREFIX, walk_nodes
from profiler.analysis.run_measurements import RunMeasurements, read_measurements
from profiler.analysis.text_format import format_seconds
from profiler.records import Record

__all__ = [
    "ENV_COMPUTE",
    "ENV_COMPUTE_IN_TRAINER",
    "EVALUATION_BLOCK",
    "NATIVE_ENV_BLOCKS",
    "PAYLOAD_ROOTS",
    "EXCHANGE_UNSPLIT",
    "RESET_BLOCKS",
    "SINGLE_ENV_STEP_BLOCKS",
    "STEP_LAYOUTS",
    "TRANSPORT",
    "VECTOR_STEP_BLOCKS",
    "WAITING_ON_LAST",
    "WAITING_ON_SLOWEST",
    "WAITING_ONLY",
    "WAITING_UNSPLIT",
    "WAIT_LATENCY",
    "StepBreakdown",
    "StepLayout",
    "StepPart",
    "ThreadBlocks",
    "blocks_in_threads",
    "step_breakdowns",
    "steps_in_threads",
    "trainer_calls",
    "trainer_env_call_seconds",
    "trainer_env_step_calls",
    "trainer_nodes",
    "trainer_step_blocks",
]


class StepLayout(NamedTuple):
    """The block names of one kind of vectorized step (a constant of this module: a named tuple,
    which costs less to make than a frozen dataclass, whose methods are compiled as it is made).

    ``wait`` is ``None`` for layouts that do not time the wait apart (ML-Agents); there the step's
    own child blocks are the trainer's work. ``is_vector_step`` marks steps (not resets): the
    critical-path counters count vector steps.
    """

    step: str
    wait: str | None
    transport: tuple[str, ...]
    rest_label: str
    is_vector_step: bool


_MANAGER_TRANSPORT = ("send_actions", "send_resets", "receive_results")
_VECTOR_TRANSPORT = ("vector.send_actions", "vector.send_resets", "vector.receive_results")
STEP_LAYOUTS = (
    StepLayout("env_manager.step", "wait_for_workers", _MANAGER_TRANSPORT,
               "other trainer work in the step", True),
    StepLayout("env_manager.reset", "wait_for_workers", _MANAGER_TRANSPORT,
               "other trainer work in the reset", False),
    StepLayout("vector.step", "vector.wait_for_workers", _VECTOR_TRANSPORT,
               "other trainer work in the step", True),
    StepLayout("vector.reset", "vector.wait_for_workers", _VECTOR_TRANSPORT,
               "other trainer work in the reset", False),
    StepLayout("env_step", None, (), "trainer blocks inside the step (policy, merging timers)", True),
)

VECTOR_STEP_BLOCKS = frozenset(layout.step for layout in STEP_LAYOUTS if layout.is_vector_step)
"""The names of the blocks that time a vector step (not a reset), whatever the layout."""
RESET_BLOCKS = frozenset({*(layout.step for layout in STEP_LAYOUTS if not layout.is_vector_step), "env.reset"})
"""The blocks that time a reset: a vector env's, or one env's that the program steps itself."""

EVALUATION_BLOCK = "evaluate_policy"
"""The block SB3's ``evaluate_policy`` runs in (``profiler.automatic.sb3_phases``): the vector steps
inside it are the evaluation's, not the training loop's, and no breakdown counts them."""

PAYLOAD_ROOTS = ("worker_root",)
"""Merged worker roots whose own total includes the worker's idle time (ML-Agents' payloads)."""

ENV_COMPUTE = "env compute (mean worker)"
WAITING_ON_LAST = "waiting on the last worker (after the others replied)"
WAITING_ON_SLOWEST = "waiting on the slowest worker (estimated from its compute)"
WAIT_LATENCY = "rest of the wait (pipe latency, wake-up)"
WAITING_UNSPLIT = "waiting beyond the mean compute (straggler or latency, not told apart)"
WAITING_ONLY = "waiting for workers (their time is merged elsewhere)"
TRANSPORT = "transport (send/receive/decode)"
EXCHANGE_UNSPLIT = "send, wait and receive (not timed apart)"
ENV_COMPUTE_IN_TRAINER = "env compute (in the trainer's process)"
IN_TRAINER_ENV_BLOCKS = ("env.step", "env.reset")
"""The trainer's own blocks around env calls, as ``rlprof run`` times them: in a vector step whose
envs run in the trainer (Gymnasium's SyncVectorEnv, SB3's DummyVecEnv), or of one env the program
steps itself (:func:`trainer_step_blocks`)."""
NATIVE_ENV_BLOCKS = ("env.step (vectorized)", "env.reset (vectorized)")
"""The trainer's block around the one call that steps (or resets) every env of a natively
vectorized env (CartPole's ``CartPoleVectorEnv``, as ``rlprof run`` times it)."""


def trainer_nodes(tree: dict[str, Any], stop_at: Collection[str] = (),
                  leave_out: Callable[[str], bool] | None = None) -> Iterator[dict[str, Any]]:
    """The trainer's own blocks, at any depth, outside the trees that ran beside it (its workers');
    not those inside a block named in ``stop_at``, nor a block whose name ``leave_out`` is true of,
    with everything inside it."""
    def kept(node: dict[str, Any]) -> bool:
        return not node.get("is_parallel") and (leave_out is None or not leave_out(node["name"]))

    pending = [child for child in tree.get("children", []) if kept(child)]
    while pending:
        node = pending.pop()
        yield node
        if node["name"] not in stop_at:
            pending.extend(child for child in node.get("children", []) if kept(child))


def trainer_env_call_seconds(tree: dict[str, Any]) -> float | None:
    """The time of the env calls timed in the trainer's own tree (``env.step``, ``env.reset``);
    None where there are none. In a program stepping its env without a vector env, what the env
    side costs the trainer."""
    calls = [node["total"] for node in trainer_nodes(tree, stop_at=IN_TRAINER_ENV_BLOCKS)
             if node["name"] in IN_TRAINER_ENV_BLOCKS]
    return sum(calls) if calls else None


def trainer_env_step_calls(tree: dict[str, Any]) -> int:
    """The calls of the ``env.step`` blocks timed in the trainer's own tree."""
    return sum(node["count"] for node in trainer_nodes(tree, stop_at=IN_TRAINER_ENV_BLOCKS)
               if node["name"] == "env.step")


def trainer_calls(tree: dict[str, Any], names: frozenset[str] | set[str]) -> int:
    """The calls of the blocks named in ``names`` in the trainer's own tree, wherever they ran in it."""
    return sum(node["count"] for node in trainer_nodes(tree) if node["name"] in names)


SINGLE_ENV_STEP_BLOCKS = frozenset({"env.step"})
"""The trainer's steps in a program that steps one env itself, without a vector env."""


def trainer_step_blocks(tree: dict[str, Any]) -> frozenset[str]:
    """The blocks that stand for the trainer's env steps: its vector steps; in a program that
    steps its env itself, with no vector env (REINFORCE on one env), ``env.step``, which ``rlprof
    run`` times in the trainer. A run with neither has :data:`VECTOR_STEP_BLOCKS`, none of which
    it holds."""
    names = {node["name"] for node in trainer_nodes(tree)}
    if names & VECTOR_STEP_BLOCKS or not names & SINGLE_ENV_STEP_BLOCKS:
        return VECTOR_STEP_BLOCKS
    return SINGLE_ENV_STEP_BLOCKS


class StepPart(Record):
    """One slice of the trainer's step time."""

    label: str
    seconds: float


class StepBreakdown(Record):
    """The trainer's time in one kind of vectorized step, split into parts that sum to ``total``.

    ``transport_blocks`` holds each transport block's seconds (send apart from receive, for the
    advice); ``notes`` say, in plain words, what this file cannot tell apart and what was assumed.
    """

    block: str
    calls: int
    total: float
    parts: list[StepPart]
    worker_blocks: tuple[str, ...]
    worker_time: float
    worker_calls: int
    workers: int
    is_vector_step: bool
    transport_blocks: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    rest_label: str = ""
    """The label of the part that is the trainer's other work in the step (its layout's)."""

    @property
    def other_trainer_seconds(self) -> float:
        """The trainer's work in the step that is neither env nor pipe (an SB3 wrapper's)."""
        return self.seconds_of(self.rest_label)

    def share(self, part: StepPart) -> float | None:
        return part.seconds / self.total if self.total > 0 else None

    def per_call(self, part: StepPart) -> float:
        return part.seconds / self.calls if self.calls else 0.0

    def seconds_of(self, *labels: str) -> float:
        """The summed seconds of the parts with these labels (0 for labels not present)."""
        return sum(part.seconds for part in self.parts if part.label in labels)


def step_breakdowns(tree: dict[str, Any], measurements: RunMeasurements | None = None) -> list[StepBreakdown]:
    """The breakdown of every kind of vectorized step found in ``tree`` (empty when none ran)."""
    measurements = measurements or read_measurements(tree)
    breakdowns = []
    for layout in STEP_LAYOUTS:
        breakdown = _breakdown(tree, layout, measurements)
        if breakdown is not None:
            breakdowns.append(breakdown)
    return breakdowns


class ThreadBlocks(Record):
    """Blocks of one name that ran in another thread of the trainer's process, beside its main
    thread (a collector thread stepping the envs, and running the policy, while the main thread
    learns)."""

    thread: str
    block: str
    calls: int
    seconds: float

    def as_text(self) -> str:
        return f"{self.block} in {self.thread}, {self.calls} calls, {format_seconds(self.seconds)}"

    def as_dict(self) -> dict[str, Any]:
        return {"thread": self.thread, "block": self.block, "calls": self.calls, "seconds": self.seconds}


def steps_in_threads(tree: dict[str, Any]) -> list[ThreadBlocks]:
    """The vector steps of the trainer's other threads (its ``thread:`` blocks). The breakdowns and
    the phases read the main thread's steps; another thread's run beside them, so a run whose envs
    step only in a thread is told where they ran rather than that it stepped none."""
    return blocks_in_threads(tree, lambda name: name in VECTOR_STEP_BLOCKS)


def blocks_in_threads(tree: dict[str, Any], wanted: Callable[[str], bool]) -> list[ThreadBlocks]:
    """The outermost blocks whose name is ``wanted`` in each of the trainer's other threads,
    summed by thread and name, the longest first."""
    found = []
    for thread in tree.get("children", []):
        if not thread["name"].startswith(THREAD_PREFIX):
            continue
        figures: dict[str, list[float]] = {}
        for node in _outermost_named(thread, wanted):
            sums = figures.setdefault(node["name"], [0, 0.0])
            sums[0] += node["count"]
            sums[1] += node["total"]
        found.extend(ThreadBlocks(thread["name"], block, int(calls), seconds)
                     for block, (calls, seconds) in figures.items())
    return sorted(found, key=lambda blocks: -blocks.seconds)


def _outermost_named(node: dict[str, Any], wanted: Callable[[str], bool]) -> list[dict[str, Any]]:
    """The blocks under ``node`` whose name is ``wanted``, without those nested in another."""
    found = []
    for child in node.get("children", []):
        if wanted(child["name"]):
            found.append(child)
        else:
            found.extend(_outermost_named(child, wanted))
    return found


# A working record (a Record: no dataclass to generate at rlprof run's exit).
class _StepBlocks(Record):
    """The figures of every step node of one layout, summed."""

    calls: int = 0
    total: float = 0.0
    child_totals: dict[str, float] = field(default_factory=dict)
    worker_time: float = 0.0
    worker_calls: int = 0
    worker_blocks: list[str] = field(default_factory=list)
    evaluation_calls: int = 0  # the step's calls inside an evaluation, left out of the figures above


def _breakdown(tree: dict[str, Any], layout: StepLayout, measurements: RunMeasurements) -> StepBreakdown | None:
    blocks = _step_blocks(tree, layout.step)
    if not blocks.calls:
        return None
    workers, notes = _worker_count(blocks, layout, measurements)
    if blocks.evaluation_calls:
        notes.append(f"the evaluation's {blocks.evaluation_calls} {layout.step} calls (inside {EVALUATION_BLOCK}) "
                     "are left out: they are the evaluation phase's")
    mean_compute = blocks.worker_time / workers
    transport_blocks = {name: blocks.child_totals[name] for name in layout.transport
                        if name in blocks.child_totals}
    one_by_one = sum(blocks.child_totals.get(name, 0.0) for name in IN_TRAINER_ENV_BLOCKS)
    in_one_call = sum(blocks.child_totals.get(name, 0.0) for name in NATIVE_ENV_BLOCKS)
    in_trainer = one_by_one + in_one_call
    if layout.wait is None:
        parts = _unsplit_parts(blocks, layout, mean_compute, notes)
    elif layout.wait not in blocks.child_totals and in_trainer and not blocks.worker_calls:
        how = ("one after another" if not in_one_call
               else "all in one call (a natively vectorized env)" if not one_by_one
               else "one after another, or all in one call (a natively vectorized env)")
        notes.append(f"the envs ran in the trainer's process, {how}, under {layout.step}: "
                     "no worker and no pipe to wait for")
        parts = [StepPart(ENV_COMPUTE_IN_TRAINER, in_trainer), StepPart(layout.rest_label, blocks.total - in_trainer)]
    elif layout.wait not in blocks.child_totals:
        notes.append(f"no {layout.wait} block under {layout.step}: sending, waiting, receiving "
                     "and the trainer's other work in the step are one part")
        compute = min(mean_compute, blocks.total)
        parts = [StepPart(ENV_COMPUTE, compute), StepPart(EXCHANGE_UNSPLIT, blocks.total - compute)]
    elif not blocks.worker_calls:
        notes.append("no worker time merged under this block (workers' payloads landed "
                     "elsewhere): env compute cannot be told apart from the wait")
        parts = _lockstep_parts(blocks, layout, sum(transport_blocks.values()), None, None)
    else:
        straggle = _straggle(blocks, layout, measurements, workers, notes)
        parts = _lockstep_parts(blocks, layout, sum(transport_blocks.values()), mean_compute, straggle)
        overlap = mean_compute - blocks.child_totals[layout.wait]
        if overlap > 0:
            notes.append(
                f"the mean worker computed {format_seconds(overlap)} longer than the trainer "
                "waited: that compute overlapped sending and receiving, and is counted as "
                "env compute, not transport")
    return StepBreakdown(
        block=layout.step,
        calls=blocks.calls,
        total=blocks.total,
        parts=parts,
        worker_blocks=tuple(blocks.worker_blocks),
        worker_time=blocks.worker_time,
        worker_calls=blocks.worker_calls,
        workers=workers,
        is_vector_step=layout.is_vector_step,
        transport_blocks=transport_blocks,
        notes=notes,
        rest_label=layout.rest_label,
    )


def _step_blocks(tree: dict[str, Any], step_name: str) -> _StepBlocks:
    blocks = _StepBlocks()
    for path, node in walk_nodes(tree):
        if node["name"] != step_name or node.get("is_parallel"):
            continue
        if EVALUATION_BLOCK in path:
            blocks.evaluation_calls += node["count"]
            continue
        blocks.calls += node["count"]
        blocks.total += node["total"]
        for child in node["children"]:
            if not child.get("is_parallel"):
                blocks.child_totals[child["name"]] = (
                    blocks.child_totals.get(child["name"], 0.0) + child["total"])
        for worker_node in _outermost_parallel(node):
            blocks.worker_time += _worker_seconds(worker_node)
            blocks.worker_calls += worker_node["count"]
            if worker_node["name"] not in blocks.worker_blocks:
                blocks.worker_blocks.append(worker_node["name"])
    return blocks


def _outermost_parallel(node: dict[str, Any]) -> list[dict[str, Any]]:
    """The blocks under ``node`` that ran in workers, without those nested in another such block.

    ML-Agents nests them under a trainer block (``env_step/workers/worker_root``), so the search
    goes through the trainer's own blocks, at any depth.
    """
    found = []
    for child in node["children"]:
        if child.get("is_parallel"):
            found.append(child)
        else:
            found.extend(_outermost_parallel(child))
    return found


def _worker_seconds(worker_node: dict[str, Any]) -> float:
    """A merged worker block's time; for a payload root, the time of the blocks under it.

    ML-Agents merges each worker's whole timer root as ``worker_root``, whose total is the worker's
    interval since its previous reply, idle time included: only its child blocks are work.
    """
    if worker_node["name"] in PAYLOAD_ROOTS:
        return sum(child["total"] for child in worker_node["children"])
    return worker_node["total"]


def _worker_count(blocks: _StepBlocks, layout: StepLayout, measurements: RunMeasurements) -> tuple[int, list[str]]:
    """How many worker processes shared the merged worker time, and how that was found out."""
    busy = [worker for worker in measurements.workers if worker.busy_seconds > 0]
    if busy:
        return len(busy), []
    per_call = max(1, round(blocks.worker_calls / blocks.calls)) if blocks.worker_calls else 1
    if not blocks.worker_calls:
        return 1, []
    if layout.wait is None:
        return per_call, [f"no workers section: the workers are counted as merged "
                          f"{'/'.join(blocks.worker_blocks)} calls per step ({per_call})"]
    return per_call, [f"no workers section: the workers are counted as merged calls per step "
                      f"({per_call}), which counts envs, not processes, when a worker hosts "
                      f"several envs; env compute is then underestimated"]


def _straggle(
    blocks: _StepBlocks, layout: StepLayout, measurements: RunMeasurements, workers: int,
    notes: list[str],
) -> StepPart | None:
    """The straggling part of the wait: measured, estimated, or not told apart from latency."""
    if workers < 2:
        return None
    if layout.is_vector_step and measurements.every_worker_has_critical_path:
        waited = sum(path.wait_as_last_seconds for _, path in measurements.critical_paths)
        return StepPart(WAITING_ON_LAST, waited)
    busy = [worker.busy_seconds for worker in measurements.workers if worker.busy_seconds > 0]
    if len(busy) >= 2:
        notes.append("this file does not record which worker each step waited on: waiting on "
                     "the slowest worker is estimated from how much longer it computed than "
                     "the others")
        slowest = max(busy)
        others_mean = (sum(busy) - slowest) / (len(busy) - 1)
        # Busy times cover the whole run; scale their gap to the compute merged under this step.
        mean_compute = blocks.worker_time / workers
        return StepPart(WAITING_ON_SLOWEST,
                        (slowest - others_mean) / (sum(busy) / len(busy)) * mean_compute)
    notes.append("without per-worker trees, waiting on the slowest worker and pipe latency "
                 "cannot be told apart")
    return StepPart(WAITING_UNSPLIT, 0.0)


def _lockstep_parts(
    blocks: _StepBlocks, layout: StepLayout, transport: float,
    mean_compute: float | None, straggle: StepPart | None,
) -> list[StepPart]:
    """Split a step whose trainer times send, wait and receive (see the module docstring)."""
    assert layout.wait is not None
    waited = blocks.child_totals[layout.wait]
    other = max(0.0, blocks.total - waited - transport)
    if mean_compute is None:
        parts = [StepPart(WAITING_ONLY, waited)]
        return parts + _transport_and_other(layout, transport, other)
    # The wait on the last worker alone comes first; the others' compute fills the rest.
    straggling = min(straggle.seconds, waited) if straggle is not None else 0.0
    compute_in_wait = min(mean_compute, waited - straggling)
    # Compute beyond the whole wait overlapped the trainer's sending and receiving.
    overflow = min(max(0.0, mean_compute - waited), transport + other)
    from_transport = min(overflow, transport)
    parts = [StepPart(ENV_COMPUTE, compute_in_wait + overflow)]
    rest_of_wait = max(0.0, waited - compute_in_wait - straggling)
    if straggle is not None and straggle.label == WAITING_UNSPLIT:
        parts.append(StepPart(WAITING_UNSPLIT, rest_of_wait))
    else:
        if straggle is not None:
            parts.append(StepPart(straggle.label, straggling))
        parts.append(StepPart(WAIT_LATENCY, rest_of_wait))
    return parts + _transport_and_other(layout, transport - from_transport,
                                        other - (overflow - from_transport))


def _transport_and_other(layout: StepLayout, transport: float, other: float) -> list[StepPart]:
    return [StepPart(TRANSPORT, transport), StepPart(layout.rest_label, other)]


def _unsplit_parts(blocks: _StepBlocks, layout: StepLayout, mean_compute: float,
                   notes: list[str]) -> list[StepPart]:
    """ML-Agents' ``env_step``: the trainer's child blocks are its own work; the rest is unsplit."""
    trainer_work = sum(blocks.child_totals.values())
    exchange = max(0.0, blocks.total - trainer_work)
    compute = min(mean_compute, exchange)
    notes.append("ML-Agents does not time sending, waiting and receiving apart, and steps its "
                 "workers asynchronously: env compute is the mean worker's merged time, as far "
                 "as the step's own time covers it")
    return [StepPart(ENV_COMPUTE, compute), StepPart(EXCHANGE_UNSPLIT, exchange - compute),
            StepPart(layout.rest_label, blocks.total - exchange)]
