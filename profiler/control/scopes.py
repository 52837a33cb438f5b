"""MXNet's ``profiler.scope``: a name prefix in force for the code inside a ``with`` block.

Scopes nest as MXNet's do: the name gets a trailing ``:``, and inside another scope it is
appended to that scope's name (``"train:"`` then ``"train:rollout:"``) unless
``append_mode=False``. The scope lives in a :mod:`contextvars` variable, so threads and asyncio
tasks each see their own. Every block that closes while a scope is in force records it: the dump
lists, per block, the scopes it ran in (``"scopes"``).

Recording costs nothing while no scope is open anywhere: the first scope to open installs an
exit hook on the timers (``profiler.timing.block_hooks.set_exit_hook``) and the last to close removes it.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from profiler.timing import block_hooks
from profiler.timing.timers import TimerNode

__all__ = ["DEFAULT_SCOPE", "current_scope", "note_current_scope", "scope"]

DEFAULT_SCOPE = "<unk>:"
"""MXNet's name for "no scope": blocks record no scope while it is in force."""

_current = contextvars.ContextVar("rlprof_profiler_scope", default=DEFAULT_SCOPE)
_open_lock = threading.Lock()
_open_scopes = 0


def current_scope() -> str:
    """The scope in force here (:data:`DEFAULT_SCOPE` outside any)."""
    return _current.get()


@contextmanager
def scope(name: str = DEFAULT_SCOPE, append_mode: bool = True) -> Iterator[str]:
    """Put the scope ``name`` in force inside the ``with`` block; ``as`` gives its full name."""
    global _open_scopes
    if not isinstance(name, str) or not name:
        raise ValueError(f"scope: the name must be a non-empty string, got {name!r}")
    if not name.endswith(":"):
        name += ":"
    outer = _current.get()
    if append_mode and outer != DEFAULT_SCOPE:
        name = outer + name
    token = _current.set(name)
    with _open_lock:
        _open_scopes += 1
        if _open_scopes == 1:
            block_hooks.set_exit_hook(note_current_scope)
    try:
        yield name
    finally:
        _current.reset(token)
        with _open_lock:
            _open_scopes -= 1
            if _open_scopes == 0:
                block_hooks.set_exit_hook(None)


def note_current_scope(node: TimerNode) -> None:
    """Record on ``node`` the scope in force, if any (a block's run just ended here)."""
    name = _current.get()
    if name != DEFAULT_SCOPE:
        node.note_scope(name)
