"""Where ``-o`` and ``rlprof report`` write: regular files replaced atomically; a device, a FIFO or
stdout named on purpose written in place and never replaced; nothing written through a link the
user did not name (see docs/trust.md, "Where outputs are written").

Devices are real: a null device made with ``mknod`` in the test's folder (root only), and the
system's ``/dev/null``, whose identity is checked before and after.
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys

import pytest

from profiler.cli.commands import main

as_root = pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")


def device_identity(path):
    status = os.lstat(path)
    return stat.S_ISCHR(status.st_mode), status.st_rdev, status.st_ino


def null_device_in(folder):
    """A character device that is a null device (1, 3), made in ``folder``."""
    node = folder / "null"
    os.mknod(node, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    return node


@as_root
def test_convert_onto_a_device_writes_into_it_and_keeps_the_device(vector_run, tmp_path):
    device = null_device_in(tmp_path)
    before = device_identity(device)
    assert main(["convert", vector_run, "--to", "chrome", "-o", str(device)]) == 0
    assert device_identity(device) == before


@as_root
def test_convert_onto_dev_null_leaves_the_system_null_device_in_place(vector_run, tmp_path):
    # The same write onto a copy first: if that replaced its device, /dev/null is not risked.
    copy = null_device_in(tmp_path)
    assert main(["convert", vector_run, "--to", "html", "-o", str(copy)]) == 0
    assert device_identity(copy)[0]
    before = device_identity("/dev/null")
    assert main(["convert", vector_run, "--to", "html", "-o", "/dev/null"]) == 0
    assert device_identity("/dev/null") == before


def test_convert_into_a_fifo_feeds_its_reader_and_keeps_the_fifo(vector_run, tmp_path):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    try:
        assert main(["convert", vector_run, "--to", "collapsed", "-o", str(fifo)]) == 0
        assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
        received, _ = reader.communicate(timeout=60)
    finally:
        reader.kill()
        reader.wait(timeout=60)
    assert b"env.step" in received


@pytest.mark.parametrize("output", ["-", "/dev/stdout", "/dev/fd/1"])
def test_convert_to_stdout_writes_the_output_there_and_nothing_else(vector_run, output):
    result = subprocess.run(
        [sys.executable, "-m", "profiler", "convert", vector_run, "--to", "collapsed", "-o", output],
        capture_output=True, timeout=120,
    )
    assert (result.returncode, result.stderr) == (0, b"")
    assert result.stdout.splitlines()[0].startswith(b"root;")


def test_convert_onto_a_block_device_or_a_socket_is_refused_in_one_line(vector_run, tmp_path, capsys):
    import socket

    address = tmp_path / "listening.sock"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(address))
        assert main(["convert", vector_run, "--to", "html", "-o", str(address)]) == 2
        assert stat.S_ISSOCK(os.lstat(address).st_mode)
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "is a socket" in error


# --- links --------------------------------------------------------------------------------------


def test_report_refuses_a_symlink_planted_at_its_default_path(vector_run, tmp_path, capsys):
    secret = tmp_path / "secret"
    secret.write_text("private")
    secret.chmod(0o600)
    planted = tmp_path / "vector_report.html"  # beside vector_timers.json
    planted.symlink_to(secret)
    assert main(["report", vector_run]) == 2
    assert secret.read_text() == "private"
    assert planted.is_symlink()
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "symbolic link" in error


def test_report_refuses_a_fifo_or_device_at_its_default_path(vector_run, tmp_path, capsys):
    planted = tmp_path / "vector_report.html"
    os.mkfifo(planted)
    assert main(["report", vector_run]) == 2  # does not block waiting for a reader either
    assert stat.S_ISFIFO(os.lstat(planted).st_mode)
    assert "not a regular file" in capsys.readouterr().err


def test_a_symlink_named_with_o_is_followed_to_the_file_it_names(vector_run, tmp_path):
    """As the shell's ``>`` does: naming a link is naming its target."""
    real = tmp_path / "reports" / "run_7.html"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "latest.html"
    link.symlink_to(real)
    assert main(["report", vector_run, "-o", str(link)]) == 0
    assert link.is_symlink() and "<html" in real.read_text().lower()


def test_rlprof_run_refuses_a_symlink_planted_at_its_timer_file_in_one_line(tmp_path, capsys):
    secret = tmp_path / "secret"
    secret.write_text("private")
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "t_timers.json").symlink_to(secret)
    script = tmp_path / "t.py"
    script.write_text("pass\n")
    assert main(["run", "--summaries-dir", str(runs), str(script)]) == 2
    error = capsys.readouterr().err
    assert error.count("\n") == 1 and "is a symbolic link" in error
    assert secret.read_text() == "private"


@pytest.mark.parametrize("output", ["/dev/stderr", "/dev/fd/2", "/proc/self/fd/2"])
def test_an_inherited_descriptor_named_with_o_is_written_through_even_onto_a_file(vector_run, tmp_path, output):
    """``-o /dev/stderr 2>log``: the output joins the log the shell opened, which stays that file."""
    log = tmp_path / "log.txt"
    with open(log, "wb") as stderr:
        inode = os.fstat(stderr.fileno()).st_ino
        result = subprocess.run(
            [sys.executable, "-m", "profiler", "convert", vector_run, "--to", "collapsed", "-o", output],
            stdout=subprocess.PIPE, stderr=stderr, timeout=120,
        )
    assert result.returncode == 0
    assert os.stat(log).st_ino == inode
    assert log.read_bytes().splitlines()[0].startswith(b"root;")
