"""Small helpers that turn figures into terminal text: durations, shares, names that fit a column.

Every text report of rlprof (``rlprof analyze``, ``rlprof diff``, ``profiler.dumps``) formats its
cells here, so a duration reads the same everywhere and tables stay inside a 100-column terminal.
"""

from __future__ import annotations

import csv
import io
import re
import shutil
import textwrap
from collections.abc import Iterable, Sequence

from profiler.analysis.memory_advice import sampling_advice

__all__ = [
    "MEBIBYTE",
    "MIN_TABLE_WIDTH",
    "TABLE_WIDTH",
    "csv_text",
    "fit_left",
    "format_bytes",
    "format_percent",
    "format_seconds",
    "signed_seconds",
    "terminal_width",
    "wrap_text",
]

TABLE_WIDTH = 100
"""Tables are laid out for a terminal this many columns wide, unless told the terminal's width."""

MIN_TABLE_WIDTH = 60
"""The narrowest layout: below it a block's path would have no room left beside the figures."""


def terminal_width() -> int:
    """The width to lay tables out for: ``COLUMNS`` when set, else the terminal's, else
    :data:`TABLE_WIDTH` (output to a pipe or a file); never under :data:`MIN_TABLE_WIDTH`."""
    return max(MIN_TABLE_WIDTH, shutil.get_terminal_size((TABLE_WIDTH, 24)).columns)


def counted(number: int, thing: str, things: str | None = None) -> str:
    """``number`` things, the noun plural unless there is one: ``1 env``, ``3 envs``, ``2 processes``
    (``things`` where adding an s is not the plural)."""
    return f"{number} {thing if number == 1 else things or thing + 's'}"


def format_seconds(seconds: float) -> str:
    """A duration with a unit chosen for it (``12.35 s``, ``4.20 ms``, ``87.0 us``).

    Timer blocks range from microseconds (a pipe send) to hours (a whole run), so one fixed unit
    would print either ``0.000`` or eleven digits; three significant figures is what the eye uses.
    """
    magnitude = abs(seconds)
    # The thresholds sit half a printed digit below 1 so that 0.9999999 s reads "1.00 s", not
    # "1000.00 ms" (clock arithmetic rarely lands on round numbers).
    if magnitude >= 0.999995:
        return f"{seconds:.2f} s"
    if magnitude >= 0.99995e-3:
        return f"{seconds * 1e3:.2f} ms"
    if magnitude == 0.0:
        return "0 s"
    return f"{seconds * 1e6:.1f} us"


MEBIBYTE = 1024 * 1024
"""Bytes in a MiB: the unit of the ``*_mb`` gauges (``resources.<process>.rss_mb``,
``sb3.replay_buffer.filled_mb``)."""


def format_bytes(byte_count: float) -> str:
    """A memory size in binary units (``812.0 KiB``, ``31.5 MiB``, ``1.20 GiB``), sign kept."""
    magnitude = abs(byte_count)
    for unit, scale in (("GiB", 1024.0**3), ("MiB", 1024.0**2), ("KiB", 1024.0)):
        if magnitude >= scale:
            value = byte_count / scale
            return f"{value:.2f} {unit}" if unit == "GiB" else f"{value:.1f} {unit}"
    return f"{int(byte_count)} B"


def signed_seconds(seconds: float) -> str:
    """A change of duration with its sign always shown (``+1.20 s``, ``-300.0 us``)."""
    text = format_seconds(seconds)
    return text if text.startswith("-") or text == "0 s" else f"+{text}"


def format_percent(fraction: float | None, *, signed: bool = False) -> str:
    """A fraction as a percentage with one decimal; ``-`` when there is no figure to show."""
    if fraction is None:
        return "-"
    if fraction in (float("inf"), float("-inf")):
        return "+inf%" if fraction > 0 else "-inf%"
    return f"{fraction * 100:+.1f}%" if signed else f"{fraction * 100:.1f}%"


LONGEST_WORD = 500
"""Characters of one word (a block name, a path) that :func:`wrap_text` shows; the middle of a
longer one is left out."""

_LONG_WORD = re.compile(r"\S{%d,}" % (LONGEST_WORD + 1))


def memory_not_sampled_text(width: int, rlprof_run: bool = False) -> str:
    """The memory section of a run that did not sample its memory, saying how to (``rlprof run``'s
    option for a run it made); here rather than in :mod:`profiler.analysis.memory_report`, so that
    the analysis of such a run does not import it."""
    text = f"Memory: not sampled in this run ({sampling_advice(rlprof_run)} to see each process's memory over time)."
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  "))


def wrap_text(text: str, width: int, **options: object) -> list[str]:
    """``textwrap.wrap(text, width, **options)`` in time linear in ``text``.

    textwrap breaks a word longer than a line by copying the rest of it at every line, which
    takes minutes on a file's megabyte-long block name; such a word keeps its first and last
    :data:`LONGEST_WORD` / 2 characters here, around ``...``.
    """
    half = LONGEST_WORD // 2
    shortened = _LONG_WORD.sub(lambda word: f"{word[0][:half]}...{word[0][-half:]}", text)
    return textwrap.wrap(shortened, width, **options)  # type: ignore[arg-type]


def fit_left(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters by dropping its *start*, marked with ``...``.

    Block paths are cut on the left because the innermost names (the end) say what the block is.
    """
    if len(text) <= width:
        return text
    if width <= 3:
        return text[-width:]
    return "..." + text[-(width - 3) :]


def csv_text(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """Rows as CSV text (``\\n`` line ends), header first."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()
