"""The side channel rlprof owns between env worker processes and the trainer.

The vector env's own pipes carry the user's actions and results and nothing else: the workers'
timers travel on a Unix socket the trainer listens on, whose path each wrapped env factory carries
(a string pickles under fork, spawn and forkserver alike). Each worker process connects once, says
who it is, and sends its timers every second or so and when its env closes.

Failure never reaches the training run. A worker that cannot connect (within
:data:`CONNECT_TIMEOUT_SECONDS`) or whose send fails stops shipping and goes on stepping; the
trainer sees which workers never connected or whose connection ended without their last timers,
and the dump says so. A worker sends with ``MSG_NOSIGNAL``: a channel closed under it is an error
its shipping handles, never a ``SIGPIPE``, which would kill a worker whose program gave the signal
its default action back. The trainer's side is daemon threads, so nothing of the channel keeps the
trainer alive, and a worker's end is a socket, which keeps no process alive either.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import socket
import struct
import tempfile
import threading
import time
import warnings
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any, Callable

__all__ = ["CONNECT_TIMEOUT_SECONDS", "ChannelServer", "WorkerEnd", "connect"]

CONNECT_TIMEOUT_SECONDS = 5.0
"""How long a worker waits to connect before it gives up shipping its timers."""

Receiver = Callable[[int, Any], None]
"""Called on a receiver thread with a connection's number and one message it sent."""


class ChannelServer:
    """The trainer's end: a listening socket, and a daemon thread reading each worker connection.

    ``on_message(connection, message)`` and ``on_closed(connection)`` run on those threads.
    """

    def __init__(self, on_message: Receiver, on_closed: Callable[[int], None]) -> None:
        self._folder = tempfile.mkdtemp(prefix="rlprof-envs-")  # 0700: only this user connects
        self.address = os.path.join(self._folder, "channel")
        self._on_message = on_message
        self._on_closed = on_closed
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.address)
        self._listener.listen(128)
        # Non-blocking: the channel's thread and the final wait both take connections in, each
        # under the lock, so none is accepted by one and missed by the other (see _take_pending).
        self._listener.setblocking(False)
        self._lock = threading.Lock()
        self._changed = threading.Condition()  # notified after each message taken in and each connection's end
        self._connections: dict[int, Connection] = {}
        self._readers: list[threading.Thread] = []
        self._closing = False
        self._accepter = threading.Thread(target=self._accept, name="rlprof-env-channel", daemon=True)
        self._accepter.start()

    def _accept(self) -> None:
        # poll, not select: a program with many files open gives descriptors beyond select's 1024.
        listening = select.poll()
        listening.register(self._listener.fileno(), select.POLLIN)
        while True:
            try:
                listening.poll()  # a connection waits, or the listener was shut down
            except OSError:
                return
            with self._lock:
                if self._closing:
                    return
                try:
                    self._take_pending()
                except OSError:
                    return  # closed

    def _take_pending(self) -> None:
        """Accept every connection waiting on the listener and start its reader (the lock held)."""
        while True:
            try:
                peer, _ = self._listener.accept()
            except BlockingIOError:
                return
            peer.setblocking(True)
            number = len(self._readers)
            connection = Connection(peer.detach())
            self._connections[number] = connection
            reader = threading.Thread(
                target=self._read, args=(number, connection), name=f"rlprof-env-channel-{number}", daemon=True
            )
            self._readers.append(reader)
            reader.start()

    def _read(self, number: int, connection: Connection) -> None:
        try:
            while True:
                try:
                    message = connection.recv()
                except (EOFError, OSError):
                    return
                except Exception:  # noqa: BLE001 - a message that does not unpickle ends this peer only
                    return
                try:
                    self._on_message(number, message)
                except Exception as error:  # noqa: BLE001 - keep draining: a worker whose socket fills blocks
                    warnings.warn(f"rlprof: a message of env worker connection {number} could not be "
                                  f"taken in ({type(error).__name__}: {error}); dropped", RuntimeWarning,
                                  stacklevel=1)
                self._notify()
        finally:
            self._on_closed(number)
            self._notify()

    def wait_for_workers(self, timeout: float, settled: Callable[[int], bool] = lambda number: False) -> bool:
        """Wait until every connection so far has ended (its worker exited, or its channel broke)
        or is ``settled`` (called with its number: the worker owes nothing more, say it said
        goodbye but lives on); False if some were neither after ``timeout`` seconds. A worker
        whose connection the kernel completed counts, accepted by the channel's thread or not
        yet: a short program can end before that thread ran."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                with self._lock:
                    if not self._closing:
                        with contextlib.suppress(OSError):
                            self._take_pending()
                    owing = [number for number, reader in enumerate(self._readers)
                             if reader.is_alive() and not settled(number)]
                remaining = deadline - time.monotonic()
                if not owing or remaining <= 0:
                    return not owing
                self._changed.wait(remaining)

    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def close(self) -> None:
        """Stop listening, end every connection and remove the socket's folder."""
        with self._lock:
            self._closing = True
            connections = list(self._connections.values())
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.close()
        shutil.rmtree(self._folder, ignore_errors=True)


_NO_SIGNAL = getattr(socket, "MSG_NOSIGNAL", 0)  # Linux; elsewhere a closed peer may still raise SIGPIPE


class WorkerEnd:
    """A worker's end of the channel: messages framed as ``multiprocessing``'s ``Connection``
    frames them (the trainer reads them with one), written with ``MSG_NOSIGNAL``."""

    __slots__ = ("_socket",)

    def __init__(self, peer: socket.socket) -> None:
        self._socket = peer

    def send(self, message: Any) -> None:
        """Send one message; ``OSError`` when the channel is closed or broken."""
        data = bytes(ForkingPickler.dumps(message))
        size = len(data)
        header = struct.pack("!i", size) if size <= 0x7FFFFFFF else struct.pack("!iQ", -1, size)
        self._socket.sendall(header + data, _NO_SIGNAL)

    def close(self) -> None:
        self._socket.close()


def connect(address: str, hello: Any) -> WorkerEnd | None:
    """The worker's end: connected and introduced, or None when the trainer cannot be reached."""
    peer = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        peer.settimeout(CONNECT_TIMEOUT_SECONDS)
        peer.connect(address)
        peer.settimeout(None)
    except OSError:
        peer.close()
        return None
    end = WorkerEnd(peer)
    try:
        end.send(hello)
    except OSError:
        end.close()
        return None
    return end
