"""Strict JSON out: every file rlprof writes parses with any JSON parser, NaN readings included.

Python's ``json`` writes NaN and the infinities as the bare tokens ``NaN`` and ``Infinity``, which
are not JSON: JavaScript's ``JSON.parse`` (Perfetto, speedscope, a browser) and most other
parsers reject the whole file. Yet a reading can be NaN for good reasons — a diverging loss is
exactly what a user wants to see — so rlprof writes a non-finite *reading* (a gauge's value, min
or max, a counter sample) as one of the strings ``"NaN"``, ``"Infinity"`` and ``"-Infinity"``:
the names JavaScript's ``Number()`` reads back, and the only strings rlprof's loader accepts in
place of a reading. Times and counts are always finite numbers.

:func:`dumps` is the one way rlprof turns a document into JSON text. Writers name their readings
where the layout says readings go (cheap, no copy of the document); :func:`dumps` also names any
other non-finite float it meets, so that no file rlprof writes is ever invalid JSON.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

__all__ = ["NON_FINITE_READINGS", "dumps", "escape_markup", "named_reading", "printable_text", "reading_from_json"]

NON_FINITE_READINGS: dict[str, float] = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
"""How a non-finite reading is written, and the float each name stands for."""


def named_reading(value: float) -> float | str:
    """A reading as it is written: a finite number as it is, NaN and the infinities by name."""
    if math.isfinite(value):
        return value
    if value != value:
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


def reading_from_json(value: Any) -> float | None:
    """The float a decoded JSON reading stands for; None when ``value`` is not a reading.

    Accepts numbers (bare ``NaN``/``Infinity`` tokens too, as rlprof 0.1 wrote them, since
    Python's parser reads those) and exactly the names of :data:`NON_FINITE_READINGS`.
    """
    if isinstance(value, str):
        return NON_FINITE_READINGS.get(value)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        return float(value)
    except OverflowError:  # an integer of hundreds of digits
        return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def dumps(document: Any, **options: Any) -> str:
    """``json.dumps(document, allow_nan=False, ensure_ascii=False, **options)``, made strict.

    The text is UTF-8-ready: non-ASCII names are written as themselves, and a lone surrogate (a
    file name decoded with ``surrogateescape``, say), which no UTF-8 file can hold and which JSON
    parsers read inconsistently, is written as the six characters of its escape (``\\udcff``).
    A non-finite float is written by name (see the module docstring). The common case costs one
    ``json.dumps``; only a document needing either repair is copied with it applied.
    """
    try:
        text = json.dumps(document, allow_nan=False, ensure_ascii=False, **options)
    except ValueError as error:
        if "Out of range float values" not in str(error):
            raise
        text = None
    if text is None or (not text.isascii() and _SURROGATE.search(text)):
        text = json.dumps(_repaired(document), allow_nan=False, ensure_ascii=False, **options)
    return text


def printable_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by its escape, so that it encodes as UTF-8."""
    if text.isascii() or not _SURROGATE.search(text):
        return text
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


def escape_markup(text: str) -> str:
    """``html.escape(text, quote=True)``, the same text, for HTML and SVG element text and quoted
    attribute values, beside :func:`printable_text` for the exporters that write markup; without
    importing :mod:`html`, whose ``html.entities`` is a cost at ``rlprof run``'s exit."""
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return text.replace('"', "&quot;").replace("'", "&#x27;")


def _repaired(value: Any) -> Any:
    if isinstance(value, float):
        return named_reading(value)
    if isinstance(value, str):
        return printable_text(value)
    if isinstance(value, dict):
        return {_key_text(key): _repaired(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_repaired(item) for item in value]
    return value


_KEY_WORDS = {True: "true", False: "false", None: "null"}


def _key_text(key: Any) -> Any:
    """A dict key as the encoder writes it: the same text whether or not the document around it
    needed repair (``str`` would write ``True`` for the encoder's ``true``)."""
    if isinstance(key, str):
        return printable_text(key)
    if key is True or key is False or key is None:
        return _KEY_WORDS[key]
    if isinstance(key, float):
        return float.__repr__(key)
    if isinstance(key, int):
        return int.__repr__(key)
    return key  # the encoder refuses it, as it would have
