"""Split a merged timer tree into one tree per process, so views that are about time can lay it out.

The merged tree holds time from several processes at once: blocks marked ``is_parallel`` ran
*beside* their parent (in a worker or another thread), not inside it, and their totals may add up
to more than the parent's. A flame graph can still draw that, but a timeline or a per-process
profile cannot: it would show more seconds inside a block than the block lasted. So the timeline
and profile exporters see the run as separate process trees:

* the trainer's own part of the merged tree (every block that ran inside its parent),
* each parallel subtree, on its own track, anchored at the block it was merged under,
* each worker's own tree from the ``workers`` section, when the run has one.
"""

from __future__ import annotations

from typing import Any, Iterator

from profiler.records import Record

__all__ = ["ProcessTree", "nested_children", "split_into_process_trees"]

Node = dict[str, Any]


class ProcessTree(Record):
    """One process's (or one parallel subtree's) blocks, ready to be laid out on its own track."""

    name: str
    """Track label, e.g. ``trainer``, ``worker 3`` or ``parallel: env_step › worker_root``."""
    pid: int
    """Unique among the run's process trees; the real pid when the tree says what it was."""
    root: Node
    """The top node of the track; its nested children (see :func:`nested_children`) hang below."""
    anchor: Node | None = None
    """For a parallel subtree, the block of the merged tree it ran beside; ``None`` otherwise."""
    gauges: dict[str, dict[str, float]] | None = None


def nested_children(node: Node) -> list[Node]:
    """The children of ``node`` that ran inside it, in the same process.

    A parallel child under a block that is not itself parallel ran elsewhere, so it belongs on
    another track. Inside a parallel subtree every block ran in the same (other) process.
    """
    if node.get("is_parallel"):
        return list(node["children"])
    return [child for child in node["children"] if not child.get("is_parallel")]


def split_into_process_trees(tree: Node) -> list[ProcessTree]:
    """The trainer's tree, then each parallel subtree in depth-first order, then each worker's."""
    pids = _PidClaims()
    # Real pids are claimed first, so a made-up one never takes a worker's.
    trainer_pid = pids.claim(_as_int(tree.get("metadata", {}).get("pid")))
    workers = [
        ProcessTree(
            str(worker.get("name") or f"worker {worker.get('worker_id', index)}"),
            pids.claim(_as_int(worker.get("pid"))),
            worker,
            gauges=worker.get("gauges") or {},
        )
        for index, worker in enumerate(tree.get("workers") or [])
    ]
    result = [ProcessTree("trainer", trainer_pid, tree, gauges=tree.get("gauges") or {})]
    for anchor, subtree, path in _parallel_subtrees(tree, ()):
        label = "parallel: " + " › ".join(path + (subtree["name"],))
        result.append(ProcessTree(label, pids.claim(None), subtree, anchor=anchor))
    result.extend(workers)
    return result


def _parallel_subtrees(node: Node, path: tuple[str, ...]) -> Iterator[tuple[Node, Node, tuple[str, ...]]]:
    """Yield ``(anchor, subtree, names from below the root down to the anchor)``.

    The search stops at a parallel child: whatever is below it runs in that subtree's track.
    """
    for child in node["children"]:
        if child.get("is_parallel"):
            yield node, child, path
        else:
            yield from _parallel_subtrees(child, path + (child["name"],))


def _as_int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


class _PidClaims:
    """Pids handed out so far. A pid already taken gets the smallest free positive id instead
    (trace viewers key tracks by pid); the search for it resumes where the last one stopped, as
    ids are never given back, so n processes sharing one pid cost linear time, not quadratic."""

    def __init__(self) -> None:
        self.used: set[int] = set()
        self._lowest_maybe_free = 1

    def claim(self, wanted: int | None) -> int:
        if wanted is not None and wanted not in self.used:
            pid = wanted
        else:
            while self._lowest_maybe_free in self.used:
                self._lowest_maybe_free += 1
            pid = self._lowest_maybe_free
        self.used.add(pid)
        return pid
