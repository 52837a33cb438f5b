"""Specification of the Chrome/Perfetto trace: well-formed events, named tracks, nested spans."""

from __future__ import annotations

import io

import pytest

from profiler.export.aggregate_timeline import AGGREGATE_THREAD_NAME
from profiler.export.chrome_trace import EVENTS_PER_WRITE, to_chrome_trace, write_chrome_trace
from profiler.tree.strict_json import dumps

KNOWN_PHASES = {"X", "C", "i", "M"}


@pytest.fixture(autouse=True, params=["C helper", "pure Python"])
def trace_core(request, monkeypatch):
    """Every test on both paths: a thread's spans through the C helper where it was built, and
    through the Python reference."""
    from profiler.export import chrome_trace

    if request.param == "C helper" and chrome_trace._trace_spans is None:  # noqa: SLF001
        pytest.skip("the trace's C helper was not built here (no compiler, or RLPROF_PURE_PYTHON=1)")
    if request.param == "pure Python":
        monkeypatch.setattr(chrome_trace, "_trace_spans", None)
    return request.param


def events_of(trace, phase):
    return [event for event in trace["traceEvents"] if event["ph"] == phase]


def assert_well_formed(trace):
    assert isinstance(trace["traceEvents"], list)
    for event in trace["traceEvents"]:
        assert event["ph"] in KNOWN_PHASES
        assert isinstance(event["name"], str)
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        assert isinstance(event["ts"], (int, float)) and event["ts"] >= 0
        if event["ph"] == "X":
            assert event["dur"] >= 0
        if event["ph"] == "C":
            assert all(isinstance(value, (int, float)) for value in event["args"].values())
        if event["ph"] == "i":
            assert event["s"] in {"t", "p", "g"}


def assert_every_track_named(trace):
    process_names = {event["pid"] for event in events_of(trace, "M") if event["name"] == "process_name"}
    thread_names = {
        (event["pid"], event["tid"]) for event in events_of(trace, "M") if event["name"] == "thread_name"
    }
    for event in trace["traceEvents"]:
        assert event["pid"] in process_names
        if event["ph"] in {"X", "i"}:
            assert (event["pid"], event["tid"]) in thread_names


def assert_spans_nest_per_thread(trace):
    """No two X events on a thread overlap partially (Perfetto would drop them)."""
    by_thread = {}
    for event in events_of(trace, "X"):
        start = round(event["ts"] * 1000)
        by_thread.setdefault((event["pid"], event["tid"]), []).append((start, start + round(event["dur"] * 1000)))
    for spans in by_thread.values():
        open_ends = []
        for start, end in sorted(spans, key=lambda span: (span[0], -span[1])):
            while open_ends and open_ends[-1] <= start:
                open_ends.pop()
            assert not open_ends or end <= open_ends[-1], "a span pokes out of its parent"
            open_ends.append(end)


def process_names(trace):
    return {
        event["pid"]: event["args"]["name"]
        for event in events_of(trace, "M")
        if event["name"] == "process_name"
    }


@pytest.mark.parametrize("run", ["trainer_tree", "run_with_workers", "run_with_timeline", "mlagents_tree"])
def test_every_run_gives_well_formed_events_on_named_nested_tracks(run, request):
    trace = to_chrome_trace(request.getfixturevalue(run))
    assert_well_formed(trace)
    assert_every_track_named(trace)
    assert_spans_nest_per_thread(trace)


def test_without_a_timeline_each_block_is_a_span_as_long_as_its_total_in_microseconds(trainer_tree):
    trace = to_chrome_trace(trainer_tree)
    durations = {event["name"]: event["dur"] for event in events_of(trace, "X")}
    assert durations["policy.update"] == pytest.approx(10_000)
    assert durations["wait"] == pytest.approx(12_000)  # 3 calls of 4 ms
    assert durations["root"] == pytest.approx(trainer_tree["total"] * 1e6)


def test_without_a_timeline_children_are_packed_one_after_another_inside_their_parent(trainer_tree):
    spans = {event["name"]: event for event in events_of(to_chrome_trace(trainer_tree), "X")}
    train, step, act = spans["train"], spans["vector.step"], spans["policy.act"]
    assert step["ts"] == train["ts"]
    assert act["ts"] == pytest.approx(step["ts"] + step["dur"])


def test_a_synthesized_timeline_says_so_in_the_metadata_and_the_thread_name(trainer_tree):
    trace = to_chrome_trace(trainer_tree)
    assert trace["otherData"]["timeline"].startswith("synthesized from aggregate totals")
    thread_names = {event["args"]["name"] for event in events_of(trace, "M") if event["name"] == "thread_name"}
    assert thread_names == {AGGREGATE_THREAD_NAME}


def test_the_run_metadata_travels_in_other_data(trainer_tree):
    trace = to_chrome_trace(trainer_tree)
    assert trace["otherData"]["rlprof_version"] == trainer_tree["metadata"]["rlprof_version"]


def test_parallel_subtrees_and_each_worker_get_their_own_process(run_with_workers):
    names = sorted(process_names(to_chrome_trace(run_with_workers)).values())
    assert names == [
        "parallel: train › vector.step › worker_root",
        "trainer",
        "worker 0",
        "worker 1",
        "worker 2",
    ]


def test_workers_keep_their_real_pids(run_with_workers):
    names = process_names(to_chrome_trace(run_with_workers))
    assert names[4002] == "worker 2"


def test_a_parallel_subtree_starts_where_the_block_it_ran_beside_starts(run_with_workers):
    trace = to_chrome_trace(run_with_workers)
    vector_step = next(event for event in events_of(trace, "X") if event["name"] == "vector.step")
    worker_root = next(event for event in events_of(trace, "X") if event["name"] == "worker_root")
    assert worker_root["ts"] == vector_step["ts"]
    assert worker_root["pid"] != vector_step["pid"]


def test_children_that_add_up_to_more_than_their_parent_are_shrunk_to_fit(trainer_tree):
    trainer_tree["children"][0]["total"] = 0.001  # far less than its children's sum
    assert_spans_nest_per_thread(to_chrome_trace(trainer_tree))


def test_recorded_spans_keep_their_times_in_microseconds_from_the_first_moment(run_with_timeline):
    trace = to_chrome_trace(run_with_timeline)
    steps = [event for event in events_of(trace, "X") if event["name"] == "vector.step"]
    assert [(event["ts"], event["dur"]) for event in steps] == [(0.0, 250.0), (500.0, 300.0)]
    assert trace["otherData"]["timeline"] == "recorded on clock perf_counter"


def test_recorded_processes_and_threads_keep_their_ids_and_names(run_with_timeline):
    trace = to_chrome_trace(run_with_timeline)
    assert process_names(trace) == {1234: "trainer", 4000: "worker 0"}
    thread_names = {
        (event["pid"], event["tid"]): event["args"]["name"]
        for event in events_of(trace, "M")
        if event["name"] == "thread_name"
    }
    assert thread_names == {(1234, 1): "MainThread", (1234, 7): "logger", (4000, 1): "MainThread"}


def test_parents_come_before_their_children_on_a_thread(run_with_timeline):
    names = [
        event["name"] for event in events_of(to_chrome_trace(run_with_timeline), "X") if event["tid"] == 1
        and event["pid"] == 1234
    ]
    assert names.index("vector.step") < names.index("wait")


def test_a_child_ending_a_hair_after_its_parent_is_trimmed_to_the_parent(run_with_timeline):
    spans = events_of(to_chrome_trace(run_with_timeline), "X")
    step = next(event for event in spans if event["name"] == "vector.step")
    wait = next(event for event in spans if event["name"] == "wait")
    assert wait["ts"] + wait["dur"] == step["ts"] + step["dur"]


def test_a_child_overlapping_the_end_of_its_parent_is_trimmed(run_with_timeline):
    thread = run_with_timeline["timeline"]["processes"][0]["threads"][0]
    thread["spans"].append(["late", 12.000800, 12.001500])  # starts in vector.step, ends after it
    trace = to_chrome_trace(run_with_timeline)
    assert_spans_nest_per_thread(trace)
    late = next(event for event in events_of(trace, "X") if event["name"] == "late")
    assert late["ts"] + late["dur"] == pytest.approx(800.0)


def test_spans_that_tie_keep_the_order_they_were_recorded_in(run_with_timeline):
    thread = run_with_timeline["timeline"]["processes"][0]["threads"][0]
    thread["spans"] += [["first", 12.0003, 12.0004], ["second", 12.0003, 12.0004]]
    names = [event["name"] for event in events_of(to_chrome_trace(run_with_timeline), "X")]
    assert names.index("first") < names.index("second")


def test_spans_centuries_apart_keep_whole_nanoseconds(run_with_timeline):
    # 1e10 s is 1e19 ns: more than a 64-bit integer holds; the trace keeps it whole.
    thread = run_with_timeline["timeline"]["processes"][0]["threads"][0]
    thread["spans"] += [["earliest", 11.0, 11.5], ["much later", 11.0 + 1e10, 11.0 + 1e10 + 0.25]]
    later = next(event for event in events_of(to_chrome_trace(run_with_timeline), "X") if event["name"] == "much later")
    start, end = round(1e10 * 1e9), round((11.0 + 1e10 + 0.25 - 11.0) * 1e9)
    assert (later["ts"], later["dur"]) == (start / 1000, (end - start) / 1000)


def test_markers_become_thread_instant_events(run_with_timeline):
    (marker,) = events_of(to_chrome_trace(run_with_timeline), "i")
    assert (marker["name"], marker["ts"], marker["pid"], marker["tid"]) == ("restart worker 2", 400.0, 1234, 1)


def test_counters_become_counter_events_on_their_process(run_with_timeline):
    counters = [
        (event["name"], event["pid"], event["ts"], event["args"]["value"])
        for event in events_of(to_chrome_trace(run_with_timeline), "C")
        if event["name"] in {"cpu_percent", "rss_mb"}
    ]
    assert counters == [
        ("cpu_percent", 1234, 0.0, 85.0),
        ("cpu_percent", 1234, 700.0, 40.0),
        ("rss_mb", 4000, 100.0, 120.0),
    ]


def test_gauges_become_counter_events_with_their_last_value(run_with_workers):
    counters = {
        (event["name"], event["pid"]): event["args"]["value"]
        for event in events_of(to_chrome_trace(run_with_workers), "C")
    }
    trainer_pid = int(run_with_workers["metadata"]["pid"])
    assert counters[("reward", trainer_pid)] == 3.0
    assert counters[("episode_length", 4001)] == 20.0


def test_a_process_clock_offset_records_a_shift_already_made_and_moves_nothing(run_with_timeline):
    before = to_chrome_trace(run_with_timeline)
    run_with_timeline["timeline"]["processes"][1]["clock_offset"] = 0.001
    after = to_chrome_trace(run_with_timeline)
    assert events_of(after, "X") == events_of(before, "X")


def test_processes_of_several_hosts_are_named_with_their_host(run_with_timeline):
    processes = run_with_timeline["timeline"]["processes"]
    processes[0]["host"], processes[1]["host"] = "trainer-host", "env-host-7"
    names = process_names(to_chrome_trace(run_with_timeline))
    assert sorted(names.values()) == ["trainer @ trainer-host", "worker 0 @ env-host-7"]


def test_processes_of_one_host_are_named_without_it(run_with_timeline):
    for process in run_with_timeline["timeline"]["processes"]:
        process["host"] = "one-host"
    assert sorted(process_names(to_chrome_trace(run_with_timeline)).values()) == ["trainer", "worker 0"]


def test_made_up_process_ids_never_take_a_worker_s_real_pid(run_with_workers):
    run_with_workers["metadata"].pop("pid")
    run_with_workers["workers"][0]["pid"] = 2  # the first id a parallel subtree would get
    names = process_names(to_chrome_trace(run_with_workers))
    assert names[2] == "worker 0"
    assert len(names) == 5


def test_processes_sharing_a_pid_still_get_a_track_each(run_with_timeline):
    processes = run_with_timeline["timeline"]["processes"]
    processes[1]["pid"] = processes[0]["pid"]  # workers in threads of the trainer's process
    trace = to_chrome_trace(run_with_timeline)
    assert sorted(process_names(trace).values()) == ["trainer", "worker 0"]
    assert_spans_nest_per_thread(trace)


def test_a_nan_or_infinite_counter_sample_becomes_a_process_instant_event(run_with_nan_readings):
    trace = to_chrome_trace(run_with_nan_readings)
    loss_samples = [event["args"]["value"] for event in events_of(trace, "C") if event["name"] == "loss"]
    markers = {event["name"]: (event["s"], event["pid"]) for event in events_of(trace, "i")}
    assert loss_samples == [0.5]
    assert markers["loss = NaN"] == ("p", 1234)
    assert markers["loss = Infinity"] == ("p", 1234)
    assert_well_formed(trace)


def test_a_nan_gauge_becomes_an_instant_event_at_the_end(run_with_nan_readings):
    trace = to_chrome_trace(run_with_nan_readings)
    end = max(event["ts"] for event in trace["traceEvents"])
    (end_marker,) = [event for event in events_of(trace, "i") if event["name"].endswith("loss = NaN") and event["ts"] == end]
    assert end_marker["s"] == "p"


def test_the_trace_written_in_pieces_is_the_trace_document(run_with_timeline, strict_json):
    trainer = run_with_timeline["timeline"]["processes"][0]["threads"][0]
    # Enough spans for several batches, the last one partial.
    trainer["spans"] = [["step", 12.0 + index * 1e-6, 12.0 + index * 1e-6 + 5e-7] for index in range(2 * EVENTS_PER_WRITE + 7)]
    output = io.BytesIO()
    write_chrome_trace(run_with_timeline, output)
    assert output.getvalue().decode() == dumps(to_chrome_trace(run_with_timeline), separators=(",", ":"))
    assert len(strict_json(output.getvalue())["traceEvents"]) > 2 * EVENTS_PER_WRITE


# --- MXNet-style objects: the domain is the category ---------------------------------------------


@pytest.fixture
def run_with_domain_objects(fake_clock):
    import profiler
    from profiler.recording import events

    events.start_recording()
    try:
        rl = profiler.Domain("rl")
        with rl.new_frame("iteration"):
            with rl.new_task("update"):
                fake_clock.advance(0.5)
            rl.new_marker("checkpoint").mark("global")
            rl.new_marker("log").mark("thread")
            rl.new_counter("episodes", value=3)
        return profiler.get_timer_tree()
    finally:
        events.stop_recording()
        events.clear_recording()


def test_spans_of_domain_objects_get_the_domain_as_category(run_with_domain_objects):
    trace = to_chrome_trace(run_with_domain_objects)
    assert_well_formed(trace)
    assert_spans_nest_per_thread(trace)
    spans = {event["name"]: event for event in events_of(trace, "X")}
    assert (spans["update"]["cat"], spans["update"]["args"]) == ("rl", {"object_type": "task"})
    assert (spans["iteration"]["cat"], spans["iteration"]["args"]) == ("rl", {"object_type": "frame", "frame": 1})


def test_marker_scopes_become_instant_scopes(run_with_domain_objects):
    instants = {event["name"]: event for event in events_of(to_chrome_trace(run_with_domain_objects), "i")}
    assert (instants["checkpoint"]["s"], instants["checkpoint"]["cat"]) == ("g", "rl")
    assert instants["log"]["s"] == "t"
    assert "args" not in instants["log"]


def test_a_counter_is_a_counter_track_in_its_domain(run_with_domain_objects):
    counters = [event for event in events_of(to_chrome_trace(run_with_domain_objects), "C")
                if event["name"] == "rl.episodes"]
    assert counters[0]["cat"] == "rl" and counters[0]["args"] == {"value": 3.0}


def test_without_a_timeline_a_domain_block_still_gets_its_category(fake_clock):
    import profiler

    with profiler.Domain("rl").new_task("update"):
        fake_clock.advance(0.5)
    (update,) = [event for event in events_of(to_chrome_trace(profiler.get_timer_tree()), "X")
                 if event["name"] == "update"]
    assert update["cat"] == "rl"
    assert update["args"]["count"] == 1


def test_a_plain_span_s_microseconds_are_written_as_the_encoder_writes_them(run_with_timeline, strict_json):
    # Every thousandth of a microsecond, then times beyond the range the integer formatting covers.
    trainer = run_with_timeline["timeline"]["processes"][0]["threads"][0]
    origin = min(span[1] for span in trainer["spans"])
    trainer["spans"] += [["fraction", origin + count * 1.001e-9, origin + count * 2.003e-9] for count in range(1000)]
    trainer["spans"] += [["days later", origin + days * 86_400.0, origin + days * 86_400.0 + 0.123456789]
                         for days in (11.5, 11.6, 12.0, 105.0, 2e4)]
    output = io.BytesIO()
    write_chrome_trace(run_with_timeline, output)
    assert output.getvalue().decode() == dumps(to_chrome_trace(run_with_timeline), separators=(",", ":"))


def test_the_microsecond_fractions_give_repr_s_text_below_their_bound():
    import random

    from profiler.export.chrome_trace import EXACT_MICROSECONDS_BELOW, MICROSECOND_FRACTIONS

    randomly = random.Random(23)
    counts = [*range(3000), EXACT_MICROSECONDS_BELOW - 1, *(EXACT_MICROSECONDS_BELOW - count for count in range(1, 2000)),
              *(randomly.randrange(EXACT_MICROSECONDS_BELOW >> shift) for shift in range(0, 50) for _ in range(400))]
    for nanoseconds in counts:
        assert f"{nanoseconds // 1000}{MICROSECOND_FRACTIONS[nanoseconds % 1000]}" == repr(nanoseconds / 1000)
