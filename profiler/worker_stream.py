"""The trainer's side of block ids: a worker stream's declared names, and the nodes its ids resolve to.

A worker names its blocks once per stream (:mod:`profiler.block_ids`), then sends rows of numbers
keyed by id (:mod:`profiler.payload`). The merger (:mod:`profiler.merge`) keeps one
:class:`WorkerStream` per worker stream: the names declared so far, the sequence numbers seen,
and for each id the node it is added into, in the trainer's tree under an anchor and in the
worker's own tree. Resolving ids to nodes once, and keeping the nodes of a payload's rows in row
order, is what makes adding a payload a walk over its rows with no lookup per row.

Everything here runs under the merger's lock.
"""

from __future__ import annotations

from typing import Any, Iterable

from profiler.payload import ROW_FIELDS, PayloadError
from profiler.timers import MAX_DEPTH, TimerNode

__all__ = ["MAX_NAME_LENGTH", "WorkerStream"]

MAX_NAME_LENGTH = 1000
"""Block names longer than this are shortened to it as they are declared (and counted in the
worker's ``shortened_names``): a name is a label for people, and a runaway one (a repr of a whole
batch) must not swell every dump."""

_MAX_ANCHORS_PER_STREAM = 64  # trees a stream's ids are resolved in at once (see WorkerStream.nodes)
_MAX_LAYOUTS_PER_STREAM = 8  # sets of row ids whose node pairs a stream keeps in row order
_MAX_ANCHORS_PER_LAYOUT = 4  # anchors a layout keeps its pairs for
_MAX_MISSING_KEPT = 4096  # skipped sequence numbers a stream remembers (see WorkerStream.skipped)


class WorkerStream:
    """One worker stream's declared names and the tree nodes its ids resolve to.

    An id is resolved to a node once per tree (the trainer's tree under an anchor, the worker's
    own tree), on the first payload that has figures for it. Nodes are created as the blocks
    first have figures, in the order of their ids (parents first), as the worker created them.

    A row is added into a pair of nodes, the trainer's and the worker's own. A worker's payloads
    usually have rows for the same blocks, flush after flush, or for one of a few sets of blocks
    (windows with an episode's reset and windows without). So the stream keeps, per set of row
    ids (a *layout*, the last 8) and per anchor, the rows' pairs in row order: a payload is added
    by walking that list and its rows side by side, with no lookup per row. ``row_ids`` and
    ``row_pairs`` are the last payload's layout, known to ascend (see
    :func:`profiler.payload.block_rows`).
    """

    __slots__ = (
        "names",
        "depths",
        "last_sequence",
        "missing",
        "merged_nodes",
        "own_nodes",
        "own_root",
        "pairs",
        "layouts",
        "row_ids",
        "row_pairs",
    )

    def __init__(self) -> None:
        self.names: list[tuple[int, str]] = []  # id -> (parent id, name)
        self.depths: list[int] = []  # id -> depth below the tree it is merged into (top level: 1)
        self.last_sequence = 0
        # Sequence numbers skipped so far (the latest _MAX_MISSING_KEPT): such a payload may still
        # arrive, and is then merged rather than taken for a duplicate.
        self.missing: set[int] = set()
        self.merged_nodes: dict[TimerNode, list[TimerNode | None]] = {}  # anchor -> id -> node
        self.own_nodes: list[TimerNode | None] = []
        self.own_root: TimerNode | None = None
        # anchor -> id -> (the trainer's node, the worker's own node), resolved as rows need them.
        self.pairs: dict[TimerNode, list[tuple[TimerNode, TimerNode] | None]] = {}
        # Row ids -> anchor -> the pairs of those rows, in row order (see add_rows).
        self.layouts: dict[tuple[float, ...], dict[TimerNode, list[tuple[TimerNode, TimerNode]]]] = {}
        self.row_ids: tuple[float, ...] = ()
        self.row_pairs: dict[TimerNode, list[tuple[TimerNode, TimerNode]]] = {}  # [] until laid out

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
            for pairs in self.pairs.values():
                pairs.extend(padding)
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
        """The trees were reset: resolve the ids again, in the new trees."""
        self.merged_nodes = {}
        self._follow_own_root(None)

    def _follow_own_root(self, own_root: TimerNode | None) -> None:
        """Resolve the ids in ``own_root``'s tree from now on (the worker's tree was replaced)."""
        self.own_root = own_root
        self.own_nodes = [None] * len(self.names)
        self.pairs = {}
        self.layouts = {}
        self.row_ids = ()
        self.row_pairs = {}

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
                self.pairs.clear()
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

    def add_rows(self, anchor: TimerNode, own_root: TimerNode, rows: tuple[float, ...]) -> None:
        """Add a payload's rows (checked, flat: see :func:`profiler.payload.block_rows`) into the
        trainer's tree under ``anchor`` and into the worker's own tree, keeping each own node's
        peak mean per payload. One loop for both trees: this loop is most of the trainer's merge
        cost."""
        if self.own_root is not own_root:
            self._follow_own_root(own_root)
        ids = rows[0::ROW_FIELDS]
        if ids != self.row_ids:
            self._lay_out(ids)
        row_pairs = self.row_pairs.get(anchor) or self._pairs_in_row_order(anchor, own_root)
        row_fields = iter(rows)
        for (merged, own), _, count, total, minimum, maximum in zip(
            row_pairs, row_fields, row_fields, row_fields, row_fields, row_fields
        ):
            merged.total += total
            own.total += total
            if count:
                merged.count += count
                own.count += count
                if minimum < merged.min:
                    merged.min = minimum
                if maximum > merged.max:
                    merged.max = maximum
                if minimum < own.min:
                    own.min = minimum
                if maximum > own.max:
                    own.max = maximum
                mean = total / count
                if mean > own.peak_mean:
                    own.peak_mean = mean

    def _lay_out(self, ids: tuple[float, ...]) -> None:
        """Make the layout of rows ``ids`` the current one (a new one if it is not kept)."""
        row_pairs = self.layouts.get(ids)
        if row_pairs is None:
            if len(self.layouts) >= _MAX_LAYOUTS_PER_STREAM:
                del self.layouts[next(iter(self.layouts))]  # the oldest goes
            row_pairs = self.layouts[ids] = {}
        self.row_ids, self.row_pairs = ids, row_pairs

    def _pairs_in_row_order(self, anchor: TimerNode, own_root: TimerNode) -> Iterable[tuple[TimerNode, TimerNode]]:
        """The node pairs of the current layout's rows under ``anchor``, in row order.

        The layout's first payload under ``anchor`` looks them up by id, one by one; its next
        one lays them out in a list, kept: a worker whose blocks vary more than the layouts kept
        then pays no more than a lookup per row, as before layouts were kept.
        """
        pairs = self.pairs.get(anchor)
        if pairs is None:
            self._node_lists(anchor, own_root)
            pairs = self.pairs[anchor] = [None] * len(self.names)
        pair_by_id = pairs.__getitem__
        if not all(map(pair_by_id, self.row_ids)):
            for node_id in self.row_ids:
                if pairs[node_id] is None:
                    self._pair(pairs, anchor, own_root, node_id)
        if anchor in self.row_pairs:
            in_row_order = self.row_pairs[anchor] = list(map(pair_by_id, self.row_ids))  # type: ignore[arg-type]
            return in_row_order
        if len(self.row_pairs) >= _MAX_ANCHORS_PER_LAYOUT:
            self.row_pairs.clear()
        self.row_pairs[anchor] = []  # seen once: laid out if it comes back
        return map(pair_by_id, self.row_ids)  # type: ignore[arg-type]

    def _pair(
        self, pairs: list[tuple[TimerNode, TimerNode] | None], anchor: TimerNode, own_root: TimerNode, node_id: int
    ) -> tuple[TimerNode, TimerNode]:
        """Resolve block ``node_id``'s nodes in both trees, for ``pairs`` (the list for ``anchor``)."""
        pairs[node_id] = pair = self.nodes(anchor, own_root, node_id)
        return pair
