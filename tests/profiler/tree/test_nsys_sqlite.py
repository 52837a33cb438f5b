"""Specification of reading an Nsight Systems SQLite export as an rlprof tree
(``profiler.tree.nsys_sqlite``, the ``load_nvprof`` role): real SQLite files with the tables and
columns ``nsys export --type sqlite`` writes, built by ``nsys_exports``."""

from __future__ import annotations

import json
import re
import sqlite3

import pytest

from nsys_exports import NsysExport, global_tid
from profiler import load_timing_tree
from profiler.cli.commands import main
from profiler.tree.nsys_sqlite import read_nsys_sqlite
from profiler.tree.timer_text import TimerFileError

TRAINER = global_tid(4242, 4242)
BACKWARD_THREAD = global_tid(4242, 4250)
WORKER = global_tid(4250, 4250)


def child(node, name):
    return next(item for item in node["children"] if item["name"] == name)


@pytest.fixture
def capture(tmp_path):
    """What ``emit_nvtx`` under ``nsys profile`` gives: rlprof's ``step``/``update`` ranges in the
    rlprof domain (registered strings, seq as payload), PyTorch's autograd ranges inside them, and
    kernels launched from them; a worker process with its own rlprof range."""
    export = NsysExport(tmp_path / "capture.sqlite")
    export.domain(1, "rlprof", TRAINER)
    export.category(1, 1, "trainer (pid 4242)", TRAINER)
    export.category(1, 2, "worker 3 (pid 4250)", WORKER)
    for step, offset in enumerate((0, 10_000)):
        export.range(offset, offset + 9_000, TRAINER, "step", domain_id=1, category=1, registered=True, payload=2 * step)
        export.range(offset + 1_000, offset + 8_000, TRAINER, "update", domain_id=1, category=1, registered=True,
                     payload=2 * step + 1)
        export.range(offset + 2_000, offset + 3_000, TRAINER, f"aten::addmm, seq = {step}, sizes = [[3], [3, 3], [3, 3]]")
        export.kernel(offset + 2_500, TRAINER, offset + 4_000, offset + 6_000, "gemm")
        export.range(offset + 5_000, offset + 7_000, BACKWARD_THREAD,
                     f"AddmmBackward0, stashed seq = {step}")
        export.kernel(offset + 5_500, BACKWARD_THREAD, offset + 7_000, offset + 7_500, "gemm_backward")
        export.kernel(offset + 1_500, TRAINER, offset + 2_000, offset + 2_300, "elementwise")
    export.kernel(30_000, TRAINER, 30_000, 31_000, "outside")
    export.range(0, 4_000, WORKER, "env.step", domain_id=1, category=2, registered=True)
    return export.close()


def test_ranges_become_blocks_nested_by_time_with_their_calls(capture):
    tree = load_timing_tree(capture)
    step = child(tree, "step")
    assert step["count"] == 2 and step["total"] == pytest.approx(18e-6)
    update = child(step, "update")
    assert update["total"] == pytest.approx(14e-6)
    addmm = child(update, "aten::addmm")
    assert addmm["count"] == 2 and addmm["object_type"] == "operator"


def test_seq_and_sizes_are_cut_from_names_so_every_call_is_one_block(capture):
    tree = load_timing_tree(capture)
    names = [item["name"] for item in child(child(tree, "step"), "update")["children"]]
    assert names == ["aten::addmm"]
    backward = child(tree, "AddmmBackward0")  # the backward thread's range, outside rlprof's blocks there
    assert backward["count"] == 2 and backward["object_type"] == "operator"


def test_kernels_go_to_the_range_whose_thread_launched_them(capture):
    document = read_nsys_sqlite(capture)
    device = {tuple(entry["path"]): entry for entry in document["device_time"]}
    # step: gemm 2 us + elementwise 0.3 us per run, launched inside it (nested ranges included)
    assert device[("step",)]["total"] == pytest.approx(2 * 2.3e-6)
    assert device[("step",)]["count"] == 2 and device[("step",)]["mode"] == "nsys"
    assert device[("step", "update")]["total"] == pytest.approx(2 * 2.3e-6)
    assert device[("step", "update", "aten::addmm")]["total"] == pytest.approx(4e-6)
    assert device[("AddmmBackward0",)]["total"] == pytest.approx(1e-6)


def test_an_operator_gets_the_device_self_time_of_the_work_it_launched(capture):
    tree = load_timing_tree(capture)
    entries = {tuple(entry["path"]): entry for entry in tree["operators"]["operators"]}
    assert entries[("step", "update", "aten::addmm")]["device_self"] == pytest.approx(4e-6)
    assert tree["operators"]["source"] == "nsys"


def test_work_launched_outside_every_range_is_counted_apart(capture):
    tree = load_timing_tree(capture)
    assert tree["metadata"]["gpu_work"].endswith("0.000001 s outside every range")


def test_the_trainer_is_the_tree_and_other_processes_are_workers_by_their_category(capture):
    tree = load_timing_tree(capture)
    assert tree["metadata"]["pid"] == "4242"
    [worker] = tree["workers"]
    assert worker["worker_id"] == 3 and worker["pid"] == 4250
    assert child(worker, "env.step")["total"] == pytest.approx(4e-6)


def test_copies_count_as_device_time_too(tmp_path):
    export = NsysExport(tmp_path / "copies.sqlite")
    export.range(0, 1_000, TRAINER, "to_device")
    export.copy(100, TRAINER, 200, 900)
    document = read_nsys_sqlite(export.close())
    assert document["device_time"][0]["total"] == pytest.approx(7e-7)


def test_a_capture_without_cuda_tables_reads_as_ranges_only(tmp_path):
    path = tmp_path / "nvtx_only.sqlite"
    connection = sqlite3.connect(path)
    connection.execute("CREATE TABLE NVTX_EVENTS (start INTEGER NOT NULL, end INTEGER, eventType INTEGER NOT NULL, "
                       "text TEXT, globalTid INTEGER)")
    connection.execute("INSERT INTO NVTX_EVENTS VALUES (0, 500, 59, 'rollout', ?)", (TRAINER,))
    connection.commit()
    connection.close()
    tree = load_timing_tree(path)
    assert child(tree, "rollout")["total"] == pytest.approx(5e-7)
    assert tree["metadata"]["gpu_work"] == "no GPU work in the capture"


def test_rlprof_analyze_reads_a_capture_and_shows_device_self_time(capture, capsys):
    assert main(["analyze", str(capture)]) == 0
    out = capsys.readouterr().out
    assert "step/update" in out
    assert re.search(r"device\s+self", out)
    assert "not recorded (an Nsight Systems capture" in " ".join(out.split())


def test_rlprof_report_writes_a_report_of_a_capture(capture, tmp_path):
    output = tmp_path / "capture.html"
    assert main(["report", str(capture), "-o", str(output)]) == 0
    assert "update" in output.read_text()


@pytest.mark.parametrize("setup, message", [
    ("CREATE TABLE something (a INTEGER)", "it has no NVTX_EVENTS table"),
    ("CREATE TABLE NVTX_EVENTS (start INTEGER, text TEXT)", "NVTX_EVENTS has no 'end' column"),
    ("CREATE TABLE NVTX_EVENTS (start INTEGER, end INTEGER, eventType INTEGER, globalTid INTEGER)",
     "the capture holds no NVTX range"),
])
def test_a_file_that_is_not_a_usable_export_is_one_clear_line(tmp_path, capsys, setup, message):
    path = tmp_path / "bad.sqlite"
    connection = sqlite3.connect(path)
    connection.execute(setup)
    connection.commit()
    connection.close()
    with pytest.raises(TimerFileError, match=message):
        load_timing_tree(path)
    assert main(["analyze", str(path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0] and "Traceback" not in err[0]


def test_a_damaged_database_is_one_clear_line(tmp_path):
    path = tmp_path / "damaged.sqlite"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 200)
    with pytest.raises(TimerFileError, match="damaged.sqlite: (not a readable Nsight Systems export|cannot open)"):
        load_timing_tree(path)


def test_the_export_is_opened_read_only(capture):
    before = capture.read_bytes()
    load_timing_tree(capture)
    assert capture.read_bytes() == before
    assert json.dumps(read_nsys_sqlite(capture))  # the document is plain JSON data


def test_a_range_that_overlaps_another_without_nesting_is_its_sibling(tmp_path):
    export = NsysExport(tmp_path / "overlap.sqlite")
    export.range(0, 1_000, TRAINER, "load")
    export.range(500, 2_000, TRAINER, "compute")  # a start/end range may outlive the one it began in
    tree = load_timing_tree(export.close())
    assert sorted(item["name"] for item in tree["children"]) == ["compute", "load"]


def test_many_kernels_over_many_ranges_are_attributed_each_to_its_own(tmp_path):
    export = NsysExport(tmp_path / "many.sqlite")
    for index in range(2_000):
        start = index * 100
        export.range(start, start + 90, TRAINER, f"step {index % 4}")
        export.kernel(start + 10, TRAINER, start + 20, start + 30)
    document = read_nsys_sqlite(export.close())
    totals = {entry["path"][0]: entry["total"] for entry in document["device_time"]}
    assert totals == {f"step {index}": pytest.approx(500 * 10e-9) for index in range(4)}


@pytest.mark.parametrize("start, end, text", [("soon", 10, "step"), (0, 10, b"\xff\xfe")])
def test_a_value_of_the_wrong_kind_is_one_clear_line(tmp_path, start, end, text):
    export = NsysExport(tmp_path / "odd.sqlite")
    export.connection.execute("INSERT INTO NVTX_EVENTS (start, end, eventType, globalTid, text) VALUES (?, ?, 59, ?, ?)",
                              (start, end, TRAINER, text))
    with pytest.raises(TimerFileError, match="a damaged Nsight Systems export: a value of the wrong kind"):
        load_timing_tree(export.close())
