"""The trainer thread's recorded spans, and how much of the run they hold.

A thread's timeline is a ring of its latest spans (``profiler.recording.events``: 100,000 by
default, ``rlprof run --timeline-spans``). A CleanRL PPO over four envs records some nine spans a
vector step, so at its default 500,000 steps the timeline holds about the last 20,000 of its
125,000 vector steps. The dump then says, per thread, from when on every span is there
(``spans_complete_after``).

The analyses that read the spans — the untimed time between steps and between rollouts
(:mod:`profiler.analysis.untimed_gaps`), the split of update blocks that hold the rollout, a target
network's calls and the time between updates (:mod:`profiler.analysis.training_phases`) — read
those complete ones and scale what they count there to the whole run by the tree, whose blocks'
calls are the whole run's: a figure that the window holds for a third of the run's updates stands
for three times that. A training loop does the same thing over and over, so its latest stretch
stands for the rest of it; what it does only once (start-up) is what the window leaves out, and
the analyses say where they scaled.

Read from spans alone, a long run's untimed time between steps had counted as start-up, and its
updates that held the rollout had no split at all.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.last_answer import LastAnswer
from profiler.analysis.step_time import trainer_calls
from profiler.records import Record

__all__ = ["TrainerSpans", "trainer_spans"]


class TrainerSpans(Record):
    """The spans of the trainer's main thread that an analysis reads."""

    spans: list[Any]
    """Every span the thread recorded, or, where its rings dropped the oldest, those that ended
    after :attr:`complete_after`, in the order the dump holds them (by their end)."""
    complete_after: float | None = None
    """Where the rings dropped spans: the moment after which every span is there; None where
    nothing was dropped."""

    @property
    def complete(self) -> bool:
        return self.complete_after is None

    def calls_held(self, names: frozenset[str] | set[str]) -> int:
        """The spans of blocks named in ``names`` (their calls in what is held)."""
        return sum(1 for span in self.spans if span[0] in names)

    def scale(self, tree: dict[str, Any], names: frozenset[str] | set[str]) -> float | None:
        """How many times the run's calls of the blocks ``names`` the spans hold: the tree's calls
        over the spans'. A count or a time the spans give for those calls, times this, stands for
        the whole run. 1.0 for a complete timeline; None where the spans hold none of them."""
        if self.complete:
            return 1.0
        held = self.calls_held(names)
        if held == 0:
            return None
        return max(1.0, trainer_calls(tree, names) / held)


_last_answer: LastAnswer[TrainerSpans] = LastAnswer()


def trainer_spans(tree: dict[str, Any]) -> TrainerSpans | None:
    """The spans of the trainer's main thread (the first thread of the timeline's first process),
    complete or not; None without a timeline. Each analysis asks for them a dozen times: the same
    list is given back for the same dump, so what is kept per list (its outermost spans) is kept."""
    processes = tree.get("timeline", {}).get("processes", [])
    if not processes or not processes[0].get("threads"):
        return None
    thread = processes[0]["threads"][0]
    spans = thread["spans"]
    complete_after = thread.get("spans_complete_after")
    return _last_answer.answer((spans,), (len(spans), complete_after), lambda: _held_whole(spans, complete_after))


def _held_whole(spans: list[Any], complete_after: float | None) -> TrainerSpans:
    if complete_after is None:
        return TrainerSpans(spans)
    return TrainerSpans([span for span in spans if span[2] > complete_after], complete_after)
