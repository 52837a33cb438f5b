"""The merged tree as collapsed stacks, the input of flamegraph.pl, inferno, speedscope and others.

One line per block with self time: the names from the root down, joined by ``;``, a space, and the
block's self time in whole **microseconds** (the format wants integers). Blocks with no self time
are left out; their time shows through their children's lines.

Rounding every line on its own would let the lines drift away from the totals. Instead the running
sum is rounded: each line gets ``round(sum so far + self) - round(sum so far)``. Because a subtree's
lines are consecutive, the lines under any block then add up to its time to within 1 µs, and all
lines add up to the rounded sum exactly. That time is the block's ``total``, plus, in rlprof's
trees, the totals of the parallel subtrees below it: they ran beside it in other processes and are
drawn inside it. (ML-Agents' files take parallel time out of the parent's self time instead, so
there the lines add up to the plain totals.)

``;`` and line breaks inside block names would break the format, so they become ``_``.
"""

from __future__ import annotations

from typing import Any, Iterator

__all__ = ["to_collapsed"]

MICROSECONDS_PER_SECOND = 1_000_000


def to_collapsed(tree: dict[str, Any]) -> str:
    """The collapsed-stacks text for a normalized timer tree, one line per block, ending in a newline."""
    lines = []
    seconds_so_far = 0.0
    for stack, self_seconds in _stacks_with_self_time(tree, ()):
        before = round(seconds_so_far * MICROSECONDS_PER_SECOND)
        seconds_so_far += self_seconds
        microseconds = round(seconds_so_far * MICROSECONDS_PER_SECOND) - before
        if microseconds > 0:
            lines.append(f"{';'.join(stack)} {microseconds}\n")
    return "".join(lines)


def _stacks_with_self_time(
    node: dict[str, Any], parents: tuple[str, ...]
) -> Iterator[tuple[tuple[str, ...], float]]:
    """Depth first, parents before children, so each subtree's lines are consecutive."""
    stack = parents + (_frame_name(node["name"]),)
    yield stack, node["self"]
    for child in node["children"]:
        yield from _stacks_with_self_time(child, stack)


def _frame_name(name: str) -> str:
    return name.replace(";", "_").replace("\r", "_").replace("\n", "_")
