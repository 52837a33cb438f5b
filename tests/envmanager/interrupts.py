"""Real SIGINTs at chosen moments of the trainer's pipe traffic, where a Ctrl-C can land.

A profile hook watches the calls the trainer's thread makes inside the pipe reading and writing
of :mod:`envmanager.transport.protocol` and raises a real SIGINT (through
``signal.raise_signal``, so Python's own handler turns it into ``KeyboardInterrupt``) at the
moment the test chose: between two reads of one reply, or between a request's header and body.
"""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from envmanager.transport import protocol

Moment = Callable[[FrameType, str, Any], bool]


@contextmanager
def ctrl_c_when(moment: Moment) -> Iterator[None]:
    """Send this process a SIGINT at the first profile event of this thread where ``moment`` holds."""

    def hook(frame: FrameType, event: str, arg: Any) -> None:
        if moment(frame, event, arg):
            sys.setprofile(None)
            signal.raise_signal(signal.SIGINT)

    sys.setprofile(hook)
    try:
        yield
    finally:
        sys.setprofile(None)


def mid_read(frame: FrameType, event: str, arg: Any) -> bool:
    """About to read more of a message whose first bytes were read already."""
    if event != "c_call" or arg is not os.read or not is_protocol_frame(frame, "_read"):
        return False
    local = frame.f_locals
    return local["size"] > 8 and 0 < local.get("remaining", 0) < local["size"]


def between_header_and_body(frame: FrameType, event: str, arg: Any) -> bool:
    """The 4-byte header of a large message is written and its body is not."""
    return is_write_done(frame, event, arg) and is_protocol_frame(frame, "_write") and len(frame.f_locals["buf"]) == 4


def after_request(number: int) -> Moment:
    """Just after the ``number``-th small request (header and body in one write) was written."""
    seen = 0

    def moment(frame: FrameType, event: str, arg: Any) -> bool:
        nonlocal seen
        if is_write_done(frame, event, arg):
            seen += 1
        return seen == number

    return moment


def is_write_done(frame: FrameType, event: str, arg: Any) -> bool:
    """The protocol has just written (part of) a message to a pipe: a small message whole, in
    ``write_message``, or a large one's header or body, in ``_write``."""
    return (
        event == "c_return"
        and arg is os.write
        and (is_protocol_frame(frame, "write_message") or is_protocol_frame(frame, "_write"))
    )


def is_protocol_frame(frame: FrameType, function: str) -> bool:
    return frame.f_code.co_name == function and frame.f_code.co_filename == protocol.__file__


def entering(module: Any, function: str) -> Moment:
    """A call of ``module``'s function named ``function`` begins."""
    return lambda frame, event, arg: (
        event == "call" and frame.f_code.co_name == function and frame.f_code.co_filename == module.__file__
    )
