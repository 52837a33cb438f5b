"""A GPU standing in for CUDA in device-time tests: its events are done when a test says so, and
the device time between two is what the test ran the fake device for (see
profiler.gpu.device_time.DeviceEvents)."""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

from profiler.gpu import device_time, set_device_events


class FakeEvent:
    def __init__(self, device: str, at: float) -> None:
        self.device = device
        self.at = at  # when the fake device reaches it, in seconds
        self.done = False


class FakeDevice:
    """A GPU that reaches events when told to; each event's device time is set by the test."""

    def __init__(self) -> None:
        self.recorded: list[FakeEvent] = []
        self.device_clock = 0.0
        self.synchronized: list[str] = []
        self.waited = 0

    def record(self, device: str) -> FakeEvent:
        event = FakeEvent(device, self.device_clock)
        self.recorded.append(event)
        return event

    def is_done(self, event: FakeEvent) -> bool:
        return event.done

    def wait(self, event: FakeEvent) -> None:
        self.waited += 1
        event.done = True

    def elapsed(self, start: FakeEvent, end: FakeEvent) -> float:
        assert start.done or end.done
        return end.at - start.at

    def synchronize(self, device: str) -> None:
        self.synchronized.append(device)

    def run_for(self, seconds: float) -> None:
        self.device_clock += seconds

    def finish_all(self) -> None:
        for event in self.recorded:
            event.done = True


@contextmanager
def fake_gpu() -> Iterator[FakeDevice]:
    """A FakeDevice as the device-event backend while the block runs; device time cleared after."""
    fake = FakeDevice()
    set_device_events(fake)
    try:
        yield fake
    finally:
        set_device_events(None)
        device_time.clear_device_times()
