"""The untimed time of a vectorized run split by where in the loop it fell: between steps or
between rollouts.

A training loop steps its envs many times in a row (a rollout), then does something else for
longer (the update, logging), then steps again. The timeline of the trainer's thread (the dump's
``timeline`` section) holds each vector step's span; the time between two consecutive steps that
no other outermost block covers is untimed time *between steps* — the policy's inference and
storage, where the program does not time them — unless that gap is much longer than the usual one
(more than :data:`ROLLOUT_GAP_FACTOR` times the median gap) or holds a reset (a new episode), when
it is *between rollouts*: advantages, the update, logging. The rest of the untimed time is
*elsewhere*: start-up before the first step, the end after the last. A program that steps one env
itself, with no vector env, has its ``env.step`` blocks for steps
(:func:`~profiler.analysis.step_time.trainer_step_blocks`), and its ``env.reset`` between two of
them ends an episode: a REINFORCE's update after an episode of 40 steps was shorter than ten of
its steps' gaps, and was called between steps.

Where the steps are not outermost but inside a block that holds the whole rollout (SB3's
``PPO.collect_rollouts``, a program's own ``rollout`` block), that block stands for its steps: the
untimed time between it and the next step or rollout block is between rollouts (the time between
its steps is the block's own, not untimed), and start-up and end are what lies before the first
and after the last. Without that, a run whose steps all sit inside such blocks had no split, and
its start-up counted as part of its training loop.

A long run's timeline keeps its latest spans (:mod:`profiler.analysis.trainer_timeline`): the
gaps are read where every span is there, and scaled to the run's steps, which the tree counts —
the steps the timeline no longer holds had gaps like the ones it holds, and the untimed time left
over is the start-up and the end. :attr:`UntimedGaps.steps_held_share` says how much was read.

One analysis asks for the split (and the outermost spans, :mod:`profiler.analysis.outermost`)
about a dozen times — the verdicts, the phases, the report's flame graph — of the same dump;
reading a long timeline's spans each time took most of ``rlprof run``'s analysis and report (80 ms
of CPU for 18,000 spans). The last answer is kept (:mod:`profiler.analysis.last_answer`), for the
same list of spans holding as many spans (and the same untimed total).
"""

from __future__ import annotations

import bisect
from typing import Any

from profiler.analysis.block_stats import median
from profiler.analysis.last_answer import LastAnswer
from profiler.analysis.outermost import outermost_spans
from profiler.analysis.step_time import (RESET_BLOCKS, SINGLE_ENV_STEP_BLOCKS, VECTOR_STEP_BLOCKS, trainer_calls,
                                         trainer_step_blocks)
from profiler.analysis.text_format import format_percent, format_seconds
from profiler.analysis.trainer_timeline import TrainerSpans, trainer_spans
from profiler.analysis.training_phases import training_window
from profiler.records import Record

__all__ = ["ROLLOUT_GAP_FACTOR", "UntimedGaps", "blocks_outside_the_loop", "loop_share", "loop_share_text",
           "training_loop_seconds", "untimed_gaps", "untimed_gaps_text"]

ROLLOUT_GAP_FACTOR = 10.0
"""A gap between steps longer than this many times the median gap ends a rollout."""


class UntimedGaps(Record):
    """Untimed seconds between consecutive vector steps and between rollouts, and around them."""

    step_block: str
    between_steps: float
    between_steps_gaps: int
    between_rollouts: float
    between_rollouts_gaps: int
    elsewhere: float
    rollout_block: str | None = None
    """The block that holds the steps of a rollout (SB3's ``PPO.collect_rollouts``), where the
    steps ran inside one: the time between them is that block's, not untimed."""
    loop_start: float = 0.0
    loop_end: float = 0.0
    """The training loop's first step's (or rollout block's) start and its last one's end, on the
    timeline's clock: what ran between them ran in the loop. Where the timeline no longer holds
    the loop's first steps, the start is where it holds every span from."""
    steps_held_share: float = 1.0
    """The share of the run's steps that the timeline held whole (a long run's keeps its latest
    spans): the gaps were read among those and scaled to the rest. 1.0 where it held them all."""

    def as_dict(self) -> dict[str, Any]:
        return {"step_block": self.step_block, "rollout_block": self.rollout_block,
                "between_steps": {"seconds": self.between_steps, "gaps": self.between_steps_gaps},
                "between_rollouts": {"seconds": self.between_rollouts, "gaps": self.between_rollouts_gaps},
                "elsewhere": self.elsewhere, "steps_held_share": self.steps_held_share}


_last_gaps: LastAnswer[UntimedGaps | None] = LastAnswer()
_last_outside: LastAnswer[tuple[frozenset[str], float]] = LastAnswer()


def untimed_gaps(tree: dict[str, Any]) -> UntimedGaps | None:
    """The split of the trainer thread's untimed time, or None without a timeline of vector steps."""
    timeline = trainer_spans(tree)
    if timeline is None:
        return None
    spans = timeline.spans
    return _last_gaps.answer((spans,), (len(spans), tree.get("self")), lambda: _untimed_gaps(tree, timeline))


def training_loop_seconds(tree: dict[str, Any]) -> float:
    """The training loop's wall time: the run's wall time less its start-up and end, where the
    trainer's timeline tells them (:func:`untimed_gaps`), else the whole wall time. The start-up
    and end are the untimed time before the loop's first step and after its last, and the blocks
    that ran only there (:func:`blocks_outside_the_loop`); a block that ran in the loop counts
    whole, its calls just before the first step (the first policy call) or after the last (the
    last update) too. A program that steps no env (behaviour cloning from a dataset) has no step
    to tell its loop: its loop runs from its first policy call or update to the end of its last
    (:func:`~profiler.analysis.training_phases.training_window`).

    What limits a run's loop is what its verdicts judge: a short run spends most of its wall time
    importing and building, and a share of the wall time would hide the loop's limit there."""
    wall = float(tree.get("total", 0.0))
    gaps = untimed_gaps(tree)
    if gaps is not None:
        return wall - gaps.elsewhere - _outside_the_loop(tree, gaps)[1]
    if trainer_calls(tree, VECTOR_STEP_BLOCKS | SINGLE_ENV_STEP_BLOCKS):
        return wall  # it stepped envs, but its timeline does not tell where (off, or long gone)
    window = training_window(tree)
    return min(wall, window[1] - window[0]) if window is not None else wall


def blocks_outside_the_loop(tree: dict[str, Any]) -> frozenset[str]:
    """The names of the trainer thread's blocks whose every span lies before the training loop's
    first step or after its last (a timed ``load_dataset``, ``save``): the run's start-up and end.
    Empty without a split of the loop (:func:`untimed_gaps`).

    The loop's wall time (:func:`training_loop_seconds`) holds every timed block, those too: a
    share of it would call such a block the loop's."""
    gaps = untimed_gaps(tree)
    return _outside_the_loop(tree, gaps)[0] if gaps is not None else frozenset()


def _outside_the_loop(tree: dict[str, Any], gaps: UntimedGaps) -> tuple[frozenset[str], float]:
    """The blocks that ran only before the loop or after it, and the seconds of their outermost
    spans; kept for the same spans and split, since every share of the loop asks (a dozen times
    an analysis, over tens of thousands of spans)."""
    spans = trainer_spans(tree).spans  # type: ignore[union-attr]  # a split was read from them
    return _last_outside.answer((spans, gaps), (len(spans),), lambda: _blocks_outside(spans, gaps))


def _blocks_outside(spans: list[Any], gaps: UntimedGaps) -> tuple[frozenset[str], float]:
    loop_start, loop_end = gaps.loop_start, gaps.loop_end
    in_loop = {span[0] for span in spans if span[1] < loop_end and span[2] > loop_start}
    outside = frozenset({span[0] for span in spans} - in_loop)
    seconds = sum(end - start for name, start, end in outermost_spans(spans) if name in outside) if outside else 0.0
    return outside, seconds


def loop_share(tree: dict[str, Any], seconds: float) -> float | None:
    """``seconds`` over the training loop's wall time (:func:`training_loop_seconds`); None for a
    run that took no time."""
    loop = training_loop_seconds(tree)
    return seconds / loop if loop > 0 else None


def loop_share_text(tree: dict[str, Any], seconds: float) -> str:
    """``"38.0% of the training loop (12.0% of the wall time)"``; of the wall time only where the
    loop is the whole run (no timeline to tell start-up and end)."""
    wall = float(tree.get("total", 0.0))
    loop = training_loop_seconds(tree)
    of_the_wall = f"{format_percent(seconds / wall if wall > 0 else None)} of the wall time"
    if loop >= wall or loop <= 0:
        return of_the_wall
    return f"{format_percent(seconds / loop)} of the training loop ({of_the_wall})"


def _untimed_gaps(tree: dict[str, Any], timeline: TrainerSpans) -> UntimedGaps | None:
    spans = timeline.spans
    outermost = outermost_spans(spans)
    step_names = trainer_step_blocks(tree)
    step_block, loop = _loop_spans(outermost, spans, step_names)
    if len(loop) < 2:
        return None
    gaps, step_to_step, lengths, resets = _gaps_between(outermost, loop)
    usual = median([length for length, steps in zip(lengths, step_to_step) if steps] or [0.0])
    rollout_ends = [not steps or length > ROLLOUT_GAP_FACTOR * usual or reset
                    for length, steps, reset in zip(lengths, step_to_step, resets)]
    between_steps = sum(gap for gap, ends in zip(gaps, rollout_ends) if not ends)
    between_rollouts = sum(gap for gap, ends in zip(gaps, rollout_ends) if ends)
    untimed = float(tree.get("self", 0.0))
    # The steps the timeline no longer holds had gaps like those it holds; the scaled gaps take
    # at most the untimed time there is, which the tree measured whole.
    read = between_steps + between_rollouts
    scale = timeline.scale(tree, step_names) or 1.0
    if read > 0:
        scale = max(1.0, min(scale, untimed / read))
    return UntimedGaps(
        step_block=step_block,
        between_steps=between_steps * scale,
        between_steps_gaps=round(rollout_ends.count(False) * scale),
        between_rollouts=between_rollouts * scale,
        between_rollouts_gaps=round(rollout_ends.count(True) * scale),
        elsewhere=max(0.0, untimed - read * scale),
        rollout_block=next((outermost[index][0] for index, is_step in loop if not is_step), None),
        loop_start=outermost[loop[0][0]][1] if scale == 1.0 else float(timeline.complete_after or 0.0),
        loop_end=outermost[loop[-1][0]][2],
        steps_held_share=1.0 / scale,
    )


def _loop_spans(outermost: list[tuple[str, float, float]], spans: list[Any],
                step_names: frozenset[str]) -> tuple[str, list[tuple[int, bool]]]:
    """The step block's name (a vector step's; a program's own ``env.step`` where it steps one env
    itself), and the outermost spans of the loop, in time order: each as ``(its index in
    outermost, whether it is a step itself)``; the others hold one (a rollout block). Empty
    without steps."""
    step_spans = [span for span in spans if span[0] in step_names]
    if not step_spans:
        return "", []
    is_step = [name in step_names for name, _, _ in outermost]
    loop = [(index, True) for index, step in enumerate(is_step) if step]
    if len(loop) == len(step_spans):  # every step is outermost: no block holds a rollout's steps
        return step_spans[0][0], loop
    starts = [start for _, start, _ in outermost]
    holding = set()
    for _, start, end in step_spans:
        index = bisect.bisect_right(starts, start) - 1  # the outermost span that starts last at or before it
        if index >= 0 and not is_step[index] and end <= outermost[index][2]:
            holding.add(index)
    loop += [(index, False) for index in holding]
    return step_spans[0][0], sorted(loop)


def _gaps_between(outermost: list[tuple[str, float, float]], loop: list[tuple[int, bool]]
                  ) -> tuple[list[float], list[bool], list[float], list[bool]]:
    """For each two consecutive spans of the loop: the untimed time between them (what no
    outermost span between them covers), whether both are steps (only a gap from one step to the
    next can be between steps; one beside a rollout block ends a rollout), the time from the one's
    end to the other's start, and whether a reset ran between them (the program began a new
    episode there, stepping one env itself: what ran around it followed an episode, not a step).

    One loop, not a function call per gap and question: a long run's timeline holds 20,000 gaps."""
    gaps: list[float] = []
    step_to_step: list[bool] = []
    lengths: list[float] = []
    resets: list[bool] = []
    for (before, before_is_step), (after, after_is_step) in zip(loop, loop[1:]):
        length = outermost[after][1] - outermost[before][2]
        covered, reset = 0.0, False
        for name, begin, end in outermost[before + 1:after]:
            covered += end - begin
            reset = reset or name in RESET_BLOCKS
        gaps.append(max(0.0, length - covered))
        step_to_step.append(before_is_step and after_is_step)
        lengths.append(length)
        resets.append(reset)
    return gaps, step_to_step, lengths, resets


def untimed_gaps_text(gaps: UntimedGaps) -> str:
    """One line for the report: the untimed time between steps, between rollouts, elsewhere."""
    inside = f", inside {gaps.rollout_block}" if gaps.rollout_block else ""
    scaled = gaps.steps_held_share < 1.0

    def counted(gap_count: int) -> str:
        return f"{'about ' if scaled and gap_count else ''}{gap_count} gaps"

    held = (f"; read from the latest {format_percent(gaps.steps_held_share)} of the steps, which the timeline "
            "held, and scaled to the run") if scaled else ""
    return (f"untimed time by where it fell in the loop ({gaps.step_block}{inside}): "
            f"between steps {format_seconds(gaps.between_steps)} ({counted(gaps.between_steps_gaps)}), "
            f"between rollouts {format_seconds(gaps.between_rollouts)} ({counted(gaps.between_rollouts_gaps)}), "
            f"elsewhere (start-up, end) {format_seconds(gaps.elsewhere)}{held}")
