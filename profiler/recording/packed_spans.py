"""Spans of a block that runs many times alike (an environment's ``env.step``, a vector step and
its phases timed from stamps), held as float64 ``start, end`` pairs instead of one
``(name, start, end)`` tuple each.

A timed env step ends every few hundred microseconds in every env worker. As tuples, each step's
span was made, kept in the ring, pickled into the worker's shipment, unpickled and checked by the
trainer, and walked by the collector: about 2,400 instructions a step in the worker and 1,300 a
worker's step in the trainer (``benchmarks/inplace_step_instructions.py``, ``instrumented_step_instructions.py``).
Packed, a fold of up to a thousand runs is one ``bytes`` object the step path already has (its
held runs are that buffer), and the shipment carries it as one field. The spans become rows only
when the timeline is written.

Bounded as a thread's ring is: each block keeps its most recent ``capacity`` spans and counts
what fell out. In a payload they travel little-endian, whatever the machine's byte order.
"""

from __future__ import annotations

import sys
import threading
from array import array
from collections.abc import Iterable
from itertools import repeat
from operator import itemgetter
from typing import Any

__all__ = ["PackedSpans", "check_packed_spans", "with_packed"]

_NATIVE_IS_LITTLE = sys.byteorder == "little"
_PAIR_BYTES = 16


class PackedSpans:
    """One thread's (or one worker thread's) packed spans, by block name, in the order they ended.

    Locked: the thread that folds an env's steps, a shipment and the dump's writer may be three.
    """

    __slots__ = ("capacity", "by_name", "dropped", "complete_after", "_lock")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.by_name: dict[str, array] = {}
        self.dropped = 0
        self.complete_after: float | None = None
        """The end of the latest span dropped (None while none was): every span that ends later
        is held, so an analysis knows from when on its spans are the whole story."""
        self._lock = threading.Lock()

    def __len__(self) -> int:
        with self._lock:
            return sum(len(runs) for runs in self.by_name.values()) // 2

    def add(self, name: str, runs: Any) -> None:
        """Keep ``runs``, a bytes-like of native float64 ``start, end`` pairs, as spans of ``name``."""
        with self._lock:
            held = self.by_name.get(name)
            if held is None:
                held = self.by_name[name] = array("d")
            held.frombytes(runs)
            over = len(held) // 2 - self.capacity
            if over > 0:
                last_dropped_end = held[2 * over - 1]
                if self.complete_after is None or last_dropped_end > self.complete_after:
                    self.complete_after = last_dropped_end
                del held[: 2 * over]
                self.dropped += over

    def add_shifted(self, name: str, runs: bytes, offset: float) -> None:
        """Keep a payload's ``runs`` (little-endian pairs, checked) of ``name``, moved by ``offset``
        seconds onto the trainer's clock."""
        import numpy as np  # the trainer's: the timers import without numpy (a script may run without it)

        pairs = np.frombuffer(runs, dtype="<f8")
        if offset:
            pairs = pairs + offset
        self.add(name, pairs.astype("=f8", copy=False).tobytes())

    def drain(self) -> tuple[tuple[tuple[str, bytes], ...], int]:
        """Hand over and forget every span held, as a payload carries them (``(name, pairs)``),
        with the number dropped since the last drain."""
        with self._lock:
            by_name, self.by_name = self.by_name, {}
            dropped, self.dropped = self.dropped, 0
            self.complete_after = None
        drained = []
        for name, held in by_name.items():
            if not _NATIVE_IS_LITTLE:
                held.byteswap()
            drained.append((name, held.tobytes()))
        return tuple(drained), dropped

    def rows(self) -> list[list[Any]]:
        """Every span held, as the dump writes a span: ``[name, start, end]``."""
        with self._lock:
            held_values = [(name, held.tolist()) for name, held in self.by_name.items()]
        rows: list[list[Any]] = []
        for name, values in held_values:
            rows.extend(map(list, zip(repeat(name), values[0::2], values[1::2])))
        return rows


def with_packed(spans: Iterable[Any], packed: PackedSpans) -> list[Any]:
    """``spans`` (rows) and ``packed``'s spans in one list, by their end, as a ring holds spans
    (a span is appended when its block closes)."""
    rows = list(spans)
    if not packed.by_name:
        return rows
    rows.extend(packed.rows())
    rows.sort(key=itemgetter(2))  # two runs, each nearly in order: merged in about one pass
    return rows


def check_packed_spans(packed: Any, max_seconds: float) -> str | None:
    """Where and what is wrong with a payload's packed spans (``"[2]: ..."``, or ``": ..."`` for
    the whole), or None when they are right: a sequence of ``(name, pairs)``, each
    name a non-empty ``str`` and each ``pairs`` a ``bytes`` of little-endian float64 ``start, end``
    pairs, finite, within ``max_seconds`` of zero, none ending before it starts."""
    import numpy as np  # as in add_shifted

    if not isinstance(packed, (tuple, list)):
        return ": must be a sequence of (name, pairs)"
    for index, entry in enumerate(packed):
        where = f"[{index}]"
        if not isinstance(entry, (tuple, list)) or len(entry) != 2:
            return f"{where}: must be (name, pairs)"
        name, runs = entry
        if type(name) is not str or not name:
            return f"{where}: the name must be a non-empty str"
        if type(runs) is not bytes or len(runs) % _PAIR_BYTES:
            return f"{where}: the pairs must be bytes of float64 (start, end) pairs"
        pairs = np.frombuffer(runs, dtype="<f8").reshape(-1, 2)
        if not np.isfinite(pairs).all() or (np.abs(pairs) > max_seconds).any():
            return f"{where}: a time is not finite, or more than {max_seconds:g} s from zero"
        if (pairs[:, 1] < pairs[:, 0]).any():
            return f"{where}: a span ends before it starts"
    return None
