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
  indexing), which the timeline shows, and a target network's inference calls before each update
  (:func:`_target_calls_before_updates`); or SB3's ``<Algorithm>.train`` blocks;
- **environments**: the trainer's vector-step blocks (``vector.step``: the envs' compute, and for
  envs in other processes the wait and the transport); in a program that steps one env itself,
  with no vector env, its ``env.step`` blocks (:func:`~profiler.analysis.step_time.trainer_step_blocks`);
- **evaluation**: SB3's ``evaluate_policy`` blocks (``EvalCallback`` runs them inside the
  rollout), with the policy calls and env steps inside them, which are none of the other phases'.

An ``update`` block that holds steps is not only an update: the program ran its rollout's policy
with grad enabled (CleanRL's DQN and SAC do; REINFORCE keeps each call's log-probability for its
loss), and the block opened at that call, so it holds the rollout up to the optimizer step;
:attr:`TrainingPhases.rollout_with_grad` says so. Where the timeline was recorded, each such block
is split at the end of the last step inside it (:mod:`profiler.analysis.rollout_updates`): the
update is what follows it (the learner's forward with its target network's, the loss,
``backward``, the step); before it, the model calls are the rollout's policy, and the time in no
block is the rollout's own code (:data:`ROLLOUT_CODE_PART`, a part of the policy phase: building
the action distribution, sampling, storing the step, as a model method's own code is its call's);
:attr:`TrainingPhases.split_at_steps` says so.

The figures read from the timeline (that split, a target network's calls, the time between
updates) are read, in a long run, from the spans its timeline still holds, and scaled to the
run's calls (:mod:`profiler.analysis.trainer_timeline`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from profiler.analysis.block_stats import median
from profiler.analysis.last_answer import LastAnswer
from profiler.analysis.outermost import outermost_spans
from profiler.analysis.phase_names import (NO_GRAD_SUFFIX, ROLLOUT_CODE_PART, UNTIMED_PART, UPDATE_BLOCK,
                                          is_training_name)
from profiler.analysis.rollout_updates import (followed_by_a_step, split_scaled_to_the_run,
                                              updates_split_at_their_last_step)
from profiler.analysis.step_time import (EVALUATION_BLOCK, VECTOR_STEP_BLOCKS, ThreadBlocks, blocks_in_threads,
                                         trainer_step_blocks)
from profiler.analysis.text_format import format_percent, format_seconds
from profiler.analysis.trainer_timeline import TrainerSpans, trainer_spans
from profiler.records import Record

__all__ = ["NO_GRAD_SUFFIX", "ROLLOUT_CODE_PART", "UNTIMED_PART", "PhaseBlock", "TrainingPhases",
           "policy_calls_in_threads", "training_phases", "training_phases_text", "training_start",
           "training_window"]

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
    code between them (the loss arithmetic, gradient clipping). Where update blocks that held the
    rollout were split (:attr:`split_at_steps`), the blocks directly inside their part after the
    last step, read from the timeline (their self time not read: 0)."""
    update_between_seconds: float
    env_steps: PhaseBlock | None
    rollout_with_grad: bool
    split_at_steps: bool = False
    """Whether update blocks holding the rollout were split at their last step (the timeline was
    recorded), so the policy and the update are told apart after all."""
    evaluation: tuple[PhaseBlock, ...] = ()
    """SB3's evaluations (``evaluate_policy``), each holding its own policy calls and env steps."""
    loss_on_rollout_graph: bool = False
    """Whether the split updates' loss is made of the rollout's own calls with grad: no model call
    with grad ran after their last step, only ``backward`` and the optimizer's (REINFORCE keeps each
    step's log-probability for the loss). Their grad is then used, not wasted: ``no_grad`` alone
    would break the loss, which must then recompute them in one batched forward."""

    @property
    def steps_a_vector_env(self) -> bool:
        """Whether its env steps are a vector env's (not one env the program steps itself)."""
        return self.env_steps is not None and self.env_steps.name in VECTOR_STEP_BLOCKS

    @property
    def steps_word(self) -> str:
        """What its steps are called: ``env steps`` of one env the program steps itself, else
        ``vector steps``."""
        return "env steps" if self.env_steps is not None and not self.steps_a_vector_env else "vector steps"

    @property
    def policy_seconds(self) -> float:
        return sum(block.seconds for block in self.policy)

    @property
    def update_blocks(self) -> tuple[PhaseBlock, ...]:
        """The update's own blocks (``update``, one per optimizer step, or SB3's ``<Algorithm>.train``),
        without the target network's calls before them."""
        return tuple(block for block in self.update if not block.name.endswith(NO_GRAD_SUFFIX))

    @property
    def update_seconds(self) -> float:
        return sum(block.seconds for block in self.update) + self.update_between_seconds

    @property
    def reads_a_target_network(self) -> bool:
        """Whether the update runs another model than the rollout's under ``torch.no_grad()``: a
        target network, whose values the loss needs (DQN, TD3, SAC: algorithms that learn from a
        replay buffer every few env steps, not in epochs over a rollout). A model is the rollout's
        where the policy calls it at least as often as the update does under ``no_grad``: SAC's
        first training step, before the hooks open any update, calls its target critics once
        outside one, among the policy's calls."""
        update_calls: dict[str, int] = {}
        for block in (*self.update, *self.update_parts):
            if block.name.endswith(NO_GRAD_SUFFIX):
                update_calls[_model_of(block.name)] = update_calls.get(_model_of(block.name), 0) + block.calls
        policy_calls: dict[str, int] = {}
        for block in self.policy:
            policy_calls[_model_of(block.name)] = policy_calls.get(_model_of(block.name), 0) + block.calls
        return any(policy_calls.get(model, 0) < calls for model, calls in update_calls.items())

    @property
    def env_seconds(self) -> float:
        return self.env_steps.seconds if self.env_steps is not None else 0.0

    @property
    def evaluation_seconds(self) -> float:
        return sum(block.seconds for block in self.evaluation)

    def as_dict(self) -> dict[str, Any]:
        return {
            "policy": {"seconds": self.policy_seconds, "blocks": [block.as_dict() for block in self.policy]},
            "update": {"seconds": self.update_seconds, "blocks": [block.as_dict() for block in self.update],
                       "between_blocks_seconds": self.update_between_seconds,
                       "parts": [block.as_dict() for block in self.update_parts]},
            "environments": {"seconds": self.env_seconds,
                             "block": self.env_steps.as_dict() if self.env_steps is not None else None},
            "evaluation": {"seconds": self.evaluation_seconds,
                           "blocks": [block.as_dict() for block in self.evaluation]},
            "rollout_with_grad": self.rollout_with_grad,
            "split_at_steps": self.split_at_steps,
            "loss_on_rollout_graph": self.loss_on_rollout_graph,
        }


# An analysis and the verdicts ask for the same dump's phases several times (rlprof run's exit, four):
# read from a timeline of 100,000 spans, each reading took 140 ms.
_last_answer: LastAnswer[TrainingPhases | None] = LastAnswer()
_last_window: LastAnswer[tuple[float, float] | None] = LastAnswer()


def training_phases(tree: dict[str, Any]) -> TrainingPhases | None:
    """The phases of the trainer in ``tree``, or None when it has no policy or update block."""
    timeline = trainer_spans(tree)
    spans = timeline.spans if timeline is not None else None
    held = len(spans) if spans is not None else 0
    return _last_answer.answer((tree, spans), (held,), lambda: _training_phases(tree))


def _training_phases(tree: dict[str, Any]) -> TrainingPhases | None:
    sb3 = _is_sb3_run(tree)
    step_names = trainer_step_blocks(tree)
    policy: dict[str, list[float]] = {}
    policy_in_updates: dict[str, list[float]] = {}  # no-grad calls inside update blocks that hold steps
    update: dict[str, list[float]] = {}
    parts: dict[str, list[float]] = {}
    steps: dict[str, list[float]] = {}
    evaluation: dict[str, list[float]] = {}
    inside_rollout_updates: dict[str, list[float]] = {}  # what the update blocks that hold steps hold
    rollout_updates = 0
    rollout_with_grad = False

    def add(into: dict[str, list[float]], name: str, node: dict[str, Any], seconds: float | None = None) -> None:
        figures = into.setdefault(name, [0.0, 0, 0.0])
        figures[0] += node["total"] if seconds is None else seconds
        figures[1] += node["count"]
        figures[2] += node["self"] if seconds is None else 0.0

    def visit(node: dict[str, Any], in_rollout_update: bool = False) -> None:
        nonlocal rollout_with_grad, rollout_updates
        for child in node.get("children", []):
            if child.get("is_parallel"):
                continue
            name = child["name"]
            if name == EVALUATION_BLOCK and sb3:
                add(evaluation, name, child)  # its policy calls and env steps are the evaluation's
            elif _is_update(name, sb3):
                if name == UPDATE_BLOCK and _holds_a_step(child, step_names):
                    rollout_with_grad = True
                    rollout_updates += child["count"]
                    for part in child["children"]:
                        if _is_training_call(part):
                            add(parts, part["name"], part)
                        if not part.get("is_parallel"):
                            add(inside_rollout_updates, part["name"], part)
                    add(inside_rollout_updates, UNTIMED_PART, child, child["self"])
                    visit(child, in_rollout_update=True)
                    continue
                add(update, name, child)
                for part in child["children"]:
                    if not part.get("is_parallel"):
                        add(parts, part["name"], part)
                add(parts, UNTIMED_PART, child, child["self"])
            elif _is_policy_call(name, sb3):
                add(policy_in_updates if in_rollout_update else policy, name, child)
            else:
                if name in step_names:
                    add(steps, name, child)
                visit(child, in_rollout_update)

    visit(tree)
    split = updates_split_at_their_last_step(tree, step_names) if rollout_with_grad else None
    if split is not None and not trainer_spans(tree).complete:  # type: ignore[union-attr]  # a split was read from it
        # The root's calls of the rollout's names; its inference calls are the policy's already.
        outside = {child["name"]: [child["total"], child["count"]] for child in tree.get("children", [])
                   if not child.get("is_parallel") and not _is_policy_call(child["name"], sb3)}
        split = split_scaled_to_the_run(split, inside_rollout_updates, outside, rollout_updates)
    if split is not None:
        for name, (seconds, calls) in (*split.rollout_policy.items(), *split.rollout_before_training.items()):
            figures = policy.setdefault(name, [0.0, 0, 0.0])
            figures[0] += seconds
            figures[1] += calls
        update[UPDATE_BLOCK] = [split.learner_seconds, split.updates, 0.0]
        # The tree's parts of blocks that held the rollout are only the training calls; the
        # timeline's are what ran after each update's last step, its own code included (their
        # self time is not read from the timeline: 0).
        parts = {name: [seconds, calls, 0.0] for name, (seconds, calls) in split.learner_parts.items()}
    else:
        for name, figures in policy_in_updates.items():
            policy.setdefault(name, [0.0, 0, 0.0])
            policy[name] = [sum(pair) for pair in zip(policy[name], figures)]
    if UPDATE_BLOCK in update:
        rollout_calls = frozenset(split.rollout_policy) if split is not None else frozenset()
        for name, (seconds, calls) in _target_calls_before_updates(tree, policy, step_names, rollout_calls).items():
            figures = policy[name]
            figures[0] -= seconds
            figures[1] -= calls
            if figures[1] <= 0:
                del policy[name]
            update[name] = [seconds, calls, 0.0]
    if not policy and not update:
        return None
    step = max(_ranked(steps), key=lambda block: block.seconds, default=None)
    return TrainingPhases(
        policy=_ranked(policy), update=_ranked(update), update_parts=_ranked(parts),
        update_between_seconds=_between_updates(tree) if UPDATE_BLOCK in update and split is None else 0.0,
        env_steps=step, rollout_with_grad=rollout_with_grad, split_at_steps=split is not None,
        evaluation=_ranked(evaluation), loss_on_rollout_graph=split is not None and split.loss_on_rollout_graph)


def _is_sb3_run(tree: dict[str, Any]) -> bool:
    """Whether ``rlprof run`` timed Stable-Baselines3's phases in this run."""
    return SB3_FRAMEWORK in str(tree.get("metadata", {}).get("rlprof_framework_phases", ""))


def _is_policy_call(name: str, sb3: bool) -> bool:
    """A block of the policy's inference: a call under ``no_grad``, or SB3's ``predict``."""
    return name.endswith(NO_GRAD_SUFFIX) or (sb3 and name.endswith(_SB3_INFERENCE_METHODS))


def _is_update(name: str, sb3: bool) -> bool:
    return name == UPDATE_BLOCK or (sb3 and name.endswith(".train"))


def _is_training_call(node: dict[str, Any]) -> bool:
    """``backward``, an optimizer's ``step`` or ``zero_grad``: the learner's work wherever it ran."""
    return not node.get("is_parallel") and is_training_name(node["name"])


def training_start(tree: dict[str, Any]) -> float | None:
    """When the program began to train, on the timeline's clock: the start of its first policy
    call or update block. What the trainer did outside any block before it was its start-up
    (imports, building the model and the data), whether or not it steps envs. None without those
    blocks, or without a trainer timeline that kept its first spans."""
    window = training_window(tree)
    return window[0] if window is not None else None


def training_window(tree: dict[str, Any]) -> tuple[float, float] | None:
    """From the start of the program's first policy call or update block to the end of its last,
    on the timeline's clock: the training loop of a program that steps no env it builds (behaviour
    cloning from a dataset), whose loop no vector step tells. None as for :func:`training_start`.
    Every share of such a program's loop asks: kept for the same dump, as the phases are."""
    timeline = trainer_spans(tree)
    if timeline is None:
        return None
    return _last_window.answer((tree, timeline.spans), (len(timeline.spans),), lambda: _window(tree, timeline))


def _window(tree: dict[str, Any], timeline: TrainerSpans) -> tuple[float, float] | None:
    phases = training_phases(tree)
    if phases is None:
        return None
    names = {block.name for block in (*phases.policy, *phases.update_blocks)}
    if timeline.scale(tree, names) != 1.0:  # the first of them fell out of the timeline
        return None
    spans = [span for span in timeline.spans if span[0] in names]
    if not spans:
        return None
    return min(span[1] for span in spans), max(span[2] for span in spans)


def _target_calls_before_updates(tree: dict[str, Any], policy: dict[str, list[float]],
                                 step_names: frozenset[str], rollout_calls: frozenset[str]) -> dict[str, list[float]]:
    """The inference calls of another model than the rollout's, each followed by an ``update``
    block before any step (a block of ``step_names``): a target network's, whose values the update's loss needs
    (CleanRL's DQN and TD3 compute their targets under ``torch.no_grad()`` before the forward with
    grad that opens the update). Per name, their seconds and calls, from the timeline's outermost
    spans (in a long run, the share of the name's calls they are where the timeline holds them,
    of all its calls); none without a timeline.

    The rollout's models are those of the policy's calls followed by a step before any
    update, and of ``rollout_calls``, the calls before the last step of update blocks that held
    the rollout (a long run's timeline may hold no rollout call outside an update); a call of one
    of them right before an update stays the policy's (CleanRL's PPO asks its agent for the value
    to bootstrap from before each update)."""
    timeline = trainer_spans(tree)
    names = {name for name in policy if name.endswith(NO_GRAD_SUFFIX)}
    if timeline is None or not names:
        return {}
    outermost = outermost_spans(timeline.spans)
    following = followed_by_a_step(outermost, step_names)
    rollout_models = {_model_of(name) for (name, _, _), next_is_a_step in zip(outermost, following)
                      if next_is_a_step and name in policy}
    rollout_models.update(_model_of(name) for name in rollout_calls if name != ROLLOUT_CODE_PART)
    found: dict[str, list[float]] = {}
    for (name, start, end), next_is_a_step in zip(outermost, following):
        if next_is_a_step is False and name in names and _model_of(name) not in rollout_models:
            figures = found.setdefault(name, [0.0, 0])
            figures[0] += end - start
            figures[1] += 1
    scaled = {}
    for name, (seconds, calls) in found.items():
        scale = timeline.scale(tree, {name}) or 1.0
        scaled[name] = [seconds * scale, round(calls * scale)]
    return scaled


def _model_of(name: str) -> str:
    """The model a call's block names: ``target_network`` of ``target_network.forward (no grad)``,
    ``Agent`` of ``Agent.get_value (no grad)``."""
    return name.split(".", 1)[0]


def _holds_a_step(node: dict[str, Any], step_names: frozenset[str]) -> bool:
    return any(child["name"] in step_names or _holds_a_step(child, step_names) for child in node.get("children", []))


def _ranked(figures: dict[str, list[float]]) -> tuple[PhaseBlock, ...]:
    blocks = [PhaseBlock(name, seconds, int(calls), own) for name, (seconds, calls, own) in figures.items()]
    return tuple(sorted(blocks, key=lambda block: (-block.seconds, block.name)))


def _between_updates(tree: dict[str, Any]) -> float:
    """The untimed time between consecutive outermost ``update`` spans of the trainer's thread with
    no other block between them, each gap at most as long as the median update (a longer pause
    is something else: a checkpoint, an evaluation); scaled to the run's updates where the
    timeline holds only its latest."""
    timeline = trainer_spans(tree)
    if timeline is None:
        return 0.0
    spans = outermost_spans(timeline.spans)
    updates = [end - start for name, start, end in spans if name == UPDATE_BLOCK]
    if len(updates) < 2:
        return 0.0
    longest_gap = median(updates)
    gaps = (after[1] - before[2] for before, after in zip(spans, spans[1:])
            if before[0] == UPDATE_BLOCK and after[0] == UPDATE_BLOCK)
    return sum(gap for gap in gaps if 0.0 < gap <= longest_gap) * (timeline.scale(tree, {UPDATE_BLOCK}) or 1.0)


def policy_calls_in_threads(tree: dict[str, Any]) -> list[ThreadBlocks]:
    """The policy's inference calls in the trainer's other threads: the phases read the main
    thread's, and a collector thread that runs the policy as it steps the envs ran them beside it."""
    sb3 = _is_sb3_run(tree)
    return blocks_in_threads(tree, lambda name: _is_policy_call(name, sb3))


def training_phases_text(phases: TrainingPhases, wall_time: float,
                         steps_in_threads: Sequence[ThreadBlocks] = (),
                         policy_in_threads: Sequence[ThreadBlocks] = ()) -> str:
    """The phases as the report's lines: each phase's time, share of the wall time and its blocks.
    ``steps_in_threads`` (:func:`profiler.analysis.step_time.steps_in_threads`) and
    ``policy_in_threads`` (:func:`policy_calls_in_threads`) are named where the main thread ran
    none of its own: they ran beside it, not in no time."""

    def share(seconds: float) -> str:
        return format_percent(seconds / wall_time if wall_time > 0 else None)

    def listed(blocks: tuple[PhaseBlock, ...], beside: Sequence[ThreadBlocks]) -> str:
        if blocks:
            return ", ".join(f"{block.name} x{block.calls}" if block.name != ROLLOUT_CODE_PART
                             else "the rollout's own code" for block in blocks[:3])
        if not beside:
            return "none"
        return f"none in this thread; beside it: {'; '.join(other.as_text() for other in beside)}"

    env_steps = (phases.env_steps,) if phases.env_steps is not None else ()
    lines = ["training phases (what rlprof run timed in the program's own calls):",
             f"  policy (inference)  {format_seconds(phases.policy_seconds):>10} {share(phases.policy_seconds):>6}  "
             f"{listed(phases.policy, policy_in_threads)}",
             f"  update (learner)    {format_seconds(phases.update_seconds):>10} {share(phases.update_seconds):>6}  "
             f"{listed(phases.update, ())}"
             + (f", {format_seconds(phases.update_between_seconds)} between them"
                if phases.update_between_seconds else ""),
             f"  environments        {format_seconds(phases.env_seconds):>10} {share(phases.env_seconds):>6}  "
             f"{listed(env_steps, steps_in_threads)}"]
    if phases.evaluation:
        lines.append(f"  evaluation          {format_seconds(phases.evaluation_seconds):>10} "
                     f"{share(phases.evaluation_seconds):>6}  {listed(phases.evaluation, ())} (its policy calls and env "
                     "steps are its own, in no other phase)")
    steps = phases.steps_word
    if phases.rollout_with_grad and phases.split_at_steps:
        lines.append(f"  (the rollout's policy ran with grad enabled, so its {steps} fell inside update blocks: "
                     "each was split at its last step, the update after it, the policy's calls and the rollout's "
                     "own code before)")
    elif phases.rollout_with_grad:
        lines.append(f"  (the rollout's policy ran with grad enabled: its {steps} fell inside update blocks)")
    return "\n".join(lines)
