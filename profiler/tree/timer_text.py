"""A timer file's JSON document, read with bounds, whatever the path turns out to be.

:func:`read_timer_document` is the reading half of ``profiler.load_timing_tree`` (which then
checks the document's shape): every way reading can fail ends in a one-line
:class:`TimerFileError`. ``rlprof analyze /dev/zero`` used to read zeros until the machine ran
out of memory, a gzip-compressed dump (``run_timers.json.gz``) was refused with a message about
UTF-8, and an integer of 5,000 digits raised a bare ``ValueError``. Now:

* **A file too large for the memory free** is refused before reading
  (:mod:`profiler.tree.memory_check`).
* **gzip** is recognised by its magic bytes, whatever the name, and decompressed as it is read
  (rlprof writes its Chrome traces as ``.json.gz``; users compress timer files the same way).
* **Anything that is not JSON text** is refused from its first bytes: a JSON document starts, after
  any whitespace, with one of ``{["-0123456789tfn``, so ``/dev/zero``'s NUL bytes or a binary
  file end the read at once.
* **A source without a size** (a device, a pipe, a FIFO, a compressed file) is read in pieces up to
  the most text the memory check would let a file have, then refused; a regular file's size was
  checked before reading.
* **JSON Python will not parse** (nested past the recursion limit, an integer of more than 4,300
  digits) is refused in one line.
"""

from __future__ import annotations

import gzip
import json
import os
import stat
import sys
from pathlib import Path
from typing import Any, BinaryIO

from profiler.timing.timers import MAX_DEPTH
from profiler.tree.memory_check import READ_MEMORY_PER_DENSE_BYTE, available_memory, memory_shortage

__all__ = ["MAX_FILE_DEPTH", "SQLITE_MAGIC", "TimerFileError", "is_sqlite_file", "read_timer_document",
           "read_timer_text"]

SQLITE_MAGIC = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file."""


class TimerFileError(ValueError):
    """A timer file that cannot be read: missing, not JSON, or JSON of another shape."""


MAX_FILE_DEPTH = 2 * MAX_DEPTH
"""Trees nested deeper than this are refused with a :class:`TimerFileError`. rlprof folds its own
trees at :data:`profiler.timing.timers.MAX_DEPTH`, so this only stops foreign or crafted files, before
they can exhaust Python's recursion limit in the parser or the tools that walk the tree."""

GZIP_MAGIC = b"\x1f\x8b"
_JSON_STARTS = frozenset(b'{["-0123456789tfn')
_WHITESPACE = b" \t\r\n"
_PIECE_BYTES = 1 << 20


class TimerTextError(ValueError):
    """Bytes that cannot be a timer file, or more of them than memory can hold once parsed."""


def is_sqlite_file(path: str | Path) -> bool:
    """Whether ``path`` is a regular file that starts like an SQLite database (False for what
    cannot be read, and for a pipe or a device, whose first bytes reading would consume).

    Here, not in :mod:`profiler.tree.nsys_sqlite`: every read of a timers file asks, and only
    an Nsight Systems export needs that module (``rlprof run``'s start and exit need it not).
    """
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return False
        with open(path, "rb") as file:
            return file.read(len(SQLITE_MAGIC)) == SQLITE_MAGIC
    except OSError:
        return False


def read_timer_document(source: Path) -> Any:
    """The JSON document of the timer file at ``source``, unchecked; :class:`TimerFileError`
    with a one-line reason, naming ``source``, if it cannot be read."""
    try:
        shortage = memory_shortage(source)
    except FileNotFoundError:
        raise TimerFileError(f"{source}: no such file") from None
    except OSError as error:
        raise TimerFileError(f"{source}: cannot read: {error}") from None
    if shortage is not None:
        raise TimerFileError(f"{source}: {shortage}")
    try:
        text = read_timer_text(source).decode("utf-8")
    except FileNotFoundError:
        raise TimerFileError(f"{source}: no such file") from None
    except TimerTextError as error:
        raise TimerFileError(f"{source}: {error}") from None
    except (OSError, EOFError, UnicodeDecodeError) as error:
        raise TimerFileError(f"{source}: cannot read: {error}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise TimerFileError(f"{source}: not JSON ({error.msg} at line {error.lineno})") from None
    except RecursionError:
        raise TimerFileError(
            f"{source}: nested too deeply to read (a timer tree has at most {MAX_FILE_DEPTH} levels)"
        ) from None
    except ValueError:  # Python's int_max_str_digits refuses to parse a longer integer
        raise TimerFileError(
            f"{source}: not a timer file: it holds an integer of more than "
            f"{getattr(sys, 'get_int_max_str_digits', lambda: 4300)()} digits"
        ) from None


def read_timer_text(path: str | os.PathLike[str]) -> bytes:
    """The text of the timer file at ``path`` as bytes (decompressed when it is gzip).

    Raises :class:`TimerTextError` for bytes that are not JSON text and for a source larger than
    memory allows (see the module docstring); ``OSError`` as ``open`` raises it.
    """
    with open(Path(path), "rb") as raw:
        is_regular = stat.S_ISREG(os.fstat(raw.fileno()).st_mode)
        head = raw.read(len(GZIP_MAGIC))
        if head == GZIP_MAGIC:
            with gzip.GzipFile(fileobj=_Prefixed(head, raw)) as unpacked:
                return _checked_read(unpacked, limit=_largest_text(), compressed=True)
        if is_regular:  # its size passed the memory check: one read, no pieces to join
            text = head + raw.read()
            _check_json_start(text, compressed=False)
            return text
        return _checked_read(_Prefixed(head, raw), limit=_largest_text(), compressed=False)


def _checked_read(source: BinaryIO, *, limit: int, compressed: bool) -> bytes:
    """All of ``source``, in pieces, refused once it starts like no JSON or passes ``limit`` bytes."""
    pieces = []
    size = 0
    while piece := source.read(_PIECE_BYTES):
        if size == 0 or not b"".join(pieces).strip(_WHITESPACE):
            _check_json_start(b"".join(pieces) + piece, compressed=compressed)
        pieces.append(piece)
        size += len(piece)
        if size > limit:
            raise TimerTextError(
                f"more than {size // 1_000_000} MB of {'decompressed ' if compressed else ''}text and "
                "more to come: more than the memory free here can parse"
            )
    return b"".join(pieces)


def _check_json_start(text: bytes, *, compressed: bool) -> None:
    content = text.lstrip(_WHITESPACE)
    if content and content[0] not in _JSON_STARTS:
        inside = " (inside the gzip file)" if compressed else ""
        raise TimerTextError(
            f"not a timer file: JSON text cannot start with byte {content[0]:#04x}{inside}"
        )


def _largest_text() -> int:
    """The most text worth reading: what parses in the memory free now (as the size check reckons)."""
    return available_memory() // (1 + READ_MEMORY_PER_DENSE_BYTE)


class _Prefixed:
    """``head`` (bytes already read, which a pipe or device cannot give again), then ``stream``."""

    def __init__(self, head: bytes, stream: BinaryIO) -> None:
        self._head = head
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        head, self._head = self._head, b""
        if size < 0:
            return head + self._stream.read()
        return head + self._stream.read(max(0, size - len(head))) if head else self._stream.read(size)
