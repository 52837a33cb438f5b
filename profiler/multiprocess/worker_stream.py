"""The trainer's side of block ids: a worker stream's declared names, and the nodes its ids resolve to.

A worker names its blocks once per stream (:mod:`profiler.multiprocess.block_ids`), then sends rows of numbers
keyed by id (:mod:`profiler.multiprocess.payload`). The merger (:mod:`profiler.multiprocess.merge`) keeps one
:class:`WorkerStream` per worker stream: the names declared so far, the sequence numbers seen,
for each id the node it is added into, in the trainer's tree under an anchor and in the worker's
own tree, and the payloads' rows not yet added. Resolving ids to nodes once, keeping the nodes
of a payload's rows in row order, and adding many payloads' rows at once with numpy is what
makes a payload cost the merger little more than its validation.

Everything here runs under the merger's lock.
"""

from __future__ import annotations

from typing import Any

from profiler.multiprocess.figure_table import Figures
from profiler.multiprocess.payload import PayloadError
from profiler.timing.timers import MAX_DEPTH, TimerNode

__all__ = ["FOLD_AT_ROWS", "MAX_NAME_LENGTH", "RowNodes", "WorkerStream"]

MAX_NAME_LENGTH = 1000
"""Block names longer than this are shortened to it as they are declared (and counted in the
worker's ``shortened_names``): a name is a label for people, and a runaway one (a repr of a whole
batch) must not swell every dump."""

_MAX_ANCHORS_PER_STREAM = 64  # trees a stream's ids are resolved in at once (see WorkerStream.nodes)
_MAX_LAYOUTS_PER_STREAM = 8  # sets of row ids whose nodes a stream keeps in row order
_MAX_ANCHORS_PER_LAYOUT = 4  # anchors a layout keeps its nodes for
_MAX_MISSING_KEPT = 4096  # skipped sequence numbers a stream remembers (see WorkerStream.skipped)

FOLD_AT_ROWS = 4096
"""A stream adds the payload rows it holds once it holds this many (144 KiB): enough payloads
that adding them costs each little (80 of 50 blocks), few enough that they stay in cache."""



class RowNodes:
    """Where the rows of one layout go, under one anchor: the trainer's nodes and the worker's
    own nodes, in row order, and their slots in the merger's figure tables.

    ``worker_root`` is the root of the worker's own tree: the layouts of two workers never share
    an own node. ``distinct``: no node comes twice in either list. A well-formed stream never
    declares a block twice, but a payload may, and two rows into one node must then be added
    one after the other.
    """

    __slots__ = ("trainer_nodes", "worker_nodes", "trainer_slots", "worker_slots", "worker_root", "distinct")

    def __init__(
        self, trainer_nodes: list[TimerNode], worker_nodes: list[TimerNode], worker_root: TimerNode, figures: Figures
    ) -> None:
        self.trainer_nodes = trainer_nodes
        self.worker_nodes = worker_nodes
        trainer_figures, worker_figures = figures
        self.trainer_slots = trainer_figures.slots(trainer_nodes)
        self.worker_slots = worker_figures.slots(worker_nodes)
        self.worker_root = worker_root
        self.distinct = len(set(trainer_nodes)) == len(trainer_nodes) == len(set(worker_nodes))


class WorkerStream:
    """One worker stream's declared names and the tree nodes its ids resolve to.

    An id is resolved to a node once per tree (the trainer's tree under an anchor, the worker's
    own tree), on the first payload that has figures for it. Nodes are created as the blocks
    first have figures, in the order of their ids (parents first), as the worker created them.

    A worker's payloads usually have rows for the same blocks, flush after flush, or for one of a
    few sets of blocks (windows with an episode's reset and windows without). So the stream keeps,
    per set of row ids (a *layout*, the last 8) and per anchor, the rows' nodes in both trees in
    row order: a payload is added by walking those node lists and its rows side by side, with no
    lookup per row. Two lists of nodes rather than one of pairs: with many workers, each worker's
    nodes are read from memory, and a pair would be one more object to read per row. A worker
    whose blocks cycle through more layouts than are kept pays for laying them out every time,
    more than a lookup per row would cost. ``row_ids`` and ``row_nodes`` are the last payload's
    layout, known to ascend (see :func:`profiler.multiprocess.payload.row_ids`).

    A payload's rows are not added to the nodes as it arrives: the stream holds its ``blocks``
    (the rows' bytes) by the nodes of its layout, until the merger adds them in bulk
    (:mod:`profiler.multiprocess.held_rows`): once the stream holds :data:`FOLD_AT_ROWS` rows and whenever the
    merger is asked for its figures. Adding a row to two nodes as it came cost the merger more
    than checking the whole payload (``benchmarks/merge_cost.py``). Only the figures wait: the
    nodes of a layout are made with its first payload, so the trees keep the order in which
    blocks first arrived.
    """

    __slots__ = (
        "names",
        "depths",
        "last_sequence",
        "missing",
        "merged_nodes",
        "own_nodes",
        "own_root",
        "layouts",
        "row_ids",
        "row_nodes",
        "held",
        "held_rows",
        "figures",
    )

    def __init__(self, figures: Figures) -> None:
        self.names: list[tuple[int, str]] = []  # id -> (parent id, name)
        self.depths: list[int] = []  # id -> depth below the tree it is merged into (top level: 1)
        self.last_sequence = 0
        # Sequence numbers skipped so far (the latest _MAX_MISSING_KEPT): such a payload may still
        # arrive, and is then merged rather than taken for a duplicate.
        self.missing: set[int] = set()
        self.merged_nodes: dict[TimerNode, list[TimerNode | None]] = {}  # anchor -> id -> node
        self.own_nodes: list[TimerNode | None] = []
        self.own_root: TimerNode | None = None
        # Row ids -> anchor -> (the trainer's nodes, the worker's own nodes) of those rows, in order.
        self.layouts: dict[tuple[int, ...], dict[TimerNode, RowNodes]] = {}
        self.row_ids: tuple[int, ...] = ()
        self.row_nodes: dict[TimerNode, RowNodes] = {}
        # Payloads' rows not added yet, by the nodes of their layout: a table each, the payloads'
        # blocks one after the other (copied while they are in cache, not when added).
        self.held: dict[RowNodes, bytearray] = {}
        self.held_rows = 0
        self.figures = figures  # the merger's, where the held rows are added

    def declare(self, first_id: int, declared: Any, worker_id: int) -> int:
        """Add the names of ids ``first_id`` on; return how many had to be shortened.

        Names declared before must be declared the same again (a payload with ``declare_all``
        repeats them); an id past the end of the known ones means declarations were lost.
        """
        known = len(self.names)
        if first_id > known:
            raise PayloadError(
                f"names: the payload declares block ids from {first_id}, but the stream of worker "
                f"{worker_id} declared only ids 0 to {known - 1}: a payload with declarations was "
                "lost on the way (payloads of a stream must all reach the merger, in order)"
            )
        shortened = 0
        additions: list[tuple[int, str]] = []
        for node_id, (parent_id, name) in enumerate(declared, start=first_id):
            if len(name) > MAX_NAME_LENGTH:
                name = name[:MAX_NAME_LENGTH]
                if node_id >= known:  # counted once, when first declared
                    shortened += 1
            if node_id < known:
                if self.names[node_id] != (parent_id, name):
                    raise PayloadError(
                        f"names: block id {node_id} was declared as {self.names[node_id]!r} and now "
                        f"as {(parent_id, name)!r:.200}: the block names of a worker stream cannot "
                        "change (a new process must send a new stream)"
                    )
                continue
            additions.append((parent_id, name))
        if additions:
            depths = self.depths + [0] * len(additions)
            for node_id, (parent_id, name) in enumerate(additions, start=known):
                depth = depths[node_id] = 1 if parent_id < 0 else depths[parent_id] + 1
                if depth > MAX_DEPTH:
                    raise PayloadError(
                        f"names: block {name!r:.80} is nested deeper than {MAX_DEPTH} levels "
                        "(snapshot_and_flush folds deeper blocks, so this payload was not made by it)"
                    )
            self.depths = depths
            self.names.extend(additions)
            padding = [None] * len(additions)
            for nodes in self.merged_nodes.values():
                nodes.extend(padding)
            self.own_nodes.extend(padding)
        return shortened

    def skipped(self, sequence: int) -> None:
        """A payload numbered ``sequence`` arrived: note the ones between it and the last."""
        first_skipped = max(self.last_sequence + 1, sequence - _MAX_MISSING_KEPT)
        if first_skipped < sequence:
            self.missing.update(range(first_skipped, sequence))
            if len(self.missing) > _MAX_MISSING_KEPT:
                self.missing = set(sorted(self.missing)[-_MAX_MISSING_KEPT:])

    def forget_nodes(self) -> None:
        """The trees were reset: resolve the ids again, in the new trees, and drop the rows held
        for the old ones (as the old trees dropped the rows added to them)."""
        self.merged_nodes = {}
        self._follow_own_root(None)

    def drop_held(self) -> None:
        """Forget the rows held: the trees they were for were reset."""
        self.held = {}
        self.held_rows = 0

    def _follow_own_root(self, own_root: TimerNode | None) -> None:
        """Resolve the ids in ``own_root``'s tree from now on (the worker's tree was replaced,
        which happens only when the trees were reset: the rows held for the old ones go)."""
        self.drop_held()
        self.own_root = own_root
        self.own_nodes = [None] * len(self.names)
        self.layouts = {}
        self.row_ids = ()
        self.row_nodes = {}

    def nodes(self, anchor: TimerNode, own_root: TimerNode, node_id: int) -> tuple[TimerNode, TimerNode]:
        """The trainer's node (under ``anchor``) and the worker's own node of block ``node_id``."""
        merged_nodes, own_nodes = self._node_lists(anchor, own_root)
        return (
            merged_nodes[node_id] or self._resolve(merged_nodes, anchor, node_id, True),
            own_nodes[node_id] or self._resolve(own_nodes, own_root, node_id, False),
        )

    def _node_lists(
        self, anchor: TimerNode, own_root: TimerNode
    ) -> tuple[list[TimerNode | None], list[TimerNode | None]]:
        if self.own_root is not own_root:
            self._follow_own_root(own_root)
        merged_nodes = self.merged_nodes.get(anchor)
        if merged_nodes is None:
            if len(self.merged_nodes) >= _MAX_ANCHORS_PER_STREAM:
                self.merged_nodes.clear()  # many anchors in turn: resolving again is cheap enough
            merged_nodes = self.merged_nodes[anchor] = [None] * len(self.names)
        return merged_nodes, self.own_nodes

    def _resolve(self, nodes: list[TimerNode | None], root: TimerNode, node_id: int, parallel: bool) -> TimerNode:
        """Find (creating it and its parents if need be) the node of ``node_id`` under ``root``."""
        parent_id, name = self.names[node_id]
        if parent_id < 0:
            parent = root
        else:
            parent = nodes[parent_id] or self._resolve(nodes, root, parent_id, parallel)
        node = parent.get_child(name)
        if parallel:
            node.is_parallel = True  # the worker's time ran beside the trainer's
        nodes[node_id] = node
        return node

    def add_rows(self, anchor: TimerNode, own_root: TimerNode, ids: tuple[int, ...], blocks: bytes) -> int:
        """Hold a payload's rows for the trainer's tree under ``anchor`` and the worker's own tree;
        return how many rows the stream holds now.

        ``blocks`` are the payload's rows, checked, and ``ids`` their ids (see
        :func:`profiler.multiprocess.payload.row_ids`). The rows' nodes are found (made, for blocks new to a
        tree) now; their figures are added later (see :meth:`take_held`).
        """
        if self.own_root is not own_root:
            self._follow_own_root(own_root)
        if ids != self.row_ids:
            self._lay_out(ids)
        row_nodes = self.row_nodes.get(anchor) or self._nodes_in_row_order(anchor, own_root)
        table = self.held.get(row_nodes)
        if table is None:
            self.held[row_nodes] = bytearray(blocks)
        else:
            table += blocks
        self.held_rows += len(ids)
        return self.held_rows

    def take_held(self) -> list[tuple[RowNodes, bytearray]]:
        """The payload rows held, as tables: the nodes of a layout and the ``blocks`` of its
        payloads one after the other. The stream holds none after this (give them to
        :func:`profiler.multiprocess.held_rows.add_held_rows`)."""
        held = self.held
        self.drop_held()
        return list(held.items())

    def _lay_out(self, ids: tuple[int, ...]) -> None:
        """Make the layout of rows ``ids`` the current one (a new one if it is not kept)."""
        row_nodes = self.layouts.get(ids)
        if row_nodes is None:
            if len(self.layouts) >= _MAX_LAYOUTS_PER_STREAM:
                del self.layouts[next(iter(self.layouts))]  # the oldest goes
            row_nodes = self.layouts[ids] = {}
        self.row_ids, self.row_nodes = ids, row_nodes

    def _nodes_in_row_order(self, anchor: TimerNode, own_root: TimerNode) -> RowNodes:
        """The trainer's nodes under ``anchor`` and the worker's own nodes of the current layout, in
        row order, kept for the layout's next payload."""
        merged_nodes, own_nodes = self._node_lists(anchor, own_root)
        row_nodes = RowNodes(
            self._in_row_order(merged_nodes, anchor, True),
            self._in_row_order(own_nodes, own_root, False),
            own_root,
            self.figures,
        )
        if len(self.row_nodes) >= _MAX_ANCHORS_PER_LAYOUT:
            self.row_nodes.clear()
        self.row_nodes[anchor] = row_nodes
        return row_nodes

    def _in_row_order(self, nodes: list[TimerNode | None], root: TimerNode, parallel: bool) -> list[TimerNode]:
        """The nodes of ``row_ids`` in one tree, resolving the ids no row had before (one pass of
        builtins when every id has its node: a worker whose blocks vary a lot lays them out often)."""
        in_row_order = list(map(nodes.__getitem__, self.row_ids))
        if all(in_row_order):
            return in_row_order  # type: ignore[return-value]
        return [nodes[node_id] or self._resolve(nodes, root, node_id, parallel) for node_id in self.row_ids]
