"""Adding the payload rows a merger holds into its figure tables, many payloads at a time.

A merger (:mod:`profiler.multiprocess.merge`) checks each worker payload as it arrives, but holds its rows,
as the bytes they came in, in a table per layout of its stream
(:class:`profiler.multiprocess.worker_stream.WorkerStream`). Here the tables are read with numpy: the payloads
of a table summed and their extremes found column by column, tables of the same size stacked so
that a fleet of alike workers costs a few numpy calls, and the results scattered into the
merger's figure tables (:mod:`profiler.multiprocess.figure_table`), which write them into the nodes when
read. A payload then costs the merger little more than its validation
(``benchmarks/merge_cost.py``).
"""

from __future__ import annotations

from profiler.multiprocess.figure_table import Figures
from profiler.multiprocess.payload import row_dtype, unchecked_rows
from profiler.multiprocess.worker_stream import RowNodes

__all__ = ["add_held_rows"]

# Fewer payloads than this in a stack of tables are added row by row: numpy costs more than the
# rows of one or two payloads (benchmarks/merge_cost.py, part 3).
_TABLE_FROM_PAYLOADS = 3
_STACK_BYTES = 2**20  # rows read at once (see add_held_rows)
# Stacks whose counts add up to this or more are added row by row, as Python integers: a figure
# table holds 64-bit ones (see profiler.multiprocess.figure_table).
_TABLE_COUNT_BOUND = 2**62


def add_held_rows(tables: list[tuple[RowNodes, bytearray]], figures: Figures) -> None:
    """Add payloads' rows into the merger's ``figures``, from which they go into the nodes when
    read. ``tables`` are as streams hold them: the nodes of a layout, and the ``blocks`` of its
    payloads one after the other (a row of the table each).

    Each node gets what adding the payloads one at a time would give it: the sum of the totals
    and of the counts, the shortest and longest call, and for the worker's own node the highest
    mean per call of any one payload (its ``peak_mean``). Totals are summed by numpy, so in
    another order than one at a time: they may differ in the last bits.

    Tables of the same size (payloads and rows) are stacked and added together, in a few numpy
    calls whatever their number: a fleet of workers sending at the same pace gives one stack.
    """
    row_bytes = row_dtype().itemsize
    stacks: dict[tuple[int, int], list[tuple[RowNodes, bytearray]]] = {}
    for table in tables:
        row_nodes, held = table
        rows = len(row_nodes.trainer_nodes)
        stacks.setdefault((len(held) // (rows * row_bytes), rows), []).append(table)
    for (payloads, rows), stacked in stacks.items():
        payload_bytes = rows * row_bytes
        # A stack is read in parts of about _STACK_BYTES: memory the allocator hands out again
        # fold after fold, where a stack of a whole large fleet would be fresh pages each time.
        part = max(1, _STACK_BYTES // (payloads * payload_bytes))
        for start in range(0, len(stacked), part):
            tables_part = stacked[start : start + part]
            if payloads * len(tables_part) < _TABLE_FROM_PAYLOADS or not _add_stacked_tables(
                tables_part, payloads, figures
            ):
                for row_nodes, held in tables_part:
                    for offset in range(0, len(held), payload_bytes):
                        _add_rows(row_nodes, unchecked_rows(held[offset : offset + payload_bytes]))


def _add_stacked_tables(stacked: list[tuple[RowNodes, bytearray]], payloads: int, figures: Figures) -> bool:
    """Add tables of ``payloads`` payloads each, of the same rows, into ``figures``; False,
    adding nothing, if their counts add up to more than the figure tables hold."""
    import numpy  # a core dependency; imported by the first fold, not with the merger

    held = stacked[0][1] if len(stacked) == 1 else b"".join(table for _, table in stacked)
    rows = numpy.frombuffer(held, row_dtype())
    rows = rows.reshape(len(stacked), payloads, len(stacked[0][0].trainer_nodes))
    counts = rows["count"]
    # All counts added up fit the tables' integers, and so does every sum of some of them (a
    # node's over its payloads, the trainer's node over the tables).
    if counts.sum(dtype=numpy.float64) >= _TABLE_COUNT_BOUND:
        return False
    totals = rows["total"]
    closed = counts > 0
    if closed.all():  # every block closed a call in every payload: no row to leave out
        shortest = rows["min"].min(axis=1)
        longest = rows["max"].max(axis=1)
        peak_means = (totals / counts).max(axis=1)
    else:  # a row with no closed call (a run still open) adds its total only, as TimerNode.add does
        shortest = numpy.where(closed, rows["min"], numpy.inf).min(axis=1)
        longest = numpy.where(closed, rows["max"], -numpy.inf).max(axis=1)
        peak_means = numpy.where(closed, totals / numpy.maximum(counts, 1), -numpy.inf).max(axis=1)
    total_sums = totals.sum(axis=1)
    count_sums = counts.sum(axis=1)
    trainer_figures, worker_figures = figures
    if len(stacked) == 1:  # one worker's table, the usual case of a stream's own fold
        nodes = stacked[0][0]
        trainer_figures.add(
            nodes.trainer_slots, total_sums[0], count_sums[0], shortest[0], longest[0], distinct=nodes.distinct
        )
        worker_figures.add(
            nodes.worker_slots,
            total_sums[0],
            count_sums[0],
            shortest[0],
            longest[0],
            peak_means[0],
            distinct=nodes.distinct,
        )
        return True
    row_nodes = [row_nodes for row_nodes, _ in stacked]
    distinct = all(nodes.distinct for nodes in row_nodes)
    trainer_slots = numpy.stack([nodes.trainer_slots for nodes in row_nodes])
    if distinct and (trainer_slots == trainer_slots[0]).all():
        # Every table's rows go into the same trainer nodes (one anchor, one set of blocks, as
        # in a fleet of alike workers): add the tables up first, then into each node once.
        trainer_figures.add(
            trainer_slots[0],
            total_sums.sum(axis=0),
            count_sums.sum(axis=0),
            shortest.min(axis=0),
            longest.max(axis=0),
            distinct=True,
        )
    else:
        trainer_figures.add(trainer_slots, total_sums, count_sums, shortest, longest)
    worker_slots = numpy.stack([nodes.worker_slots for nodes in row_nodes])
    # Tables of different workers never share an own node; tables of one worker may.
    one_table_per_worker = len({id(nodes.worker_root) for nodes in row_nodes}) == len(row_nodes)
    worker_figures.add(
        worker_slots, total_sums, count_sums, shortest, longest, peak_means, distinct=distinct and one_table_per_worker
    )
    return True


def _add_rows(row_nodes: RowNodes, rows: tuple[float, ...]) -> None:
    """Add one payload's rows (flat, see :func:`profiler.multiprocess.payload.unchecked_rows`) straight into
    their nodes, keeping each own node's peak mean per payload."""
    row_fields = iter(rows)
    for merged, own, _, count, total, minimum, maximum in zip(
        row_nodes.trainer_nodes, row_nodes.worker_nodes, row_fields, row_fields, row_fields, row_fields, row_fields
    ):
        merged.total += total
        own.total += total
        if count:
            merged.count += count
            own.count += count
            if minimum < merged.min:
                merged.min = minimum
            if maximum > merged.max:
                merged.max = maximum
            if minimum < own.min:
                own.min = minimum
            if maximum > own.max:
                own.max = maximum
            mean = total / count
            if mean > own.peak_mean:
                own.peak_mean = mean
