"""Where each block of the merged tree goes in an icicle (a flame graph drawn top down).

Positions are fractions of the root's width, so the HTML can draw them with percentages and zoom
by rescaling. A block's width is its share of its parent's width by total time. Parallel blocks
(time that ran beside the parent in other processes) can add up to more than the parent lasted;
then all the parent's children are shrunk together to fit inside it, and the hover text gives the
real numbers.

The root's own time, the wall time outside every block, is a box of its own at the end of the
first row, named :data:`UNTIMED_BOX`: a run that times little of its loop shows a labelled gap,
not a blank one. Below it, the untimed time split where the analysis can split it
(:func:`untimed_parts`): over the places the stack sampler found the trainer at outside any block
(:mod:`profiler.analysis.untimed_places`), what no place explains in a box of its own; or, in a run
not sampled, by where it fell in the loop, between steps or between rollouts
(:mod:`profiler.analysis.untimed_gaps`). The split the boxes do not show is a line of text
(:func:`untimed_note`).
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.untimed_gaps import ROLLOUT_GAP_FACTOR, untimed_gaps, untimed_gaps_text
from profiler.analysis.untimed_places import SHOWN_PLACES, untimed_places
from profiler.analysis.text_format import format_seconds
from profiler.records import Record

__all__ = ["UNTIMED_BOX", "UNTIMED_PART", "FlameBox", "lay_out_flame_graph", "untimed_note", "untimed_parts"]

UNTIMED_BOX = "(untimed: outside any block)"
UNTIMED_PART = "(untimed) "
"""How the name of each part of the untimed box begins."""


class FlameBox(Record):
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
    note: str = ""
    """What the box is, where its name alone does not say (the parts of the untimed box)."""


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
        untimed_index, start, width = len(boxes), placed / root_total, untimed / root_total
        boxes.append(FlameBox(untimed_index, 0, UNTIMED_BOX, 1, start, width, untimed, untimed, 0,
                              untimed / root_total, False, "wall time of the trainer outside every block"))
        parts = untimed_parts(tree)
        parts_total = sum(seconds for _, seconds, _ in parts)
        for name, seconds, note in parts:
            part_width = width * seconds / parts_total
            boxes.append(FlameBox(len(boxes), untimed_index, name, 2, start, part_width, seconds, seconds, 0,
                                  seconds / root_total, False, note))
            start += part_width
    return boxes


def untimed_parts(tree: dict[str, Any]) -> list[tuple[str, float, str]]:
    """The untimed time split where the analysis can: ``(name, seconds, note)`` per part.

    By the places the stack sampler found (the top :data:`SHOWN_PLACES`, the rest together, and
    what no place explains); without samples, by where in the loop it fell; else no parts.
    """
    places = untimed_places(tree)
    if places.places:
        parts = [(f"{UNTIMED_PART}{place.label}", place.seconds,
                  f"{_counted(place.samples, 'stack sample')} here, ± {format_seconds(place.error_seconds)}")
                 for place in places.places[:SHOWN_PLACES]]
        rest = places.places[SHOWN_PLACES:]
        if rest:
            parts.append((f"{UNTIMED_PART}{len(rest)} more places", sum(place.seconds for place in rest),
                          _counted(sum(place.samples for place in rest), "stack sample")))
        parts.append((f"{UNTIMED_PART}unexplained", places.unexplained_seconds,
                      "samples in no named code, in places beyond those the dump keeps"))
        return [part for part in parts if part[1] > 0]
    gaps = untimed_gaps(tree)
    if gaps is None:
        return []
    parts = [
        (f"{UNTIMED_PART}between steps", gaps.between_steps,
         f"{_counted(gaps.between_steps_gaps, 'gap')} between one {gaps.step_block} and the next"),
        (f"{UNTIMED_PART}between rollouts", gaps.between_rollouts,
         f"{_counted(gaps.between_rollouts_gaps, 'gap')} that end a rollout (over {ROLLOUT_GAP_FACTOR:g} times the "
         "usual gap, or beside a block that holds the rollout's steps): update, logging"),
        (f"{UNTIMED_PART}elsewhere", gaps.elsewhere, "before the first step and after the last"),
    ]
    return [part for part in parts if part[1] > 0]


def _counted(number: int, thing: str) -> str:
    return f"{number:,} {thing}" + ("" if number == 1 else "s")


def untimed_note(tree: dict[str, Any]) -> str:
    """The split of the untimed time that the flame graph's boxes do not show, as a line; "" if none.

    The boxes show the sampled places when there are some; then where in the loop the untimed time
    fell is this line.
    """
    if not untimed_places(tree).places:
        return ""
    gaps = untimed_gaps(tree)
    return "" if gaps is None else untimed_gaps_text(gaps)
