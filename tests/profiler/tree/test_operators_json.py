"""Specification of the dump's ``operators`` section on load: kept whole, refused with one line."""

from __future__ import annotations

import json

import pytest

from profiler import load_timing_tree
from profiler.tree.timer_json import TimerFileError

OPERATOR = {"path": ["forward", "aten::addmm"], "flops": 65536, "cpu_memory_bytes": 4096,
            "input_shapes": {"[[16], [64, 32], [32, 16], [], []]": 3}}


def file_with(tmp_path, operators):
    path = tmp_path / "run_timers.json"
    path.write_text(json.dumps({"name": "root", "total": 1.0, "count": 1, "children": [],
                                "operators": operators}))
    return path


def test_an_operators_section_loads_back_with_every_figure(tmp_path):
    section = {"source": "torch.profiler", "device_time": False, "record_shapes": True,
               "with_flops": True, "profile_memory": True, "operators": [OPERATOR]}
    loaded = load_timing_tree(file_with(tmp_path, section))["operators"]
    assert loaded == dict(section, with_stack=False, record_outputs=False, operators=[dict(
        OPERATOR, other_shapes=0, input_dtypes={}, other_dtypes=0, backtraces={}, other_backtraces=0,
        output_shapes={}, other_output_shapes=0)])


def test_output_shapes_and_tensor_bytes_load_back_with_what_the_trace_said(tmp_path):
    operator = dict(OPERATOR, output_shapes={"[[64, 16]]": 3}, tensor_bytes=43584)
    section = {"record_outputs": True, "outputs_unmatched": 2, "operators": [operator]}
    loaded = load_timing_tree(file_with(tmp_path, section))["operators"]
    assert (loaded["record_outputs"], loaded["outputs_unmatched"]) == (True, 2)
    assert (loaded["operators"][0]["output_shapes"], loaded["operators"][0]["tensor_bytes"]) == (
        {"[[64, 16]]": 3}, 43584)


def test_dtypes_and_backtraces_load_back_with_their_call_counts(tmp_path):
    operator = dict(OPERATOR, input_dtypes={"[float32, float32, float32, Scalar, Scalar]": 3},
                    backtraces={"train.py(12): update <- train.py(30): <module>": 3}, other_backtraces=1)
    section = {"with_stack": True, "operators": [operator]}
    loaded = load_timing_tree(file_with(tmp_path, section))["operators"]
    assert loaded["with_stack"] is True
    assert loaded["operators"][0]["input_dtypes"] == operator["input_dtypes"]
    assert (loaded["operators"][0]["backtraces"], loaded["operators"][0]["other_backtraces"]) == (
        operator["backtraces"], 1)


@pytest.mark.parametrize(("operators", "reason"), [
    ([], "'operators' must be an object"),
    ({"operators": [{"path": []}]}, r"operators.operators\[0\]: must be an object with a 'path'"),
    ({"operators": [dict(OPERATOR, flops=-1)]}, r"operators.operators\[0\].flops: must be a whole number >= 0"),
    ({"operators": [], "with_flops": "yes"}, "operators.with_flops: must be true or false"),
    ({"operators": [dict(OPERATOR, backtraces=["f"])]}, r"operators.operators\[0\].backtraces: must be an object"),
    ({"operators": [dict(OPERATOR, tensor_bytes=-4)]}, r"operators.operators\[0\].tensor_bytes: must be a whole number >= 0"),
])
def test_a_bad_operators_section_is_refused_saying_where(tmp_path, operators, reason):
    with pytest.raises(TimerFileError, match=reason):
        load_timing_tree(file_with(tmp_path, operators))
