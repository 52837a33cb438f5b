"""What PyTorch's profiler says of one operator call beyond its time, as the dump writes it: the
dtypes of its inputs, and the Python call stack it came from (:mod:`profiler.gpu.torch_ops` counts
both per operator).

PyTorch names dtypes as C++ does and stacks with addresses and its own file names; these
functions turn them into text that reads the same from one process and one run to the next.
"""

from __future__ import annotations

import functools
import os
import re
import sys

__all__ = ["MAX_BACKTRACE_FRAMES", "TORCH_DTYPE_NAMES", "backtrace_text", "dtype_names"]

MAX_BACKTRACE_FRAMES = 8
"""The innermost Python frames kept of an operator's call stack."""

TORCH_DTYPE_NAMES = {
    "float": "float32", "double": "float64", "c10::Half": "float16", "c10::BFloat16": "bfloat16",
    "long int": "int64", "int": "int32", "short int": "int16", "signed char": "int8",
    "unsigned char": "uint8", "bool": "bool", "c10::complex<float>": "complex64",
    "c10::complex<double>": "complex128", "c10::complex<c10::Half>": "complex32",
}
"""PyTorch's profiler names an input's dtype as C++ does (``long int``); the dump names it as
``torch`` does (``int64``). Other C++ names lose their ``c10::`` only (``Float8_e4m3fn``);
inputs that are not tensors keep PyTorch's word for them (``Scalar``, ``TensorList``), and
``-`` stands for an input it gives no type for (``None``)."""

_RLPROF_DIRECTORY = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
"""The ``profiler`` package's folder: frames of files under it are rlprof's, not the program's."""


def dtype_names(torch_names: list[str]) -> str:
    """PyTorch's profiler's dtypes of a call's inputs as text: ``[float32, int64, Scalar]``."""
    names = (TORCH_DTYPE_NAMES.get(name, name.removeprefix("c10::")) or "-" for name in torch_names)
    return "[" + ", ".join(names) + "]"


def backtrace_text(stack: list[str]) -> str:
    """An operator's Python call stack as text, innermost first, ``<-`` between frames.

    PyTorch's entries are ``file(first line): function`` (the function's first line, not the
    calling line), ``nn.Module: Linear_0`` for a module's call, and built-ins named with their
    address, which is cut (``<built-in method randn of type object>``) so that the same call
    site reads the same in every process. rlprof's own frames (a ``@timed`` wrapper) are left
    out; at most :data:`MAX_BACKTRACE_FRAMES` are kept."""
    frames = [_ADDRESS.sub("", frame) for frame in stack if not _is_rlprofs_frame(frame.partition("(")[0])]
    return " <- ".join(frames[:MAX_BACKTRACE_FRAMES])


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@functools.lru_cache(maxsize=1024)
def _is_rlprofs_frame(file_name: str) -> bool:
    """Whether a frame's file is rlprof's. PyTorch names a file relative to the ``sys.path``
    entry it was imported from, so a relative name is looked for under each."""
    if os.path.isabs(file_name):
        candidates = [file_name]
    else:
        candidates = [os.path.join(entry or os.getcwd(), file_name) for entry in sys.path]
    for candidate in candidates:
        if os.path.isfile(candidate):
            return os.path.realpath(candidate).startswith(_RLPROF_DIRECTORY + os.sep)
    return False
