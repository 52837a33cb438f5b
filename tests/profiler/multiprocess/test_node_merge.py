"""Specification of NodeMerger: a node's worker payloads pre-merged into one payload per interval,
which a driver merges into the same tree as the workers' own payloads would give."""

from __future__ import annotations

import pytest

from profiler import hierarchical_timer
from profiler.analysis.block_stats import walk_nodes
from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.multiprocess.node_merge import NodeMerger
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing import timers
from profiler.timing.timers import TimerStack


def work(stack: TimerStack, clock, step_seconds: float, steps: int) -> None:
    """``steps`` env steps of ``step_seconds`` each, a quarter of it in physics."""
    for _ in range(steps):
        with hierarchical_timer("env.step", stack):
            with hierarchical_timer("physics", stack):
                clock.advance(step_seconds / 4)
            clock.advance(step_seconds * 3 / 4)
    timers.set_gauge("episode_length", steps, stack)


def figures(tree: dict) -> dict[str, tuple]:
    return {"/".join(path): (node["count"], round(node["total"], 9), round(node["min"], 9), round(node["max"], 9))
            for path, node in walk_nodes(tree) if node.get("count")}


def worker_payloads(clock, seconds: list[float], intervals: int) -> list[list[tuple]]:
    """Each worker's payloads, one an interval: worker ``i`` steps 3 times a step of ``seconds[i]``."""
    stacks = [TimerStack(f"worker {index}") for index in range(len(seconds))]
    return [[(work(stack, clock, step, 3), snapshot_and_flush(stack))[1] for _ in range(intervals)]
            for stack, step in zip(stacks, seconds)]


def test_the_driver_merging_one_payload_per_node_gets_the_tree_of_every_worker_payload(fake_clock):
    payloads = worker_payloads(fake_clock, [0.01, 0.02, 0.03, 0.04], intervals=3)
    direct = TimerMerger(TimerStack("direct driver"))
    per_node = TimerMerger(TimerStack("per-node driver"))
    nodes = [NodeMerger("10.0.0.2"), NodeMerger("10.0.0.3")]  # workers 0, 1 and workers 2, 3
    for interval in range(3):
        for worker, stream in enumerate(payloads):
            direct.merge_payload(worker, stream[interval])
            nodes[worker // 2].add(worker, stream[interval])
        for node_index, node in enumerate(nodes):
            per_node.merge_payload(node_index, node.take())
    direct.fold()
    per_node.fold()
    direct_tree, node_tree = direct.timer_stack.root.to_dict(), per_node.timer_stack.root.to_dict()
    assert figures(node_tree) == figures(direct_tree)
    assert figures(node_tree)["env.step"] == (36, 0.9, 0.01, 0.04)  # 4 workers x 3 intervals x 3 steps
    assert [node.payloads_merged for node in nodes] == [6, 6] and [node.payloads_taken for node in nodes] == [3, 3]


def test_each_workers_own_tree_stays_available_on_its_node(fake_clock):
    payloads = worker_payloads(fake_clock, [0.01, 0.02], intervals=2)
    node = NodeMerger("10.0.0.2")
    for interval in range(2):
        for worker, stream in enumerate(payloads):
            node.add(worker, stream[interval])
    entries = node.worker_entries()
    assert [entry["worker_id"] for entry in entries] == [0, 1]
    assert [figures(entry)["env.step"] for entry in entries] == [(6, 0.06, 0.01, 0.01), (6, 0.12, 0.02, 0.02)]
    assert entries[1]["gauges"]["episode_length"]["value"] == 3


def test_a_node_without_new_payloads_sends_nothing(fake_clock):
    node = NodeMerger()
    assert node.take() is None
    node.add(0, worker_payloads(fake_clock, [0.01], intervals=1)[0][0])
    assert node.take() is not None and node.take() is None


def test_a_bad_worker_payload_is_refused_and_merges_nothing(fake_clock):
    node = NodeMerger()
    with pytest.raises(PayloadError):
        node.add(0, ("rlprof.timers", 4, "not a payload"))
    assert node.take() is None and node.payloads_merged == 0
