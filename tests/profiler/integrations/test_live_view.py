"""The live view's switches and sources: start/stop, set_config(live_view=True), the file it
watches, and the windowed figures of profiler.scalars()."""

from __future__ import annotations

import contextlib
import io
import json
import os
import time

import profiler
from profiler.integrations import live_view
from not_installed import run_without

from profiler.integrations.live_view import LiveView, WindowedRun, file_reader


def test_a_view_on_a_stream_that_is_not_a_terminal_prints_one_plain_line_per_refresh(fake_clock):
    stream = io.StringIO()
    view = LiveView(live_view.in_process_reader(), stream=stream)
    for _ in range(2):
        with profiler.hierarchical_timer("policy.act"):
            fake_clock.advance(0.5)
        view.refresh()
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert all(line.startswith("rlprof live ") and "policy 100%" in line for line in lines)


def stream_nobody_reads():
    """The write end of a full pipe that nobody reads: the next line written to it blocks."""
    read_end, write_end = os.pipe()
    os.set_blocking(write_end, False)
    with contextlib.suppress(BlockingIOError):
        while True:
            os.write(write_end, b"x" * 65536)
    os.set_blocking(write_end, True)
    return read_end, os.fdopen(write_end, "w")


def test_a_view_stuck_writing_its_stream_holds_up_neither_the_timers_nor_its_own_stop():
    read_end, stuck = stream_nobody_reads()
    view = LiveView(live_view.in_process_reader(), stream=stuck, interval=0.01, mode="lines").start()
    deadline = time.monotonic() + 60
    while view.latest is None and time.monotonic() < deadline:
        time.sleep(0.01)  # its first figures made, the view writes them: the write blocks
    assert view.latest is not None
    for _ in range(100):
        with profiler.hierarchical_timer("policy.act"):
            pass
    assert profiler.get_timer_root().get_child("policy.act").count == 100
    view.stop()  # returns, the refresh still stuck
    assert view._thread.is_alive() and not view.is_running()
    os.close(read_end)  # the stuck write fails (a broken pipe), which the view swallows
    view._thread.join(60)
    assert not view._thread.is_alive()
    with contextlib.suppress(OSError):
        stuck.close()


def test_start_shows_one_view_per_process_and_stop_takes_it_down():
    view = live_view.start(stream=io.StringIO(), interval=60)
    try:
        assert live_view.is_showing()
        assert live_view.start() is view
    finally:
        live_view.stop()
    assert not live_view.is_showing()



def test_the_view_of_rlprof_run_live_is_the_process_view_that_start_returns():
    with live_view.shown(stream=io.StringIO(), interval=60) as shown_view:
        assert live_view.is_showing()
        assert live_view.start() is shown_view
    assert not live_view.is_showing()

def test_set_config_live_view_shows_the_view_while_the_profiler_runs():
    try:
        profiler.set_config(live_view=True)  # MXNet's profiler starts stopped: set_state runs it
        profiler.set_state("run")
        assert live_view.is_showing()
        profiler.set_state("stop")
        assert not live_view.is_showing()
    finally:
        profiler.set_config(live_view=False)
        profiler.set_state("run")
        live_view.stop()


def test_a_file_that_does_not_exist_yet_is_waited_for_with_a_line_saying_so(tmp_path):
    stream = io.StringIO()
    view = LiveView(file_reader(tmp_path / "run_timers.json"), stream=stream)
    view.refresh()
    view.refresh()
    assert stream.getvalue().count("waiting for") == 1


def test_a_file_that_is_not_a_timer_tree_is_said_so_and_read_again(tmp_path):
    path = tmp_path / "run_timers.json"
    path.write_text("[1, 2")
    stream = io.StringIO()
    view = LiveView(file_reader(path), stream=stream)
    view.refresh()
    path.write_text(json.dumps({"name": "root", "total": 1.0, "count": 1, "self": 1.0, "children": []}))
    view.refresh()
    first, second = stream.getvalue().splitlines()
    assert "cannot read" in first
    assert second.startswith("rlprof live 1.0s")


def test_scalars_give_the_window_since_their_previous_call(fake_clock):
    with profiler.hierarchical_timer("policy.act"):
        fake_clock.advance(3.0)
    profiler.scalars()
    with profiler.hierarchical_timer("update"):
        fake_clock.advance(1.0)
    figures = profiler.scalars()
    assert figures["rlprof/window/seconds"] == 1.0
    assert figures["rlprof/window/phase_share/update"] == 1.0
    assert figures["rlprof/window/phase_share/policy"] == 0.0


def test_without_rich_a_view_on_a_terminal_says_what_to_install_and_prints_plain_lines():
    result = run_without(("rich",), """
        import os
        import select
        import time
        import profiler
        from profiler.integrations.live_view import LiveView, in_process_reader
        master, slave = os.openpty()
        terminal = os.fdopen(slave, "w")
        view = LiveView(in_process_reader(), stream=terminal)
        view.refresh()
        terminal.flush()
        print(view.mode)
        # A terminal hands its output over in pieces: read until the view's line has come.
        drawn, deadline = b"", time.monotonic() + 30
        while b"rlprof live " not in drawn and time.monotonic() < deadline:
            if select.select([master], [], [], 0.2)[0]:
                drawn += os.read(master, 65536)
        print(drawn.decode())
        print("rich" in sys.modules)
    """)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "lines"
    assert "pip install 'rlprof[live]'" in result.stdout and "rlprof live " in result.stdout
    assert lines[-1] == "False"  # rich was never imported


def dump_at(total: float) -> dict:
    return {"name": "root", "total": total, "count": 1, "self": total, "children": []}


def test_the_window_starts_at_the_newest_dump_at_least_window_seconds_old():
    run = WindowedRun(window=5.0)
    for total in (1.0, 2.0, 4.0, 6.0, 7.5, 9.0):
        assert run.add(dump_at(total))
    assert run.figures().window_seconds == 9.0 - 4.0
    assert run.figures().elapsed_seconds == 9.0


def test_a_dump_no_newer_than_the_last_adds_nothing_and_an_earlier_one_starts_afresh():
    run = WindowedRun(window=5.0)
    run.add(dump_at(3.0))
    run.add(dump_at(8.0))
    assert not run.add(dump_at(8.0))
    assert run.add(dump_at(2.0))  # the timers were reset, or another run replaced the file
    assert run.figures().window_seconds == 2.0
