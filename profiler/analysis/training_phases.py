"""A training run's phases in the user's terms: the policy's inference, the update, the environments.

``rlprof run`` times a PyTorch or Stable-Baselines3 program's calls without edits
(:mod:`profiler.automatic`); this module reads those blocks back from the dump and says what each
phase of the training loop took, named as the program names its calls:

- **policy** (inference): the outermost inference calls of the trainer — model methods and module
  calls under ``torch.no_grad()`` (blocks named ``... (no grad)``: CleanRL's
  ``Agent.get_action_and_value (no grad)``) and SB3's ``predict``/``predict_values`` — anywhere
  but inside an update;
- **update** (the learner): torch's ``update`` blocks (one per optimizer step: the forward with
  grad, the loss code, ``zero_grad``, ``backward``, ``step``), plus the untimed time *between* two
  consecutive ``update`` blocks where no other block ran (the minibatch loop's shuffling and
  indexing), which the timeline shows; or SB3's ``<Algorithm>.train`` blocks;
- **environments**: the trainer's vector-step blocks (``vector.step``: the envs' compute, and for
  envs in other processes the wait and the transport).

An ``update`` block that holds vector steps is not an update: the program ran its rollout's policy
with grad enabled, so the hooks could not tell its rollout from its update;
:attr:`TrainingPhases.rollout_with_grad` says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from profiler.analysis.block_stats import median
from profiler.analysis.step_time import VECTOR_STEP_BLOCKS, ThreadSteps
from profiler.analysis.text_format import format_percent, format_seconds
from profiler.analysis.untimed_gaps import outermost_spans
from profiler.records import Record

__all__ = ["PhaseBlock", "TrainingPhases", "training_phases", "training_phases_text"]

UPDATE_BLOCK = "update"
"""The block the torch hooks open per optimizer step (``profiler.automatic.torch_phases``)."""
NO_GRAD_SUFFIX = " (no grad)"
SB3_FRAMEWORK = "stable_baselines3"
_SB3_INFERENCE_METHODS = (".predict", ".predict_values")


class PhaseBlock(Record):
    """One block of a phase, summed over every place it ran in the trainer."""

    name: str
    seconds: float
    calls: int
    self_seconds: float = 0.0
    """Its time outside its child blocks: for a model method, outside the networks' forwards."""

    def as_dict(self) -> dict[str, Any]:
        return {"block": self.name, "seconds": self.seconds, "calls": self.calls, "self_seconds": self.self_seconds}


class TrainingPhases(Record):
    """What each phase took, with the blocks that make it up (costliest first)."""

    policy: tuple[PhaseBlock, ...]
    update: tuple[PhaseBlock, ...]
    update_parts: tuple[PhaseBlock, ...]
    """The blocks inside the update blocks, summed by name; ``(untimed)`` for the update's own
    code between them (the loss arithmetic, gradient clipping)."""
    update_between_seconds: float
    env_steps: PhaseBlock | None
    rollout_with_grad: bool

    @property
    def policy_seconds(self) -> float:
        return sum(block.seconds for block in self.policy)

    @property
    def update_seconds(self) -> float:
        return sum(block.seconds for block in self.update) + self.update_between_seconds

    @property
    def env_seconds(self) -> float:
        return self.env_steps.seconds if self.env_steps is not None else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": {"seconds": self.policy_seconds, "blocks": [block.as_dict() for block in self.policy]},
            "update": {"seconds": self.update_seconds, "blocks": [block.as_dict() for block in self.update],
                       "between_blocks_seconds": self.update_between_seconds,
                       "parts": [block.as_dict() for block in self.update_parts]},
            "environments": {"seconds": self.env_seconds,
                             "block": self.env_steps.as_dict() if self.env_steps is not None else None},
            "rollout_with_grad": self.rollout_with_grad,
        }


def training_phases(tree: dict[str, Any]) -> TrainingPhases | None:
    """The phases of the trainer in ``tree``, or None when it has no policy or update block."""
    sb3 = SB3_FRAMEWORK in str(tree.get("metadata", {}).get("rlprof_framework_phases", ""))
    policy: dict[str, list[float]] = {}
    update: dict[str, list[float]] = {}
    parts: dict[str, list[float]] = {}
    steps: dict[str, list[float]] = {}
    rollout_with_grad = False

    def add(into: dict[str, list[float]], name: str, node: dict[str, Any], seconds: float | None = None) -> None:
        figures = into.setdefault(name, [0.0, 0, 0.0])
        figures[0] += node["total"] if seconds is None else seconds
        figures[1] += node["count"]
        figures[2] += node["self"] if seconds is None else 0.0

    def visit(node: dict[str, Any]) -> None:
        nonlocal rollout_with_grad
        for child in node.get("children", []):
            if child.get("is_parallel"):
                continue
            name = child["name"]
            if _is_update(name, sb3):
                if name == UPDATE_BLOCK and _holds_a_step(child):
                    rollout_with_grad = True
                    visit(child)
                    continue
                add(update, name, child)
                for part in child["children"]:
                    if not part.get("is_parallel"):
                        add(parts, part["name"], part)
                add(parts, "(untimed)", child, child["self"])
            elif name.endswith(NO_GRAD_SUFFIX) or (sb3 and name.endswith(_SB3_INFERENCE_METHODS)):
                add(policy, name, child)
            else:
                if name in VECTOR_STEP_BLOCKS:
                    add(steps, name, child)
                visit(child)

    visit(tree)
    if not policy and not update:
        return None
    step = max(_ranked(steps), key=lambda block: block.seconds, default=None)
    return TrainingPhases(
        policy=_ranked(policy), update=_ranked(update), update_parts=_ranked(parts),
        update_between_seconds=_between_updates(tree) if UPDATE_BLOCK in update else 0.0,
        env_steps=step, rollout_with_grad=rollout_with_grad)


def _is_update(name: str, sb3: bool) -> bool:
    return name == UPDATE_BLOCK or (sb3 and name.endswith(".train"))


def _holds_a_step(node: dict[str, Any]) -> bool:
    return any(child["name"] in VECTOR_STEP_BLOCKS or _holds_a_step(child) for child in node.get("children", []))


def _ranked(figures: dict[str, list[float]]) -> tuple[PhaseBlock, ...]:
    blocks = [PhaseBlock(name, seconds, int(calls), own) for name, (seconds, calls, own) in figures.items()]
    return tuple(sorted(blocks, key=lambda block: (-block.seconds, block.name)))


def _between_updates(tree: dict[str, Any]) -> float:
    """The untimed time between consecutive outermost ``update`` spans of the trainer's thread with
    no other block between them, each gap at most as long as the median update (a longer pause
    is something else: a checkpoint, an evaluation)."""
    processes = tree.get("timeline", {}).get("processes", [])
    if not processes or not processes[0].get("threads"):
        return 0.0
    spans = outermost_spans(processes[0]["threads"][0]["spans"])
    updates = [end - start for name, start, end in spans if name == UPDATE_BLOCK]
    if len(updates) < 2:
        return 0.0
    longest_gap = median(updates)
    gaps = (after[1] - before[2] for before, after in zip(spans, spans[1:])
            if before[0] == UPDATE_BLOCK and after[0] == UPDATE_BLOCK)
    return sum(gap for gap in gaps if 0.0 < gap <= longest_gap)


def training_phases_text(phases: TrainingPhases, wall_time: float,
                         steps_in_threads: Sequence[ThreadSteps] = ()) -> str:
    """The phases as the report's lines: each phase's time, share of the wall time and its blocks.
    ``steps_in_threads`` (:func:`profiler.analysis.step_time.steps_in_threads`) are named where the
    main thread stepped no env: the environments ran beside it, not in no time."""

    def share(seconds: float) -> str:
        return format_percent(seconds / wall_time if wall_time > 0 else None)

    def listed(blocks: tuple[PhaseBlock, ...]) -> str:
        return ", ".join(f"{block.name} x{block.calls}" for block in blocks[:3]) or "none"

    lines = ["training phases (what rlprof run timed in the program's own calls):",
             f"  policy (inference)  {format_seconds(phases.policy_seconds):>10} {share(phases.policy_seconds):>6}  "
             f"{listed(phases.policy)}",
             f"  update (learner)    {format_seconds(phases.update_seconds):>10} {share(phases.update_seconds):>6}  "
             f"{listed(phases.update)}"
             + (f", {format_seconds(phases.update_between_seconds)} between them"
                if phases.update_between_seconds else ""),
             f"  environments        {format_seconds(phases.env_seconds):>10} {share(phases.env_seconds):>6}  "
             f"{listed((phases.env_steps,)) if phases.env_steps is not None else _env_steps_elsewhere(steps_in_threads)}"]
    if phases.rollout_with_grad:
        lines.append("  (the rollout's policy ran with grad enabled: its vector steps fell inside update blocks)")
    return "\n".join(lines)


def _env_steps_elsewhere(steps_in_threads: Sequence[ThreadSteps]) -> str:
    """The environments line of a main thread that stepped no env: none, or where they ran."""
    if not steps_in_threads:
        return "none"
    return f"none in this thread; beside it: {'; '.join(steps.as_text() for steps in steps_in_threads)}"
