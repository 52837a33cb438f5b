"""ML-Agents' layout of the timer JSON, for the tools that read the ``timers.json`` it writes.

rlprof's dump lists each node's children, each child carrying its ``name`` (docs/formats.md).
Unity ML-Agents' files key children by name instead, leave ``name`` out of every node but the
root and leave ``children`` out where there are none; scripts and dashboards written against
those files index ``node["children"]["env_step"]`` and break on a list. :func:`to_mlagents_layout`
turns a dump into that layout and loses nothing: what ML-Agents' files do not have (``errors``,
per-call figures, the ``workers`` section, the ``timeline``) stays where it was, since readers of
ML-Agents' files skip fields they do not know, and ``rlprof`` reads both layouts back alike.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LAYOUTS", "check_layout", "to_mlagents_layout"]

LAYOUTS = ("rlprof", "mlagents")
"""The layouts a dump can be written in: rlprof's own (the default) and ML-Agents'."""


def check_layout(layout: str) -> None:
    """Refuse a layout name that is not one of :data:`LAYOUTS`, naming the valid ones."""
    if layout not in LAYOUTS:
        raise ValueError(f"unknown timer layout {layout!r}; choose one of: {', '.join(LAYOUTS)}")


def to_mlagents_layout(tree: dict[str, Any]) -> dict[str, Any]:
    """A dump (``get_timer_tree()`` or ``load_timing_tree()``) in ML-Agents' layout (a new dict).

    The root keeps its ``name``; every tree in the ``workers`` section is converted the same way
    and keeps its ``name``, as the workers are a list. Two siblings of one name cannot share a
    key: the second becomes ``"name #2"`` (rlprof itself only writes such siblings for two
    threads given the same name).
    """
    converted = {"name": tree.get("name", "root"), **_node(tree)}
    if "workers" in tree:
        converted["workers"] = [
            {"name": worker.get("name", f"worker {index}"), **_node(worker)}
            for index, worker in enumerate(tree["workers"])
        ]
    return converted


def _node(node: dict[str, Any]) -> dict[str, Any]:
    converted = {key: value for key, value in node.items() if key not in ("name", "children")}
    children: dict[str, Any] = {}
    last_number: dict[str, int] = {}
    for child in node.get("children", []):
        children[_free_key(children, child["name"], last_number)] = _node(child)
    if children:
        converted["children"] = children
    return converted


def _free_key(taken: dict[str, Any], name: str, last_number: dict[str, int]) -> str:
    """``name``, else ``name #2``, ``#3``... the first not taken. The count resumes from the last
    number given to ``name``: from 2 each time, n siblings of one name took n squared steps."""
    if name not in taken:
        return name
    number = last_number.get(name, 1)
    key = name
    while key in taken:
        number += 1
        key = f"{name} #{number}"
    last_number[name] = number
    return key
