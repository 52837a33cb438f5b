"""Update blocks that held the rollout, split at their last step.

torch's hooks open an ``update`` block at the first model call with grad and close it at the next
optimizer step (:mod:`profiler.automatic.torch_phases`). A program that runs its rollout's policy
with grad (CleanRL's DQN and SAC, a REINFORCE keeping each step's log-probability) opens it at the
rollout's first call, so the block holds the rollout's calls and env steps up to the optimizer
step. Read from the trainer's timeline, each such block is split at the end of the last step
inside it (:func:`updates_split_at_their_last_step`): before, the rollout's policy calls and its
own code; after, the learner. A long run's timeline holds only its latest blocks:
:func:`split_scaled_to_the_run` shares the tree's figures, which are the whole run's, as those
blocks share theirs.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.phase_names import (NO_GRAD_SUFFIX, ROLLOUT_CODE_PART, UNTIMED_PART, UPDATE_BLOCK,
                                          is_training_name)
from profiler.analysis.trainer_timeline import trainer_spans
from profiler.records import Record

__all__ = ["SplitUpdates", "followed_by_a_step", "split_scaled_to_the_run", "updates_split_at_their_last_step"]


class SplitUpdates(Record):
    """The ``update`` blocks that held the rollout, split at their last step (see
    :func:`updates_split_at_their_last_step`)."""

    rollout_policy: dict[str, list[float]]
    """Per name, the seconds and calls of the model calls before the last steps, and
    :data:`ROLLOUT_CODE_PART`: the time there in no block."""
    rollout_before_training: dict[str, list[float]]
    """Per name, the seconds and calls of the same calls outside any update, each followed by a
    step before any update: the rollout's before the program first trained."""
    learner_parts: dict[str, list[float]]
    """Per name, the seconds and calls of the blocks directly inside the updates after their last
    step, and :data:`UNTIMED_PART`: the update's own code between them."""
    updates: int
    """The update blocks with a learner: the optimizer steps."""
    updates_without_learner: int
    """The update blocks without one: the rollouts the run ended in."""
    loss_on_rollout_graph: bool
    """No update made a model call with grad after its last step (see
    :attr:`TrainingPhases.loss_on_rollout_graph`)."""

    @property
    def learner_seconds(self) -> float:
        return sum(seconds for seconds, _ in self.learner_parts.values())


def updates_split_at_their_last_step(tree: dict[str, Any], step_names: frozenset[str]) -> SplitUpdates | None:
    """The ``update`` blocks of the trainer's thread, from its timeline, each split at the end of
    the last step (a block of ``step_names``) inside it. Before that end: the model calls (the
    outermost blocks inside the update that are no step), per name, and the rollout's own code, the
    time in no block there. After it, the learner: an update without a step is all learner; one
    with no ``backward`` or optimizer call after its last step, which a run ends in, has none;
    its parts are the blocks directly inside the update after its last step (the learner's
    forward, a target network's, ``backward``, the optimizer's calls) and ``(untimed)``, the
    update's own code between them (sampling the replay buffer, the loss). None without a
    timeline, or with one that shows no step inside an update block. Where the timeline holds only
    the run's latest updates, it is the split of those (:func:`split_scaled_to_the_run` makes it
    the run's).

    One sweep over the spans sorted by start (the longer first at a tie): a span that starts at or
    after the end of the outermost one open is outermost itself; else one that starts at or after
    the end of the last span directly inside it is directly inside it too."""
    timeline = trainer_spans(tree)
    if timeline is None:
        return None
    ordered = sorted((span[1], -span[2], position, span[0]) for position, span in enumerate(timeline.spans))
    rollout_policy: dict[str, list[float]] = {}
    rollout_before_training: dict[str, list[float]] = {}
    learner_parts: dict[str, list[float]] = {}
    updates = closed = split = split_learners = recomputed = 0

    def add(into: dict[str, list[float]], name: str, seconds: float) -> None:
        figures = into.setdefault(name, [0.0, 0])
        figures[0] += seconds
        figures[1] += 1

    def add_learner(begin: float, end: float, inside: list[tuple[str, float, float]]) -> None:
        nonlocal updates
        updates += 1
        timed = 0.0
        for name, start, stop in inside:
            if start >= begin:
                add(learner_parts, name, stop - start)
                timed += stop - start
        add(learner_parts, UNTIMED_PART, max(0.0, end - begin - timed))

    def close(update: tuple[float, float], inside: list[tuple[str, float, float]]) -> None:
        nonlocal closed, split, split_learners, recomputed
        closed += 1
        last_step = max((end for name, _, end in inside if name in step_names), default=None)
        if last_step is None:
            add_learner(update[0], update[1], inside)
            return
        split += 1
        after = [name for name, start, _ in inside if start >= last_step]
        # Without a training call after its last step, it is a rollout the run ended in: no update.
        if any(is_training_name(name) for name in after):
            add_learner(last_step, update[1], inside)
            split_learners += 1
            recomputed += any(not is_training_name(name) and not name.endswith(NO_GRAD_SUFFIX) for name in after)
        timed = 0.0
        for name, start, end in inside:
            if end <= last_step:
                timed += end - start
                if name not in step_names:
                    add(rollout_policy, name, end - start)
        if last_step - update[0] > timed:
            add(rollout_policy, ROLLOUT_CODE_PART, last_step - update[0] - timed)

    outermost: list[tuple[str, float, float]] = []
    open_update: tuple[float, float] | None = None
    inside: list[tuple[str, float, float]] = []
    for start, negative_end, _, name in ordered:
        end = -negative_end
        if not outermost or start >= outermost[-1][2]:
            if open_update is not None:
                close(open_update, inside)
            outermost.append((name, start, end))
            open_update, inside = ((start, end), []) if name == UPDATE_BLOCK else (None, [])
        elif open_update is not None and (not inside or start >= inside[-1][2]):
            inside.append((name, start, end))
    if open_update is not None:
        close(open_update, inside)
    if not split:  # the timeline shows no step inside an update (the blocks were read elsewhere)
        return None
    # The same calls outside any update, each followed by a step before any update: the
    # rollout's calls before the program's first optimizer step (the hooks open no update before
    # a program has trained once), not the first update's forward.
    for (name, start, end), next_is_a_step in zip(outermost, followed_by_a_step(outermost, step_names)):
        if next_is_a_step and name in rollout_policy:
            add(rollout_before_training, name, end - start)
    return SplitUpdates(rollout_policy, rollout_before_training, learner_parts, updates, closed - updates,
                         loss_on_rollout_graph=split_learners > 0 and not recomputed)


def split_scaled_to_the_run(split: SplitUpdates, inside: dict[str, list[float]], outside: dict[str, list[float]],
                             update_blocks: int) -> SplitUpdates:
    """``split``, read from a long run's latest update blocks, made the run's. Each name's seconds
    and calls directly inside the update blocks are the tree's (``inside``: the whole run's),
    shared between the rollout and the learner as the held blocks share them; the time in no block
    (the tree's self time of the update blocks, ``inside``'s :data:`UNTIMED_PART`) between the
    rollout's own code and the update's likewise. The optimizer steps are the run's
    ``update_blocks`` less the held ones without a learner, the rollouts the run ended in (the
    latest: held). The rollout's calls before the program first trained, which the timeline no
    longer holds, are the tree's calls of those names outside any block (``outside``).

    A share rather than a multiple of what the held blocks show: a program whose rollout calls its
    policy more often as it explores less (CleanRL's DQN, as its epsilon decays) calls it more per
    update late in the run than early."""
    rollout: dict[str, list[float]] = {}
    learner: dict[str, list[float]] = {}
    in_no_block = (ROLLOUT_CODE_PART, UNTIMED_PART)  # the time in no block, before and after the last step
    paired = {name: (name, name) for name in (*split.rollout_policy, *split.learner_parts) if name not in in_no_block}
    paired[UNTIMED_PART] = in_no_block
    for tree_name, (rollout_name, learner_name) in paired.items():
        before = split.rollout_policy.get(rollout_name, [0.0, 0])
        after = split.learner_parts.get(learner_name, [0.0, 0])
        run_seconds, run_calls = inside.get(tree_name, [before[0] + after[0], before[1] + after[1]])[:2]
        for into, name, held in ((rollout, rollout_name, before), (learner, learner_name, after)):
            if held[1]:
                into[name] = [run_seconds * _share(held[0], before[0] + after[0]),
                              round(run_calls * _share(held[1], before[1] + after[1]))]
    updates = max(0, update_blocks - split.updates_without_learner)
    if UNTIMED_PART in learner:
        learner[UNTIMED_PART][1] = updates  # the update's own code: one part per optimizer step
    before_training = {name: list(outside[name][:2]) for name in rollout if name in outside}
    return SplitUpdates(rollout, before_training, learner, updates, split.updates_without_learner,
                         split.loss_on_rollout_graph)


def _share(part: float, whole: float) -> float:
    return part / whole if whole > 0 else 0.0


def followed_by_a_step(outermost: list[tuple[str, float, float]], step_names: frozenset[str]) -> list[bool | None]:
    """For each outermost span, whether the next step (a block of ``step_names``) or update after
    it is a step (None when neither follows); read backwards, once."""
    following: list[bool | None] = []
    comes_next: bool | None = None
    for name, _, _ in reversed(outermost):
        following.append(comes_next)
        if name in step_names:
            comes_next = True
        elif name == UPDATE_BLOCK:
            comes_next = False
    following.reverse()
    return following
