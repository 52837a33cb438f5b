"""Make a timeline out of aggregate totals, for runs that recorded no spans.

A timer tree knows how long each block took in total, not when it ran. Laying each block out as
one span sized by its total, with its children one after another inside it, still gives the
picture a trace viewer is good at: nested bars whose widths are the shares of the time. The
result has the shape of a recorded ``timeline`` section, so the trace exporter has one input.
Parallel subtrees and worker trees go on their own process tracks (see :mod:`process_trees`);
a parallel subtree starts where the block it ran beside starts.
"""

from __future__ import annotations

from typing import Any

from profiler.export.process_trees import Node, nested_children, split_into_process_trees

__all__ = ["AGGREGATE_THREAD_NAME", "synthesize_timeline"]

AGGREGATE_THREAD_NAME = "aggregate totals (not a recorded timeline)"
"""Thread label shown in the viewer, so nobody mistakes the layout for the order things ran in."""


def synthesize_timeline(tree: Node) -> dict[str, Any]:
    """A ``timeline`` section laid out from the tree's totals; see the module docstring.

    Spans carry a fourth element, a dict of the block's ``count``, ``total_s`` and ``self_s``
    (and ``errors``, and a domain's ``cat``), because the laid-out duration alone would hide how
    often a block ran.
    """
    start_of_block: dict[int, float] = {}
    processes = []
    for process_tree in split_into_process_trees(tree):
        anchor = process_tree.anchor
        origin = 0.0 if anchor is None else start_of_block.get(id(anchor), 0.0)
        root = process_tree.root
        duration = max(root["total"], sum(child["total"] for child in nested_children(root)))
        spans: list[list[Any]] = []
        _lay_out(root, origin, duration, spans, start_of_block)
        processes.append(
            {
                "pid": process_tree.pid,
                "name": process_tree.name,
                "clock_offset": 0.0,
                "threads": [
                    {"tid": 1, "name": AGGREGATE_THREAD_NAME, "spans": spans, "instants": []}
                ],
                "counters": [],
            }
        )
    return {"clock": "aggregate", "dropped": 0, "processes": processes}


def _lay_out(
    node: Node,
    start: float,
    duration: float,
    spans: list[list[Any]],
    start_of_block: dict[int, float],
) -> None:
    """Append ``node``'s span and, recursively, its nested children's, packed from ``start``."""
    start_of_block[id(node)] = start
    details: dict[str, Any] = {"count": node["count"], "total_s": node["total"], "self_s": node["self"]}
    if node.get("errors"):
        details["errors"] = node["errors"]
    if node.get("domain"):
        details["cat"] = node["domain"]  # a Task's or Frame's domain is its trace category
    spans.append([node["name"], start, start + duration, details])
    children = nested_children(node)
    children_total = sum(child["total"] for child in children)
    # Clock granularity can make children add up to a hair more than their parent: shrink them
    # to fit rather than let them poke out of it.
    scale = min(1.0, duration / children_total) if children_total > 0 else 1.0
    cursor = start
    for child in children:
        child_duration = child["total"] * scale
        _lay_out(child, cursor, child_duration, spans, start_of_block)
        cursor += child_duration
