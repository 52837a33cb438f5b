"""Specification: the analysis' and exporters' records initialise, print, compare and copy as
dataclasses do, and the modules ``rlprof run`` imports at its exit make no dataclass as they are
imported.

A ``@dataclass`` compiles its generated methods as the class is made, about 2 M instructions a
class in every ``rlprof run``'s exit (``profiler.records``); the step layouts, a table of
constants, are a named tuple.
"""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import ClassVar

import pytest

from profiler.analysis.step_time import STEP_LAYOUTS, StepBreakdown, StepPart
from profiler.analysis.verdicts import RunVerdicts, Verdict
from profiler.records import Record

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


class _Point(Record):
    x: int
    y: int = 0
    tags: list[str] = dataclasses.field(default_factory=list)
    label: str = dataclasses.field(default="point")


class _Point3(_Point):
    z: int = 0


class _Checked(Record):
    seconds: float
    twice: float = 0.0

    def __post_init__(self) -> None:
        self.twice = 2 * self.seconds


def test_the_init_binds_positional_then_keyword_arguments_in_field_order() -> None:
    point = _Point(1, tags=["a"], y=2)
    assert (point.x, point.y, point.tags, point.label) == (1, 2, ["a"], "point")
    assert list(vars(point)) == ["x", "y", "tags", "label"]  # set in field order, as a dataclass


def test_fields_not_passed_take_their_defaults() -> None:
    point = _Point(x=1)
    assert (point.y, point.label) == (0, "point")


def test_a_default_factory_makes_a_fresh_value_for_every_record() -> None:
    first, second = _Point(1), _Point(1)
    first.tags.append("a")
    assert second.tags == []


def test_field_objects_leave_the_class_as_a_dataclass_leaves_them() -> None:
    assert not hasattr(_Point, "tags")  # a factory's field has no class attribute
    assert _Point.label == "point"  # field(default=...) leaves the default itself


def test_a_missing_argument_is_named_as_a_dataclass_names_it() -> None:
    with pytest.raises(TypeError) as raised:
        StepPart()  # type: ignore[call-arg]
    with pytest.raises(TypeError) as by_dataclass:
        _Reference()  # type: ignore[call-arg]
    assert str(raised.value) == str(by_dataclass.value).replace("_Reference", "StepPart")


def test_three_missing_arguments_are_listed_as_python_lists_them() -> None:
    with pytest.raises(TypeError, match=r"missing 3 required positional arguments: 'block', 'calls', and 'total'"):
        StepBreakdown(parts=[], worker_blocks=(), worker_time=0.0, worker_calls=0, workers=0,  # type: ignore[call-arg]
                      is_vector_step=True)


def test_an_argument_given_twice_is_refused() -> None:
    with pytest.raises(TypeError, match=r"StepPart.__init__\(\) got multiple values for argument 'label'"):
        StepPart("env", 1.5, label="env")  # type: ignore[misc]


def test_an_unknown_keyword_is_refused() -> None:
    with pytest.raises(TypeError, match=r"StepPart.__init__\(\) got an unexpected keyword argument 'count'"):
        StepPart("env", 1.5, count=1)  # type: ignore[call-arg]


def test_too_many_positional_arguments_are_refused() -> None:
    with pytest.raises(TypeError, match=r"StepPart.__init__\(\) takes 3 positional arguments but 4 were given"):
        StepPart("env", 1.5, 2)  # type: ignore[call-arg]


def test_a_field_without_default_after_one_with_a_default_is_refused_as_the_class_is_made() -> None:
    with pytest.raises(TypeError, match="non-default argument 'seconds' follows default argument"):
        class _Wrong(Record):
            label: str = ""
            seconds: float


def test_a_mutable_default_is_refused_as_a_dataclass_refuses_it() -> None:
    with pytest.raises(ValueError, match="mutable default <class 'list'> for field tags is not allowed"):
        class _Shared(Record):
            tags: list[str] = []  # noqa: RUF012 - the mistake under test


def test_a_subclass_takes_its_base_fields_first() -> None:
    point = _Point3(1, 2, z=3)
    assert _Point3._fields == ("x", "y", "tags", "label", "z")
    assert (point.x, point.y, point.z) == (1, 2, 3)
    assert repr(point) == "_Point3(x=1, y=2, tags=[], label='point', z=3)"


def test_post_init_runs_after_the_fields_are_set() -> None:
    assert _Checked(1.5).twice == 3.0


class _Clamped(Record):
    seconds: float

    @property
    def seconds(self) -> float:  # type: ignore[no-redef]
        return self._seconds

    @seconds.setter
    def seconds(self, value: float) -> None:
        self._seconds = max(0.0, value)


def test_a_field_that_a_property_takes_is_set_through_the_property() -> None:
    assert _Clamped(-1.0).seconds == 0.0


def test_class_variables_are_no_fields() -> None:
    class _Counted(Record):
        kind: ClassVar[str] = "counted"
        count: int

    assert _Counted._fields == ("count",)
    assert _Counted(2).kind == "counted"


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
