"""Gauges: the latest value of a named measurement, with its min, max and how often it was set."""

from __future__ import annotations

import numbers
import time
from typing import Any

__all__ = ["GaugeNode", "gauge_value"]


def gauge_value(name: str, value: Any) -> float:
    """``value`` as the Python float a gauge stores, or an error naming the gauge.

    Training code passes whatever its libraries hand back: NumPy scalars and 0-d arrays, torch
    scalar tensors, bools, Fractions, Decimals. Converting once, when the gauge is set, keeps the
    payloads, the merger and the JSON dump working on plain floats only. Python floats and ints
    take the fast path; anything else must convert through ``__float__`` and be a single real
    number. NaN and infinities are kept: a diverging loss is worth seeing.

    Raises ``TypeError`` for a non-number (a string, a complex, an array of several values) and
    ``ValueError`` for an integer too large for a float, each naming the gauge.
    """
    value_type = type(value)
    if value_type is float:
        return value  # type: ignore[no-any-return]
    if value_type is not int and value_type is not bool:
        if getattr(value_type, "__float__", None) is None and getattr(value_type, "__index__", None) is None:
            raise TypeError(f"gauge {name!r}: expected a real number, got {_describe(value)}")
        if isinstance(value, numbers.Complex) and not isinstance(value, numbers.Real):
            raise TypeError(f"gauge {name!r}: expected a real number, got {_describe(value)}")
        shape = getattr(value, "shape", ())
        if tuple(shape) != ():
            raise TypeError(
                f"gauge {name!r}: expected one number, got {value_type.__name__} of shape "
                f"{tuple(shape)} (reduce it, or pass .item() of a one-element array)"
            )
    try:
        return float(value)
    except OverflowError:
        raise ValueError(f"gauge {name!r}: {_describe(value)} is too large for a float") from None
    except Exception as error:  # a third-party __float__ can raise anything
        raise TypeError(f"gauge {name!r}: cannot convert {_describe(value)} to a float: {error}") from None


def _describe(value: Any) -> str:
    text = repr(value)
    if len(text) > 60:
        text = text[:57] + "..."
    return f"{type(value).__name__} {text}"


def _lower(current: float, candidate: float) -> float:
    """The smaller reading, ignoring NaN unless every reading so far was NaN."""
    return candidate if candidate < current or current != current else current


def _higher(current: float, candidate: float) -> float:
    """The larger reading, ignoring NaN unless every reading so far was NaN."""
    return candidate if candidate > current or current != current else current


class GaugeNode:
    """The latest value of a named measurement, with its min, max and how often it was set.

    ``updated_at`` is the wall-clock time (``time.time()``) of the latest value: gauges merged
    from several processes or threads keep the value set last, as ML-Agents' do. ``min`` and
    ``max`` skip NaN readings (as ``numpy.nanmin`` does): after a loss turns NaN, the gauge shows
    ``value`` NaN and the range it covered before. They are NaN only while every reading was.
    """

    __slots__ = ("value", "min_value", "max_value", "count", "updated_at")

    def __init__(self, value: float) -> None:
        self.value = value
        self.min_value = value
        self.max_value = value
        self.count = 1
        self.updated_at = time.time()

    def update(self, new_value: float) -> None:
        self.value = new_value
        self.min_value = _lower(self.min_value, new_value)
        self.max_value = _higher(self.max_value, new_value)
        self.count += 1
        self.updated_at = time.time()

    def merge(self, other: GaugeNode) -> None:
        """Fold in a gauge recorded elsewhere; the value set later (by ``updated_at``) is kept."""
        if other.updated_at > self.updated_at:
            self.value = other.value
            self.updated_at = other.updated_at
        self.min_value = _lower(self.min_value, other.min_value)
        self.max_value = _higher(self.max_value, other.max_value)
        self.count += other.count

    def merge_summary(self, value: float, minimum: float, maximum: float, count: int) -> None:
        """Fold in ``count`` readings summarized as (latest, min, max), arriving now: a worker's
        payload, whose latest value is the latest there is."""
        self.value = value
        self.updated_at = time.time()
        self.min_value = _lower(self.min_value, minimum)
        self.max_value = _higher(self.max_value, maximum)
        self.count += count

    def copy(self) -> GaugeNode:
        """An independent gauge with the same figures."""
        duplicate = GaugeNode(self.value)
        duplicate.min_value = self.min_value
        duplicate.max_value = self.max_value
        duplicate.count = self.count
        duplicate.updated_at = self.updated_at
        return duplicate

    def to_dict(self) -> dict[str, float]:
        return {
            "value": self.value,
            "min": self.min_value,
            "max": self.max_value,
            "count": self.count,
        }

    as_dict = to_dict
    """ML-Agents' name for :meth:`to_dict`."""

    def __repr__(self) -> str:
        return f"GaugeNode(value={self.value!r}, min={self.min_value!r}, max={self.max_value!r})"
