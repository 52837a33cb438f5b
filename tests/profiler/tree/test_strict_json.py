"""Specification of strict JSON output: what NaN, infinities and lone surrogates are written as."""

from __future__ import annotations

import json
import math

import pytest

from profiler.tree.strict_json import NON_FINITE_READINGS, dumps, named_reading, printable_text, reading_from_json


def test_finite_documents_are_written_as_json_dumps_writes_them():
    document = {"a": [1, 2.5, "x"], "b": {"c": None}}
    assert dumps(document) == json.dumps(document)


@pytest.mark.parametrize(
    "value, name", [(float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity")]
)
def test_a_non_finite_float_is_written_by_its_name(value, name, strict_json):
    assert strict_json(dumps({"gauge": [value]})) == {"gauge": [name]}


def test_a_name_reads_back_as_the_float_it_stands_for():
    for name, value in NON_FINITE_READINGS.items():
        assert reading_from_json(name) == value or math.isnan(reading_from_json(name))
        assert named_reading(value) == name


def test_only_numbers_and_the_three_names_are_readings():
    assert reading_from_json(2) == 2.0
    assert reading_from_json("nan") is None
    assert reading_from_json(True) is None
    assert reading_from_json(10**400) is None


def test_a_lone_surrogate_is_written_as_the_text_of_its_escape(strict_json):
    text = dumps({"block\udcff": "x\ud800"})
    assert strict_json(text) == {"block\\udcff": "x\\ud800"}
    text.encode("utf-8")


def test_a_repaired_document_writes_its_keys_as_the_encoder_does():
    """A key the encoder turns to text (true, false, null, a number) is written the same whether
    or not a NaN or a lone surrogate elsewhere has the document repaired: the timers file writes
    its timeline's parts one by one where its C helper runs, and each part is repaired alone."""
    keys = {True: 1, False: 2, None: 3, 7: 4, 2.5: 5, 1e16: 6}
    assert dumps({**keys, "gauge": float("nan")}) == dumps(keys)[:-1] + ', "gauge": "NaN"}'
    assert dumps({**keys, "name": "x\udcff"}) == dumps(keys)[:-1] + ', "name": "x\\\\udcff"}'


def test_other_text_is_written_as_itself_in_utf8():
    assert dumps({"name": "physics é 物理 🎲"}) == '{"name": "physics é 物理 🎲"}'


def test_printable_text_leaves_valid_text_alone():
    assert printable_text("ok é") == "ok é"
    assert printable_text("bad\udcff") == "bad\\udcff"
