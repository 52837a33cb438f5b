"""Payloads for the specifications: written by hand as readable trees, and read back by path.

A payload (version 7, see profiler.multiprocess.payload) names blocks by id and carries their figures as
columns of numbers. These helpers turn a tree of ``(name, total, count, errors, extremes,
children[, labels])`` into such a payload, declaring every name (as ``declare_all`` does), and a
payload back into ``{"parent/child": figures}`` with the names its stream declared.
"""

from __future__ import annotations

import struct
from typing import Any

from profiler.timing import timers
from profiler.multiprocess.payload import PAYLOAD_TAG, PAYLOAD_VERSION, row_ids, unchecked_rows


def tree_payload(*blocks, sequence=1, stream=7, pid=4321, window=(0.0, 1.0), gauges=(), timeline=None, memory=None,
                 device_time=None, operators=None):
    """A payload whose blocks are given as a tree; extremes None means (total, total)."""
    names, rows, error_counts, labels = [], [], [], []

    def add(block, parent_id):
        name, total, count, errors, extremes, children, *label = block
        node_id = len(names)
        names.append((parent_id, name))
        minimum, maximum = extremes if extremes is not None else ((total, total) if count else (0.0, 0.0))
        rows.append((node_id, count, total, minimum, maximum))
        if errors:
            error_counts.append((node_id, errors))
        if label:
            domain, object_type, scopes = label[0]
            labels.append((node_id, domain, object_type, scopes))
        for child in children:
            add(child, node_id)

    for block in blocks:
        add(block, -1)
    return (PAYLOAD_TAG, PAYLOAD_VERSION, pid, stream, sequence, *window, (0, tuple(names)),
            pack_rows(rows), tuple(error_counts), tuple(labels), gauges, timeline, memory, device_time, operators)


def pack_rows(rows) -> bytes:
    """Rows (id, count, total, minimum, maximum) as a payload's ``blocks`` bytes."""
    return struct.pack("<" + "Iqddd" * len(rows), *[value for row in rows for value in row])


def with_rows(payload, rows):
    """The payload with other rows in its ``blocks``."""
    return payload[:8] + (pack_rows(rows),) + payload[9:]


def paths(payload, stack=None) -> list[str]:
    """Each declared id's path, from the stack's ids (the stream that made the payload)."""
    declared = timers._resolve(stack).block_ids.paths
    found: list[str] = []
    for parent_id, name in declared:
        found.append(name if parent_id < 0 else f"{found[parent_id]}/{name}")
    return found


def rows_of(payload, stack=None) -> dict[str, tuple[Any, ...]]:
    """{path: (total, count, errors, minimum, maximum)} of the payload's rows."""
    names = paths(payload, stack)
    row_ids(payload[8], len(names))  # checked first
    row_fields = iter(unchecked_rows(payload[8]))
    errors = dict(payload[9])
    return {
        names[node_id]: (total, count, errors.get(node_id, 0), minimum, maximum)
        for node_id, count, total, minimum, maximum in zip(*[row_fields] * 5)
    }


def blocks_of(payload, stack=None) -> dict[str, tuple[float, int, int]]:
    """{path: (total, count, errors)} of the payload's rows, for readable assertions."""
    return {path: row[:3] for path, row in rows_of(payload, stack).items()}
