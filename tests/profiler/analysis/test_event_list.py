"""Specification of ``load_nvprof``'s EventList (profiler.analysis.event_list): a capture read back,
or any rlprof dump, as PyTorch's ``EventList`` with ``table()`` and ``key_averages()``, on real
SQLite files built as ``nsys export`` writes them and on a real torch run."""

from __future__ import annotations

import pytest

from nsys_exports import NsysExport, global_tid
import profiler
from profiler import Profiler, TimerFileError

TRAINER = global_tid(4242, 4242)
BACKWARD_THREAD = global_tid(4242, 4250)


@pytest.fixture
def capture(tmp_path):
    """Two steps, each an ``update`` range with PyTorch's ``aten::addmm`` inside launching a 2 us
    kernel, and a backward range on another thread launching a 0.5 us one."""
    export = NsysExport(tmp_path / "capture.sqlite")
    export.domain(1, "rlprof", TRAINER)
    for step, offset in enumerate((0, 10_000)):
        export.range(offset, offset + 9_000, TRAINER, "step", domain_id=1, registered=True)
        export.range(offset + 1_000, offset + 8_000, TRAINER, "update", domain_id=1, registered=True)
        export.range(offset + 2_000, offset + 3_000, TRAINER, f"aten::addmm, seq = {step}, sizes = [[3], [3, 3], [3, 3]]")
        export.kernel(offset + 2_500, TRAINER, offset + 4_000, offset + 6_000, "gemm")
        export.range(offset + 5_000, offset + 7_000, BACKWARD_THREAD, f"AddmmBackward0, stashed seq = {step}")
        export.kernel(offset + 5_500, BACKWARD_THREAD, offset + 7_000, offset + 7_500, "gemm_backward")
    return export.close()


def by_key(events):
    return {event.key: event for event in events}


def test_load_nvprof_gives_one_event_per_block_with_torchs_names_in_microseconds(capture):
    events = by_key(profiler.load_nvprof(capture))
    assert (events["step"].count, events["step"].cpu_time_total) == (2, pytest.approx(18.0))
    assert events["step"].self_cpu_time_total == pytest.approx(4.0)
    assert events["update"].cpu_time == pytest.approx(7.0)
    assert events["aten::addmm"].is_operator and events["aten::addmm"].path == ("step", "update", "aten::addmm")


def test_an_operator_has_the_device_time_of_the_kernels_it_launched(capture):
    events = by_key(profiler.load_nvprof(capture))
    assert events["aten::addmm"].self_device_time_total == pytest.approx(4.0)
    assert events["aten::addmm"].self_cuda_time_total == pytest.approx(4.0)
    assert events["step"].device_time_total == pytest.approx(4.0)
    assert events["step"].self_device_time_total == pytest.approx(0.0)
    assert events["AddmmBackward0"].device_time == pytest.approx(0.5)


def test_table_prints_torchs_columns_sorted_and_limited(capture):
    text = profiler.load_nvprof(capture).table(sort_by="self_cuda_time_total", row_limit=2)
    lines = text.splitlines()
    assert lines[1].split()[:4] == ["Name", "Self", "CPU", "%"]
    assert "Self CUDA" in lines[1] and lines[1].rstrip().endswith("# of Calls")
    assert [line.split()[0] for line in lines[3:5]] == ["aten::addmm", "AddmmBackward0"]
    assert lines[-2:] == ["Self CPU time total: 22.0us", "Self CUDA time total: 5.0us"]  # 4 + 12 + 2 + 4; 4 + 1


def test_an_unknown_sort_key_is_refused_naming_the_known_ones(capture):
    with pytest.raises(ValueError, match="sort_by must be one of cpu_time_total, self_cpu_time_total"):
        profiler.load_nvprof(capture).table(sort_by="flops")


def test_key_averages_adds_up_the_blocks_of_one_name(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs these")
    layer, batch = torch.nn.Linear(8, 4), torch.randn(2, 8)
    with Profiler(path=tmp_path, format="timers.json", record_operators=True) as session:
        with profiler.hierarchical_timer("act"):
            layer(batch)
        with profiler.hierarchical_timer("learn"):
            layer(batch)
            layer(batch)
    events = profiler.load_nvprof(session.paths["timers.json"])
    linear_blocks = [event for event in events if event.key == "aten::linear"]
    averaged = by_key(events.key_averages())["aten::linear"]
    assert [block.count for block in linear_blocks] == [1, 2]
    assert averaged.count == 3
    assert averaged.cpu_time_total == pytest.approx(sum(block.cpu_time_total for block in linear_blocks))
    assert "aten::linear" in events.key_averages().table(sort_by="cpu_time_total")


def test_key_averages_by_input_shapes_keeps_shapes_apart(tmp_path):
    torch = pytest.importorskip("torch", reason="torch is not installed; pip install torch runs these")
    layer = torch.nn.Linear(8, 4)
    with Profiler(path=tmp_path, format="timers.json", record_operators=True) as session:
        with profiler.hierarchical_timer("act"):
            layer(torch.randn(2, 8))
        with profiler.hierarchical_timer("learn"):
            layer(torch.randn(16, 8))
    averages = profiler.load_nvprof(session.paths["timers.json"]).key_averages(group_by_input_shapes=True)
    shapes = sorted(event.input_shapes for event in averages if event.key == "aten::linear")
    assert shapes == ["[[16, 8], [4, 8], [4]]", "[[2, 8], [4, 8], [4]]"]


def test_a_file_that_is_not_a_capture_is_one_clear_error(tmp_path):
    path = tmp_path / "nothing.sqlite"
    path.write_bytes(b"not a database")
    with pytest.raises(TimerFileError):
        profiler.load_nvprof(path)
