"""Specification of the memory figures ``rlprof analyze`` shows: per process, and per block."""

from __future__ import annotations

import json

import pytest

from profiler import get_timer_tree, hierarchical_timer
from profiler.recording import memory
from profiler.analysis.analyze import AnalyzeOptions, analyze_run, render_analysis
from profiler.analysis.memory_report import memory_document, memory_report, memory_text

MIB = 1024 * 1024


def tree_with(processes):
    return {"name": "root", "total": 1.0, "count": 1, "self": 1.0, "children": [],
            "memory": {"unit": "bytes", "clock": "perf_counter", "processes": processes}}


def process(name, resident, blocks=(), uss=None):
    return {"pid": 7, "name": name, "clock_offset": 0.0, "stride": 1,
            "samples": [[float(second), value, uss] for second, value in enumerate(resident)],
            "blocks": [{"path": list(path), "calls": calls, "net_bytes": net, "peak_bytes": peak}
                       for path, calls, net, peak in blocks]}


def test_peak_start_end_and_growth_come_from_the_samples():
    resident = [10 * MIB, 12 * MIB, 14 * MIB, 40 * MIB, 16 * MIB, 18 * MIB, 20 * MIB, 22 * MIB]
    (figures,) = memory_report(tree_with([process("trainer", resident)])).processes
    assert figures.peak_bytes == 40 * MIB
    assert figures.quarter_medians == (11 * MIB, 27 * MIB, 17 * MIB, 21 * MIB)
    assert (figures.start_bytes, figures.end_bytes, figures.growth_bytes) == (11 * MIB, 21 * MIB, 10 * MIB)


def test_growth_per_minute_spans_the_first_quarters_middle_to_the_lasts():
    resident = [MIB * index for index in range(9)]  # 8 seconds of samples, 1 MiB a second
    (figures,) = memory_report(tree_with([process("trainer", resident)])).processes
    assert figures.bytes_per_minute == pytest.approx(60 * MIB, rel=0.1)


def test_fewer_than_four_samples_compare_the_first_and_last():
    (figures,) = memory_report(tree_with([process("trainer", [MIB, 3 * MIB])])).processes
    assert figures.quarter_medians == () and figures.growth_bytes == 2 * MIB


def test_the_peak_unique_set_is_kept_when_sampled():
    (figures,) = memory_report(tree_with([process("worker 0", [MIB] * 4, uss=MIB // 2)])).processes
    assert figures.peak_uss_bytes == MIB // 2


def test_the_largest_allocations_are_by_peak_over_every_process():
    report = memory_report(tree_with([
        process("trainer", [MIB], blocks=[(("update",), 10, 0, 5 * MIB), (("act",), 10, MIB, MIB)]),
        process("worker 1", [MIB], blocks=[(("env.step",), 10, 3 * MIB, 8 * MIB)]),
    ]))
    assert [(block.process, block.label) for block in report.largest_allocations(2)] == [
        ("worker 1", "env.step"), ("trainer", "update")]


def test_a_run_without_memory_says_how_to_sample_it():
    assert memory_report({"name": "root", "children": []}) is None
    assert memory_text(None).startswith("Memory: not sampled in this run")
    assert memory_document(None) is None


def test_the_text_has_a_row_per_process_and_the_blocks_when_tracked():
    text = memory_text(memory_report(tree_with([
        process("worker 1", [20 * MIB, 30 * MIB, 40 * MIB, 50 * MIB], blocks=[(("env.step",), 4, 30 * MIB, MIB)]),
    ])))
    assert " 50.0 MiB   20.0 MiB   50.0 MiB   +30.0 MiB" in text
    assert "worker 1: env.step" in text


def test_the_text_says_when_allocations_were_not_tracked():
    assert "not tracked; profile with track_allocations=True" in memory_text(
        memory_report(tree_with([process("trainer", [MIB] * 4)])))


def test_a_run_rlprof_run_made_is_told_its_option_for_allocations():
    tree = {**tree_with([process("trainer", [MIB] * 4)]), "metadata": {"rlprof_run": "train.py"}}
    assert "not tracked; run it again with rlprof run --memory --track-allocations" in memory_text(memory_report(tree))


def test_the_analysis_of_a_run_rlprof_run_made_without_memory_names_its_option():
    tree = {"name": "root", "total": 1.0, "count": 1, "self": 1.0, "children": [],
            "metadata": {"rlprof_run": "train.py"}}
    text = render_analysis(analyze_run(tree), width=200)
    assert ("Memory: not sampled in this run (run it again with rlprof run --memory to see each process's "
            "memory over time).") in text


# --- in rlprof analyze --------------------------------------------------------------------------


@pytest.fixture
def tracked_run():
    memory.start_sampling(every_blocks=1, track_allocations=True)
    kept = []
    for _ in range(3):
        with hierarchical_timer("train"):
            with hierarchical_timer("small"):
                kept.append(bytearray(64 * 1024))
            with hierarchical_timer("large"):
                scratch = bytearray(4 * MIB)
                del scratch
    memory.stop_sampling()
    return get_timer_tree()


def test_order_by_memory_puts_the_block_with_the_largest_allocation_first(tracked_run):
    analysis = analyze_run(tracked_run, AnalyzeOptions(order_by="memory"))
    assert [row.label for row in analysis.blocks][:2] == ["train", "train/large"]
    assert analysis.blocks[1].allocated_peak >= 4 * MIB


def test_ordered_by_memory_the_table_shows_the_allocation_columns(tracked_run):
    text = render_analysis(analyze_run(tracked_run, AnalyzeOptions(order_by="memory")))
    assert "alloc peak alloc kept" in text


def test_the_json_rows_carry_their_allocations(tracked_run):
    document = json.loads(render_analysis(analyze_run(tracked_run), "json"))
    small = next(block for block in document["blocks"] if block["block"] == "train/small")
    assert small["allocated_net_bytes"] >= 3 * 64 * 1024
    assert document["memory"]["processes"][0]["process"] == "trainer"


def test_grouped_rows_keep_the_largest_peak_and_add_what_was_kept(tracked_run):
    (everything,) = analyze_run(tracked_run, AnalyzeOptions(aggregate_by="process")).blocks
    rows = {row.label: row for row in analyze_run(tracked_run).blocks}
    assert everything.allocated_peak == rows["train"].allocated_peak
    assert everything.allocated_net == rows["train"].allocated_net


def test_ordering_by_memory_without_tracked_allocations_is_refused():
    with hierarchical_timer("step"):
        pass
    with pytest.raises(ValueError, match="did not track its blocks' allocations"):
        analyze_run(get_timer_tree(), AnalyzeOptions(order_by="memory"))


def test_ordering_a_run_rlprof_run_made_by_memory_without_allocations_names_its_option():
    with hierarchical_timer("step"):
        pass
    tree = get_timer_tree()
    tree["metadata"] = {**tree.get("metadata", {}), "rlprof_run": "train.py"}
    with pytest.raises(ValueError, match="run it again with rlprof run --memory --track-allocations"):
        analyze_run(tree, AnalyzeOptions(order_by="memory"))
