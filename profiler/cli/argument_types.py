"""The command line's argument types: each rejects bad input with a message argparse turns into one line."""

from __future__ import annotations

import argparse
import math
import re
from collections.abc import Callable
from typing import Any

__all__ = ["envs_per_worker", "order_key", "pattern", "positive_count", "positive_seconds", "seconds",
           "seconds_or_percent", "top_count"]


def _converted(text: str, convert: Callable[[str], Any], expected: str) -> Any:
    """``convert(text)``, or argparse's error saying what was ``expected``."""
    try:
        return convert(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None


def positive_seconds(text: str) -> float:
    """A finite number of seconds above 0 (an interval, a window)."""
    value = _converted(text, float, "a number of seconds")
    if not math.isfinite(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got {text!r}")
    return value


def positive_count(text: str) -> int:
    """A whole number above 0 (a capacity)."""
    value = _converted(text, int, "a whole number")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, got {value}")
    return value


def top_count(text: str) -> int:
    value = _converted(text, int, "a whole number")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (all) or more, got {value}")
    return value


def seconds_or_percent(unit: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = _converted(text, float, f"a number of {unit}")
        if not math.isfinite(value) or value < 0:
            raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text!r}")
        return value

    parse.__name__ = unit
    return parse


seconds = seconds_or_percent("seconds")


def envs_per_worker(text: str) -> int | str:
    """``auto`` or a whole number >= 1 (the envmanager checks it again: profiler does not import it)."""
    if text == "auto":
        return text
    value = _converted(text, int, "a whole number >= 1 or auto")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1 or auto, got {value}")
    return value


def order_key(text: str) -> tuple[str, bool]:
    """``KEY`` (largest first) or, as in MegEngine's profile_analyze, ``+KEY`` (smallest first)."""
    from profiler.analysis.analyze import ANALYZE_ORDER_KEYS

    ascending = text.startswith("+")
    key = text[1:] if ascending else text
    if key not in ANALYZE_ORDER_KEYS:
        raise argparse.ArgumentTypeError(
            f"invalid choice: {text!r} (choose from {', '.join(ANALYZE_ORDER_KEYS)}, each may "
            "start with + for smallest first)"
        )
    return key, ascending


def pattern(text: str) -> re.Pattern[str]:
    try:
        return re.compile(text)
    except re.error as error:
        raise argparse.ArgumentTypeError(f"bad regular expression {text!r}: {error}") from None
