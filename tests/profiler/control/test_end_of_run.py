"""Specification of dumps that survive the end of a program: real processes, real signals.

A trainer configured with ``set_config`` writes its files when it ends — a normal exit, an
uncaught exception, SIGTERM — without a ``dump()`` call; with ``continuous_dump=True``, a trainer
killed outright (SIGKILL) leaves its last periodic dump, whole.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from profiler import load_timing_tree

PROGRAM = textwrap.dedent(
    """
    import os, signal, sys, time
    import profiler
    from profiler import hierarchical_timer

    mode, folder = sys.argv[1], sys.argv[2]
    if mode == "own-handler":
        signal.signal(signal.SIGTERM, lambda number, frame: print("own handler ran", flush=True)
                      or setattr(sys.modules[__name__], "stopping", True))
    stopping = False
    profiler.set_config(summaries_dir=folder, run_id="run", formats="timers",
                        continuous_dump=mode == "kill", dump_period=0.02)
    profiler.set_state("run")
    with hierarchical_timer("setup"):
        pass
    if mode == "exception":
        raise RuntimeError("the trainer failed")
    if mode == "fork":
        child = os.fork()
        if child == 0:
            with hierarchical_timer("in the child"):
                pass
            sys.exit(0)  # runs the atexit handlers the child inherited
        os.waitpid(child, 0)
        print("child gone; files:", sorted(os.listdir(folder)) if os.path.isdir(folder) else [],
              flush=True)
    if mode in ("kill", "term", "own-handler"):
        with hierarchical_timer("step"):
            pass
        print("stepping", flush=True)
        while not stopping:
            with hierarchical_timer("step"):
                time.sleep(0.005)
    print("done", flush=True)
    """
)

TIMEOUT = 60.0
"""Generous: the machine running the tests may be busy; the tests check behaviour, not speed."""


@pytest.fixture
def start(tmp_path):
    processes = []

    def start_program(mode: str) -> subprocess.Popen[str]:
        script = tmp_path / "trainer.py"
        script.write_text(PROGRAM)
        process = subprocess.Popen(
            [sys.executable, str(script), mode, str(tmp_path / "runs")],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )
        processes.append(process)
        return process

    yield start_program
    for process in processes:
        if process.poll() is None:
            process.kill()
        process.communicate(timeout=TIMEOUT)


def timers_file(tmp_path: Path) -> Path:
    return tmp_path / "runs" / "run_timers.json"


def block_names(path: Path) -> list[str]:
    return [child["name"] for child in load_timing_tree(path)["children"]]


def wait_for_line(process: subprocess.Popen[str], line: str) -> None:
    assert process.stdout is not None
    for output in process.stdout:
        if output.strip() == line:
            return
    pytest.fail(f"the program ended without printing {line!r}: {process.stderr.read()}")


def test_a_normal_exit_writes_the_files_without_a_dump_call(tmp_path, start):
    process = start("exit")
    out, err = process.communicate(timeout=TIMEOUT)
    assert (process.returncode, out.strip(), err) == (0, "done", "")
    assert block_names(timers_file(tmp_path)) == ["setup"]


def test_an_uncaught_exception_still_writes_the_files(tmp_path, start):
    process = start("exception")
    _, err = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 1
    assert "RuntimeError: the trainer failed" in err
    assert block_names(timers_file(tmp_path)) == ["setup"]


def test_sigterm_writes_the_files_then_ends_the_program_as_sigterm_does(tmp_path, start):
    process = start("term")
    wait_for_line(process, "stepping")
    process.send_signal(signal.SIGTERM)
    process.communicate(timeout=TIMEOUT)
    assert process.returncode == -signal.SIGTERM
    tree = load_timing_tree(timers_file(tmp_path))
    assert [child["name"] for child in tree["children"]] == ["setup", "step"]
    assert tree["children"][1]["count"] >= 1


def test_sigterm_still_reaches_the_programs_own_handler(tmp_path, start):
    process = start("own-handler")
    wait_for_line(process, "stepping")
    process.send_signal(signal.SIGTERM)
    out, _ = process.communicate(timeout=TIMEOUT)
    assert process.returncode == 0
    assert out.splitlines() == ["own handler ran", "done"]
    assert block_names(timers_file(tmp_path)) == ["setup", "step"]


def test_sigkill_leaves_the_last_continuous_dump_whole_and_loadable(tmp_path, start):
    process = start("kill")
    wait_for_line(process, "stepping")
    deadline = time.monotonic() + TIMEOUT
    # Two periods in a row that found the file: the dumps run while the trainer steps.
    while not timers_file(tmp_path).exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.1)
    process.kill()
    process.communicate(timeout=TIMEOUT)
    assert process.returncode == -signal.SIGKILL
    assert block_names(timers_file(tmp_path)) == ["setup", "step"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_forked_child_that_exits_does_not_write_the_parents_files(tmp_path, start):
    process = start("fork")
    out, err = process.communicate(timeout=TIMEOUT)
    assert (process.returncode, err) == (0, "")
    assert "child gone; files: []" in out
    assert block_names(timers_file(tmp_path)) == ["setup"]
