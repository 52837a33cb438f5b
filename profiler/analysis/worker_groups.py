"""Which workers an analysis compares with one another, when a run had several vector envs.

A training env and an evaluation env in one program each have their workers; the dump lists both,
each entry naming its manager (``manager``, ``manager_id``). Their workers ran other envs at other
times, so comparing them would invent stragglers and mix up worker ids (which repeat from one
manager to the next). The per-worker analysis therefore compares the workers of one manager: the
one whose workers took the most ``env.step`` calls, which is the training env in every program we
know of. The others are named, so the report can say what it left out.

Files written before entries named their manager, and workers merged by a plain ``TimerMerger``
with no name, form one group.
"""

from __future__ import annotations

from typing import Any

from profiler.analysis.block_stats import walk_nodes
from profiler.records import Record

__all__ = ["OtherManager", "compared_workers", "other_managers"]


class OtherManager(Record):
    """A manager whose workers the per-worker analysis left out."""

    name: str
    workers: int


def compared_workers(tree: dict[str, Any]) -> list[dict[str, Any]]:
    """The ``workers`` entries the per-worker analysis compares (all of them for one manager)."""
    groups = _groups(tree)
    if len(groups) <= 1:
        return list(tree.get("workers") or [])
    return max(groups.values(), key=_env_steps)


def other_managers(tree: dict[str, Any]) -> list[OtherManager]:
    """The managers whose workers :func:`compared_workers` leaves out, in dump order."""
    groups = _groups(tree)
    if len(groups) <= 1:
        return []
    compared = max(groups.values(), key=_env_steps)
    return [
        OtherManager(str(entries[0].get("manager") or f"manager {key}"), len(entries))
        for key, entries in groups.items()
        if entries is not compared
    ]


def _groups(tree: dict[str, Any]) -> dict[Any, list[dict[str, Any]]]:
    groups: dict[Any, list[dict[str, Any]]] = {}
    for entry in tree.get("workers") or []:
        groups.setdefault(entry.get("manager_id"), []).append(entry)
    return groups


def _env_steps(entries: list[dict[str, Any]]) -> int:
    return sum(node["count"] for entry in entries for _, node in walk_nodes(entry) if node["name"] == "env.step")
