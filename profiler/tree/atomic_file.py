"""Write a file so that readers see either the old file or the whole new one, never a part.

Every output goes to a temporary file beside its target, which is renamed over the target once
complete. Three things a user would otherwise trip over are taken care of here:

* **Stale temporary files.** A writer killed mid-write (``kill -9``, the OOM killer) leaves its
  temporary file behind. Each temporary file is named for the target, the host, and the writing
  process (pid and start time): ``.run_timers.json.myhost.4242-1795354099.k3j9a.tmp``. Before
  writing a target, the temporary files of that target left by processes of this host that are
  no longer running are removed. Those of live processes and of other hosts (a shared file
  system) are never touched.
* **Mode.** Replacing an existing file keeps its permission bits; a new file gets the mode the
  umask gives any new file (``mkstemp`` alone would make it private).
* **What is at the path** (docs/trust.md, "Where outputs are written"). Only a regular file is
  ever replaced, and only a new path created; the rename replaces a directory entry and never
  writes through a link. Paths rlprof chooses itself (a dump in the summaries folder, the report
  beside its run) must hold a regular file or nothing: a symbolic link, a FIFO or a device there
  is refused with an :class:`OutputPathError`, since nobody asked rlprof to write into it. A
  path the user names (``named_by_user=True``: ``-o``) is taken as the shell's ``>`` takes it: a
  symbolic link is followed to the file it names (the link stays), a character device
  (``/dev/null``) or a FIFO is written into in place, never replaced, ``-`` or
  ``/dev/stdout`` is standard output, and ``/dev/stderr`` or ``/dev/fd/N`` the descriptor it
  names, whatever it holds (``2>log``: the log). Block devices, sockets and folders are refused either way.
"""

from __future__ import annotations

import contextlib
import os
import sys
import re
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from profiler.recording import proc_files

__all__ = [
    "OutputPathError",
    "is_standard_output",
    "open_atomically",
    "remove_stale_temporary_files",
    "write_atomically",
]


class OutputPathError(OSError):
    """An output path rlprof will not write: a link, FIFO or device it was not asked to write
    into, or something no output can go to (a folder, a socket, a block device)."""


def _process_umask() -> int:
    # os.umask can only be read by setting it; done once, at import, before threads are likely.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_process_umask()
_HOST = socket.gethostname()
_NAME_LENGTH_KEPT = 100
"""Characters of the target's name kept in a temporary file's name (names are limited to 255)."""


def write_atomically(
    path: str | os.PathLike[str], data: str | bytes, *, named_by_user: bool = False
) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename it.

    A crash or an exception half-way leaves no partial file behind: the temporary file is removed
    and ``path`` keeps whatever it held before. Missing parent folders are created. Text is
    written as UTF-8; a lone surrogate in it (which UTF-8 cannot hold) is written as the text of
    its escape, ``\\udcff``. ``named_by_user`` says the user typed ``path`` (see the module
    docstring for what that allows). Returns ``path``.
    """
    payload = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    with open_atomically(path, named_by_user=named_by_user) as output:
        output.write(payload)
    return Path(path)


@contextlib.contextmanager
def open_atomically(path: str | os.PathLike[str], *, named_by_user: bool = False) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into, piece by piece; on leaving the
    ``with`` block it replaces ``path`` whole, or, after an exception, is removed unseen.

    For outputs too large to build in memory first (a long run's trace). With ``named_by_user``,
    standard output, a character device or a FIFO at ``path`` is written into as it is (no
    temporary file: such a target cannot be replaced). Raises :class:`OutputPathError` for a
    path that must not be written (see the module docstring).
    """
    if named_by_user and is_standard_output(path):
        yield _StandardOutput(sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    inherited = _inherited_descriptor(path) if named_by_user else None
    if inherited is not None:  # /dev/stderr, /dev/fd/N: what the shell opened, written as it is
        sys.stderr.flush()
        with os.fdopen(os.dup(inherited), "wb") as stream:
            yield stream
        return
    target = _user_target(Path(path)) if named_by_user else _own_target(Path(path))
    if isinstance(target, int):  # a character device or FIFO the user named, opened for writing
        with os.fdopen(target, "wb") as stream:
            yield stream
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporary_files(target)
    try:
        mode = stat.S_IMODE(os.lstat(target).st_mode)
    except FileNotFoundError:
        mode = _NEW_FILE_MODE
    descriptor, temporary_name = tempfile.mkstemp(
        prefix=f"{_temporary_prefix(target)}{_HOST}.{_writer_id(os.getpid())}.",
        suffix=".tmp",
        dir=target.parent,
    )
    try:
        with os.fdopen(descriptor, "wb") as temporary_file:
            yield temporary_file
            temporary_file.flush()
            os.fsync(temporary_file.fileno())
        os.chmod(temporary_name, mode)
        os.replace(temporary_name, target)
    except BaseException:
        Path(temporary_name).unlink(missing_ok=True)
        raise


def remove_stale_temporary_files(target: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporary files of ``target`` whose writers on this host have ended.

    Returns the files removed. Called before every write; call it yourself to tidy a folder.
    """
    target = Path(target)
    prefix = _temporary_prefix(target)
    pattern = re.compile(
        re.escape(prefix) + r"(?P<host>.+)\.(?P<pid>\d+)-(?P<started>\d+)\.[A-Za-z0-9_]+\.tmp"
    )
    removed = []
    try:
        entries = list(os.scandir(target.parent))
    except OSError:
        return removed
    for entry in entries:
        match = pattern.fullmatch(entry.name) if entry.name.startswith(prefix) else None
        if match is None or match["host"] != _HOST:
            continue
        if _is_running(int(match["pid"]), match["started"]):
            continue
        try:
            os.unlink(entry.path)
        except FileNotFoundError:  # another writer tidied it first
            continue
        removed.append(Path(entry.path))
    return removed


def is_standard_output(path: str | os.PathLike[str]) -> bool:
    """Whether ``path``, typed by a user, means standard output: ``-``, ``/dev/stdout`` or its
    descriptor's paths."""
    return os.fspath(path) in ("-", "/dev/stdout", "/dev/fd/1", "/proc/self/fd/1")


_DESCRIPTOR_PATH = re.compile(r"/(?:dev|proc/self)/fd/(\d+)")


def _inherited_descriptor(path: str | os.PathLike[str]) -> int | None:
    """The descriptor that ``/dev/stderr``, ``/dev/fd/N`` or ``/proc/self/fd/N`` names, if open.

    Followed as a link, such a path leads to whatever the descriptor holds; when that is a
    regular file (``2>log``), replacing it would leave the shell writing to a deleted file.
    """
    text = os.fspath(path)
    if text == "/dev/stderr":
        return 2
    match = _DESCRIPTOR_PATH.fullmatch(text)
    if match is None:
        return None
    descriptor = int(match[1])
    try:
        os.fstat(descriptor)
    except (OSError, OverflowError):
        return None  # not open here: the path is then refused or created as any other
    return descriptor


class _StandardOutput:
    """Standard output as an output file: writes go through, closing leaves it open."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def write(self, data: bytes) -> int:
        return self._stream.write(data)

    def flush(self) -> None:
        self._stream.flush()


def _own_target(path: Path) -> Path:
    """A path rlprof chose: a regular file (replaced) or nothing (created), never anything else."""
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return path
    if stat.S_ISLNK(status.st_mode):
        raise OutputPathError(
            f"{path} is a symbolic link, and rlprof writes through no link it was not given: "
            "remove it, or write elsewhere"
        )
    if not stat.S_ISREG(status.st_mode):
        raise OutputPathError(f"{path} is {_kind(status.st_mode)}, not a regular file: remove it, "
                              "or write elsewhere")
    return path


def _user_target(path: Path) -> Path | int:
    """A path the user typed: its file (a symlink followed to the end), or, for a character
    device or a FIFO, a descriptor open for writing into it."""
    try:
        status = os.stat(path)  # follows links, as the shell's ``>`` does
    except FileNotFoundError:
        return Path(os.path.realpath(path)) if os.path.islink(path) else path
    if stat.S_ISREG(status.st_mode):
        return Path(os.path.realpath(path)) if os.path.islink(path) else path
    if stat.S_ISCHR(status.st_mode) or stat.S_ISFIFO(status.st_mode):
        # No O_CREAT: if the node vanished since the stat, nothing is created in its place.
        descriptor = os.open(path, os.O_WRONLY | os.O_NOCTTY | os.O_CLOEXEC)
        if stat.S_ISREG(os.fstat(descriptor).st_mode):  # swapped for a file meanwhile
            os.close(descriptor)
            raise OutputPathError(f"{path} changed while being opened; try again")
        return descriptor
    raise OutputPathError(f"{path} is {_kind(status.st_mode)}; rlprof writes to regular files, "
                          "character devices (/dev/null), FIFOs and standard output (-)")


def _kind(mode: int) -> str:
    for test, kind in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISLNK, "a symbolic link"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    ):
        if test(mode):
            return kind
    return "not a regular file"


def _temporary_prefix(target: Path) -> str:
    return f".{target.name[:_NAME_LENGTH_KEPT]}."


def _writer_id(pid: int) -> str:
    """``pid-start``: a pid alone is reused, by a restarted container's pid 1 most of all."""
    return f"{pid}-{_start_time(pid)}"


def _start_time(pid: int) -> str:
    """The process's start time, whole seconds since the epoch (``psutil.Process.create_time``:
    read from ``/proc`` where there is one, so that psutil's import is not every write's cost)."""
    try:
        return str(int(proc_files.process_start_time(pid)))
    except ProcessLookupError:
        raise
    except (OSError, ValueError, IndexError):
        if os.path.isdir("/proc"):
            raise
    import psutil  # where there is no /proc

    try:
        return str(int(psutil.Process(pid).create_time()))
    except psutil.NoSuchProcess:
        raise ProcessLookupError(pid) from None
    except psutil.Error as error:  # not permitted
        raise OSError(str(error)) from None


def _is_running(pid: int, started: str) -> bool:
    try:
        return _start_time(pid) == started
    except ProcessLookupError:
        return False
    except (OSError, ValueError, IndexError):
        return True  # cannot tell: leave the file alone
