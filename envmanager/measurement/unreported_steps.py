"""Per worker, the steps the trainer knows were taken but no timer payload has reported.

A worker ships its timers every ``flush_every`` steps or ``flush_interval`` seconds, so up to that
much of its work is timed only inside its own process until the next payload. If the process ends
first (killed, crashed, terminated at close, cut off by an interrupt) or does not answer a request
for its timers, that timing never reaches the trainer. It cannot be recovered, but the trainer can
say how much is missing, because it counts the step replies it receives: every step reply that
arrived after a worker's last merged payload is a step no payload has reported (a payload covers
every step its worker answered before sending it).

Each worker's entry in the dump's ``workers`` section gets ``unreported_steps`` (0 when nothing is
missing) and, when something is, ``unreported_reason``: why, in words.
"""

from __future__ import annotations

import signal
from collections.abc import Sequence
from typing import Any

__all__ = ["UnreportedSteps"]


class UnreportedSteps:
    """Counts, per worker, the steps answered since its last merged payload, and says why.

    ``pending`` is indexed by worker and incremented by the manager on every step reply (the
    step path's only cost); ``handles`` are the pool's worker handles, read only to word the
    reasons when a dump is written.
    """

    __slots__ = ("pending", "_lost", "_refused", "_refusal", "_unanswered", "_handles")

    def __init__(self, handles: Sequence[Any]) -> None:
        self._handles = handles
        self.pending = [0] * len(handles)  # step replies since the last payload, current process
        self._lost = [0] * len(handles)  # unreported steps of the worker's earlier processes
        self._refused = [0] * len(handles)  # steps covered by payloads the trainer refused
        self._refusal: dict[int, str] = {}  # why the worker's first refused payload was refused
        self._unanswered: dict[int, str] = {}

    def reported(self, worker: int) -> None:
        """A payload of ``worker`` was merged: it covers every step the worker answered before."""
        self.pending[worker] = 0
        self._unanswered.pop(worker, None)

    def replaced(self, worker: int) -> None:
        """``worker``'s process was replaced: what it had not reported can never arrive now."""
        self._lost[worker] += self.pending[worker]
        self.pending[worker] = 0

    def refused(self, worker: int, reason: str) -> None:
        """A payload of ``worker`` was refused (malformed): the steps it covered are lost."""
        if not 0 <= worker < len(self.pending):
            return
        self._refused[worker] += self.pending[worker]
        self.pending[worker] = 0
        self._refusal.setdefault(worker, reason)

    def did_not_answer(self, worker: int, request: str) -> None:
        """``worker`` left ``request`` for its timers unanswered (until its next payload)."""
        self._unanswered[worker] = f"did not answer {request} (hung, or busy with a long call)"

    def steps(self, worker: int) -> int:
        """The steps ``worker`` took that no merged payload reports."""
        return self._lost[worker] + self._refused[worker] + self.pending[worker]

    def steps_section(self, entry: dict[str, Any]) -> int | None:
        """``unreported_steps`` for the worker's entry in the dump."""
        worker = entry["worker_id"]
        return self.steps(worker) if 0 <= worker < len(self.pending) else None

    def reason_section(self, entry: dict[str, Any]) -> str | None:
        """``unreported_reason`` for the worker's entry (None, left out, when nothing is missing)."""
        worker = entry["worker_id"]
        if not 0 <= worker < len(self.pending):
            return None
        reasons = []
        if worker in self._unanswered:
            reasons.append(self._unanswered[worker])
        elif self.pending[worker]:
            reasons.append(self._why_pending(self._handles[worker]))
        if self._refused[worker]:
            reasons.append(
                f"{self._refused[worker]} of them were covered by payloads the trainer refused "
                f"({self._refusal[worker]})"
            )
        if self._lost[worker]:
            reasons.append(
                f"{self._lost[worker]} of them were taken by an earlier process of this worker, "
                "which ended before shipping them"
            )
        return "; ".join(reasons) or None

    @staticmethod
    def _why_pending(handle: Any) -> str:
        if handle.cut_off is not None:
            return f"cut off by an interrupt {handle.cut_off}"
        if handle.alive:
            return "not shipped yet (its next payload carries them)"
        return f"its process {_how_it_ended(handle.exitcode)} before shipping them"


def _how_it_ended(exitcode: int | None) -> str:
    if exitcode is None:
        return "ended"
    if exitcode < 0:
        try:
            return f"was killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"was killed by signal {-exitcode}"
    return f"exited with code {exitcode}"
