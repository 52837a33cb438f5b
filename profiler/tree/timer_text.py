"""The bytes of a timer file, read with bounds: whatever the path turns out to be.

``rlprof analyze /dev/zero`` read zeros until the machine ran out of memory, and a gzip-compressed
dump (``run_timers.json.gz``) was refused with a message about UTF-8. This module reads a file's
bytes for the loader so that neither can happen:

* **gzip** is recognised by its magic bytes, whatever the name, and decompressed as it is read
  (rlprof writes its Chrome traces as ``.json.gz``; users compress timer files the same way).
* **Anything that is not JSON text** is refused from its first bytes: a JSON document starts, after
  any whitespace, with one of ``{["-0123456789tfn``, so ``/dev/zero``'s NUL bytes or a binary
  file end the read at once.
* **A source without a size** (a device, a pipe, a FIFO, a compressed file) is read in pieces up to
  the most text the memory check of :mod:`profiler.tree.memory_check` would let a file have, then
  refused; a regular file's size was checked before reading.
"""

from __future__ import annotations

import gzip
import os
import stat
from pathlib import Path
from typing import BinaryIO

from profiler.tree.memory_check import READ_MEMORY_PER_DENSE_BYTE, available_memory

__all__ = ["TimerTextError", "read_timer_text"]

GZIP_MAGIC = b"\x1f\x8b"
_JSON_STARTS = frozenset(b'{["-0123456789tfn')
_WHITESPACE = b" \t\r\n"
_PIECE_BYTES = 1 << 20


class TimerTextError(ValueError):
    """Bytes that cannot be a timer file, or more of them than memory can hold once parsed."""


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
