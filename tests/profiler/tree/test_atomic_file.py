"""Specification of atomic writes: whole files or none, with ordinary permissions."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys

import pytest

from profiler.tree.atomic_file import (
    OutputPathError,
    open_atomically,
    remove_stale_temporary_files,
    write_atomically,
)


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


# --- leftovers of killed writers ------------------------------------------------------------------

WRITER_KILLED_MID_WRITE = """
import sys, time
from profiler.tree.atomic_file import open_atomically
with open_atomically(sys.argv[1]) as output:
    output.write(b"x" * 100_000)
    output.flush()
    print("writing", flush=True)
    time.sleep(60)
"""


def start_writer(target):
    """A real process half-way through writing ``target``, once it has said so."""
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER_KILLED_MID_WRITE, str(target)], stdout=subprocess.PIPE, text=True
    )
    assert writer.stdout.readline() == "writing\n"
    return writer


def temporary_files(folder):
    return sorted(path.name for path in folder.iterdir() if path.name.endswith(".tmp"))


def test_a_writer_killed_mid_write_leaves_the_target_untouched(tmp_path):
    target = tmp_path / "run_timers.json"
    target.write_text("previous")
    writer = start_writer(target)
    writer.kill()
    writer.wait(timeout=60)
    assert target.read_text() == "previous"


def test_each_write_removes_the_temporary_files_of_killed_writers(tmp_path):
    target = tmp_path / "run_timers.json"
    for _ in range(3):
        writer = start_writer(target)
        writer.kill()
        writer.wait(timeout=60)
    assert len(temporary_files(tmp_path)) == 1  # each writer removed its killed predecessor's
    write_atomically(target, "new")
    assert temporary_files(tmp_path) == []
    assert target.read_text() == "new"


def test_the_temporary_file_of_a_writer_still_running_is_kept(tmp_path):
    target = tmp_path / "run_timers.json"
    writer = start_writer(target)
    try:
        write_atomically(target, "mine")
        assert len(temporary_files(tmp_path)) == 1
    finally:
        writer.kill()
        writer.wait(timeout=60)


def test_temporary_files_of_other_targets_and_other_hosts_are_kept(tmp_path):
    dead_pid = dead_process_id()
    kept = [
        f".other.json.{socket.gethostname()}.{dead_pid}-1.abcd1234.tmp",  # another target
        f".run.json.another-host.{dead_pid}-1.abcd1234.tmp",  # a shared folder: not our host
    ]
    for name in kept:
        (tmp_path / name).write_text("partial")
    write_atomically(tmp_path / "run.json", "new")
    assert temporary_files(tmp_path) == sorted(kept)


def test_a_leftover_of_an_earlier_process_with_this_pid_is_removed(tmp_path):
    """A restarted container's main process gets the pid its killed predecessor had."""
    leftover = tmp_path / f".run.json.{socket.gethostname()}.{os.getpid()}-1.abcd1234.tmp"
    leftover.write_text("partial")
    assert remove_stale_temporary_files(tmp_path / "run.json") == [leftover]


def dead_process_id() -> int:
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait(timeout=60)
    return process.pid


# --- what replacing a file keeps ------------------------------------------------------------------


def test_replacing_a_file_keeps_its_mode(tmp_path):
    target = tmp_path / "shared_timers.json"
    target.write_text("old")
    target.chmod(0o640)
    write_atomically(target, "new")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640


def test_a_symlink_the_user_named_is_followed_to_the_file_it_points_to(tmp_path):
    (tmp_path / "runs").mkdir()
    real = tmp_path / "runs" / "run_7_timers.json"
    real.write_text("old")
    link = tmp_path / "latest_timers.json"
    link.symlink_to(real)
    assert write_atomically(link, "new", named_by_user=True) == link
    assert link.is_symlink()
    assert real.read_text() == "new"
    assert temporary_files(tmp_path) == temporary_files(tmp_path / "runs") == []


def test_a_dangling_symlink_the_user_named_gets_its_target_created(tmp_path):
    link = tmp_path / "latest_timers.json"
    link.symlink_to(tmp_path / "made_later.json")
    write_atomically(link, "new", named_by_user=True)
    assert link.is_symlink() and (tmp_path / "made_later.json").read_text() == "new"


def test_a_symlink_at_a_path_rlprof_chose_is_refused_and_its_target_kept(tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("private")
    link = tmp_path / "run_timers.json"
    link.symlink_to(secret)
    with pytest.raises(OutputPathError, match="is a symbolic link"):
        write_atomically(link, "new")
    assert link.is_symlink() and secret.read_text() == "private"
    assert temporary_files(tmp_path) == []


def test_a_dangling_symlink_at_a_path_rlprof_chose_creates_nothing(tmp_path):
    link = tmp_path / "run_timers.json"
    link.symlink_to(tmp_path / "elsewhere.json")
    with pytest.raises(OutputPathError):
        write_atomically(link, "new")
    assert not (tmp_path / "elsewhere.json").exists()


def test_a_fifo_at_a_path_rlprof_chose_is_refused_without_waiting_for_a_reader(tmp_path):
    fifo = tmp_path / "run_timers.json"
    os.mkfifo(fifo)
    with pytest.raises(OutputPathError, match="is a FIFO, not a regular file"):
        write_atomically(fifo, "new")
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_at_a_path_rlprof_chose_is_refused_and_kept(tmp_path):
    device = tmp_path / "run_timers.json"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    with pytest.raises(OutputPathError, match="is a character device"):
        write_atomically(device, "new")
    assert stat.S_ISCHR(os.lstat(device).st_mode)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_the_user_named_is_written_into_and_kept(tmp_path):
    device = tmp_path / "null"
    os.mknod(device, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    rdev = os.lstat(device).st_rdev
    write_atomically(device, "new", named_by_user=True)
    assert stat.S_ISCHR(os.lstat(device).st_mode) and os.lstat(device).st_rdev == rdev
    assert temporary_files(tmp_path) == []


# --- writing piece by piece -----------------------------------------------------------------------


def test_open_atomically_replaces_the_target_only_when_the_block_ends(tmp_path):
    target = tmp_path / "trace.json"
    target.write_text("old")
    with open_atomically(target) as output:
        output.write(b"new ")
        assert target.read_text() == "old"
        output.write(b"trace")
    assert target.read_text() == "new trace"


def test_an_exception_inside_open_atomically_keeps_the_old_file_and_leaves_nothing(tmp_path):
    target = tmp_path / "trace.json"
    target.write_text("old")
    with pytest.raises(RuntimeError):
        with open_atomically(target) as output:
            output.write(b"half")
            raise RuntimeError("renderer failed")
    assert target.read_text() == "old"
    assert temporary_files(tmp_path) == []


def without_proc(monkeypatch):
    """This process as on a machine with no ``/proc`` (macOS, say): the files are not there."""
    from profiler.recording import proc_files

    def no_file(pid, name):
        raise FileNotFoundError(f"/proc/{pid}/{name}")

    real_isdir = os.path.isdir
    monkeypatch.setattr(proc_files, "_read_proc_file", no_file)
    monkeypatch.setattr(os.path, "isdir", lambda path: path != "/proc" and real_isdir(path))


def test_without_proc_a_file_is_written_with_psutils_start_time(tmp_path, monkeypatch):
    without_proc(monkeypatch)
    write_atomically(tmp_path / "run_timers.json", "written")
    assert (tmp_path / "run_timers.json").read_text() == "written"


def test_without_proc_a_writer_still_running_keeps_its_temporary_file(tmp_path, monkeypatch):
    target = tmp_path / "run_timers.json"
    writer = start_writer(target)
    try:
        without_proc(monkeypatch)
        write_atomically(target, "mine")
        assert len(temporary_files(tmp_path)) == 1
    finally:
        writer.kill()
        writer.wait(timeout=60)
