"""Specification of memory in the outputs: the memory_flow.svg picture, the memory counters of the
Chrome trace, and the memory section of the HTML report."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree

import pytest

from profiler import (
    TimerMerger,
    TimerStack,
    get_timer_tree,
    hierarchical_timer,
    snapshot_and_flush,
)
from profiler.recording import events, memory
from profiler.export import render
from profiler.export.chrome_trace import to_chrome_trace
from profiler.export.html_report import to_html_report
from profiler.export.memory_flow import to_memory_svg

SVG = "{http://www.w3.org/2000/svg}"


MIB = 2**20


@pytest.fixture
def sampled_run(fake_clock):
    """A trainer that recorded its timeline and sampled its memory, beside one worker process
    that sampled its own (its payload's memory field made here: one process cannot be two)."""
    merger = TimerMerger()
    events.start_recording()
    worker = TimerStack("worker main")  # made while recording: it records too
    memory.start_sampling(every_blocks=1)
    try:
        for _ in range(3):
            with hierarchical_timer("train"):
                fake_clock.advance(1.0)
        with hierarchical_timer("evaluate"):
            fake_clock.advance(0.5)
        with hierarchical_timer("env.step", worker):
            pass
    finally:
        memory.stop_sampling()
        events.stop_recording()
    payload = snapshot_and_flush(worker)
    worker_memory = (events.HOST, events.clock_origin(),
                     tuple((1000.0 + second, (30 + 10 * second) * MIB, None) for second in range(4)), ())
    merger.merge_payload(0, payload[:13] + (worker_memory,) + payload[14:])
    return get_timer_tree()


def parsed(svg_text):
    return ElementTree.fromstring(svg_text.split("\n", 1)[1])


def test_the_picture_is_an_svg_document_with_one_line_per_process(sampled_run):
    picture = parsed(to_memory_svg(sampled_run))
    lines = picture.findall(f"{SVG}polyline")
    assert [line.find(f"{SVG}title").text for line in lines] == ["trainer", "worker 0"]
    assert all(len(line.get("points").split()) >= 2 for line in lines)


def test_the_trainers_outermost_blocks_are_shaded_and_named_in_the_legend(sampled_run):
    picture = parsed(to_memory_svg(sampled_run))
    shaded = {rect.find(f"{SVG}title").text for rect in picture.findall(f"{SVG}rect")
              if rect.find(f"{SVG}title") is not None}
    assert shaded == {"train", "evaluate"}
    assert {"train", "evaluate"} <= {text.text for text in picture.iter(f"{SVG}text")}


def test_lines_rise_with_memory(sampled_run):
    sampled_run["memory"]["processes"][0]["samples"] = [[1000.0, 10 * MIB, None], [1003.0, 40 * MIB, None]]
    trainer_line = parsed(to_memory_svg(sampled_run)).findall(f"{SVG}polyline")[0]
    (_, first_y), (_, last_y) = [map(float, point.split(",")) for point in trainer_line.get("points").split()]
    assert last_y < first_y  # up is more memory


def test_unique_set_samples_are_drawn_dashed(sampled_run):
    for sample in sampled_run["memory"]["processes"][0]["samples"]:
        sample[2] = sample[1] // 2
    dashed = [line for line in parsed(to_memory_svg(sampled_run)).findall(f"{SVG}polyline")
              if line.get("stroke-dasharray")]
    assert [line.find(f"{SVG}title").text for line in dashed] == ["trainer (unique set)"]


def test_a_run_without_a_timeline_is_drawn_unshaded_and_says_so(sampled_run):
    del sampled_run["timeline"]
    text = to_memory_svg(sampled_run)
    assert "no timeline recorded:" in text
    assert not [rect for rect in parsed(text).findall(f"{SVG}rect") if rect.find(f"{SVG}title") is not None]


def test_a_run_that_sampled_no_memory_gets_a_picture_saying_so(fake_clock):
    with hierarchical_timer("step"):
        fake_clock.advance(1.0)
    text = render(get_timer_tree(), "memory-svg")
    assert "No memory samples in this run" in text
    parsed(text)


def test_names_are_escaped_in_the_picture(sampled_run):
    sampled_run["memory"]["processes"][1]["name"] = "worker <0> & \udcff"
    text = to_memory_svg(sampled_run)
    parsed(text)
    assert "worker &lt;0&gt; &amp; \\udcff" in text


# --- the Chrome trace -----------------------------------------------------------------------------


def memory_counters(trace):
    return [event for event in trace["traceEvents"] if event["ph"] == "C" and event["name"] == "RSS (MiB)"]


def test_each_processs_samples_are_rss_counters_on_its_own_track(sampled_run):
    trace = to_chrome_trace(sampled_run)
    counters = memory_counters(trace)
    pids = {event["args"]["name"]: event["pid"] for event in trace["traceEvents"]
            if event["name"] == "process_name"}
    trainer_samples = len(sampled_run["memory"]["processes"][0]["samples"])
    assert sum(event["pid"] == pids["trainer"] for event in counters) == trainer_samples
    assert {event["pid"] for event in counters} == {pids["trainer"], pids["worker 0"]}
    assert all(event["args"]["value"] > 1 for event in counters)  # MiB


def test_memory_counters_are_on_the_spans_clock(sampled_run):
    trace = to_chrome_trace(sampled_run)
    first_span = min(event["ts"] for event in trace["traceEvents"] if event["ph"] == "X")
    first_counter = min(event["ts"] for event in memory_counters(trace))
    assert first_counter == first_span == 0.0  # the first sample and the first block: same moment


def test_a_process_without_a_track_gets_one_for_its_memory(sampled_run):
    del sampled_run["timeline"]
    trace = to_chrome_trace(sampled_run)
    named = {event["args"]["name"] for event in trace["traceEvents"] if event["name"] == "process_name"}
    assert {"trainer", "worker 0"} <= named
    assert memory_counters(trace)


# --- the HTML report -------------------------------------------------------------------------------


def test_the_report_has_a_memory_section_with_the_picture_and_each_process(sampled_run):
    page = to_html_report(sampled_run)
    section = page.split('<section id="memory">', 1)[1].split("</section>", 1)[0]
    assert "<svg" in section
    assert re.search(r'<td class="name">worker 0</td>', section)


def test_the_report_of_a_run_without_memory_says_how_to_sample_it(fake_clock):
    with hierarchical_timer("step"):
        fake_clock.advance(1.0)
    assert "This run did not sample its memory" in to_html_report(get_timer_tree())


def test_a_run_rlprof_run_made_without_memory_is_told_its_option(fake_clock):
    with hierarchical_timer("step"):
        fake_clock.advance(1.0)
    tree = get_timer_tree()
    tree["metadata"] = {**tree.get("metadata", {}), "rlprof_run": "train.py"}
    assert "run it again with rlprof run --memory to see each process" in to_html_report(tree)
    text = render(tree, "memory-svg")
    assert "No memory samples in this run: run it again with rlprof run --memory" in text
    parsed(text)
