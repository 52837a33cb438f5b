"""Where each block of the merged tree goes in an icicle (a flame graph drawn top down).

Positions are fractions of the root's width, so the HTML can draw them with percentages and zoom
by rescaling. A block's width is its share of its parent's width by total time. Parallel blocks
(time that ran beside the parent in other processes) can add up to more than the parent lasted;
then all the parent's children are shrunk together to fit inside it, and the hover text gives the
real numbers.

The root's own time, the wall time outside every block, is a box of its own at the end of the
first row, named :data:`UNTIMED_BOX`: a run that times little of its loop shows a labelled gap,
not a blank one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["UNTIMED_BOX", "FlameBox", "lay_out_flame_graph"]

UNTIMED_BOX = "(untimed: outside any block)"


@dataclass(frozen=True)
class FlameBox:
    """One block's rectangle and the numbers shown when hovering it."""

    index: int
    parent_index: int | None
    name: str
    depth: int
    start: float
    """Left edge, as a fraction of the root's width."""
    width: float
    total: float
    self_time: float
    count: int
    share: float
    """``total`` over the root's total: the block's share of the run's wall time."""
    is_parallel: bool


def lay_out_flame_graph(tree: dict[str, Any]) -> list[FlameBox]:
    """Every block of the tree as a box, parents before children (depth-first)."""
    boxes: list[FlameBox] = []
    root_total = max(tree["total"], sum(child["total"] for child in tree["children"]))

    def place(node: dict[str, Any], parent: int | None, depth: int, start: float, width: float) -> None:
        index = len(boxes)
        boxes.append(
            FlameBox(
                index=index,
                parent_index=parent,
                name=node["name"],
                depth=depth,
                start=start,
                width=width,
                total=node["total"],
                self_time=node["self"],
                count=node["count"],
                share=node["total"] / root_total if root_total > 0 else 0.0,
                is_parallel=bool(node.get("is_parallel")),
            )
        )
        children_total = sum(child["total"] for child in node["children"])
        room = max(node["total"], children_total)
        cursor = start
        for child in node["children"]:
            child_width = width * child["total"] / room if room > 0 else 0.0
            place(child, index, depth + 1, cursor, child_width)
            cursor += child_width

    place(tree, None, 0, 0.0, 1.0)
    placed = sum(child["total"] for child in tree["children"])
    untimed = root_total - placed
    if untimed > 0 and root_total > 0:
        boxes.append(FlameBox(len(boxes), 0, UNTIMED_BOX, 1, placed / root_total, untimed / root_total,
                              untimed, untimed, 1, untimed / root_total, False))
    return boxes
