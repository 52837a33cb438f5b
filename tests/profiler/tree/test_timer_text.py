"""What the loader reads from a path that is not a plain timer file: gzip, devices, FIFOs."""

from __future__ import annotations

import gzip
import json
import os
import subprocess

import pytest

from profiler.tree.timer_json import TimerFileError, load_timing_tree

TREE = {"name": "root", "total": 1.0, "count": 1, "children": [
    {"name": "env.step", "total": 0.5, "count": 2, "children": []}]}


def test_a_gzip_compressed_timer_file_is_read_as_the_file_it_holds(tmp_path):
    plain = tmp_path / "run_timers.json"
    plain.write_text(json.dumps(TREE))
    packed = tmp_path / "run_timers.json.gz"
    packed.write_bytes(gzip.compress(plain.read_bytes()))
    assert load_timing_tree(packed) == load_timing_tree(plain)


def test_a_gzip_file_of_something_else_is_refused_saying_it_was_inside_gzip(tmp_path):
    packed = tmp_path / "run_timers.json.gz"
    packed.write_bytes(gzip.compress(b"\x89PNG\r\n"))
    with pytest.raises(TimerFileError, match=r"cannot start with byte 0x89 \(inside the gzip file\)"):
        load_timing_tree(packed)


def test_dev_zero_is_refused_from_its_first_bytes():
    with pytest.raises(TimerFileError, match="/dev/zero: not a timer file: JSON text cannot start with byte 0x00"):
        load_timing_tree("/dev/zero")


def test_a_binary_file_is_refused_as_not_a_timer_file(tmp_path):
    binary = tmp_path / "model.pt"
    binary.write_bytes(b"PK\x03\x04" + bytes(range(256)))
    with pytest.raises(TimerFileError, match="not a timer file"):
        load_timing_tree(binary)


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gzip"])
def test_a_fifo_fed_by_another_process_is_read_whole(tmp_path, compress):
    """As a shell's ``rlprof analyze <(zcat run.json.gz)`` gives it."""
    source = tmp_path / "run_timers.json"
    data = json.dumps(TREE).encode()
    source.write_bytes(gzip.compress(data) if compress else data)
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["cp", str(source), str(fifo)])
    try:
        assert load_timing_tree(fifo)["children"][0]["name"] == "env.step"
    finally:
        writer.kill()
        writer.wait(timeout=60)
