"""Where another process's clock stands against ours, estimated from round trips.

Processes of one machine read one monotonic clock (``time.perf_counter`` is CLOCK_MONOTONIC on
Linux), so their timestamps compare as they are. Two machines' monotonic clocks share nothing:
each counts from its own boot, and they drift apart by some parts per million. To put a remote
process's timestamps on our clock we need the **offset** (what to add to its readings) and how
far we can trust it.

A round trip bounds it. We read our clock (``sent_at``), ask the other process for its clock
(``remote_at``), and read ours again when the answer arrives (``received_at``). Its reading was
taken somewhere between our two, so::

    sent_at - remote_at  <=  offset  <=  received_at - remote_at

The middle of that interval is the estimate and half its width (half the round trip) the
**uncertainty**: the true offset lies within ``offset ± uncertainty`` whatever the network did,
as long as the clocks do not drift during the round trip. The shortest round trip of a few gives
the tightest bound (the idea behind NTP and Cristian's algorithm). Clocks drift, so the estimate
is renewed periodically from fresh round trips rather than refined forever from old ones.
"""

from __future__ import annotations

import math
import socket
from typing import Any

__all__ = ["ClockOffset", "RoundTrip", "monotonic_clock_id"]

RoundTrip = tuple[float, float, float]
"""``(sent_at, remote_at, received_at)``: our clock, the other clock, our clock."""


class ClockOffset:
    """The offset of one remote clock: seconds to add to its readings to get ours.

    Call :meth:`update` with the round trips of each synchronisation; the shortest of them sets
    ``offset`` and ``uncertainty``. Before the first update ``offset`` is 0.0 and
    ``uncertainty`` infinite (nothing is known). :meth:`share_clock` records that the other
    process reads our very clock (same machine): offset 0, no uncertainty.
    """

    __slots__ = ("offset", "uncertainty", "updates", "shared", "first_offset")

    def __init__(self) -> None:
        self.offset = 0.0
        self.uncertainty = math.inf
        self.updates = 0
        self.shared = False
        self.first_offset: float | None = None

    def share_clock(self) -> None:
        """The other process reads our clock: nothing to estimate, nothing to doubt."""
        self.offset = 0.0
        self.uncertainty = 0.0
        self.shared = True

    def update(self, round_trips: list[RoundTrip]) -> None:
        """Estimate afresh from one synchronisation's round trips (the shortest one counts).

        Raises:
            ValueError: no round trips, or one whose answer arrived before it was sent.
        """
        if not round_trips:
            raise ValueError("a clock offset needs at least one round trip")
        for sent_at, _, received_at in round_trips:
            if not received_at >= sent_at:
                raise ValueError(
                    f"a round trip cannot end before it starts (sent at {sent_at!r}, "
                    f"received at {received_at!r})"
                )
        if self.shared:
            self.updates += 1
            return
        sent_at, remote_at, received_at = min(round_trips, key=lambda trip: trip[2] - trip[0])
        self.offset = (sent_at + received_at) / 2.0 - remote_at
        self.uncertainty = (received_at - sent_at) / 2.0
        self.updates += 1
        if self.first_offset is None:
            self.first_offset = self.offset

    @property
    def drift(self) -> float:
        """How far the estimate moved since the first one (seconds): the clocks' drift over the
        run, within the two estimates' uncertainties."""
        return 0.0 if self.first_offset is None else self.offset - self.first_offset

    def to_ours(self, remote_time: float) -> float:
        """A reading of the other clock, on ours."""
        return remote_time + self.offset

    def section(self) -> dict[str, Any]:
        """The estimate as a JSON-ready dict, for a dump (``uncertainty_seconds`` is None while
        nothing is known)."""
        return {
            "offset_seconds": self.offset,
            "uncertainty_seconds": self.uncertainty if math.isfinite(self.uncertainty) else None,
            "shared_clock": self.shared,
            "estimates": self.updates,
            "drift_seconds": self.drift,
        }


def monotonic_clock_id() -> str:
    """Names the monotonic clock this process reads: equal in two processes exactly when their
    timestamps compare as they are.

    On Linux, the kernel's boot id: every process under one running kernel, containers included,
    reads one CLOCK_MONOTONIC, and a reboot starts a new one. Elsewhere, the host name.
    """
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as boot_id:
            return "boot:" + boot_id.read().strip()
    except OSError:
        return "host:" + socket.gethostname()
