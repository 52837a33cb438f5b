"""When a dead worker may be replaced instead of failing the run (``restart_on_failure``)."""

from __future__ import annotations

__all__ = ["RestartPolicy", "DEFAULT_MAX_RESTARTS"]

DEFAULT_MAX_RESTARTS = 3


class RestartPolicy:
    """A budget of restarts for the whole manager.

    A budget rather than "always": a worker that dies again and again (an env that segfaults
    on every reset) must end the run with an error, not loop forever.

    ``restart_on_failure`` is False (never restart), True (up to ``DEFAULT_MAX_RESTARTS``) or
    an int, the maximum number of restarts.
    """

    __slots__ = ("max_restarts", "restarts")

    def __init__(self, restart_on_failure: bool | int) -> None:
        if isinstance(restart_on_failure, bool):
            max_restarts = DEFAULT_MAX_RESTARTS if restart_on_failure else 0
        elif isinstance(restart_on_failure, int) and restart_on_failure >= 0:
            max_restarts = restart_on_failure
        else:
            raise ValueError(
                f"`restart_on_failure` must be a bool or an int >= 0, got {restart_on_failure!r}."
            )
        self.max_restarts = max_restarts
        self.restarts = 0

    def allow(self) -> bool:
        """Spend one restart if any is left."""
        if self.restarts >= self.max_restarts:
            return False
        self.restarts += 1
        return True
