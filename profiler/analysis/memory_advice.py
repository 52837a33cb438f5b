"""How to measure memory next time, in the terms of the run at hand: ``rlprof run``'s options for a
run it made (its user edited nothing, and should not have to), rlprof's API for any other."""

from __future__ import annotations

from typing import Any

__all__ = ["RUN_METADATA", "allocations_advice", "made_by_rlprof_run", "more_samples_advice", "sampling_advice"]

RUN_METADATA = "rlprof_run"
"""The metadata key ``rlprof run`` sets to the program it ran."""


def made_by_rlprof_run(tree: dict[str, Any]) -> bool:
    """Whether ``rlprof run`` made this dump."""
    return RUN_METADATA in (tree.get("metadata") or {})


def sampling_advice(rlprof_run: bool) -> str:
    """What samples each process's memory over time (a phrase to follow "to see ...")."""
    if rlprof_run:
        return "run it again with rlprof run --memory"
    return "profile with Profiler(sample_rate=N) or profiler.recording.memory.start_sampling(...)"


def allocations_advice(rlprof_run: bool) -> str:
    """What measures each block's Python allocations (a phrase to follow "to see ...")."""
    if rlprof_run:
        return "run it again with rlprof run --memory --track-allocations"
    return ("profile with track_allocations=True (Profiler(track_allocations=True) or "
            "profiler.recording.memory.start_sampling(track_allocations=True))")


def more_samples_advice(rlprof_run: bool) -> str:
    """What samples more often, for a run whose samples were too few to tell a trend."""
    if rlprof_run:
        return "sample more often: rlprof run --memory=SECONDS, fewer seconds than this run's"
    return "sample more often"
