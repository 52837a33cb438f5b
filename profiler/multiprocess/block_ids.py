"""A worker's blocks by number: each block path gets an id, and payloads name it only once.

A payload (:mod:`profiler.multiprocess.payload`) carries a worker's figures as flat columns keyed by block id,
not as a tree of names. The ids belong to the worker's timer stack: its first payload declares
every block as ``(parent id, name)``, later payloads declare only the blocks that appeared since
(a block first entered late), and the trainer's merger (:mod:`profiler.multiprocess.merge`) keeps each
stream's declarations and resolves every id to its tree nodes once (:mod:`profiler.multiprocess.worker_stream`).

Ids are given in the order of a walk of the tree, parents before children, so a parent's id is
always smaller than its children's; top-level blocks have the parent id -1. An id stands for a
*path*, not for a node object: after the stack is reset, its new nodes get the ids their paths
had. Blocks nested deeper than :data:`~profiler.timing.timers.MAX_DEPTH` share one id per parent at the
limit, named :data:`~profiler.timing.timers.FOLDED_BLOCK_NAME` (see :mod:`profiler.multiprocess.payload`).

The ids are worked out again only when the stack says its shape changed (a new block, new labels,
a reset: :attr:`TimerStack.shape_changed`), so a flush of a tree that did not change walks no tree.
"""

from __future__ import annotations

from typing import Any

from profiler.timing.timers import FOLDED_BLOCK_NAME, MAX_DEPTH, TimerNode, TimerStack

__all__ = ["NO_PARENT", "BlockIds", "block_ids_of"]

NO_PARENT = -1
"""The parent id of a top-level block (a child of the stack's root)."""


class BlockIds:
    """The ids of one timer stack's blocks, and which of them its payloads have declared."""

    __slots__ = (
        "paths",
        "ids_by_path",
        "present_ids",
        "present_nodes",
        "folds",
        "labelled",
        "declared",
        "generation",
    )

    def __init__(self) -> None:
        self.paths: list[tuple[int, str]] = []  # id -> (parent id, name)
        self.ids_by_path: dict[tuple[int, str], int] = {}
        # The stack's blocks present now, by ascending id: the columns a flush reads.
        self.present_ids: list[int] = []
        self.present_nodes: list[TimerNode] = []
        # (id of the folded block, the node at the depth limit whose children it stands for).
        self.folds: list[tuple[int, TimerNode]] = []
        # (id, node) of the present blocks that carry labels (domain, object type, scopes).
        self.labelled: list[tuple[int, TimerNode]] = []
        self.declared = 0  # ids 0 .. declared-1 went out in a payload
        self.generation = -1

    def refresh(self, stack: TimerStack) -> None:
        """Give ids to the stack's blocks that have none, and list the blocks present now."""
        present: list[tuple[int, TimerNode]] = []
        self.folds = []
        self.labelled = []
        # Iterative, children in their order: the tree may be MAX_DEPTH deep.
        pending: list[tuple[TimerNode, int, int]] = [
            (child, NO_PARENT, 1) for child in reversed(list(stack.root.children.values()))
        ]
        while pending:
            node, parent_id, depth = pending.pop()
            node_id = self._id_of(parent_id, node.name)
            present.append((node_id, node))
            if node.domain is not None or node.object_type is not None or node.scopes:
                self.labelled.append((node_id, node))
            if not node.children:
                continue
            if depth == MAX_DEPTH - 1:
                self.folds.append((self._id_of(node_id, FOLDED_BLOCK_NAME), node))
                continue
            pending.extend((child, node_id, depth + 1) for child in reversed(list(node.children.values())))
        present.sort(key=lambda pair: pair[0])  # after a reset, blocks may reappear in any order
        self.present_ids = [node_id for node_id, _ in present]
        self.present_nodes = [node for _, node in present]
        self.generation = stack.generation

    def _id_of(self, parent_id: int, name: str) -> int:
        path = (parent_id, name)
        node_id = self.ids_by_path.get(path)
        if node_id is None:
            node_id = self.ids_by_path[path] = len(self.paths)
            self.paths.append(path)
        return node_id

    def declarations(self, declare_all: bool) -> tuple[int, tuple[tuple[int, str], ...]]:
        """``(first id, ((parent id, name), ...))``: the ids from ``first id`` on, for a payload.

        The ids not declared yet, or all of them with ``declare_all`` (for a channel that may
        lose or reorder payloads, or deliver them to several mergers).
        """
        first = 0 if declare_all else self.declared
        self.declared = len(self.paths)
        return first, tuple(self.paths[first:])


def block_ids_of(stack: TimerStack) -> BlockIds:
    """The stack's block ids, brought up to date if its shape changed since they were worked out."""
    block_ids: Any = stack.block_ids
    if block_ids is None:
        block_ids = stack.block_ids = BlockIds()
    if stack.shape_changed or block_ids.generation != stack.generation:
        # Cleared before the walk: a block another thread adds meanwhile sets it again.
        stack.shape_changed = False
        block_ids.refresh(stack)
    return block_ids  # type: ignore[no-any-return]
