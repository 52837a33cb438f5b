"""Device time without editing each block: set_config(device=...) and Profiler(profile_device=...)
make every hierarchical_timer block a device block (profiler.gpu.device_time.set_default_device).
The GPU is a fake event backend standing in for CUDA; the CPU-only cases run real torch."""

from __future__ import annotations

import sys
from typing import Iterator

import pytest
from fake_device import FakeDevice, fake_gpu

import profiler
from profiler import Profiler, hierarchical_timer
from profiler.gpu import DeviceTimingUnavailableError, set_default_device
from profiler.timing import timers
from profiler.tree.timer_tree import get_timer_tree


@pytest.fixture
def gpu() -> Iterator[FakeDevice]:
    with fake_gpu() as fake:
        yield fake
        set_default_device(None)


def device_paths() -> dict[tuple[str, ...], dict]:
    return {tuple(entry["path"]): entry for entry in get_timer_tree().get("device_time", [])}


def test_a_default_device_times_blocks_that_name_none(gpu):
    set_default_device("cuda")
    with hierarchical_timer("update"):
        gpu.run_for(0.5)
    assert device_paths()[("update",)]["total"] == pytest.approx(0.5)


def test_a_block_that_names_its_device_keeps_it(gpu):
    set_default_device("cuda")
    with hierarchical_timer("update", device="cuda:1"):
        gpu.run_for(0.5)
    assert device_paths()[("update",)]["device"] == "cuda:1"


def test_without_a_default_device_blocks_are_host_only_again(gpu):
    set_default_device("cuda")
    set_default_device(None)
    with hierarchical_timer("update"):
        gpu.run_for(0.5)
    assert ("update",) not in device_paths() and timers.default_device() is None


def test_set_config_device_makes_every_block_a_device_block(gpu):
    profiler.set_config(device="cuda")
    profiler.set_state("run")
    try:
        with hierarchical_timer("update"):
            gpu.run_for(0.25)
    finally:
        profiler.set_state("stop")
        profiler.set_config(device=None)
    assert device_paths()[("update",)]["total"] == pytest.approx(0.25)


def test_a_session_with_profile_device_times_its_blocks_on_the_gpu(gpu, tmp_path):
    with Profiler(path=tmp_path, formats=["timers.json"], profile_device=True):
        with hierarchical_timer("update"):
            gpu.run_for(0.25)
    assert device_paths()[("update",)]["mode"] == "events"
    assert timers.default_device() is None  # the session's end restored it


def test_profile_device_false_times_the_host_only(gpu, tmp_path):
    with Profiler(path=tmp_path, formats=["timers.json"], profile_device=False):
        with hierarchical_timer("update"):
            gpu.run_for(0.25)
    assert ("update",) not in device_paths()


def test_a_default_device_without_a_gpu_is_refused_naming_what_is_missing():
    pytest.importorskip("torch")
    if sys.modules["torch"].cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceTimingUnavailableError, match="needs a GPU"):
        set_default_device("cuda")
    assert timers.default_device() is None


def test_set_config_device_without_a_gpu_changes_nothing():
    pytest.importorskip("torch")
    if sys.modules["torch"].cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.raises(DeviceTimingUnavailableError):
        profiler.set_config(device="cuda")
    assert timers.default_device() is None


def test_profile_device_true_without_a_gpu_says_why_in_one_warning(tmp_path):
    pytest.importorskip("torch")
    if sys.modules["torch"].cuda.is_available():
        pytest.skip("this machine has a GPU")
    with pytest.warns(RuntimeWarning, match="device time is not recorded: .*needs a GPU"):
        session = Profiler(path=tmp_path, formats=["timers.json"], profile_device=True)
    with session:
        with hierarchical_timer("update"):
            pass
    assert "device_time" not in get_timer_tree()


def test_the_default_session_is_quiet_and_host_only_without_a_gpu(tmp_path, recwarn):
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        pytest.skip("this machine has a GPU: the default session times it (gpu_check checks that)")
    with Profiler(path=tmp_path, formats=["timers.json"]):
        with hierarchical_timer("update"):
            pass
    assert "device_time" not in get_timer_tree() and not recwarn.list
