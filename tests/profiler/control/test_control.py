"""Specification of the MXNet profiler controls: set_config, set_state, pause/resume, dump."""

from __future__ import annotations

import json
import threading
import time
import warnings

import pytest
from hand_payloads import tree_payload
from tree_paths import child_names as names
from tree_paths import find

import profiler
from profiler import hierarchical_timer, load_timing_tree
from profiler.control import controls as control, end_of_run
from profiler.recording import events, memory
from profiler.multiprocess.merge import TimerMerger


def timed_block(clock, name: str, seconds: float) -> None:
    with hierarchical_timer(name):
        clock.advance(seconds)


@pytest.mark.parametrize(
    "name",
    ["set_config", "set_state", "pause", "resume", "dump", "dumps", "profiler_set_config",
     "profiler_set_state", "dump_profile", "set_kvstore_handle"],
)
def test_every_control_is_importable_from_the_package(name):
    assert name in profiler.__all__
    assert callable(getattr(profiler, name))


# --- set_config ---------------------------------------------------------------------------------


def test_an_unknown_key_is_refused_naming_it_and_the_keys_accepted():
    with pytest.raises(ValueError, match=r"unknown key 'profile_everything'; the keys are: .*dump_period"):
        profiler.set_config(profile_everything=True)


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("continuous_dump", "yes", "True or False"),
        ("profile_all", 2, "True or False"),
        ("dump_period", 0, "number of seconds > 0"),
        ("dump_period", float("nan"), "number of seconds > 0"),
        ("dump_period", "1", "number of seconds > 0"),
        ("filename", "", "file path"),
        ("summaries_dir", 3, "folder path"),
        ("run_id", "runs/a", "without path separators"),
        ("formats", ("timers", "pdf"), "timers, chrome, speedscope, collapsed, html"),
        ("formats", (), "one or more of"),
        ("profile_process", "client", "'worker' .* or 'server'"),
        ("gpu_memory_profile_filename_prefix", None, "a string"),
    ],
)
def test_a_bad_value_is_refused_naming_the_key_and_what_it_accepts(key, value, accepted):
    with pytest.raises(ValueError, match=f"{key} .*{accepted}"):
        profiler.set_config(**{key: value})


def test_a_call_with_one_bad_key_changes_nothing():
    with pytest.raises(ValueError):
        profiler.set_config(dump_period=5.0, continuous_dump="on")
    assert control.get_settings().dump_period == 1.0


def test_keys_are_kept_and_mxnets_engine_keys_are_accepted(tmp_path):
    profiler.set_config(profile_all=True, profile_symbolic=False, profile_imperative=False,
                        profile_api=False, aggregate_stats=True, profile_process="worker",
                        gpu_memory_profile_filename_prefix="gpu", summaries_dir=str(tmp_path),
                        run_id="a", formats="timers", timeline=False)
    settings = control.get_settings()
    assert (settings.summaries_dir, settings.run_id, settings.formats) == (tmp_path, "a", ("timers",))
    assert settings.profile_all and settings.aggregate_stats and not settings.timeline


def test_set_config_arms_the_end_of_run_dump():
    assert not end_of_run.is_armed()
    profiler.set_config(filename="trace.json")
    assert end_of_run.is_armed()


# --- set_state, pause, resume -------------------------------------------------------------------


def test_set_config_stops_the_profiler_until_set_state_runs_it_as_mxnet_does(fake_clock):
    profiler.set_config(formats="timers")
    timed_block(fake_clock, "setup", 1.0)
    assert control.get_state() == "stop"
    profiler.set_state("run")
    timed_block(fake_clock, "train", 2.0)
    assert names(profiler.get_timer_tree()) == ["train"]


def test_mxnet_profiler_autostart_keeps_the_profiler_running_from_the_start(fake_clock, monkeypatch):
    monkeypatch.setenv("MXNET_PROFILER_AUTOSTART", "1")
    profiler.set_config(formats="timers")
    timed_block(fake_clock, "setup", 1.0)
    assert (control.get_state(), names(profiler.get_timer_tree())) == ("run", ["setup"])


def test_a_state_set_before_set_config_is_kept(fake_clock):
    profiler.set_state("run")
    profiler.set_config(formats="timers")
    timed_block(fake_clock, "train", 1.0)
    assert names(profiler.get_timer_tree()) == ["train"]


def test_a_later_set_config_leaves_a_running_profiler_running(fake_clock):
    profiler.set_config(formats="timers")
    profiler.set_state("run")
    profiler.set_config(dump_period=5.0)
    timed_block(fake_clock, "train", 1.0)
    assert names(profiler.get_timer_tree()) == ["train"]


def test_a_stopped_profiler_records_nothing_until_it_runs_again(fake_clock):
    profiler.set_state("stop")
    timed_block(fake_clock, "setup", 1.0)
    profiler.set_state("run")
    timed_block(fake_clock, "train", 2.0)
    assert names(profiler.get_timer_tree()) == ["train"]


def test_a_paused_profiler_records_nothing_until_resumed(fake_clock):
    timed_block(fake_clock, "step", 1.0)
    profiler.pause()
    timed_block(fake_clock, "step", 5.0)
    profiler.set_gauge("loss", 1.0)
    profiler.resume()
    timed_block(fake_clock, "step", 1.0)
    tree = profiler.get_timer_tree()
    assert (find(tree, "step")["count"], find(tree, "step")["total"]) == (2, 2.0)
    assert tree["gauges"] == {}


def test_a_block_opened_before_a_pause_is_recorded_whole_when_it_closes(fake_clock):
    with hierarchical_timer("epoch"):
        timed_block(fake_clock, "step", 1.0)
        profiler.pause()
        fake_clock.advance(3.0)
    profiler.resume()
    epoch = find(profiler.get_timer_tree(), "epoch")
    assert (epoch["count"], epoch["total"], names(epoch)) == (1, 4.0, ["step"])


def test_a_block_opened_while_paused_records_nothing_and_what_opens_in_it_after_resume_goes_up(fake_clock):
    with hierarchical_timer("train"):
        profiler.pause()
        with hierarchical_timer("ignored"):
            profiler.resume()
            timed_block(fake_clock, "step", 1.0)
        timed_block(fake_clock, "log", 0.5)
    train = find(profiler.get_timer_tree(), "train")
    assert names(train) == ["step", "log"]
    assert train["total"] == 1.5


def test_resume_does_not_start_a_stopped_profiler(fake_clock):
    profiler.set_state("stop")
    profiler.pause()
    profiler.resume()
    timed_block(fake_clock, "step", 1.0)
    assert names(profiler.get_timer_tree()) == []
    assert (control.get_state(), control.is_paused()) == ("stop", False)


def test_set_config_leaves_a_disabled_profiler_disabled(tmp_path, fake_clock):
    profiler.disable()
    profiler.set_config(summaries_dir=str(tmp_path))
    timed_block(fake_clock, "step", 1.0)
    assert names(profiler.get_timer_tree()) == []


def test_stopping_leaves_what_was_recorded_to_dump(fake_clock):
    timed_block(fake_clock, "step", 1.0)
    profiler.set_state("stop")
    assert names(profiler.get_timer_tree()) == ["step"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: profiler.set_state("running"), "state must be 'run' or 'stop', got 'running'"),
        (lambda: profiler.set_state("run", profile_process="client"), "profile_process must be 'worker'"),
        (lambda: profiler.pause("all"), "pause: profile_process"),
        (lambda: profiler.resume(None), "resume: profile_process"),
        (lambda: profiler.dump(profile_process="kvstore"), "dump: profile_process"),
        (lambda: profiler.dump(finished="yes"), "finished must be True or False"),
    ],
)
def test_bad_arguments_are_refused_naming_them(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def step_payload(sequence: int) -> tuple:
    return tree_payload(("env.step", 0.5, 1, 0, None, ()), sequence=sequence)


def test_pausing_the_server_sets_worker_payloads_aside(fake_clock):
    merger = TimerMerger()
    merger.merge_payload(0, step_payload(1))
    profiler.pause(profile_process="server")
    merger.merge_payload(0, step_payload(2))
    profiler.resume(profile_process="server")
    merger.merge_payload(0, step_payload(3))
    tree = profiler.get_timer_tree()
    (worker,) = tree["workers"]
    assert find(tree, "env.step")["count"] == 2
    assert (worker["payloads"], worker["paused_payloads"], worker["missed_payloads"]) == (2, 1, 0)


def test_stopping_the_server_leaves_this_process_running(fake_clock):
    profiler.set_state("stop", profile_process="server")
    timed_block(fake_clock, "step", 1.0)
    TimerMerger().merge_payload(0, step_payload(1))
    assert names(profiler.get_timer_tree()) == ["step"]


def test_running_records_the_timeline_unless_told_not_to():
    profiler.set_state("run")
    assert events.is_recording()
    profiler.set_config(timeline=False)
    assert not events.is_recording()


def test_pausing_alone_does_not_start_a_timeline_recording():
    profiler.pause()
    profiler.resume()
    assert not events.is_recording()


# --- dump -----------------------------------------------------------------------------------------


def test_dump_writes_the_timers_and_the_trace_under_the_summaries_folder(tmp_path, fake_clock):
    profiler.set_config(summaries_dir=str(tmp_path), run_id="ppo")
    profiler.set_state("run")
    timed_block(fake_clock, "update", 0.25)
    written = profiler.dump()
    assert written == [tmp_path / "ppo_timers.json", tmp_path / "ppo_trace.json"]
    assert find(load_timing_tree(written[0]), "update")["total"] == 0.25
    trace = json.loads(written[1].read_text())
    assert any(event["name"] == "update" and event["ph"] == "X" for event in trace["traceEvents"])


def test_filename_is_the_trace_as_in_mxnet(tmp_path, fake_clock):
    profiler.set_config(filename=str(tmp_path / "chrome_tracing_profile.json"))
    timed_block(fake_clock, "update", 0.25)
    written = profiler.dump()
    assert written == [tmp_path / "chrome_tracing_profile_timers.json",
                       tmp_path / "chrome_tracing_profile.json"]


def test_every_output_format_can_be_asked_for(tmp_path, fake_clock):
    profiler.set_config(summaries_dir=str(tmp_path), run_id="run",
                        formats=["timers", "chrome", "speedscope", "collapsed", "html"])
    timed_block(fake_clock, "update", 0.25)
    written = profiler.dump()
    assert sorted(path.name for path in written) == [
        "run.collapsed.txt", "run.html", "run.speedscope.json", "run_timers.json", "run_trace.json"]
    assert all(path.stat().st_size > 0 for path in written)


def test_dump_finished_is_final_and_finished_false_keeps_dumping(tmp_path):
    profiler.set_config(summaries_dir=str(tmp_path))
    profiler.dump(finished=False)
    assert end_of_run.is_armed()
    profiler.dump()
    assert not end_of_run.is_armed()


def test_a_dump_that_cannot_be_written_names_the_file(tmp_path):
    (tmp_path / "taken").write_text("a file, not a folder")
    profiler.set_config(summaries_dir=str(tmp_path / "taken"), formats="timers")
    with pytest.raises(OSError, match="cannot write the timers output .*taken/profile_timers.json"):
        profiler.dump()


def trainer_memory_samples(tree: dict) -> list:
    return tree["memory"]["processes"][0]["samples"] if "memory" in tree else []


def test_profile_memory_samples_the_memory_into_the_dump(tmp_path):
    profiler.set_config(summaries_dir=str(tmp_path), formats="timers", profile_memory=True,
                        dump_period=3600.0)
    profiler.set_state("run")
    (path,) = profiler.dump()
    samples = trainer_memory_samples(load_timing_tree(path))
    assert len(samples) >= 2  # when sampling started, and at the dump
    assert all(rss > 1024 * 1024 for _, rss, _ in samples)  # bytes: any Python process has more


def test_profile_memory_takes_a_last_sample_when_the_profiler_stops_and_then_none():
    profiler.set_config(profile_memory=True, dump_period=3600.0)
    profiler.set_state("run")
    before = len(trainer_memory_samples(profiler.get_timer_tree()))
    profiler.set_state("stop")
    assert len(trainer_memory_samples(profiler.get_timer_tree())) == before + 1
    assert not memory.is_sampling()


def test_profile_memory_leaves_sampling_the_program_started_alone():
    memory.start_sampling(every_blocks=5)
    try:
        profiler.set_config(profile_memory=True)
        profiler.set_config(profile_memory=False)
        assert memory.sampling_settings().every_blocks == 5
    finally:
        memory.stop_sampling()
        memory.clear_memory()


# --- dumps and the deprecated names ---------------------------------------------------------------


@pytest.mark.parametrize(("keyword", "value"), [("reset", "no"), ("ascending", 1)])
def test_dumps_refuses_flags_that_are_not_booleans(keyword, value):
    with pytest.raises(ValueError, match=f"dumps: {keyword} must be True or False"):
        profiler.dumps(**{keyword: value})


def test_profiler_set_config_warns_and_configures(tmp_path):
    with pytest.warns(DeprecationWarning, match="profiler_set_config.*deprecated.*set_config"):
        profiler.profiler_set_config(mode="all", filename=str(tmp_path / "trace.json"))
    settings = control.get_settings()
    assert settings.profile_all and settings.filename == str(tmp_path / "trace.json")


def test_profiler_set_config_refuses_an_unknown_mode():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(ValueError, match="mode must be 'symbolic' or 'all'"):
            profiler.profiler_set_config(mode="imperative")


def test_profiler_set_state_warns_and_sets_the_state(fake_clock):
    with pytest.warns(DeprecationWarning, match="profiler_set_state.*deprecated"):
        profiler.profiler_set_state("stop")
    timed_block(fake_clock, "step", 1.0)
    assert names(profiler.get_timer_tree()) == []


def test_dump_profile_warns_and_dumps_for_good(tmp_path):
    profiler.set_config(summaries_dir=str(tmp_path), formats="timers")
    with pytest.warns(DeprecationWarning, match="dump_profile.*deprecated.*dump"):
        written = profiler.dump_profile()
    assert written == [tmp_path / "profile_timers.json"]
    assert not end_of_run.is_armed()


# --- continuous dump ------------------------------------------------------------------------------


def wait_until(condition, timeout: float = 60.0) -> None:
    """Poll ``condition`` until it holds; the timeout is generous, the assertion is the point."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "the condition never held"
        time.sleep(0.005)


def calls_in_file(path, name: str) -> int:
    try:
        return find(load_timing_tree(path), name)["count"]
    except (profiler.TimerFileError, StopIteration):
        return 0


def test_continuous_dump_rewrites_the_files_every_period(tmp_path):
    profiler.set_config(summaries_dir=str(tmp_path), formats="timers", continuous_dump=True,
                        dump_period=0.01)
    profiler.set_state("run")
    path = tmp_path / "profile_timers.json"
    with hierarchical_timer("step"):
        pass
    wait_until(lambda: calls_in_file(path, "step") == 1)
    with hierarchical_timer("step"):
        pass
    wait_until(lambda: calls_in_file(path, "step") == 2)


def test_stopping_the_profiler_stops_the_dump_thread(tmp_path):
    profiler.set_config(summaries_dir=str(tmp_path), continuous_dump=True, dump_period=0.01)
    profiler.set_state("stop")
    assert not any(thread.name == "rlprof continuous dump" for thread in threading.enumerate())


def test_profile_memory_samples_every_dump_period_without_writing(tmp_path):
    profiler.set_config(summaries_dir=str(tmp_path), profile_memory=True, dump_period=0.01)
    profiler.set_state("run")
    wait_until(lambda: len(trainer_memory_samples(profiler.get_timer_tree())) >= 3)
    assert list(tmp_path.iterdir()) == []


def test_a_failing_continuous_dump_is_reported_once_and_retried(tmp_path, capsys):
    blocker = tmp_path / "not a folder"
    blocker.write_text("")
    profiler.set_config(summaries_dir=str(blocker), formats="timers", continuous_dump=True,
                        dump_period=0.01)
    profiler.set_state("run")
    wait_until(lambda: control._control.failed_periodic_dumps >= 3)
    blocker.unlink()
    wait_until(lambda: (blocker / "profile_timers.json").exists())
    errors = capsys.readouterr().err.splitlines()
    assert len(errors) == 1 and errors[0].startswith("rlprof: a continuous dump failed (")


def test_set_kvstore_handle_is_accepted_and_changes_nothing(fake_clock):
    profiler.set_kvstore_handle(object())
    timed_block(fake_clock, "step", 1.0)
    assert names(profiler.get_timer_tree()) == ["step"]


def test_changing_the_dump_period_while_dumps_are_written_never_deadlocks(tmp_path):
    def toggle() -> None:
        for index in range(50):
            profiler.set_config(summaries_dir=str(tmp_path), formats="timers", continuous_dump=True,
                                dump_period=0.001 if index % 2 else 0.002)
            profiler.pause()
            profiler.resume()

    worker = threading.Thread(target=toggle)
    worker.start()
    worker.join(timeout=60.0)
    assert not worker.is_alive()
