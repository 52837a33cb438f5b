"""Specification of atomic writes: whole files or none, with ordinary permissions."""

from __future__ import annotations

import os
import stat

from profiler.atomic_file import write_atomically


def test_the_file_holds_exactly_what_was_written(tmp_path):
    path = write_atomically(tmp_path / "out.txt", "hello")
    assert path.read_text() == "hello"


def test_bytes_are_written_as_they_are(tmp_path):
    path = write_atomically(tmp_path / "out.bin", b"\x00\xff")
    assert path.read_bytes() == b"\x00\xff"


def test_a_written_file_gets_the_mode_the_umask_gives_new_files(tmp_path):
    mask = os.umask(0o022)
    os.umask(mask)
    path = write_atomically(tmp_path / "out.txt", "data")
    assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~mask
