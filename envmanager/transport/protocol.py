"""Every message that crosses the pipe between the manager and a worker, in one place.

Messages are plain tuples of built-ins and numpy arrays, never class instances, because
pickling a tuple of scalars is several times cheaper than pickling an object and the step
path sends two messages per worker per step.  The layouts below are the whole protocol.

Each worker has two one-way pipes, one for requests and one for replies.  A message on either
is framed as ``multiprocessing.Connection`` frames it (a 4-byte big-endian length, then the
bytes) but written and read straight on the file descriptor (:func:`write_message`,
:func:`read_message`, :func:`read_only_message`, :class:`MessageReader`): on the step path the
Python around the system calls costs as much as the calls themselves.

Request (manager -> worker)::

    (sequence, command, body)

Reply (worker -> manager)::

    (sequence, ok, body, timers, finished_at)

``sequence`` is echoed back so the manager can recognise and drop a late reply to a request
it already gave up on (after a timeout) instead of mistaking it for the current answer.
``ok`` is False when the command raised; ``body`` is then a :class:`RemoteFailure`.
``timers`` is None, or ``(payload, measured_wall, measured_cpu, measured_calls, scheduling)``: a
profiler payload and, since the worker's previous payload, the wall time, CPU time and number of
the env calls whose CPU time it measured (:mod:`envmanager.measurement.env_time`), and the
kernel's count of the worker's waits for a core, ``(run-queue seconds, CPU seconds, wall seconds,
involuntary switches)``, or None where schedstat is missing
(:mod:`profiler.recording.scheduling`).  It rides on the reply so that shipping timer data never
costs an extra round trip, and it is kept apart from ``body`` so it can never leak into the
infos a user sees.  ``finished_at`` is the worker's ``time.perf_counter()`` when it finished
the request (read through the timers' clock while profiling, which is that one unless a test
replaced it), one clock for every process of a machine: the trainer orders a step's replies by
it (:mod:`envmanager.measurement.critical_path`).

Bodies, per command (``k`` is the number of envs the worker runs):

=============  ==============================================  ==============================================
command        request body                                    reply body
=============  ==============================================  ==============================================
``STEP``       ``k`` actions: a packed array or a list, or     ``(observations, rewards, terminations,
               ``IN_SHARED_MEMORY``                            truncations, infos)``, or ``IN_SHARED_MEMORY``
``RESET``      ``(seeds, options, mask)``: ``k`` seeds,        ``(observations, infos)``
               options dict or None, ``k`` bools or None
``CALL``       ``(name, args, kwargs)``                        ``k`` results
``SET_ATTR``   ``(name, values)``: ``k`` values                None
``DESCRIBE``   None                                            ``k`` pairs ``(observation_space, action_space)``
``FLUSH``      None                                            None (all timer data is in ``timers``)
``CLOSE``      None                                            None (the last timer data is in ``timers``)
``NVTX``       ``(record_shapes, backend)``, or None: stop      None
=============  ==============================================  ==============================================

Arrays on the hot path travel *packed* (:func:`pack_array`): raw bytes, dtype string and shape
in a tuple.  Pickling that costs about a microsecond, pickling the same small ndarray over ten.

``observations`` is None when they travel through shared memory; otherwise it is one packed
array for array-like spaces (``Box``, ``Discrete``, ``MultiDiscrete``, ``MultiBinary``) or a
list of ``k`` observations for everything else.  ``rewards``, ``terminations`` and
``truncations`` are tuples of ``k`` scalars, or all three None when they travel through shared
memory.  ``infos`` is None when no env reported anything (the common case, so nothing is
pickled for it), else a list of ``k`` dicts or None.

**Steps in shared memory.**  With ``shared_memory=True`` and an array-like action space, a step's
actions and results live in the manager's :class:`~envmanager.transport.step_buffers.StepBuffers`, and a
step body may be :data:`IN_SHARED_MEMORY`: in a request, "your actions are in your rows"; in a
reply, "everything is in shared memory, there is nothing else to say" (no infos, no failure).
Such messages, when they carry no timer payload either, are not pickled: :func:`encode` writes
a fixed-size wake-up instead, a tag byte and ``struct``-packed numbers::

    step request  b"S" + sequence (int64)                     9 bytes
    step reply    b"R" + sequence (int64) + finished_at (f64)  17 bytes

and :func:`decode` turns them back into the tuples above, so everything that reads messages
reads both.  A pickle always starts with its protocol byte (``0x80``), never with a tag.  Every
other message is pickled as before: any non-step command, a step whose actions are not in
shared memory (not an ndarray of the space's dtype and shape, or sent while the worker still
owes an earlier reply), and a step reply with infos, a timer payload that is due, a failure, or
a result that does not fit shared memory (a reward that is not a real number: its values then
travel in the body, for the trainer to report).
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import pickle
import struct
import traceback
from typing import Any, Callable

import numpy as np

__all__ = [
    "STEP",
    "RESET",
    "CALL",
    "SET_ATTR",
    "DESCRIBE",
    "FLUSH",
    "CLOSE",
    "NVTX",
    "COMMAND_NAMES",
    "IN_SHARED_MEMORY",
    "Request",
    "Reply",
    "RemoteFailure",
    "PackedArray",
    "pack_array",
    "unpack_array",
    "encode",
    "decode",
    "send",
    "receive",
    "write_message",
    "read_message",
    "read_only_message",
    "READ_SIZE",
    "MessageReader",
    "step_wakeup",
    "FRAMED_STEP_REPLY_SIZE",
    "STEP_REPLY_FRAME_START",
    "STEP_REPLY_FIELDS",
]

# Plain ints rather than an Enum: an Enum member pickles as a class reference plus a value.
STEP = 1
RESET = 2
CALL = 3
SET_ATTR = 4
DESCRIBE = 5
FLUSH = 6
CLOSE = 7
# Sent before the next request once the trainer's profiler.gpu.emit_nvtx settings changed, so
# that running workers open NVTX ranges exactly while the trainer does.
NVTX = 8

COMMAND_NAMES = {
    STEP: "step",
    RESET: "reset",
    CALL: "call",
    SET_ATTR: "set_attr",
    DESCRIBE: "describe",
    FLUSH: "flush",
    CLOSE: "close",
    NVTX: "nvtx",
}

Request = tuple[int, int, Any]
Reply = tuple[int, bool, Any, Any, float]
PackedArray = tuple[bytes, str, tuple[int, ...]]


class _InSharedMemory:
    """The type of :data:`IN_SHARED_MEMORY`; it pickles as a reference to that one object."""

    __slots__ = ()

    def __reduce__(self) -> str:
        return "IN_SHARED_MEMORY"

    def __repr__(self) -> str:
        return "IN_SHARED_MEMORY"


IN_SHARED_MEMORY = _InSharedMemory()
"""A step body whose contents are in the shared step buffers (see the module's docstring)."""

# The wake-ups of a step in shared memory; their tags are no pickle's first byte (0x80).
_STEP_REQUEST = struct.Struct("<cq")
_STEP_REPLY = struct.Struct("<cqd")
_STEP_REQUEST_TAG = b"S"
_STEP_REPLY_TAG = b"R"
_STEP_REQUEST_FIRST = _STEP_REQUEST_TAG[0]
_STEP_REPLY_FIRST = _STEP_REPLY_TAG[0]


# A step reply's wake-up framed as write_message frames it, for the trainer's step in shared
# memory (:meth:`envmanager.transport.pool.WorkerPool.collect`): recognised by its first five
# bytes and read in one call, without read_only_message's and decode's.
STEP_REPLY_FRAME_START = struct.pack("!i", _STEP_REPLY.size) + _STEP_REPLY_TAG
FRAMED_STEP_REPLY_SIZE = 4 + _STEP_REPLY.size
STEP_REPLY_FIELDS = struct.Struct("<qd")  # (sequence, finished_at), after the frame's start


# ``step_wakeup(sequence)``: what :func:`encode` makes of ``(sequence, STEP, IN_SHARED_MEMORY)``,
# without its tests (and, as a partial, without a Python call): the request of a step whose
# actions are all in shared memory, the same for every worker.
step_wakeup: Callable[[int], bytes] = functools.partial(_STEP_REQUEST.pack, _STEP_REQUEST_TAG)


def encode(message: Request | Reply) -> bytes:
    """One message as the bytes :func:`send` writes: a fixed-size wake-up for a step in shared
    memory with nothing else to say, a pickle otherwise.

    Plain ``pickle`` instead of ``Connection.send``'s ``ForkingPickler``: no message carries a
    pipe or a lock, and building a ``ForkingPickler`` per message costs more than the
    pickling itself on the step path.
    """
    if message[2] is IN_SHARED_MEMORY:
        if len(message) == 3:
            return _STEP_REQUEST.pack(_STEP_REQUEST_TAG, message[0])
        if message[3] is None:  # a reply (ok, as its body says) with no timers: a wake-up
            return _STEP_REPLY.pack(_STEP_REPLY_TAG, message[0], message[4])
    return pickle.dumps(message, pickle.HIGHEST_PROTOCOL)


def decode(data: bytes) -> Any:
    """The message :func:`encode` made ``data`` from."""
    first = data[0]
    if first == _STEP_REPLY_FIRST:
        _, sequence, finished_at = _STEP_REPLY.unpack(data)
        return (sequence, True, IN_SHARED_MEMORY, None, finished_at)
    if first == _STEP_REQUEST_FIRST:
        return (_STEP_REQUEST.unpack(data)[1], STEP, IN_SHARED_MEMORY)
    return pickle.loads(data)


def encode_anything(value: Any) -> bytes:
    """``value`` pickled with cloudpickle, which also carries lambdas and closures (a first
    env's metadata may hold one, see :mod:`envmanager.transport.first_env`); :func:`decode`
    reads it."""
    import cloudpickle

    return cloudpickle.dumps(value, pickle.HIGHEST_PROTOCOL)


def decode_salvaging(data: bytes) -> Any:
    """The message :func:`decode` could not make of ``data``, every object whose class this
    process cannot import (an env's info holding an instance of a class only the worker
    knows) replaced by a stand-in: so a reply's sequence number and timers survive a body that
    cannot be rebuilt here.  Raises as :func:`decode` does for anything else."""
    return _SalvagingUnpickler(io.BytesIO(data)).load()


class _StandIn:
    """What :func:`decode_salvaging` puts in place of an object it cannot rebuild."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __setstate__(self, state: Any) -> None:
        pass


class _SalvagingUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        try:
            return super().find_class(module, name)
        except (ImportError, AttributeError):
            return _StandIn


def send(conn: Any, message: Request | Reply) -> None:
    """Encode and send one message."""
    write_message(conn.fileno(), encode(message))


def receive(conn: Any) -> Any:
    """Receive and decode one message (raises ``EOFError`` when the other end is gone)."""
    return decode(read_message(conn.fileno()))


# multiprocessing.Connection's framing: a 4-byte big-endian length, then the message (a length
# of -1 announces an 8-byte one, for messages of 2 GiB and more).
_HEADER = struct.Struct("!i")
_LONG_HEADER = struct.Struct("!Q")
_CONCATENATED_UP_TO = 16384  # as Connection: larger messages are written after their header


def write_message(fd: int, data: bytes) -> None:
    """Write one message to a pipe end, framed as ``Connection.send_bytes`` frames it.

    Straight onto the file descriptor: ``send_bytes`` checks the connection and builds
    memoryviews in Python on every call, which costs more than the system call on the step
    path.  A small message goes out in a single write, header included, so it never lies
    half-written in the pipe.
    """
    size = len(data)
    if size <= _CONCATENATED_UP_TO:
        framed = _HEADER.pack(size) + data
        written = os.write(fd, framed)  # a pipe takes a small write whole: one call, no loop
        if written < len(framed):
            _write(fd, memoryview(framed)[written:])
        return
    if size > 0x7FFFFFFF:
        _write(fd, _HEADER.pack(-1))
        _write(fd, _LONG_HEADER.pack(size))
    else:
        _write(fd, _HEADER.pack(size))
    _write(fd, data)


def read_message(fd: int) -> bytes | bytearray:
    """Read one message that :func:`write_message` (or ``Connection.send_bytes``) wrote.

    Raises:
        EOFError: the other end is gone (nothing of a message was read).
        OSError: the pipe ended in the middle of a message.
    """
    (size,) = _HEADER.unpack(_read(fd, 4))
    if size == -1:
        (size,) = _LONG_HEADER.unpack(_read(fd, 8))
    return _read(fd, size)


def read_only_message(fd: int, start: bytes | None = None) -> bytes | bytearray:
    """Read the one message a pipe can hold, with a single read when it has arrived whole.

    Only for a pipe whose writer sends nothing after this message until it is answered (a
    worker owing a single reply): a read larger than the message then cannot take bytes of the
    next one.  Saves the second system call of :func:`read_message` on every step.
    ``start``: what the caller already read of it, with ``os.read(fd, READ_SIZE)``.
    """
    chunk = os.read(fd, READ_SIZE) if start is None else start
    if not chunk:
        raise EOFError
    if len(chunk) >= 4 and (size := _HEADER.unpack_from(chunk)[0]) != -1:
        if len(chunk) == 4 + size:  # the whole message, arrived at once: the step's case
            return chunk[4:]
        start = 4
    else:
        start, size = _frame(chunk)
    while size < 0:  # the header itself came in parts
        chunk += _read(fd, start - len(chunk))
        start, size = _frame(chunk)
    missing = start + size - len(chunk)
    if missing == 0:
        return chunk[start:]
    if missing < 0:
        raise OSError(f"{-missing} bytes followed a message that had to be the pipe's only one")
    return chunk[start:] + _read(fd, missing)


class MessageReader:
    """Reads the messages of a pipe end that nothing else reads or polls, as many bytes at a
    time as have arrived: a small message costs one read, not two (its header, then its body).

    For a worker's end of its pipe, which it only ever reads blocking.  The trainer's ends are
    polled, and bytes kept here would be invisible to a poll, so the trainer reads with
    :func:`read_message`, exactly a message at a time.
    """

    __slots__ = ("fd", "_buffer")

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self._buffer: bytes | bytearray = b""

    def read(self) -> bytes | bytearray:
        """The next message (raises ``EOFError`` when the other end is gone between messages,
        ``OSError`` when it is gone in the middle of one)."""
        buffer = self._buffer
        if not buffer:
            buffer = os.read(self.fd, READ_SIZE)
            if not buffer:
                raise EOFError
            # One whole message, the common case, without _frame's call.
            if len(buffer) >= 4 and _HEADER.unpack_from(buffer)[0] == len(buffer) - 4:
                return buffer[4:]
        while True:
            start, size = _frame(buffer)
            if size >= 0 and len(buffer) >= start + size:
                self._buffer = buffer[start + size :]
                return buffer[start : start + size]
            chunk = os.read(self.fd, max(READ_SIZE, start + size - len(buffer)))
            if not chunk:
                raise OSError("got end of file during message")
            if type(buffer) is bytes:
                buffer = bytearray(buffer)
            buffer += chunk


READ_SIZE = 65536  # a pipe's buffer on Linux: a reply that fits comes in one read


def _frame(buffer: bytes | bytearray) -> tuple[int, int]:
    """Where the message at the start of ``buffer`` begins and its size (-1: header incomplete)."""
    if len(buffer) < 4:
        return 4, -1
    (size,) = _HEADER.unpack_from(buffer)
    if size != -1:
        return 4, size
    if len(buffer) < 12:
        return 12, -1
    return 12, _LONG_HEADER.unpack_from(buffer, 4)[0]


def _write(fd: int, buf: bytes) -> None:
    written = os.write(fd, buf)
    while written < len(buf):
        written += os.write(fd, memoryview(buf)[written:])


def _read(fd: int, size: int) -> bytes | bytearray:
    """Exactly ``size`` bytes: one read when they are all there, as a small message is."""
    chunk = os.read(fd, size)
    if len(chunk) == size:
        return chunk
    if not chunk:
        raise EOFError
    buf = bytearray(chunk)
    remaining = size - len(chunk)
    while remaining:
        chunk = os.read(fd, remaining)
        if not chunk:
            raise OSError("got end of file during message")
        buf += chunk
        remaining -= len(chunk)
    return buf


def pack_array(array: np.ndarray) -> PackedArray:
    """An ndarray as ``(raw bytes, dtype string, shape)``, the cheapest form to pickle."""
    return (array.tobytes(), array.dtype.str, array.shape)


def unpack_array(packed: PackedArray) -> np.ndarray:
    """The writable ndarray that :func:`pack_array` packed (same dtype, shape and values)."""
    data, dtype, shape = packed
    # bytearray, not bytes: an env may legitimately write into the action it was given.
    return np.frombuffer(bytearray(data), dtype=dtype).reshape(shape)


class RemoteFailure:
    """An exception raised inside a worker, in a form that always survives the pipe.

    The original exception object is sent when it pickles, so the manager can re-raise the
    very same type with the very same arguments.  When it does not pickle (a lambda in its
    args, a class defined in ``__main__`` under spawn, ...), its type name and message are
    kept instead and the manager raises a ``RuntimeError`` that says so; so it does for an
    exception that is no ``Exception`` (an env's own ``KeyboardInterrupt``), which raised as
    such in the trainer would pass for the user's Ctrl-C.  An exception whose ``str()`` or
    traceback cannot be made still reports its type.  ``context`` (when given) says where
    it happened, as a note.
    """

    __slots__ = ("exception", "type_name", "message", "traceback", "env_index")

    def __init__(self, exc: BaseException, env_index: int | None, context: str | None = None) -> None:
        self.type_name = type(exc).__qualname__
        self.message = _describe(str, exc)
        if context is not None:
            with contextlib.suppress(Exception):
                exc.add_note(f"({context})")
        self.traceback = _describe(
            lambda e: "".join(traceback.format_exception(type(e), e, e.__traceback__)), exc
        )
        self.env_index = env_index
        self.exception: BaseException | None = None
        if isinstance(exc, Exception):
            try:
                # Prove the round trip here, where a failure can still be handled.
                pickle.loads(pickle.dumps(exc))
                self.exception = exc
            except Exception:
                pass

    def __getstate__(self) -> tuple:
        exc = self.exception
        if exc is not None:
            # The traceback object cannot be pickled and its text is already in self.traceback.
            exc = exc.with_traceback(None)
        return (exc, self.type_name, self.message, self.traceback, self.env_index)

    def __setstate__(self, state: tuple) -> None:
        self.exception, self.type_name, self.message, self.traceback, self.env_index = state


def _describe(render: Callable[[BaseException], str], exc: BaseException) -> str:
    """``render(exc)``, or what can still be said when the exception refuses (its ``__str__``
    raises)."""
    try:
        return render(exc)
    except Exception as failure:
        return f"<{type(exc).__qualname__}; printing it raised {type(failure).__qualname__}>"
