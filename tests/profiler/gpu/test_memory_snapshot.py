"""Specification of MXNet's ``gpu_memory_profile_filename_prefix``: with ``profile_memory`` on, the
CUDA allocator's history is recorded and each dump writes its snapshot beside the outputs
(profiler.gpu.device_memory, profiler.control.controls). A fake history stands in for
torch.cuda.memory (CI has no GPU)."""

from __future__ import annotations

import os
import pickle
from typing import Iterator

import pytest

import profiler
from profiler.gpu import device_memory


class FakeHistory:
    def __init__(self, reason: str | None = None) -> None:
        self.reason = reason
        self.started = 0

    def available(self):
        return self.reason

    def start(self):
        self.started += 1

    def stop(self):
        pass

    def snapshot(self):
        return {"segments": [{"device": 0, "total_size": 2 ** 21}], "device_traces": [[]]}


@pytest.fixture
def history() -> Iterator[FakeHistory]:
    fake = FakeHistory()
    device_memory.set_memory_history(fake)
    yield fake
    device_memory.stop_memory_history()
    device_memory.set_memory_history(None)


def test_a_dump_writes_the_allocator_s_snapshot_under_the_prefix(tmp_path, history):
    prefix = tmp_path / "gpu_memory"
    profiler.set_config(summaries_dir=str(tmp_path), formats="timers", profile_memory=True,
                        dump_period=3600.0, gpu_memory_profile_filename_prefix=str(prefix))
    profiler.set_state("run")
    written = profiler.dump()
    snapshot = tmp_path / f"gpu_memory-pid_{os.getpid()}.pickle"
    assert snapshot in written
    assert pickle.loads(snapshot.read_bytes())["segments"][0]["total_size"] == 2 ** 21


def test_without_a_gpu_no_snapshot_is_written(tmp_path, history):
    history.reason = "torch.cuda.is_available() is False"
    profiler.set_config(summaries_dir=str(tmp_path), formats="timers", profile_memory=True,
                        dump_period=3600.0, gpu_memory_profile_filename_prefix=str(tmp_path / "gpu"))
    profiler.set_state("run")
    written = profiler.dump()
    assert not any(path.suffix == ".pickle" for path in written) and history.started == 0


def test_without_profile_memory_no_history_is_recorded(tmp_path, history):
    profiler.set_config(summaries_dir=str(tmp_path), formats="timers", dump_period=3600.0)
    profiler.set_state("run")
    profiler.dump()
    assert history.started == 0
