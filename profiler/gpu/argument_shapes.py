"""What ``record_shapes`` says about a ``@timed`` call: the shapes and dtypes of its arguments.

PyTorch's ``emit_nvtx(record_shapes=True)`` appends ``sizes = [[2, 3], []]`` to each op's range:
one list per input, the dimensions of a tensor and ``[]`` for anything else. rlprof does the same
for the arguments of a ``@timed`` function (positional first, then keyword values), for NumPy
arrays and torch tensors, and adds their dtypes (``-`` for what has none), since a trainer's
arrays differ by dtype as often as by shape.

Arrays are recognised by the module of their type rather than by importing NumPy or torch: this
runs on every ``@timed`` call while ``record_shapes`` is on, and must not import either.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ArgumentShapes", "describe_arguments"]

ArgumentShapes = tuple[str, str]
"""``(sizes, dtypes)`` as text: ``("[[4, 3], []]", "[float32, -]")``."""

_ARRAY_MODULES = ("numpy", "torch")


def describe_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> ArgumentShapes:
    """The sizes and dtypes of a call's arguments, in the order they were passed."""
    sizes = []
    dtypes = []
    for value in (*args, *kwargs.values()):
        shape_and_dtype = _array_shape_and_dtype(value)
        if shape_and_dtype is None:
            sizes.append("[]")
            dtypes.append("-")
        else:
            shape, dtype = shape_and_dtype
            sizes.append("[" + ", ".join(str(int(dimension)) for dimension in shape) + "]")
            dtypes.append(dtype)
    return "[" + ", ".join(sizes) + "]", "[" + ", ".join(dtypes) + "]"


def _array_shape_and_dtype(value: Any) -> tuple[tuple[int, ...], str] | None:
    """``(shape, dtype name)`` of a NumPy array or torch tensor (scalars included), else None."""
    module = type(value).__module__.partition(".")[0]
    if module not in _ARRAY_MODULES:
        return None
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is None or dtype is None:
        return None
    # torch prints its dtypes as "torch.float32"; the module is said once, by the type.
    return tuple(shape), str(dtype).removeprefix("torch.")
