"""set_config(emit_nvtx=True): the config key for NVTX ranges, checked like every other key."""

from __future__ import annotations

import sys

import pytest
from nvtx_calls import skip_without_nvtx_package

import profiler
from profiler.gpu import emit_nvtx, is_emitting, nvtx_bridge, nvtx_settings
from profiler.gpu.nvtx_bridge import NvtxUnavailableError


def test_emit_nvtx_key_starts_and_stops_the_ranges():
    skip_without_nvtx_package()
    profiler.set_config(emit_nvtx=True)
    assert nvtx_settings() is not None and not nvtx_settings().record_shapes
    profiler.set_config(emit_nvtx=False)
    assert not is_emitting()


def test_record_shapes_key_switches_shapes_on_the_running_ranges():
    skip_without_nvtx_package()
    profiler.set_config(emit_nvtx=True, record_shapes=True)
    assert nvtx_settings().record_shapes
    profiler.set_config(record_shapes=False)
    assert nvtx_settings() is not None and not nvtx_settings().record_shapes


def test_a_bad_value_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="emit_nvtx must be True or False"):
        profiler.set_config(emit_nvtx="on")
    assert not is_emitting()


def test_without_a_backend_the_key_is_refused_and_nothing_changes(monkeypatch):
    monkeypatch.setitem(sys.modules, "nvtx", None)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(NvtxUnavailableError, match="rlprof\\[nvtx\\]"):
        profiler.set_config(emit_nvtx=True, run_id="changed")
    assert not profiler.control.controls.get_settings().emit_nvtx
    assert profiler.control.controls.get_settings().run_id != "changed"


def test_the_key_leaves_an_emit_nvtx_block_of_the_program_alone():
    skip_without_nvtx_package()
    with emit_nvtx(record_shapes=True, backend="nvtx"):
        profiler.set_config(emit_nvtx=True)
        profiler.set_config(emit_nvtx=False)
        assert nvtx_settings().record_shapes
    assert nvtx_bridge.nvtx_settings() is None
