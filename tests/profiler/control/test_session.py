"""Specification of the MegEngine session, ``Profiler`` / ``profile``: what it records, which files
it writes, and when."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import textwrap

import pytest

import profiler
from profiler import Profiler, hierarchical_timer, load_timing_tree, profile
from profiler.recording import events, memory
from profiler.control.session import SESSION_FORMATS


def written(directory, format_name):
    return directory / f"{os.getpid()}.{format_name}"


def work(blocks=3):
    for _ in range(blocks):
        with hierarchical_timer("step"):
            pass


def span_names(tree):
    return [span[0] for thread in tree["timeline"]["processes"][0]["threads"] for span in thread["spans"]]


# --- a with block ----------------------------------------------------------------------------------


def test_a_with_block_writes_its_files_under_path_named_by_pid_and_format(tmp_path):
    with Profiler(path=tmp_path / "profile", formats=["chrome_timeline.json", "timers.json"]):
        work()
    assert sorted(path.name for path in (tmp_path / "profile").iterdir()) == [
        f"{os.getpid()}.chrome_timeline.json", f"{os.getpid()}.timers.json"]


def test_the_default_output_is_the_chrome_timeline(tmp_path):
    with Profiler(path=tmp_path):
        work()
    assert [path.name for path in tmp_path.iterdir()] == [f"{os.getpid()}.chrome_timeline.json"]


def test_the_timeline_is_recorded_inside_the_session_only(tmp_path):
    with hierarchical_timer("before"):
        pass
    with Profiler(path=tmp_path, format="timers.json"):
        work(2)
    with hierarchical_timer("after"):
        pass
    assert not events.is_recording()
    assert span_names(load_timing_tree(written(tmp_path, "timers.json"))) == ["step", "step"]


def test_the_chrome_timeline_shows_recorded_spans_not_a_layout_from_totals(tmp_path):
    with Profiler(path=tmp_path):
        work(2)
    trace = json.loads(written(tmp_path, "chrome_timeline.json").read_text())
    assert trace["otherData"]["timeline"].startswith("recorded on clock")
    assert [event["name"] for event in trace["traceEvents"] if event["ph"] == "X"] == ["step", "step"]


def test_recording_started_before_the_session_stays_on_after_it(tmp_path):
    events.start_recording()
    try:
        with Profiler(path=tmp_path):
            work(1)
        assert events.is_recording()
    finally:
        events.stop_recording()


def test_a_name_times_each_entry_of_the_block(tmp_path):
    with Profiler(path=tmp_path, format="timers.json", name="rollout"):
        work(2)
    (rollout,) = load_timing_tree(written(tmp_path, "timers.json"))["children"]
    assert (rollout["name"], rollout["count"], rollout["children"][0]["count"]) == ("rollout", 1, 2)


@pytest.mark.parametrize("format_name", list(SESSION_FORMATS))
def test_every_format_is_written(tmp_path, format_name, strict_json):
    with Profiler(path=tmp_path, format=format_name, sample_rate=1):
        work()
    path = written(tmp_path, format_name)
    assert path.stat().st_size > 0
    if format_name.endswith(".json"):
        strict_json(path.read_text())


def test_a_block_entered_again_rewrites_its_files_at_most_every_dump_interval(tmp_path):
    session = Profiler(path=tmp_path, format="timers.json", dump_interval=3600)
    for _ in range(3):
        with session:
            work(1)
    steps = load_timing_tree(written(tmp_path, "timers.json"))["children"][0]["count"]
    assert steps == 1  # written at the first exit only
    session.dump()
    assert load_timing_tree(written(tmp_path, "timers.json"))["children"][0]["count"] == 3


def test_dump_interval_zero_rewrites_at_every_exit(tmp_path):
    session = Profiler(path=tmp_path, format="timers.json", dump_interval=0)
    for _ in range(2):
        with session:
            work(1)
    assert load_timing_tree(written(tmp_path, "timers.json"))["children"][0]["count"] == 2


def test_an_exception_in_the_block_still_ends_the_session_and_writes(tmp_path):
    with pytest.raises(KeyError):
        with Profiler(path=tmp_path, format="timers.json", name="failing"):
            raise KeyError("boom")
    assert not events.is_recording()
    assert load_timing_tree(written(tmp_path, "timers.json"))["children"][0]["errors"] == 1


def test_a_path_that_cannot_be_written_is_an_error_naming_the_file(tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder")
    with pytest.raises(OSError):
        with Profiler(path=tmp_path / "taken"):
            work(1)


def test_step_marks_the_timeline(tmp_path):
    with Profiler(path=tmp_path, format="timers.json") as session:
        work(1)
        session.step()
    instants = load_timing_tree(written(tmp_path, "timers.json"))["timeline"]["processes"][0]["threads"][0]["instants"]
    assert [instant[0] for instant in instants] == ["step"]


# --- a decorator -------------------------------------------------------------------------------------


def test_each_call_of_a_decorated_function_is_profiled_as_its_block(tmp_path):
    @profile(path=tmp_path, format="timers.json")
    def train_step():
        work(2)

    for _ in range(3):
        train_step()
    assert not list(tmp_path.iterdir())  # written at the end, not at every call
    train_step.__profiler__.dump()
    tree = load_timing_tree(written(tmp_path, "timers.json"))
    (block,) = tree["children"]
    assert (block["name"], block["count"]) == (train_step.__qualname__, 3)
    assert span_names(tree).count(train_step.__qualname__) == 3


def test_the_profiler_class_decorates_too_and_keeps_the_functions_name(tmp_path):
    @Profiler(path=tmp_path)
    def update(value):
        """Update the policy."""
        return value * 2

    assert (update(21), update.__name__, update.__doc__) == (42, "update", "Update the policy.")


def test_bare_profile_decorates_with_the_defaults(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)

    @profile
    def act():
        return "action"

    assert act() == "action"
    act.__profiler__.dump()
    assert [path.name for path in (tmp_path / "profile").iterdir()] == [f"{os.getpid()}.chrome_timeline.json"]


def test_a_session_collected_as_garbage_writes_what_is_unwritten(tmp_path):
    @profile(path=tmp_path, format="timers.json")
    def act():
        work(1)

    act()
    del act
    gc.collect()
    assert load_timing_tree(written(tmp_path, "timers.json"))["children"][0]["count"] == 1


def test_a_decorated_function_writes_its_files_when_the_interpreter_exits(tmp_path):
    program = textwrap.dedent(f"""
        from profiler import profile, hierarchical_timer

        @profile(path={str(tmp_path)!r}, formats=["timers.json", "memory_flow.svg"], sample_rate=1)
        def train_step():
            with hierarchical_timer("update"):
                pass

        for _ in range(4):
            train_step()
        print(__import__("os").getpid())
    """)
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert completed.returncode == 0, completed.stderr
    pid = completed.stdout.strip()
    tree = load_timing_tree(tmp_path / f"{pid}.timers.json")
    assert tree["children"][0]["count"] == 4
    assert (tmp_path / f"{pid}.memory_flow.svg").exists()


# --- memory -----------------------------------------------------------------------------------------


def test_sample_rate_samples_memory_every_n_blocks_inside_the_session(tmp_path):
    with Profiler(path=tmp_path, format="timers.json", sample_rate=2):
        work(6)
    assert not memory.is_sampling()
    samples = load_timing_tree(written(tmp_path, "timers.json"))["memory"]["processes"][0]["samples"]
    assert len(samples) == 1 + 3 + 1  # at the start, every 2 of 6 blocks, at the end


def test_track_allocations_records_each_blocks_allocations(tmp_path):
    kept = []
    with Profiler(path=tmp_path, format="timers.json", track_allocations=True):
        with hierarchical_timer("grow"):
            kept.append(bytearray(2**20))
    (grow,) = load_timing_tree(written(tmp_path, "timers.json"))["memory"]["processes"][0]["blocks"]
    assert grow["path"] == ["grow"] and grow["net_bytes"] >= 2**20


def test_the_sampling_in_force_before_a_session_is_restored_after_it(tmp_path):
    outer = memory.start_sampling(every_blocks=50)
    with Profiler(path=tmp_path, sample_rate=1):
        work(1)
    assert memory.sampling_settings() == outer


# --- bad options --------------------------------------------------------------------------------------


def test_an_unknown_format_is_refused_with_the_valid_names(tmp_path):
    with pytest.raises(ValueError, match="unknown profiler format 'trace.json'; choose from chrome_timeline.json"):
        Profiler(path=tmp_path, formats=["chrome_timeline.json", "trace.json"])


def test_formats_given_as_one_string_are_refused(tmp_path):
    with pytest.raises(ValueError, match="formats takes a list of names"):
        Profiler(path=tmp_path, formats="memory_flow.svg")


@pytest.mark.parametrize("options, message", [
    ({"profile_device": "yes"}, "profile_device"),
    ({"sample_rate": -1}, "sample_rate"),
    ({"memory_interval": 0}, "interval"),
    ({"memory_uss": True}, "needs samples"),
    ({"dump_interval": -1}, "dump_interval"),
])
def test_meaningless_options_are_refused(tmp_path, options, message):
    with pytest.raises(ValueError, match=message):
        Profiler(path=tmp_path, **options)


def test_stop_without_start_is_an_error():
    with pytest.raises(RuntimeError, match="without a start"):
        Profiler().stop()


def test_profile_and_profiler_are_importable_from_profiler():
    assert profiler.profile is profile and profiler.Profiler is Profiler


def test_profile_is_the_profiler_class_as_in_megengine():
    assert profile is Profiler


def test_an_option_python_refuses_raises_its_type_error_and_leaves_no_traceback_behind():
    program = textwrap.dedent("""
        import gc
        from profiler import Profiler
        try:
            Profiler(num_tensor_watch=4)
        except TypeError as error:
            print(error)
        gc.collect()
    """)
    completed = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert "num_tensor_watch" in completed.stdout
    assert (completed.returncode, completed.stderr) == (0, "")
