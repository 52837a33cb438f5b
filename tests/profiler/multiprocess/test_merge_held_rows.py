"""Specification of held payload rows: a merger holds each payload's rows and adds them in bulk.

``TimerMerger.merge_payload`` checks a payload whole and makes the nodes of its blocks at once,
but only holds the rows' figures; they are added, many payloads at a time, when a stream holds
``FOLD_AT_ROWS`` rows, when the merger holds ``FOLD_AT_HELD_ROWS``, and before anything reads
the figures. Whatever the moment of the fold, the figures are those that adding each payload one
at a time gives: totals and counts summed, per-call extremes over the rows that closed a call
(a row with count 0 is a run still open: it adds its total only), and each worker node's
``peak_mean`` the highest mean per call of any single payload row.

Times here are multiples of 2**-8 s, exact in binary, so that sums in any order are equal and the
figures can be compared exactly with those computed here from the payloads' own rows.
"""

from __future__ import annotations

import contextlib
import gc
import json
import sys
import threading
import weakref

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hand_payloads import rows_of, tree_payload
from profiler import get_timer_root, get_timer_tree, hierarchical_timer, reset_timers, write_timing_tree
from profiler.multiprocess import merge as merge_module
from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.multiprocess.payload import MAX_ROW_COUNT, snapshot_and_flush, unchecked_rows
from profiler.timing.timers import TimerStack, all_timer_stacks
from profiler.multiprocess.worker_stream import FOLD_AT_ROWS
from tree_paths import child_names, find

UNIT = 2.0**-8  # seconds: every time a test makes is a small multiple of it, exact in binary


# --- figures as adding one payload at a time gives them, computed from the payloads' rows ---------


def declared_rows(payload) -> dict[str, tuple]:
    """{path: (total, count, errors, minimum, maximum)} of a hand-made payload (which declares
    every name itself), as ``hand_payloads.rows_of`` gives them for a stack's payload. Two rows
    of one path (a payload declaring a block twice) are listed apart, as ``path#id``."""
    first_id, declared = payload[7]
    assert first_id == 0, "a hand-made payload declares every name"
    paths: list[str] = []
    for parent_id, name in declared:
        paths.append(name if parent_id < 0 else f"{paths[parent_id]}/{name}")
    errors = dict(payload[9])
    fields = iter(unchecked_rows(payload[8]))
    rows = {}
    for node_id, count, total, minimum, maximum in zip(*[fields] * 5):
        key = paths[node_id] if paths.count(paths[node_id]) == 1 else f"{paths[node_id]}#{node_id}"
        rows[key] = (total, count, errors.get(node_id, 0), minimum, maximum)
    return rows


class OneAtATime:
    """The figures each node gets when every payload row is added straight into its nodes."""

    def __init__(self) -> None:
        self.trainer: dict[tuple[str, ...], list] = {}
        self.workers: dict[int, dict[tuple[str, ...], list]] = {}

    def add(self, worker_id: int, rows: dict[str, tuple], anchor_path: tuple[str, ...] = ()) -> None:
        own_tree = self.workers.setdefault(worker_id, {})
        for path, (total, count, errors, minimum, maximum) in rows.items():
            names = tuple(path.split("#")[0].split("/"))
            for figures in (
                self.trainer.setdefault(anchor_path + names, [0.0, 0, 0, None, None, 0.0]),
                own_tree.setdefault(names, [0.0, 0, 0, None, None, 0.0]),
            ):
                figures[0] += total
                figures[2] += errors
                if count:
                    figures[1] += count
                    figures[3] = minimum if figures[3] is None else min(figures[3], minimum)
                    figures[4] = maximum if figures[4] is None else max(figures[4], maximum)
                    figures[5] = max(figures[5], total / count)

    def trainer_figures(self) -> dict[tuple[str, ...], tuple]:
        return {path: tuple(figures[:5]) for path, figures in self.trainer.items() if figures[0] or figures[1]}

    def worker_figures(self, worker_id: int) -> dict[tuple[str, ...], tuple]:
        own_tree = self.workers.get(worker_id, {})
        return {path: tuple(figures[:5]) for path, figures in own_tree.items() if figures[0] or figures[1]}

    def peak_means(self, worker_id: int) -> dict[str, float]:
        """Block name -> highest mean per call of one payload row, over every node of that name."""
        peaks: dict[str, float] = {}
        for path, figures in self.workers.get(worker_id, {}).items():
            if figures[5] > peaks.get(path[-1], 0.0):
                peaks[path[-1]] = figures[5]
        return peaks


def dumped_figures(node: dict, prefix: tuple[str, ...] = ()) -> dict[tuple[str, ...], tuple]:
    """{path: (total, count, errors, min, max)} of every dumped node below ``node`` that has figures
    (min and max None where the dump has none: no call closed)."""
    found = {}
    for child in node["children"]:
        path = (*prefix, child["name"])
        if child["total"] or child["count"]:
            found[path] = (child["total"], child["count"], child.get("errors", 0), child.get("min"), child.get("max"))
        found.update(dumped_figures(child, path))
    return found


def worker_entry(tree: dict, worker_id: int) -> dict:
    return next(entry for entry in tree["workers"] if entry["worker_id"] == worker_id)


def assert_merged_one_at_a_time(tree: dict, expected: OneAtATime) -> None:
    assert dumped_figures(tree) == expected.trainer_figures()
    for worker_id in expected.workers:
        entry = worker_entry(tree, worker_id)
        assert dumped_figures(entry) == expected.worker_figures(worker_id), f"worker {worker_id}"
        assert entry["peak_mean"] == expected.peak_means(worker_id), f"worker {worker_id}"


# --- payloads from real worker stacks ------------------------------------------------------------


def time_blocks(worker: TimerStack, clock, blocks) -> None:
    """Time each ``(path, units)`` once on ``worker``: the names of ``a/b`` nested, ``units`` of
    2**-8 s spent in the innermost."""
    for path, units in blocks:
        with contextlib.ExitStack() as nested:
            for name in path.split("/"):
                nested.enter_context(hierarchical_timer(name, worker))
            clock.advance(units * UNIT)


def flushed(worker: TimerStack, clock, *blocks) -> tuple:
    time_blocks(worker, clock, blocks)
    return snapshot_and_flush(worker)


def merge_and_expect(merger, expected, worker_id, worker, payload, anchor=None, anchor_path=()):
    merger.merge_payload(worker_id, payload, anchor)
    expected.add(worker_id, rows_of(payload, worker), anchor_path)


@pytest.fixture
def fold_often(monkeypatch):
    """Folds after a few rows: a stream's own at 5 rows, the merger's at 12 over all streams."""
    monkeypatch.setattr(merge_module, "FOLD_AT_ROWS", 5)
    monkeypatch.setattr(merge_module, "FOLD_AT_HELD_ROWS", 12)


def step_payload(total_units=1, count=1, sequence=1, name="env.step", stream=7, **options):
    per_call = total_units * UNIT / count if count else 0.0
    return tree_payload((name, total_units * UNIT, count, 0, (per_call, per_call), ()), sequence=sequence, stream=stream, **options)


# --- figures equal adding the payloads one at a time ----------------------------------------------


def test_one_workers_payloads_beyond_a_streams_fold_add_up_as_one_at_a_time(fake_clock, fold_often):
    trainer, worker = TimerStack("trainer"), TimerStack("worker")
    merger, expected = TimerMerger(trainer), OneAtATime()
    for flush in range(23):
        payload = flushed(worker, fake_clock, ("env.step", flush % 5), ("env.step/physics", flush % 3), ("env.reset", 1))
        merge_and_expect(merger, expected, 0, worker, payload)
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_several_workers_add_up_in_the_nodes_they_share_as_one_at_a_time(fake_clock, fold_often):
    trainer = TimerStack("trainer")
    workers = [TimerStack(f"worker {worker_id}") for worker_id in range(4)]
    merger, expected = TimerMerger(trainer), OneAtATime()
    for flush in range(9):
        for worker_id, worker in enumerate(workers):
            payload = flushed(worker, fake_clock, ("env.step", (flush + worker_id) % 4 + 1), ("env.step/physics", worker_id))
            merge_and_expect(merger, expected, worker_id, worker, payload)
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_a_worker_alternating_between_two_sets_of_blocks_adds_up_as_one_at_a_time(fake_clock, fold_often):
    trainer, worker = TimerStack("trainer"), TimerStack("worker")
    merger, expected = TimerMerger(trainer), OneAtATime()
    for flush in range(14):
        blocks = [("env.step", 2), ("env.step/physics", 1)]
        if flush % 3 == 0:  # an episode ends: these payloads have a row for env.reset too
            blocks.append(("env.reset", flush % 4 + 1))
        merge_and_expect(merger, expected, 0, worker, flushed(worker, fake_clock, *blocks))
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_payloads_under_two_anchors_add_up_under_each_as_one_at_a_time(fake_clock, fold_often):
    trainer, worker = TimerStack("trainer"), TimerStack("worker")
    merger, expected = TimerMerger(trainer), OneAtATime()
    anchors = {name: trainer.root.get_child(name) for name in ("collect", "evaluate")}
    for flush in range(16):
        name = "collect" if flush % 4 else "evaluate"
        payload = flushed(worker, fake_clock, ("env.step", flush % 3 + 1))
        merge_and_expect(merger, expected, 0, worker, payload, anchors[name], (name,))
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_one_workers_payloads_held_under_two_anchors_add_up_in_its_own_tree(fake_clock):
    # Two tables of one stream, alike in size, added together: both go into the worker's own nodes.
    trainer, worker = TimerStack("trainer"), TimerStack("worker")
    merger, expected = TimerMerger(trainer), OneAtATime()
    anchors = {name: trainer.root.get_child(name) for name in ("collect", "evaluate")}
    for flush in range(6):
        name = ("collect", "evaluate")[flush % 2]
        payload = flushed(worker, fake_clock, ("env.step", flush + 1), ("env.step/physics", 1))
        merge_and_expect(merger, expected, 0, worker, payload, anchors[name], (name,))
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_the_payloads_of_a_restarted_worker_add_up_in_its_one_tree(fake_clock):
    # The old process's stream and the new one's hold tables alike in size, of one worker.
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    for process in (TimerStack("worker"), TimerStack("worker, restarted")):
        for flush in range(3):
            merge_and_expect(merger, expected, 0, process, flushed(process, fake_clock, ("env.step", flush + 2)))
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_more_sets_of_blocks_and_anchors_than_a_stream_keeps_add_up_as_one_at_a_time(fake_clock):
    # 9 sets of blocks and 6 anchors in turn, every row held until the one read at the end.
    trainer, worker = TimerStack("trainer"), TimerStack("worker")
    merger, expected = TimerMerger(trainer), OneAtATime()
    anchors = [trainer.root.get_child(f"anchor{index}") for index in range(6)]
    for flush in range(40):
        names = [name for bit, name in enumerate(["a", "b", "c", "a/d"]) if (flush % 9 + 1) >> bit & 1]
        payload = flushed(worker, fake_clock, *[(name, flush % 4 + 1) for name in names])
        anchor = anchors[flush % 6]
        merge_and_expect(merger, expected, 0, worker, payload, anchor, (anchor.name,))
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_reads_between_merges_see_the_figures_of_one_at_a_time_adding_each_time(fake_clock, fold_often):
    trainer = TimerStack("trainer")
    workers = [TimerStack("worker 0"), TimerStack("worker 1")]
    merger, expected = TimerMerger(trainer), OneAtATime()
    for flush in range(17):
        worker_id = flush % 2
        payload = flushed(workers[worker_id], fake_clock, ("env.step", flush % 4), ("render", 1))
        merge_and_expect(merger, expected, worker_id, workers[worker_id], payload)
        if flush in (0, 3, 4, 11, 16):  # after 1, 2, 3 payloads held, and more
            assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


BLOCKS = st.sampled_from(["env.step", "env.step/physics", "env.step/physics/contacts", "env.reset", "render"])
FLUSH = st.tuples(
    st.just("flush"),
    st.integers(0, 2),  # worker
    st.sampled_from([None, "collect", "update"]),  # anchor: None is the trainer's root
    st.lists(st.tuples(BLOCKS, st.integers(0, 5)), max_size=5),  # blocks timed, units spent in each
    st.booleans(),  # whether the worker's outer "loop" block is open across the flush
)
STEPS = st.lists(st.one_of(FLUSH, FLUSH, FLUSH, FLUSH, st.just(("read",))), min_size=4, max_size=40)
FOLD_THRESHOLDS = st.sampled_from([(2, 3), (5, 12), (9, 20), (4096, 2**19)])  # (FOLD_AT_ROWS, FOLD_AT_HELD_ROWS)


@settings(
    max_examples=200,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(FOLD_THRESHOLDS, STEPS)
def test_any_sequence_of_payloads_and_reads_merges_as_one_at_a_time(fake_clock, monkeypatch, thresholds, steps):
    monkeypatch.setattr(merge_module, "FOLD_AT_ROWS", thresholds[0])
    monkeypatch.setattr(merge_module, "FOLD_AT_HELD_ROWS", thresholds[1])
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    anchors = {None: trainer.root, "collect": trainer.root.get_child("collect"), "update": trainer.root.get_child("update")}
    workers = [TimerStack(f"worker {worker_id}") for worker_id in range(3)]
    open_loops: dict[int, object] = {}
    for step in steps:
        if step[0] == "read":
            assert_merged_one_at_a_time(get_timer_tree(trainer), expected)
            continue
        _, worker_id, anchor, blocks, loop_open = step
        worker = workers[worker_id]
        if loop_open and worker_id not in open_loops:
            open_loops[worker_id] = hierarchical_timer("loop", worker).__enter__()
        elif not loop_open and worker_id in open_loops:
            open_loops.pop(worker_id).__exit__(None, None, None)
        time_blocks(worker, fake_clock, blocks)
        fake_clock.advance(UNIT)  # time in the loop, or in no block
        payload = snapshot_and_flush(worker)
        merge_and_expect(merger, expected, worker_id, worker, payload, anchors[anchor], () if anchor is None else (anchor,))
        assert merger.held_rows <= thresholds[1]
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


# --- every read sees every payload merged before it -----------------------------------------------


@pytest.fixture
def held_step_payloads(fake_clock):
    """A trainer stack and its merger, holding (not yet added) three payloads of one worker:
    env.step, 1 + 3 + 4 units in 1 + 2 + 3 calls."""
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    for sequence, (units, count) in enumerate([(1, 1), (3, 2), (4, 3)], start=1):
        merger.merge_payload(0, step_payload(units, count, sequence))
    assert merger.held_rows == 3  # nothing added yet: what follows reads them all the same
    return trainer, merger


def test_get_timer_tree_sees_every_payload_merged_before_it(held_step_payloads):
    trainer, _ = held_step_payloads
    tree = get_timer_tree(trainer)
    assert (find(tree, "env.step")["total"], find(tree, "env.step")["count"]) == (8 * UNIT, 6)
    assert find(worker_entry(tree, 0), "env.step")["count"] == 6


def test_get_timer_root_sees_every_payload_merged_before_it(held_step_payloads):
    trainer, _ = held_step_payloads
    step = get_timer_root(trainer).children["env.step"]
    assert (step.total, step.count, step.min, step.max) == (8 * UNIT, 6, UNIT, 1.5 * UNIT)


def test_worker_entries_see_every_payload_merged_before_them(held_step_payloads):
    _, merger = held_step_payloads
    (entry,) = merger.worker_entries()
    assert (find(entry, "env.step")["total"], find(entry, "env.step")["count"]) == (8 * UNIT, 6)
    assert entry["peak_mean"] == {"env.step": 1.5 * UNIT}


def test_worker_block_times_and_the_slowest_worker_see_every_payload_merged_before_them(held_step_payloads):
    _, merger = held_step_payloads
    (times,) = merger.worker_block_times("env.step")
    assert (times.count, times.total, times.peak_mean) == (6, 8 * UNIT, 1.5 * UNIT)
    merger.merge_payload(1, step_payload(9, 3))
    slowest = merger.slowest_worker("env.step")
    assert (slowest.worker_id, slowest.max) == (1, 3 * UNIT)


def test_a_written_timing_tree_holds_every_payload_merged_before_it(held_step_payloads, tmp_path):
    trainer, _ = held_step_payloads
    written = json.loads(write_timing_tree(tmp_path / "timers.json", trainer).read_text())
    assert (find(written, "env.step")["total"], find(written, "env.step")["count"]) == (8 * UNIT, 6)
    assert worker_entry(written, 0)["peak_mean"] == {"env.step": 1.5 * UNIT}


def test_a_flush_of_the_merging_stack_ships_every_payload_merged_before_it(held_step_payloads):
    # A trainer that is itself a worker of another (a hierarchy of vector envs) flushes what it merged.
    trainer, _ = held_step_payloads
    (row,) = rows_of(snapshot_and_flush(trainer), trainer).values()
    assert row == (8 * UNIT, 6, 0, UNIT, 1.5 * UNIT)


def test_a_merged_block_takes_its_place_in_the_tree_as_it_arrives_not_when_added(fake_clock):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    merger.merge_payload(0, step_payload(name="env.step"))
    assert "env.step" in trainer.root.children  # made at once, its figures held
    with hierarchical_timer("update", trainer):
        pass
    merger.merge_payload(1, step_payload(name="env.reset"))
    assert child_names(get_timer_tree(trainer)) == ["env.step", "update", "env.reset"]


def test_a_refused_payload_leaves_the_rows_held_before_it_as_they_were(fake_clock):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    merger.merge_payload(0, step_payload(2, 1, sequence=1))
    merger.merge_payload(0, step_payload(2, 1, sequence=2))
    with pytest.raises(PayloadError):
        merger.merge_payload(0, tree_payload(("env.step", 1.0, 1, 0, (2.0, 1.0), ()), sequence=3))  # min > max
    assert merger.held_rows == 2
    assert find(get_timer_tree(trainer), "env.step")["count"] == 2


# --- the merger's bound on rows held --------------------------------------------------------------


def test_the_rows_held_over_all_streams_never_exceed_the_mergers_bound(fake_clock, monkeypatch):
    monkeypatch.setattr(merge_module, "FOLD_AT_HELD_ROWS", 10)
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    held = []
    for sequence in range(1, 8):
        for worker_id in range(6):  # 6 streams of 2 rows a payload, far below a stream's own fold
            payload = tree_payload(
                ("env.step", (worker_id + 1) * UNIT, 1, 0, None, (("physics", UNIT, 1, 0, None, ()),)),
                sequence=sequence,
                stream=100 + worker_id,
            )
            merger.merge_payload(worker_id, payload)
            expected.add(worker_id, declared_rows(payload))
            held.append(merger.held_rows)
    assert max(held) <= 10
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_a_stream_adds_its_rows_once_it_holds_a_fold_of_them(fake_clock):
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    blocks = [(f"env.block{index}", UNIT * (index + 1), 1, 0, None, ()) for index in range(4)]
    for sequence in range(1, FOLD_AT_ROWS // 4 + 4):
        payload = tree_payload(*blocks, sequence=sequence)
        merger.merge_payload(0, payload)
        expected.add(0, declared_rows(payload))
    assert merger.held_rows == 3 * 4  # the first FOLD_AT_ROWS rows were added, the last three payloads' are held
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


def test_the_rows_a_stream_holds_never_reach_its_fold(fake_clock, monkeypatch):
    monkeypatch.setattr(merge_module, "FOLD_AT_ROWS", 7)
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    held = []
    for sequence in range(1, 20):
        payload = tree_payload(("env.step", sequence * UNIT, 2, 0, (0.0, sequence * UNIT), ()), ("env.reset", UNIT, 1, 0, None, ()), sequence=sequence)
        merger.merge_payload(0, payload)
        expected.add(0, declared_rows(payload))
        held.append(merger.held_rows)
    assert max(held) < 7
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


# --- resets and detaching -------------------------------------------------------------------------


def test_a_reset_of_the_stack_drops_the_rows_held_for_its_old_tree(fake_clock):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    for sequence in (1, 2, 3):
        merger.merge_payload(0, step_payload(5, 1, sequence))
    reset_timers(trainer)
    assert merger.held_rows == 0
    merger.merge_payload(0, step_payload(1, 2, sequence=4))
    tree = get_timer_tree(trainer)
    assert (find(tree, "env.step")["total"], find(tree, "env.step")["count"]) == (UNIT, 2)
    own = find(worker_entry(tree, 0), "env.step")
    assert (own["total"], own["count"], worker_entry(tree, 0)["peak_mean"]) == (UNIT, 2, {"env.step": UNIT / 2})


def test_a_reset_drops_figures_added_in_bulk_but_not_yet_read(fake_clock, monkeypatch):
    monkeypatch.setattr(merge_module, "FOLD_AT_ROWS", 3)
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    for sequence in (1, 2, 3, 4):  # the stream adds the first three on its own, holds the fourth
        merger.merge_payload(0, step_payload(5, 1, sequence))
    assert merger.held_rows == 1
    reset_timers(trainer)
    merger.merge_payload(0, step_payload(1, 2, sequence=5))
    tree = get_timer_tree(trainer)
    assert (find(tree, "env.step")["total"], find(tree, "env.step")["count"]) == (UNIT, 2)
    assert (find(worker_entry(tree, 0), "env.step")["count"], worker_entry(tree, 0)["payloads"]) == (2, 1)


def test_payloads_merged_between_a_discard_and_the_reset_it_belongs_to_still_add_up(fake_clock):
    # reset() discards what recorders hold before the stack's generation moves on: a receiver
    # thread may merge in between, into layouts made afresh for the cleared figure tables.
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    merger.merge_payload(0, step_payload(5, 1, 1))
    merger.discard(trainer)
    for sequence in range(2, 5):
        merger.merge_payload(0, step_payload(1, 1, sequence))
    tree = get_timer_tree(trainer)
    assert (find(tree, "env.step")["total"], find(tree, "env.step")["count"]) == (3 * UNIT, 3)


def test_worker_block_times_after_a_reset_list_nothing_from_before_it(fake_clock):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    merger.merge_payload(0, step_payload(5, 1))
    assert merger.slowest_worker("env.step") is not None  # read: added into the worker's tree
    reset_timers(trainer)
    assert merger.worker_block_times("env.step") == []
    assert merger.slowest_worker("env.step") is None


def test_detaching_adds_the_rows_held_into_the_tree_which_keeps_them_when_the_merger_goes(fake_clock):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    for sequence in (1, 2, 3):
        merger.merge_payload(0, step_payload(sequence, 1, sequence))
    merger.detach()
    gone = weakref.ref(merger)
    del merger
    gc.collect()
    assert gone() is None
    tree = get_timer_tree(trainer)
    step = find(tree, "env.step")
    assert (step["total"], step["count"], step["min"], step["max"]) == (6 * UNIT, 3, UNIT, 3 * UNIT)
    assert "workers" not in tree


# --- rows anchored in the tree of a thread that ended ---------------------------------------------
# A vector env stepped from another thread merges its workers' payloads under that thread's step.
# Once the thread has ended, its tree is added into its group's (see StackRegistry): a dump, a new
# thread or all_timer_stacks() may do it at any moment, while the merger holds rows for it, and
# before the last payloads arrive.


def block_of_a_thread_that_ended(thread_name: str):
    """The node of block ``collect``, timed once by a thread called ``thread_name`` that ended."""
    found = []

    def collect() -> None:
        with hierarchical_timer("collect") as node:
            found.append(node)

    thread = threading.Thread(target=collect, name=thread_name)
    thread.start()
    thread.join()
    return found[0]


def test_rows_held_for_a_thread_that_ended_are_in_its_tree_when_that_is_folded(fake_clock):
    anchor = block_of_a_thread_that_ended("collector")
    merger = TimerMerger()
    merger.merge_payload(0, step_payload(3, 3), anchor)
    all_timer_stacks()  # folds the ended thread's tree into its group's
    tree = get_timer_tree(include_threads=True)
    assert find(tree, "thread:ended:collector", "collect", "env.step")["count"] == 3
    assert find(worker_entry(tree, 0), "env.step")["count"] == 3


def test_a_payload_anchored_in_a_thread_folded_away_lands_in_its_group(fake_clock):
    anchor = block_of_a_thread_that_ended("collector")
    merger = TimerMerger()
    merger.merge_payload(0, step_payload(3, 3), anchor)
    all_timer_stacks()
    merger.merge_payload(0, step_payload(2, 2, sequence=2), anchor)
    tree = get_timer_tree(include_threads=True)
    assert find(tree, "thread:ended:collector", "collect", "env.step")["count"] == 5
    assert find(worker_entry(tree, 0), "env.step")["count"] == 5


# --- rows of runs still open (count 0) ------------------------------------------------------------


@pytest.mark.parametrize("payloads", [1, 2, 3, 5])
def test_a_row_of_a_run_still_open_adds_its_total_and_leaves_the_extremes(fake_clock, payloads):
    # A worker's outer loop, open across every flush; the last payload's row closes it.
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    for sequence in range(1, payloads + 1):
        closes = sequence == payloads
        loop = ("loop", 2 * UNIT, 1 if closes else 0, 0, (2 * UNIT * payloads,) * 2 if closes else None, ())
        payload = tree_payload(loop, ("env.step", UNIT, 1, 0, None, ()), sequence=sequence)
        merger.merge_payload(0, payload)
        expected.add(0, declared_rows(payload))
    tree = get_timer_tree(trainer)
    loop = find(tree, "loop")
    assert (loop["total"], loop["count"], loop["min"], loop["max"]) == (2 * UNIT * payloads, 1, 2 * UNIT * payloads, 2 * UNIT * payloads)
    assert worker_entry(tree, 0)["peak_mean"] == {"loop": 2 * UNIT, "env.step": UNIT}
    assert_merged_one_at_a_time(tree, expected)


@pytest.mark.parametrize("payloads", [1, 2, 3, 5])
def test_a_block_whose_run_stays_open_has_a_total_and_no_call(fake_clock, payloads):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    for sequence in range(1, payloads + 1):
        merger.merge_payload(0, tree_payload(("loop", UNIT, 0, 0, None, ()), ("env.step", UNIT, 1, 0, None, ()), sequence=sequence))
    tree = get_timer_tree(trainer)
    for node in (find(tree, "loop"), find(worker_entry(tree, 0), "loop")):
        assert (node["total"], node["count"]) == (payloads * UNIT, 0)
        assert "min" not in node and "max" not in node
    assert worker_entry(tree, 0)["peak_mean"] == {"env.step": UNIT}


def test_open_runs_of_several_workers_add_up_beside_their_closed_calls(fake_clock):
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    for sequence in range(1, 4):
        for worker_id in range(3):
            closes = sequence == worker_id + 1  # each worker's run closes in another payload
            count = 1 if closes else 0
            payload = tree_payload(("loop", (worker_id + sequence) * UNIT, count, 0, None, ()), sequence=sequence, stream=10 + worker_id)
            merger.merge_payload(worker_id, payload)
            expected.add(worker_id, declared_rows(payload))
    assert_merged_one_at_a_time(get_timer_tree(trainer), expected)


# --- huge counts --------------------------------------------------------------------------------


def test_huge_counts_of_one_worker_sum_to_the_exact_whole_number(fake_clock):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    for sequence in range(1, 5):
        merger.merge_payload(0, step_payload(4, MAX_ROW_COUNT - 1, sequence))
    tree = get_timer_tree(trainer)
    assert find(tree, "env.step")["count"] == 4 * (MAX_ROW_COUNT - 1) > 2**64
    assert find(worker_entry(tree, 0), "env.step")["count"] == 4 * (MAX_ROW_COUNT - 1)


def test_huge_counts_added_over_many_folds_of_one_stream_sum_to_the_exact_whole_number(fake_clock, monkeypatch):
    monkeypatch.setattr(merge_module, "FOLD_AT_ROWS", 3)
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    count = 15 * 10**17  # a stack of 3 such payloads stays below 2**62
    for sequence in range(1, 13):
        merger.merge_payload(0, step_payload(4, count, sequence))
    tree = get_timer_tree(trainer)
    assert find(tree, "env.step")["count"] == 12 * count > 2**63
    assert find(worker_entry(tree, 0), "env.step")["count"] == 12 * count


# Counts below 2**62 / payloads: each worker's payloads alone fit a 64-bit count, all of them not.
@pytest.mark.parametrize(("payloads_per_worker", "count"), [(1, 4 * 10**18), (2, 2 * 10**18), (3, 15 * 10**17)])
def test_huge_counts_of_several_workers_sum_to_the_exact_whole_number(fake_clock, payloads_per_worker, count):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    for worker_id in range(3):
        for sequence in range(1, payloads_per_worker + 1):
            merger.merge_payload(worker_id, step_payload(4, count, sequence, stream=20 + worker_id))
    tree = get_timer_tree(trainer)
    assert [find(entry, "env.step")["count"] for entry in tree["workers"]] == [payloads_per_worker * count] * 3
    assert find(tree, "env.step")["count"] == 3 * payloads_per_worker * count > 2**63


def test_huge_counts_of_a_block_a_payload_declares_several_times_sum_to_the_exact_whole_number(fake_clock):
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    count = 15 * 10**17  # each row below 2**62 / 3, the rows of one node over three payloads not
    for sequence in (1, 2, 3):
        merger.merge_payload(0, tree_payload(*[("env.step", UNIT, count, 0, (0.0, UNIT), ())] * 3, sequence=sequence))
    tree = get_timer_tree(trainer)
    assert find(tree, "env.step")["count"] == find(worker_entry(tree, 0), "env.step")["count"] == 9 * count > 2**63


# --- a block declared twice ---------------------------------------------------------------------


@pytest.mark.parametrize("payloads", [1, 3])
def test_rows_of_a_block_a_payload_declares_twice_both_land_in_its_one_node(fake_clock, payloads):
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    for sequence in range(1, payloads + 1):
        for worker_id in range(2):
            payload = tree_payload(
                ("env.step", UNIT, 1, 0, None, ()),
                ("env.step", 6 * UNIT, 2, 0, (2 * UNIT, 4 * UNIT), ()),
                sequence=sequence,
                stream=30 + worker_id,
            )
            merger.merge_payload(worker_id, payload)
            expected.add(worker_id, declared_rows(payload))
    tree = get_timer_tree(trainer)
    step = find(tree, "env.step")
    assert (step["total"], step["count"], step["min"], step["max"]) == (14 * payloads * UNIT, 6 * payloads, UNIT, 4 * UNIT)
    assert worker_entry(tree, 0)["peak_mean"] == {"env.step": 3 * UNIT}
    assert_merged_one_at_a_time(tree, expected)


# --- error counts and labels --------------------------------------------------------------------


def test_error_counts_and_labels_land_beside_the_rows_held(fake_clock, monkeypatch):
    monkeypatch.setattr(merge_module, "FOLD_AT_ROWS", 4)
    trainer = TimerStack("trainer")
    merger, expected = TimerMerger(trainer), OneAtATime()
    for sequence in range(1, 8):
        errors = sequence % 3  # some payloads carry errors, some none
        labels = ("rl", "task", (f"scope{sequence % 2}",))
        payload = tree_payload(
            ("env.step", 2 * UNIT, 2, errors, (0.0, 2 * UNIT), (("physics", UNIT, 1, 1, None, ()),), labels),
            sequence=sequence,
        )
        merger.merge_payload(0, payload)
        expected.add(0, declared_rows(payload))
    tree = get_timer_tree(trainer)
    assert_merged_one_at_a_time(tree, expected)
    for step in (find(tree, "env.step"), find(worker_entry(tree, 0), "env.step")):
        assert (step["errors"], step["count"]) == (7, 14)
        assert (step["domain"], step["object_type"], step["scopes"]) == ("rl", "task", ["scope0", "scope1"])
    assert find(tree, "env.step", "physics")["errors"] == 7


# --- merging on another thread --------------------------------------------------------------------


def test_reads_while_a_thread_merges_lose_no_payload_and_never_go_back(monkeypatch):
    monkeypatch.setattr(merge_module, "FOLD_AT_ROWS", 8)
    monkeypatch.setattr(merge_module, "FOLD_AT_HELD_ROWS", 20)
    trainer = TimerStack("trainer")
    merger = TimerMerger(trainer)
    payloads_per_worker, workers = 500, 3
    failures: list[BaseException] = []

    def receive() -> None:
        try:
            for sequence in range(1, payloads_per_worker + 1):
                for worker_id in range(workers):
                    payload = tree_payload(
                        ("env.step", 3 * UNIT, 3, 0, (0.0, 2 * UNIT), (("physics", UNIT, 1, 0, None, ()),)),
                        sequence=sequence,
                        stream=40 + worker_id,
                    )
                    merger.merge_payload(worker_id, payload)
        except BaseException as error:  # reported by the main thread
            failures.append(error)

    receiver = threading.Thread(target=receive, name="payload receiver")
    switch_interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # the threads take turns often: merges, folds and reads interleave
    try:
        receiver.start()
        counts_read = []
        while receiver.is_alive() or not counts_read:
            tree = get_timer_tree(trainer)
            counts_read.append(find(tree, "env.step")["count"] if "env.step" in child_names(tree) else 0)
        receiver.join(timeout=60)
    finally:
        sys.setswitchinterval(switch_interval)
    assert not receiver.is_alive() and failures == []
    assert counts_read == sorted(counts_read)  # a read never sees fewer calls than one before it
    tree = get_timer_tree(trainer)
    merged = payloads_per_worker * workers
    step = find(tree, "env.step")
    assert (step["total"], step["count"], step["min"], step["max"]) == (3 * merged * UNIT, 3 * merged, 0.0, 2 * UNIT)
    assert find(tree, "env.step", "physics")["count"] == merged
    assert [find(entry, "env.step")["count"] for entry in tree["workers"]] == [3 * payloads_per_worker] * workers
