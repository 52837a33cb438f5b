"""Specification of what a run without memory samples still says of its memory: the resident set
the trainer read of each process."""

from __future__ import annotations

from profiler.analysis.analyze import analyze_run, render_analysis
from profiler.analysis.resident_gauges import ResidentGauge, resident_gauges, resident_gauges_text

MIB = 1024 * 1024


def gauge(last, lowest, highest, count=5):
    return {"value": last, "min": lowest, "max": highest, "count": count}


def tree_with(gauges, **sections):
    return {"name": "root", "total": 1.0, "count": 1, "self": 1.0, "children": [], "gauges": gauges, **sections}


def test_the_trainer_comes_first_then_the_workers_by_index_in_bytes():
    tree = tree_with({"resources.worker_10.rss_mb": gauge(3.0, 2.0, 4.0),
                      "resources.worker_2.rss_mb": gauge(1.0, 1.0, 1.5),
                      "resources.trainer.rss_mb": gauge(100.0, 90.0, 110.0, 7),
                      "resources.trainer.cpu_percent": gauge(50.0, 0.0, 99.0),
                      "loss": gauge(0.1, 0.0, 1.0)})
    assert resident_gauges(tree) == [ResidentGauge("trainer", 100 * MIB, 90 * MIB, 110 * MIB, 7),
                                     ResidentGauge("worker 2", MIB, MIB, 1.5 * MIB, 5),
                                     ResidentGauge("worker 10", 3 * MIB, 2 * MIB, 4 * MIB, 5)]


def test_a_gauge_with_a_reading_that_is_not_a_number_is_left_out():
    tree = tree_with({"resources.trainer.rss_mb": gauge(float("nan"), 1.0, 2.0),
                      "resources.worker_0.rss_mb": gauge(1.0, 1.0, float("inf"))})
    assert resident_gauges(tree) == []


def test_the_text_has_a_row_per_process_last_lowest_highest_readings():
    text = resident_gauges_text([ResidentGauge("worker 0", 235 * MIB, 234 * MIB, 236 * MIB, 7)])
    assert text.splitlines()[-1] == " 235.0 MiB  234.0 MiB  236.0 MiB        7  worker 0"


def test_the_analysis_shows_them_where_memory_was_not_sampled():
    text = render_analysis(analyze_run(tree_with({"resources.trainer.rss_mb": gauge(50.0, 40.0, 60.0)})))
    assert "Resident memory as the trainer read it, once a second:" in text
    assert "  50.0 MiB   40.0 MiB   60.0 MiB        5  trainer" in text


def test_the_memory_samples_stand_in_their_place_where_memory_was_sampled():
    samples = {"unit": "bytes", "clock": "perf_counter", "processes": [
        {"pid": 7, "name": "trainer", "clock_offset": 0.0, "stride": 1, "samples": [[0.0, MIB, None]], "blocks": []}]}
    tree = tree_with({"resources.trainer.rss_mb": gauge(50.0, 40.0, 60.0)}, memory=samples)
    text = render_analysis(analyze_run(tree))
    assert "Memory per process (resident set, sampled)" in text
    assert "Resident memory as the trainer read it" not in text
