"""The run as a speedscope profile: drag the file onto https://www.speedscope.app to explore it.

speedscope's file format (https://www.speedscope.app/file-format-schema.json) lists every block
name once in ``shared.frames`` and refers to names by index. A run becomes one profile per process
(see :mod:`profiler.export.process_trees`):

* without a recorded timeline, a ``sampled`` profile: one sample per block, the stack from the
  track's top down to that block, weighted by the block's self time in seconds. speedscope's
  "left heavy" and "sandwich" views then show exactly the tree's totals;
* with a recorded timeline, an ``evented`` profile of open/close events per thread (a process with
  several threads gets a profile per thread, since one profile must nest like one call stack).
"""

from __future__ import annotations

from typing import Any

from profiler.export.process_trees import Node, nested_children, split_into_process_trees

__all__ = ["SPEEDSCOPE_SCHEMA", "to_speedscope"]

SPEEDSCOPE_SCHEMA = "https://www.speedscope.app/file-format-schema.json"


def to_speedscope(tree: dict[str, Any]) -> dict[str, Any]:
    """The speedscope document for a normalized timer tree (evented when spans were recorded)."""
    frames = _FrameTable()
    timeline = tree.get("timeline")
    if timeline is not None:
        profiles = _evented_profiles(timeline, frames)
    else:
        profiles = [
            _sampled_profile(process_tree.name, process_tree.root, frames)
            for process_tree in split_into_process_trees(tree)
        ]
    name = (tree.get("metadata") or {}).get("run_id") or "rlprof run"
    return {
        "$schema": SPEEDSCOPE_SCHEMA,
        "name": name,
        "activeProfileIndex": 0,
        "exporter": "rlprof",
        "shared": {"frames": frames.frames},
        "profiles": profiles,
    }


class _FrameTable:
    """Block names in first-seen order, each stored once and referred to by index."""

    def __init__(self) -> None:
        self.frames: list[dict[str, str]] = []
        self._index_by_name: dict[str, int] = {}

    def index(self, name: str) -> int:
        index = self._index_by_name.get(name)
        if index is None:
            index = self._index_by_name[name] = len(self.frames)
            self.frames.append({"name": name})
        return index


def _sampled_profile(name: str, root: Node, frames: _FrameTable) -> dict[str, Any]:
    samples: list[list[int]] = []
    weights: list[float] = []

    def visit(node: Node, stack: list[int]) -> None:
        stack = stack + [frames.index(node["name"])]
        if node["self"] > 0:
            samples.append(stack)
            weights.append(node["self"])
        for child in nested_children(node):
            visit(child, stack)

    visit(root, [])
    return {
        "type": "sampled",
        "name": name,
        "unit": "seconds",
        "startValue": 0.0,
        "endValue": sum(weights),
        "samples": samples,
        "weights": weights,
    }


def _evented_profiles(timeline: dict[str, Any], frames: _FrameTable) -> list[dict[str, Any]]:
    profiles = []
    for process in timeline["processes"]:
        threads = process.get("threads", [])
        for thread in threads:
            name = process.get("name") or f"process {process['pid']}"
            if len(threads) > 1:
                name = f"{name} / {thread.get('name') or thread['tid']}"
            profiles.append(_evented_profile(name, thread.get("spans", []), frames))
    return profiles


def _evented_profile(
    name: str, spans: list[list[Any]], frames: _FrameTable
) -> dict[str, Any]:
    """Open/close events in time order; a child outliving its parent is closed with the parent.

    speedscope requires closes in the reverse order of opens, so spans are nested with a stack.
    """
    ordered = sorted(
        (
            (span[1], max(span[1], span[2]), position, span[0])
            for position, span in enumerate(spans)
        ),
        key=lambda item: (item[0], -item[1], item[2]),
    )
    events: list[dict[str, Any]] = []
    open_spans: list[tuple[float, int]] = []  # (end, frame index)

    def close_until(moment: float) -> None:
        while open_spans and open_spans[-1][0] <= moment:
            end, frame = open_spans.pop()
            events.append({"type": "C", "frame": frame, "at": end})

    for start, end, _, block_name in ordered:
        close_until(start)
        if open_spans:
            end = min(end, open_spans[-1][0])
        frame = frames.index(block_name)
        events.append({"type": "O", "frame": frame, "at": start})
        open_spans.append((end, frame))
    close_until(float("inf"))
    start_value = ordered[0][0] if ordered else 0.0
    end_value = max((event["at"] for event in events), default=start_value)
    return {
        "type": "evented",
        "name": name,
        "unit": "seconds",
        "startValue": start_value,
        "endValue": end_value,
        "events": events,
    }
