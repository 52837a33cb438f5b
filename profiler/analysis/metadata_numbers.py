"""Whole numbers read from a dump's metadata, whose values are text: a bad one is said, not dropped.

Several readers take numbers from the metadata (the machine's cores, the processes that were
busy, torch's threads, the envs, one observation's bytes). A value that is not a whole number, or
is below what the figure can be, is read as unsaid, as a file that does not record it, and a
sentence says so: the analysis then shows it among what it cannot tell.
"""

from __future__ import annotations

from typing import Any

__all__ = ["whole_number"]


def whole_number(metadata: dict[str, Any], key: str, problems: list[str], *, at_least: int) -> int | None:
    """The whole number that ``metadata[key]`` holds (as text or as a number), or None where it
    holds none; where it holds something else, or a number below ``at_least``, None and a
    sentence in ``problems``."""
    value = metadata.get(key)
    if value is None:
        return None
    try:
        number = None if isinstance(value, (bool, float)) else int(str(value).strip())
    except ValueError:
        number = None
    if number is None or number < at_least:
        problems.append(f"metadata {key}={value!r} is not a whole number >= {at_least}; ignored")
        return None
    return number
