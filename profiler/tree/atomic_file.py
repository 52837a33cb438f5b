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
* **Symbolic links.** Writing to a symlink replaces the file it points to, as ``open(path, "w")``
  would, instead of replacing the link with a plain file.
"""

from __future__ import annotations

import contextlib
import os
import re
import socket
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import psutil

__all__ = ["open_atomically", "remove_stale_temporary_files", "write_atomically"]


def _process_umask() -> int:
    # os.umask can only be read by setting it; done once, at import, before threads are likely.
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_NEW_FILE_MODE = 0o666 & ~_process_umask()
_HOST = socket.gethostname()
_NAME_LENGTH_KEPT = 100
"""Characters of the target's name kept in a temporary file's name (names are limited to 255)."""


def write_atomically(path: str | os.PathLike[str], data: str | bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder, then rename it.

    A crash or an exception half-way leaves no partial file behind: the temporary file is removed
    and ``path`` keeps whatever it held before. Missing parent folders are created. Text is
    written as UTF-8; a lone surrogate in it (which UTF-8 cannot hold) is written as the text of
    its escape, ``\\udcff``. Returns ``path``.
    """
    payload = data.encode("utf-8", "backslashreplace") if isinstance(data, str) else data
    with open_atomically(path) as output:
        output.write(payload)
    return Path(path)


@contextlib.contextmanager
def open_atomically(path: str | os.PathLike[str]) -> Iterator[BinaryIO]:
    """A binary file to write ``path``'s new content into, piece by piece; on leaving the
    ``with`` block it replaces ``path`` whole, or, after an exception, is removed unseen.

    For outputs too large to build in memory first (a long run's trace).
    """
    target = _real_target(Path(path))
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporary_files(target)
    try:
        mode = stat.S_IMODE(target.stat().st_mode)
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


def _real_target(path: Path) -> Path:
    """The file a write to ``path`` lands in: a symlink's target (followed to the end)."""
    return Path(os.path.realpath(path)) if path.is_symlink() else path


def _temporary_prefix(target: Path) -> str:
    return f".{target.name[:_NAME_LENGTH_KEPT]}."


def _writer_id(pid: int) -> str:
    """``pid-start``: a pid alone is reused, by a restarted container's pid 1 most of all."""
    return f"{pid}-{_start_time(pid)}"


def _start_time(pid: int) -> str:
    return str(int(psutil.Process(pid).create_time()))


def _is_running(pid: int, started: str) -> bool:
    try:
        return _start_time(pid) == started
    except psutil.NoSuchProcess:
        return False
    except (psutil.Error, OSError):
        return True  # cannot tell: leave the file alone
