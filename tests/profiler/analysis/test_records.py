"""Specification: the analysis' and exporters' records print, compare and copy as dataclasses do,
and the modules ``rlprof run`` imports at its exit make no dataclass as they are imported.

A ``@dataclass`` compiles its generated methods as the class is made, about 2 M instructions a
class in every ``rlprof run``'s exit (``profiler.analysis.records``); the step layouts, a table of
constants, are a named tuple.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import pytest

from profiler.analysis.records import Record
from profiler.analysis.step_time import STEP_LAYOUTS, StepPart
from profiler.analysis.verdicts import RunVerdicts, Verdict

EXIT_MODULES = (
    "profiler.analysis.analyze",
    "profiler.export.chrome_trace",
    "profiler.export.html_report",
)
"""What ``rlprof run`` imports at its exit (``_write_files`` and ``_report``), and what they import."""
FINISHES_WITHIN = 120  # seconds: generous, for a loaded machine; no test checks a duration


@dataclasses.dataclass
class _Reference:
    label: str
    seconds: float


def test_a_record_prints_as_the_dataclass_of_the_same_fields() -> None:
    assert repr(StepPart("env", 1.5)) == repr(_Reference("env", 1.5)).replace("_Reference", "StepPart")


def test_records_compare_field_by_field_only_with_their_own_class() -> None:
    assert StepPart("env", 1.5) == StepPart("env", 1.5)
    assert StepPart("env", 1.5) != StepPart("env", 2.0)
    assert StepPart("env", 1.5) != _Reference("env", 1.5)
    nan = float("nan")
    assert StepPart("env", nan) == StepPart("env", nan)  # the same object, as in a tuple


def test_a_record_is_not_hashable_as_a_dataclass_with_eq() -> None:
    with pytest.raises(TypeError):
        hash(StepPart("env", 1.5))


def test_replace_copies_with_changes_through_the_init() -> None:
    verdict = Verdict("straggler", "title", 1.0, 0.5, {"seconds": 1.0}, "advice")
    changed = verdict.replace(title="new title")
    assert changed == Verdict("straggler", "new title", 1.0, 0.5, {"seconds": 1.0}, "advice")
    assert verdict.title == "title"
    assert RunVerdicts(2.0, (verdict,)).replace(wall_seconds=3.0).cannot_tell == ()
    with pytest.raises(TypeError):
        verdict.replace(no_such_field=1)


def test_the_step_layouts_stay_constant() -> None:
    with pytest.raises(AttributeError):
        STEP_LAYOUTS[0].step = "another.step"  # type: ignore[misc]


def test_fields_are_the_annotations_of_the_class_in_order() -> None:
    assert StepPart._fields == ("label", "seconds")
    assert Record._fields == ()


def test_the_exit_s_modules_make_no_dataclass() -> None:
    # In a fresh interpreter: this one has imported analysis modules that the exit does not.
    found = subprocess.run([sys.executable, "-c", _LIST_DATACLASSES, *EXIT_MODULES], capture_output=True,
                           text=True, check=True, timeout=FINISHES_WITHIN).stdout.split()
    assert found == []


_LIST_DATACLASSES = """
import dataclasses, importlib, sys
for name in sys.argv[1:]:
    importlib.import_module(name)
for name, module in list(sys.modules.items()):
    if name.startswith(("profiler.analysis", "profiler.export")):
        for value in vars(module).values():
            if isinstance(value, type) and value.__module__ == name and dataclasses.is_dataclass(value):
                print(f"{name}.{value.__qualname__}")
"""
