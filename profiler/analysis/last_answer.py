"""One function's latest answer, given again while it is asked about the same dump.

An analysis asks for some figures of one dump a dozen times: the verdicts, the phases, the report
and the table each read the trainer's spans, their outermost spans, the untimed gaps. Read afresh
each time from a long run's 100,000 spans, they took most of ``rlprof run``'s exit. Each such
function keeps its last answer in a :class:`LastAnswer`, keyed on the objects it read (compared by
identity: a dump's lists are not compared element by element) and a few values that tell whether
those objects changed since (a list's length: a live timeline grows in place).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["LastAnswer"]

Answer = TypeVar("Answer")


class LastAnswer(Generic[Answer]):
    """The last answer of one function, for the objects and values it was worked out from.

    The objects are held, so that their ids are not reused by others while the answer is kept.
    The key and the answer are kept as one tuple, replaced whole: a thread that reads it meanwhile
    sees either the old answer or the new one, never one's key with the other's answer."""

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[tuple[object, ...], tuple[Hashable, ...], Answer] | None = None

    def answer(self, objects: tuple[object, ...], values: tuple[Hashable, ...], work: Callable[[], Answer]) -> Answer:
        """The kept answer where it was worked out from these very ``objects`` and equal
        ``values``; else ``work()``'s, which is kept in its place."""
        last = self._last
        if (last is not None and len(last[0]) == len(objects)
                and all(kept is given for kept, given in zip(last[0], objects)) and last[1] == values):
            return last[2]
        answer = work()
        self._last = (objects, values, answer)
        return answer
