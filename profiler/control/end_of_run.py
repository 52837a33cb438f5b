"""One last action when the program ends: a normal exit, an uncaught exception or SIGTERM.

``profiler.control.controls`` arms it with its dump once outputs are configured, so that the files are
written without an explicit ``dump()`` call, as ML-Agents writes ``{run_id}_timers.json``:

* a normal exit, ``sys.exit`` and an uncaught exception end through the interpreter's shutdown,
  which runs :mod:`atexit` handlers (after the traceback is printed);
* SIGTERM's default action kills the process without any of that, so a handler runs the action
  first, then lets the signal do what it did before: the program still ends killed by SIGTERM
  (exit status 143 to a shell), or calls the handler the program had installed itself, or keeps
  ignoring it;
* SIGKILL cannot be caught: what survives it is the last periodic dump (``continuous_dump``),
  complete because every file is replaced atomically.

The action runs at most once per arming, and only in the process that armed it: a worker forked
from the trainer inherits the registration, but must not write its own empty timers over the
trainer's files when it exits.
"""

from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

__all__ = ["arm", "disarm", "is_armed"]

_lock = threading.RLock()
_action: Callable[[], None] | None = None
_armed_in_pid = 0
_exit_handler_registered = False
_sigterm_handled = False
_handler_before: Any = None
_terminating = False


def arm(action: Callable[[], None]) -> None:
    """Run ``action`` when this process ends (see the module docstring), replacing any action
    armed before."""
    global _action, _armed_in_pid, _exit_handler_registered
    with _lock:
        _action = action
        _armed_in_pid = os.getpid()
        if not _exit_handler_registered:
            atexit.register(_run, consume=True)
            _exit_handler_registered = True
        _handle_sigterm()


def disarm() -> None:
    """Forget the armed action (the SIGTERM handler stays, and passes the signal on as before)."""
    global _action
    with _lock:
        _action = None


def is_armed() -> bool:
    return _action is not None and _armed_in_pid == os.getpid()


def _run(*, consume: bool) -> None:
    """Run the armed action, in the process that armed it; with ``consume``, only this once."""
    global _action
    with _lock:
        action = _action
        if consume:
            _action = None
        if action is None or _armed_in_pid != os.getpid():
            return
    try:
        action()
    except Exception as error:  # noqa: BLE001 - the program is ending: say why, never a traceback
        print(f"rlprof: the end-of-run dump failed: {type(error).__name__}: {error}", file=sys.stderr)


def _handle_sigterm() -> None:
    """Install the SIGTERM handler, once, in front of the program's own (only the main thread
    may install one). A SIGTERM the program ignores, or handles in C, is left alone."""
    global _sigterm_handled, _handler_before
    if _sigterm_handled or threading.current_thread() is not threading.main_thread():
        return
    before = signal.getsignal(signal.SIGTERM)
    if before is signal.SIG_IGN or before is None:
        return
    _handler_before = before
    signal.signal(signal.SIGTERM, _on_sigterm)
    _sigterm_handled = True


def _on_sigterm(signal_number: int, frame: Any) -> None:
    global _terminating
    if _terminating:  # a second SIGTERM while the first one's dump is being written
        return
    _terminating = True
    program_handles_it = callable(_handler_before)
    try:
        # A program with its own handler may go on (finish an epoch, then exit): the action
        # stays armed, so the files written at its exit hold that too.
        _run(consume=not program_handles_it)
    finally:
        _terminating = False
    if program_handles_it:
        _handler_before(signal_number, frame)
    else:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)
