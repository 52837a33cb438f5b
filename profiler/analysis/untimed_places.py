"""Where the untimed time went, from a dump's ``untimed_samples`` section.

The stack sampler (:mod:`profiler.automatic.stack_sampler`) counted, outside any block, the
place the trainer's thread was at, and the seconds its samples stand for (each sample, the time
since the one before): together, the untimed time of the span it watched. That span can be shorter
than the run — the sampler starts after the interpreter and stops before the end — so the
**sampled** untimed time is the samples' seconds, at most the untimed time the tree measured (more
is sampling error, scaled down). Each place gets ``sampled * p`` where ``p`` is the place's share
of the sampled seconds ``S``. Its standard error is that of a sum of looks that stand for unequal
times (the looks thin out as a run goes on, and come late while the trainer holds the GIL):
``sampled / S * sqrt(q (1 - p))``, where ``q`` is the sum of the place's samples' seconds squared.
With equal looks that is the binomial ``sampled * sqrt(p (1 - p) / n)`` over the ``n`` samples,
the formula used for dumps written before the squares were kept. What no place explains — samples in no named
code, places beyond those the dump keeps, the untimed time outside the span sampled, or all of it
when nothing was sampled — is **unexplained**, the figure that tells how much of the run rlprof
still cannot name. (Spreading the untimed time outside the span over the places instead would
credit a loop's line with the start-up's time.)

An env worker timed in place samples its own stack outside its env calls, and its entry in the
dump's ``workers`` section carries its own ``untimed_samples`` (:func:`workers_untimed_places`):
its untimed time (the entry's self time) is split the same way, and the text names, per worker,
its places with their sample counts. A worker's time reading its pipe is its wait for the
trainer's next call, said in those words.
"""

from __future__ import annotations

import math
import os
from typing import Any

from profiler.analysis.text_format import counted, format_percent, format_seconds
from profiler.records import Record

__all__ = ["SAMPLER_OFF_METADATA", "UntimedPlace", "UntimedPlaces", "WorkerUntimedPlaces", "untimed_places",
           "untimed_places_text", "workers_untimed_places", "workers_untimed_text"]

SHOWN_PLACES = 8
"""Places the text report lists."""

SHOWN_WORKER_PLACES = 4
"""Places the text report lists per worker."""

SAMPLER_OFF_METADATA = "rlprof_stack_sampler"
"""The metadata ``rlprof run --no-stack-sampler`` writes (``"off"``; ``profiler.automatic`` writes
it, and this reader of dumps names it again rather than import the live side)."""

_PIPE_FILE = os.path.join("multiprocessing", "connection.py")
_PIPE_WAITS = {"_recv", "_recv_bytes", "recv", "recv_bytes", "poll", "_poll", "wait"}
_PIPE_SENDS = {"_send", "_send_bytes", "send", "send_bytes"}


class UntimedPlace(Record):
    """One place the trainer's thread was at outside any block, and the time it stands for."""

    function: str
    file: str
    line: int
    calls: str
    samples: int
    seconds: float
    error_seconds: float
    first_look: float | None = None
    last_look: float | None = None
    """The clock readings (the timeline's clock) of the place's first and last looks; None in
    dumps written before they were kept."""

    def seen_during(self, start: float, end: float) -> bool:
        """Whether this place was looked at between ``start`` and ``end`` (the training loop's
        window): its looks from first to last overlap it. A loop's line is seen before its first
        vector step too (the first iteration's code before it); a start-up line is last seen before
        the loop begins. False where the dump did not keep the looks' times."""
        return self.first_look is not None and self.last_look is not None and \
            self.first_look <= end and self.last_look >= start

    @property
    def label(self) -> str:
        """``main (train.py:12)``, and ``in PPO.learn`` when that line was in a library's call."""
        label = f"{self.function} ({os.path.basename(self.file)}:{self.line})"
        return f"{label} in {self.calls}" if self.calls else label

    def as_dict(self) -> dict[str, Any]:
        return {"function": self.function, "file": self.file, "line": self.line, "calls": self.calls,
                "samples": self.samples, "seconds": self.seconds, "error_seconds": self.error_seconds,
                "first_look": self.first_look, "last_look": self.last_look}


class UntimedPlaces(Record):
    """The untimed time split over the places sampled, and what no place explains.

    ``sampled`` says whether a stack sampler watched the run at all (the dump has the section):
    one that looked and found no place is not a run nobody sampled, and the text says which.
    """

    untimed_seconds: float
    untimed_samples: int
    interval_seconds: float
    longest_interval_seconds: float
    places: tuple[UntimedPlace, ...]
    unexplained_seconds: float
    sampled: bool = True
    sampler_turned_off: bool = False
    """The run was under ``rlprof run --no-stack-sampler``: unsampled by choice."""

    def no_place_found(self) -> str:
        """Why no place is named, for a run without places: nobody sampled it, or the looks found
        the thread in a block each time, or only in code no place names."""
        if self.sampler_turned_off:
            return "not sampled (`rlprof run --no-stack-sampler`: without that option it samples the trainer's stack)"
        if not self.sampled:
            return "not sampled (runs under `rlprof run` sample the trainer's stack outside any block)"
        looks = _looks(self.interval_seconds, self.longest_interval_seconds)
        if self.untimed_samples == 0:
            return (f"the stack sampler ({looks}) took no sample outside a block: the untimed time fell "
                    "before it started or after it stopped (start-up, including what rlprof imports "
                    "for the program first, and the end), or was too short for its looks")
        return (f"the stack sampler ({looks}) took {counted(self.untimed_samples, 'sample')} outside any block, "
                "none of them in code a place names")


def untimed_places(tree: dict[str, Any]) -> UntimedPlaces:
    """The places of a normalized tree's untimed time; all of it unexplained without samples."""
    untimed = float(tree.get("self", 0.0))
    section = tree.get("untimed_samples")
    if section is None:
        turned_off = (tree.get("metadata") or {}).get(SAMPLER_OFF_METADATA) == "off"
        return UntimedPlaces(untimed, 0, 0.0, 0.0, (), untimed, sampled=False, sampler_turned_off=turned_off)
    intervals = section["interval_seconds"], section.get("longest_interval_seconds", section["interval_seconds"])
    places = section["places"]
    sampled_seconds = (sum(place["seconds"] for place in places) + section["unnamed"]["seconds"]
                       + section["other_places"]["seconds"])
    samples = sum(place["samples"] for place in places) + section["unnamed"]["samples"] \
        + section["other_places"]["samples"]
    if sampled_seconds <= 0.0 or samples == 0:
        return UntimedPlaces(untimed, samples, *intervals, (), untimed)
    sampled = min(untimed, sampled_seconds)
    found = []
    for place in places:
        share = place["seconds"] / sampled_seconds
        squared = place.get("seconds_squared")
        if squared is None:
            error = sampled * math.sqrt(share * (1.0 - share) / samples)
        else:
            error = sampled / sampled_seconds * math.sqrt(squared * (1.0 - share))
        found.append(UntimedPlace(place["function"], place["file"], place["line"], place["calls"],
                                  place["samples"], sampled * share, error,
                                  place.get("first_look"), place.get("last_look")))
    named = sampled * sum(place["seconds"] for place in places) / sampled_seconds
    return UntimedPlaces(untimed, samples, *intervals, tuple(found), untimed - named)


def _looks(first: float, longest: float) -> str:
    """How often the sampler looked: ``one each 20.00 ms``, or, where the looks thinned out,
    ``one each 20.00 ms, thinning to one each 100.00 ms``."""
    if longest <= first:
        return f"one each {format_seconds(first)}"
    return f"one each {format_seconds(first)}, thinning to one each {format_seconds(longest)}"


def untimed_places_text(places: UntimedPlaces, wall_seconds: float) -> str:
    """The report's section: the top places with their time, error and share of the wall time."""
    if not places.places:
        return f"where the untimed time went: {places.no_place_found()}"
    share = places.unexplained_seconds / wall_seconds if wall_seconds > 0 else None
    lines = [f"where the untimed time went ({counted(places.untimed_samples, 'sample')} outside any block, "
             f"{_looks(places.interval_seconds, places.longest_interval_seconds)}; "
             f"unexplained {format_seconds(places.unexplained_seconds)}, {format_percent(share)} of wall time):"]
    for place in places.places[:SHOWN_PLACES]:
        lines.append(f"  {format_seconds(place.seconds):>9} ± {format_seconds(place.error_seconds):<8} "
                     f"{place.label}")
    if len(places.places) > SHOWN_PLACES:
        lines.append(f"  ... {len(places.places) - SHOWN_PLACES} more places (--format json lists them)")
    return "\n".join(lines)


class WorkerUntimedPlaces(Record):
    """One worker's time outside its env calls, split over the places its own sampler saw."""

    label: str
    worker_id: int
    places: UntimedPlaces

    def as_dict(self) -> dict[str, Any]:
        return {"worker": self.label, "worker_id": self.worker_id, "untimed_seconds": self.places.untimed_seconds,
                "samples": self.places.untimed_samples, "unexplained_seconds": self.places.unexplained_seconds,
                "places": [place.as_dict() for place in self.places.places]}


def workers_untimed_places(tree: dict[str, Any]) -> list[WorkerUntimedPlaces]:
    """The places of each worker that shipped samples of its stack, by worker."""
    found = []
    for worker in tree.get("workers", []):
        if worker.get("untimed_samples") is None:
            continue
        manager = worker.get("manager")
        label = f"{manager} {worker['name']}" if manager else worker["name"]
        found.append(WorkerUntimedPlaces(label, worker["worker_id"], untimed_places(worker)))
    return found


def _what_it_was(place: UntimedPlace) -> str:
    """What a place in a worker's pipe is, in the reader's words."""
    if place.file.endswith(_PIPE_FILE):
        if place.function in _PIPE_WAITS:
            return ": waiting for the trainer's next call"
        if place.function in _PIPE_SENDS:
            return ": sending its results"
    return ""


def workers_untimed_text(workers: list[WorkerUntimedPlaces]) -> str:
    """The report's section: per worker, its time outside env calls and its top places, each with
    its time, error and sample count."""
    first = max(worker.places.interval_seconds for worker in workers)
    longest = max(worker.places.longest_interval_seconds for worker in workers)
    lines = [f"where each worker's time outside its env calls went (samples of its own stack, "
             f"{_looks(first, longest)}):"]
    for worker in workers:
        places = worker.places
        lines.append(f"  {worker.label}: {format_seconds(places.untimed_seconds)} outside env calls, "
                     f"{counted(places.untimed_samples, 'sample')}")
        for place in places.places[:SHOWN_WORKER_PLACES]:
            lines.append(f"    {format_seconds(place.seconds):>9} ± {format_seconds(place.error_seconds):<8} "
                         f"{counted(place.samples, 'sample'):>14}  {place.label}{_what_it_was(place)}")
        if len(places.places) > SHOWN_WORKER_PLACES:
            lines.append(f"    ... {len(places.places) - SHOWN_WORKER_PLACES} more places (--format json lists them)")
    return "\n".join(lines)
