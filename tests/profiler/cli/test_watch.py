"""Specification of ``rlprof watch PATH``: the live view of a timers file, read-only.

The view on a continuous dump being written by a real run is specified with the other real runs in
tests/envmanager/test_live_view_terminal.py; here, what watching does to the file it reads.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from run_files import write_vector_run


def snapshot(folder):
    return {path.name: (path.read_bytes(), path.stat().st_mtime_ns) for path in sorted(folder.iterdir())}


def test_watching_a_file_reads_it_and_changes_nothing_in_its_folder(tmp_path, fake_clock):
    timers = write_vector_run(tmp_path / "run_timers.json", fake_clock, measured=True)
    before = snapshot(tmp_path)
    watcher = subprocess.Popen([sys.executable, "-m", "profiler", "watch", "--plain", "--interval", "0.2",
                                str(timers)], stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    try:
        first, second = watcher.stderr.readline(), watcher.stderr.readline()
        assert first.startswith("rlprof live ") and "env steps/s" in first and "straggler" in first
        assert "no new dump since the last refresh" in second  # the same file read again
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(timeout=60) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert snapshot(tmp_path) == before


def test_a_folder_that_cannot_be_read_is_said_in_one_line_and_watching_goes_on(tmp_path):
    folder = tmp_path / "not_a_file"
    folder.mkdir()
    watcher = subprocess.Popen([sys.executable, "-m", "profiler", "watch", "--plain", "--interval", "0.2",
                                str(folder)], stderr=subprocess.PIPE, text=True)
    try:
        line = watcher.stderr.readline()
        assert line.startswith("rlprof live: cannot read") and "Traceback" not in line
        assert watcher.poll() is None
        os.kill(watcher.pid, signal.SIGTERM)
        assert watcher.wait(timeout=60) == 0
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
