"""Closing, when the interpreter exits, a manager the program never closed.

Left open, a manager used to meet the interpreter's teardown: with ``daemon=False``,
``multiprocessing``'s own exit hook waits for the workers, which wait for requests, so the
interpreter never exits; with ``daemon=True`` that hook kills the workers and ``__del__``
runs during module teardown, when the timers can no longer be written (imports fail).

So each live manager registers an exit hook that closes it normally, as ``close()`` would:
the workers send their last timer data and the timers are dumped.  The hook holds the
manager weakly, so a manager the program drops is still collected, and ``close()``
unregisters it.  It runs before ``multiprocessing``'s hook, which was registered earlier
(exit hooks run last-registered first).  A process forked from the trainer inherits the
hook but does not own the workers: there it does nothing.
"""

from __future__ import annotations

import atexit
import os
import warnings
import weakref
from typing import Any, Callable

__all__ = ["close_at_exit"]


def close_at_exit(manager: Any) -> Callable[[], None]:
    """Have ``manager.close()`` called at interpreter exit; return the function that cancels it."""
    reference = weakref.ref(manager)
    owner_pid = os.getpid()

    def close_if_open() -> None:
        open_manager = reference()
        if open_manager is None or os.getpid() != owner_pid:
            return
        try:
            open_manager.close()
        except Exception as exc:  # at exit, a clear line beats a traceback nobody can act on
            warnings.warn(
                f"rlprof: closing {type(open_manager).__name__} at exit failed: {type(exc).__name__}: {exc}",
                RuntimeWarning,
                stacklevel=1,
            )

    atexit.register(close_if_open)
    return lambda: atexit.unregister(close_if_open)
