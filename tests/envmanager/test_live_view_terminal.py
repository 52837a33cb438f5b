"""The live view on real runs: a planted straggler stepped by real worker processes, the view drawn
on a real pseudo-terminal, in a pipe, and by ``rlprof watch`` from a continuous dump."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from pseudo_terminal import CURSOR_ESCAPES, DEADLINE, Terminal

pytest.importorskip("rich")

PROGRAM = str(Path(__file__).parent / "straggler_training.py")
MANAGER_PROGRAM = str(Path(__file__).parent / "manager_live_view_training.py")


@pytest.fixture
def straggler_run_on_a_terminal(tmp_path):
    terminal = Terminal([sys.executable, "-m", "profiler", "run", "--live", "--summaries-dir",
                         str(tmp_path / "run"), PROGRAM, "60"])
    yield terminal
    terminal.close()


def test_the_live_view_appears_on_the_terminal_and_refreshes(straggler_run_on_a_terminal):
    output = straggler_run_on_a_terminal.read_until(b"env steps/s", count=3)
    assert b"rlprof live" in output
    assert b"transport" in output and b"untimed" in output and b"worker 3" in output
    # Per worker: its step time over the window, how often it came last, its memory.
    assert b"step (window)" in output and b"last" in output and b"MiB" in output
    straggler_run_on_a_terminal.process.send_signal(signal.SIGINT)
    straggler_run_on_a_terminal.wait_for_exit()


def test_the_live_view_shows_the_planted_stragglers_verdict_while_the_run_goes_on(straggler_run_on_a_terminal):
    # The verdict's own words: "straggler" alone also names the program's file, which the untimed
    # verdict's stack samples point at early in the run.
    straggler_run_on_a_terminal.read_until(b"worker 3 holds up the vector step")
    assert straggler_run_on_a_terminal.process.poll() is None  # the run is still going
    straggler_run_on_a_terminal.process.send_signal(signal.SIGINT)
    straggler_run_on_a_terminal.wait_for_exit()


def test_ctrl_c_on_the_terminal_leaves_it_as_it_was_found(straggler_run_on_a_terminal):
    terminal = straggler_run_on_a_terminal
    terminal.read_until(b"env steps/s", count=2)
    os.write(terminal.master, b"\x03")  # Ctrl-C, as typed: the terminal sends SIGINT
    returncode = terminal.wait_for_exit()
    assert returncode == -signal.SIGINT  # rlprof run ends as the program did
    assert b"rlprof: timers" in terminal.output  # the run's files were still written
    escapes = CURSOR_ESCAPES.findall(terminal.output)
    hidden = [mode for mode in escapes if mode == (b"25", b"l")]
    assert hidden and escapes[-1] == (b"25", b"h")  # the cursor hidden while drawing, shown again
    for screen in (b"1049", b"1047", b"47"):
        entered = escapes.count((screen, b"h"))
        assert entered == escapes.count((screen, b"l"))
    assert termios.tcgetattr(terminal.slave) == terminal.modes_before


def failing_program(folder: Path) -> str:
    """A program that steps the planted straggler for six seconds (several refreshes), then raises."""
    program = folder / "failing_training.py"
    program.write_text(f"import runpy, sys\nsys.argv = [{PROGRAM!r}, '6']\n"
                       f"runpy.run_path({PROGRAM!r}, run_name='__main__')\n"
                       "raise RuntimeError('the trainer failed')\n")
    return str(program)


def left_as_found(terminal: Terminal) -> bool:
    escapes = CURSOR_ESCAPES.findall(terminal.output)
    return ((b"25", b"l") in escapes and escapes[-1] == (b"25", b"h")
            and termios.tcgetattr(terminal.slave) == terminal.modes_before)


def assert_the_failure_leaves_the_terminal_as_found(terminal: Terminal) -> None:
    """The failing program's view refreshes, the program fails with its own error, and the
    terminal is left as it was found."""
    try:
        terminal.read_until(b"env steps/s", count=2)
        assert terminal.wait_for_exit() == 1
        assert b"RuntimeError: the trainer failed" in terminal.output
        assert left_as_found(terminal)
    finally:
        terminal.close()


def test_an_exception_in_the_program_takes_the_view_down_with_the_cursor_shown_again(tmp_path):
    assert_the_failure_leaves_the_terminal_as_found(Terminal(
        [sys.executable, "-m", "profiler", "run", "--live", "--summaries-dir", str(tmp_path / "run"),
         failing_program(tmp_path)]))


def test_an_exception_after_the_program_started_the_view_itself_leaves_the_terminal_as_found(tmp_path):
    started_by_the_program = (f"import runpy, profiler; profiler.live_view.start(); "
                              f"runpy.run_path({failing_program(tmp_path)!r}, run_name='__main__')")
    assert_the_failure_leaves_the_terminal_as_found(Terminal([sys.executable, "-c", started_by_the_program]))


def test_sigterm_takes_the_view_down_with_the_cursor_shown_again(straggler_run_on_a_terminal):
    terminal = straggler_run_on_a_terminal
    terminal.read_until(b"env steps/s", count=2)
    terminal.process.send_signal(signal.SIGTERM)
    assert terminal.wait_for_exit() == -signal.SIGTERM
    escapes = CURSOR_ESCAPES.findall(terminal.output)
    assert escapes[-1] == (b"25", b"h")
    assert termios.tcgetattr(terminal.slave) == terminal.modes_before


def test_a_view_started_by_the_program_itself_is_taken_down_by_sigterm(tmp_path):
    started_by_the_program = (f"import runpy, sys, profiler; profiler.live_view.start(); "
                              f"sys.argv = [{PROGRAM!r}, '60']; runpy.run_path({PROGRAM!r}, run_name='__main__')")
    terminal = Terminal([sys.executable, "-c", started_by_the_program])
    try:
        terminal.read_until(b"env steps/s", count=2)
        terminal.process.send_signal(signal.SIGTERM)
        assert terminal.wait_for_exit() == -signal.SIGTERM
        assert CURSOR_ESCAPES.findall(terminal.output)[-1] == (b"25", b"h")
        assert termios.tcgetattr(terminal.slave) == terminal.modes_before
    finally:
        terminal.close()


def test_in_a_pipe_the_view_prints_one_plain_line_per_refresh(tmp_path):
    finished = subprocess.run(
        [sys.executable, "-m", "profiler", "run", "--live", "--summaries-dir", str(tmp_path / "run"),
         PROGRAM, "4"], capture_output=True, text=True, timeout=DEADLINE)
    assert finished.returncode == 0, finished.stderr
    lines = [line for line in finished.stderr.splitlines() if line.startswith("rlprof live ")]
    assert len(lines) >= 2
    assert all("env steps/s" in line and "untimed" in line for line in lines)
    assert any("straggler" in line for line in lines)
    assert any("slowest worker 3" in line for line in lines)
    assert "\x1b[" not in finished.stderr


def test_watch_follows_a_continuous_dump_being_written_and_waits_for_it_first(tmp_path):
    timers = tmp_path / "dumps" / "straggler_timers.json"
    watcher = subprocess.Popen([sys.executable, "-m", "profiler", "watch", "--plain", "--interval", "0.5",
                                str(timers)], stderr=subprocess.PIPE, text=True)
    writer = None
    try:
        first = watcher.stderr.readline()
        assert first.startswith("rlprof live: waiting for") and str(timers) in first
        writer = subprocess.Popen([sys.executable, PROGRAM, "60", str(timers.parent)])
        end = time.monotonic() + DEADLINE
        lines = []
        while time.monotonic() < end and not any("verdicts: straggler" in line for line in lines):
            lines.append(watcher.stderr.readline())
        assert any("verdicts: straggler" in line for line in lines), lines
        assert writer.poll() is None  # seen while the run goes on
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=DEADLINE) == 0
    finally:
        for process in (watcher, writer):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGINT)
                try:
                    process.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


def test_a_managers_live_view_option_shows_the_view_while_its_workers_run_and_takes_it_down_at_close(tmp_path):
    stop_file = tmp_path / "stop"
    terminal = Terminal([sys.executable, MANAGER_PROGRAM, "subprocess", "60", str(stop_file)])
    try:
        terminal.read_until(b"worker 3 holds up the vector step")
        assert terminal.process.poll() is None  # drawn while the run goes on
        stop_file.touch()
        assert terminal.wait_for_exit() == 0
        assert b"closed" in terminal.output
        escapes = CURSOR_ESCAPES.findall(terminal.output)
        # Taken down by close(), before the program's last line: the cursor shown again.
        assert escapes[-1] == (b"25", b"h")
        assert terminal.output.rindex(b"\x1b[?25h") < terminal.output.rindex(b"closed")
        assert termios.tcgetattr(terminal.slave) == terminal.modes_before
    finally:
        terminal.close()


def test_a_managers_live_view_on_a_pipe_prints_plain_lines():
    finished = subprocess.run([sys.executable, MANAGER_PROGRAM, "subprocess", "4"], capture_output=True,
                              text=True, timeout=DEADLINE)
    assert finished.returncode == 0, finished.stderr
    lines = [line for line in finished.stderr.splitlines() if line.startswith("rlprof live ")]
    assert lines and all("env steps/s" in line for line in lines)
    assert "\x1b[" not in finished.stderr
