"""Device time per block in the HTML report and the Chrome trace, from the dump's ``device_time``
section (blocks timed on a GPU through a fake event backend standing in for CUDA)."""

from __future__ import annotations

from typing import Iterator

import pytest
from fake_device import FakeDevice

import profiler
from profiler import hierarchical_timer
from profiler.export.chrome_trace import to_chrome_trace
from profiler.export.html_report import to_html_report
from profiler.gpu import device_time, set_device_events
from profiler.recording import events
from profiler.tree.tree_reader import normalize_timing_tree


@pytest.fixture
def run() -> Iterator[dict]:
    fake = FakeDevice()
    set_device_events(fake)
    events.start_recording()
    try:
        for _ in range(2):
            with hierarchical_timer("update", device="cuda"):
                fake.run_for(0.5)
        fake.finish_all()
        yield profiler.get_timer_tree()
    finally:
        events.stop_recording()
        events.clear_recording()
        set_device_events(None)
        device_time.clear_device_times()


def test_the_report_has_a_device_time_section_with_each_device_block(run):
    page = to_html_report(normalize_timing_tree(run))
    section = page[page.index('<section id="device-time">'):]
    assert '<td class="name">update</td>' in section and '<td class="number">1 s</td>' in section


def test_a_run_without_device_time_has_no_device_section():
    with hierarchical_timer("update"):
        pass
    assert 'id="device-time"' not in to_html_report(normalize_timing_tree(profiler.get_timer_tree()))


def test_each_span_of_a_device_block_carries_its_mean_device_time_in_the_trace(run):
    spans = [event for event in to_chrome_trace(run)["traceEvents"]
             if event["ph"] == "X" and event["name"] == "update"]
    assert len(spans) == 2
    assert {span["args"]["device time per call (mean, ms)"] for span in spans} == {500.0}
