"""The messages between the manager and its workers: framing on a real pipe, and the fixed-size
wake-ups of a step in shared memory."""

from __future__ import annotations

import os
import threading

import pytest

from envmanager.transport import protocol

# Small, at the concatenation limit, over it (header written apart), over a pipe's buffer.
SIZES = [1, 9, 17, 16384, 16385, 70000]


def written_through_a_pipe(messages: list[bytes], close: bool = True) -> int:
    """The read end of a pipe into which a thread writes ``messages`` (then closes it)."""
    read_end, write_end = os.pipe()

    def write() -> None:
        for message in messages:
            protocol.write_message(write_end, message)
        if close:
            os.close(write_end)

    threading.Thread(target=write, daemon=True).start()
    return read_end


def test_messages_of_every_size_arrive_whole_and_in_order_one_read_at_a_time():
    messages = [os.urandom(size) for size in SIZES]
    read_end = written_through_a_pipe(messages)
    assert [bytes(protocol.read_message(read_end)) for _ in messages] == messages
    with pytest.raises(EOFError):
        protocol.read_message(read_end)
    os.close(read_end)


def test_a_message_reader_splits_what_arrives_together_into_the_messages_that_were_written():
    messages = [os.urandom(size) for size in SIZES + [9, 9, 17]]
    read_end = written_through_a_pipe(messages)
    reader = protocol.MessageReader(read_end)
    assert [bytes(reader.read()) for _ in messages] == messages
    with pytest.raises(EOFError):
        reader.read()
    os.close(read_end)


def test_a_pipe_that_ends_inside_a_message_is_an_os_error_not_a_short_message():
    read_end, write_end = os.pipe()
    os.write(write_end, (100).to_bytes(4, "big") + b"only part of it")
    os.close(write_end)
    with pytest.raises(OSError, match="end of file during message"):
        protocol.MessageReader(read_end).read()
    os.close(read_end)


def test_what_the_protocol_writes_reads_back_through_multiprocessing_connection():
    import multiprocessing

    reader, writer = multiprocessing.Pipe(duplex=False)
    for size in (9, 16385):
        message = os.urandom(size)
        protocol.write_message(writer.fileno(), message)
        assert reader.recv_bytes() == message
    reader.close()
    writer.close()


def test_the_wake_ups_decode_to_the_messages_they_stand_for():
    request = (7, protocol.STEP, protocol.IN_SHARED_MEMORY)
    reply = (7, True, protocol.IN_SHARED_MEMORY, None, 12.5)
    assert protocol.decode(protocol.encode(request)) == request
    assert protocol.decode(protocol.encode(reply)) == reply
    # With timers to ship, the reply is pickled, and the marker is the same object after it.
    with_timers = (7, True, protocol.IN_SHARED_MEMORY, ("payload", 0.0, 0.0, 0), 12.5)
    decoded = protocol.decode(protocol.encode(with_timers))
    assert decoded == with_timers and decoded[2] is protocol.IN_SHARED_MEMORY


@pytest.mark.parametrize("size", SIZES)
def test_the_only_message_in_a_pipe_is_read_whole_whatever_its_size(size):
    message = os.urandom(size)
    read_end = written_through_a_pipe([message])
    assert bytes(protocol.read_only_message(read_end)) == message
    with pytest.raises(EOFError):
        protocol.read_only_message(read_end)
    os.close(read_end)
