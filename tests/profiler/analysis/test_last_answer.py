"""Specification: a function's last answer is given again for the very objects and equal values it
was worked out from, and worked out afresh for anything else."""

from __future__ import annotations

from profiler.analysis.last_answer import LastAnswer


class Counted:
    """Work that counts how often it was done."""

    def __init__(self) -> None:
        self.done = 0

    def __call__(self) -> int:
        self.done += 1
        return self.done


def test_the_same_objects_and_values_are_answered_without_working_again():
    last, work, spans = LastAnswer[int](), Counted(), [1, 2]
    assert last.answer((spans,), (2,), work) == 1
    assert last.answer((spans,), (2,), work) == 1
    assert work.done == 1


def test_an_equal_but_other_object_is_worked_out_afresh():
    last, work = LastAnswer[int](), Counted()
    last.answer(([1, 2],), (2,), work)
    assert last.answer(([1, 2],), (2,), work) == 2


def test_a_changed_value_is_worked_out_afresh():
    last, work, spans = LastAnswer[int](), Counted(), [1, 2]
    last.answer((spans,), (len(spans),), work)
    spans.append(3)
    assert last.answer((spans,), (len(spans),), work) == 2


def test_only_the_latest_answer_is_kept():
    last, work, first, second = LastAnswer[int](), Counted(), [1], [2]
    last.answer((first,), (), work)
    last.answer((second,), (), work)
    assert last.answer((first,), (), work) == 3
