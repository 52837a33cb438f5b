"""Figures for many timer nodes, added in bulk with numpy and written into the nodes when read.

A merger adds the rows of thousands of worker payloads into the trainer's tree and into each
worker's own tree. Writing each row into its node object is a cache miss per node when the
workers are many (1,000 workers' trees do not fit in any cache), so the merger adds the rows into
a :class:`FigureTable` instead: one slot per node, the figures of all slots in a few numpy
arrays, the rows of a whole fold scattered into them in one call per figure. The figures go into
the node objects only when someone reads them (:meth:`FigureTable.write_back`), at each settle
of the trainer's stack and before the workers' entries are dumped.

Every figure is one that can be added in any order and in any grouping (a sum, a least, a
greatest), so rows added into the table and rows added straight into a node, at any time, give
the node the same figures.
"""

from __future__ import annotations

from typing import Any

from profiler.timing.timers import TimerNode

__all__ = ["FigureTable", "Figures"]

# Counts held per slot stay below this, so that adding more never overflows a 64-bit integer:
# past it the table writes its figures into the nodes (Python integers) and starts again.
_COUNT_BOUND = 2**62


class FigureTable:
    """Per timer node (a *slot*): the total, count, shortest and longest call, and highest mean
    per payload added since the table last wrote its figures into the nodes."""

    __slots__ = ("nodes", "_slot_of", "total", "count", "minimum", "maximum", "peak_mean", "_touched", "_count_bound")

    def __init__(self) -> None:
        self.nodes: list[TimerNode] = []  # slot -> node
        self._slot_of: dict[TimerNode, int] = {}
        self._allocate(256)
        self._touched = False
        self._count_bound = 0.0  # the counts added since the last write-back, all together

    def _allocate(self, capacity: int) -> None:
        import numpy  # a core dependency; imported with the first table, not with the merger

        self.total = numpy.zeros(capacity)
        self.count = numpy.zeros(capacity, dtype=numpy.int64)
        self.minimum = numpy.full(capacity, numpy.inf)
        self.maximum = numpy.full(capacity, -numpy.inf)
        self.peak_mean = numpy.full(capacity, -numpy.inf)

    def slots(self, nodes: list[TimerNode]) -> Any:
        """The slot of each of ``nodes`` (a numpy array), giving a slot to a node first seen."""
        import numpy

        slot_of = self._slot_of
        for node in nodes:
            if node not in slot_of:
                slot_of[node] = len(self.nodes)
                self.nodes.append(node)
        if len(self.nodes) > len(self.total):
            self._grow(len(self.nodes))
        return numpy.fromiter(map(slot_of.__getitem__, nodes), numpy.intp, len(nodes))

    def _grow(self, needed: int) -> None:
        held = (self.total, self.count, self.minimum, self.maximum, self.peak_mean)
        capacity = len(self.total)
        while capacity < needed:
            capacity *= 2
        self._allocate(capacity)
        for grown, old in zip((self.total, self.count, self.minimum, self.maximum, self.peak_mean), held):
            grown[: len(old)] = old

    def add(
        self,
        slots: Any,
        totals: Any,
        counts: Any,
        shortest: Any,
        longest: Any,
        peak_means: Any | None = None,
        *,
        distinct: bool = False,
    ) -> None:
        """Add figures (numpy arrays of one shape) into ``slots`` (of that shape): totals and
        counts are summed, the extremes kept (no peak means: the nodes' are left as they are).
        ``counts`` must be 64-bit integers, each below 2**62.

        A slot may come more than once, unless ``distinct`` says it does not: then plain numpy
        indexing adds them, a few times faster than the unbuffered ``ufunc.at`` that duplicates
        need.
        """
        import numpy

        added = float(counts.sum(dtype=numpy.float64))
        if self._count_bound + added >= _COUNT_BOUND:
            self.write_back()  # the nodes hold any count; the table's integers do not
        self._count_bound += added
        if distinct:
            self.total[slots] += totals
            self.count[slots] += counts
            self.minimum[slots] = numpy.minimum(self.minimum[slots], shortest)
            self.maximum[slots] = numpy.maximum(self.maximum[slots], longest)
            if peak_means is not None:
                self.peak_mean[slots] = numpy.maximum(self.peak_mean[slots], peak_means)
        else:
            numpy.add.at(self.total, slots, totals)
            numpy.add.at(self.count, slots, counts)
            numpy.minimum.at(self.minimum, slots, shortest)
            numpy.maximum.at(self.maximum, slots, longest)
            if peak_means is not None:
                numpy.maximum.at(self.peak_mean, slots, peak_means)
        self._touched = True

    def write_back(self) -> None:
        """Add the figures held into their nodes, and hold none."""
        if not self._touched:
            return
        import numpy

        touched = numpy.flatnonzero((self.count != 0) | (self.total != 0.0))
        nodes = self.nodes
        for slot, total, count, minimum, maximum, peak_mean in zip(
            touched.tolist(),
            self.total[touched].tolist(),
            self.count[touched].tolist(),
            self.minimum[touched].tolist(),
            self.maximum[touched].tolist(),
            self.peak_mean[touched].tolist(),
        ):
            node = nodes[slot]
            node.add_runs(total, count, 0, minimum, maximum)
            if count and peak_mean > node.peak_mean:
                node.peak_mean = peak_mean
        self.total[touched] = 0.0
        self.count[touched] = 0
        self.minimum[touched] = numpy.inf
        self.maximum[touched] = -numpy.inf
        self.peak_mean[touched] = -numpy.inf
        self._touched = False
        self._count_bound = 0.0

    def clear(self) -> None:
        """Forget every slot and the figures held: the trees were reset."""
        self.nodes = []
        self._slot_of = {}
        self._allocate(256)
        self._touched = False
        self._count_bound = 0.0


Figures = tuple[FigureTable, FigureTable]
"""A merger's figure tables: for the trainer's nodes, and for its workers' own nodes."""
