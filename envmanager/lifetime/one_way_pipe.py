"""A one-way pipe whose ends each close their descriptor exactly once.

A manager collected as garbage without ``close()`` closes its pipes from its finaliser, and the
collector runs the finalisers of a dead reference cycle in no set order.  A plain
``multiprocessing`` ``Connection``'s own finaliser closes its descriptor but keeps the number on
the object, so the manager's ``close()`` of the same end after it closes that number a second
time: EBADF at best, and at worst the descriptor the program (or another thread) opened with the
freed number in between.  The ends made here forget their descriptor whichever way they close,
so the finaliser and ``close()`` together close it once.
"""

from __future__ import annotations

import os
from multiprocessing.connection import Connection, reduce_connection
from typing import Any

__all__ = ["OwnedEnd", "one_way_pipe"]


class OwnedEnd(Connection):
    """A pipe end whose finaliser forgets the descriptor it closes, as ``close()`` does."""

    def __del__(self) -> None:
        self.close()

    def __reduce__(self) -> Any:
        # Sent to a spawned process as a plain Connection on a duplicate of the descriptor,
        # exactly as multiprocessing sends a Connection.
        return reduce_connection(self)


def one_way_pipe() -> tuple[OwnedEnd, OwnedEnd]:
    """``(reader, writer)``: what ``Pipe(duplex=False)`` makes on Unix (non-inheritable
    descriptors), with ends that close once."""
    read_fd, write_fd = os.pipe()
    return OwnedEnd(read_fd, writable=False), OwnedEnd(write_fd, readable=False)
