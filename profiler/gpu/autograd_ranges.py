"""PyTorch's own NVTX ranges, one per autograd operator, inside rlprof's block ranges.

``torch.autograd.profiler.emit_nvtx(record_shapes=...)`` makes every operator PyTorch runs an
NVTX range: ``aten::addmm, seq = 12`` on the forward pass, and on the backward pass the backward
object's range carries ``stashed seq = 12``, the number of the forward operator that made it (and
for a double backward, the backward's own ``seq`` is stashed again), so Nsight Systems matches a
backward kernel to the forward operator it differentiates. rlprof's :class:`emit_nvtx` runs it
beside its own block ranges: an ``update`` range then holds the ``aten::`` ranges of its ops.

**Where it runs.** PyTorch's ``emit_nvtx`` needs a CUDA build of torch: it synchronises the
device as it starts and stops, and a CPU-only build refuses (torch 2.13.0+cpu raises
``AssertionError: Torch not compiled with CUDA enabled``). So:

* ``autograd=None`` (the default): PyTorch's ranges are added where the program already imported
  torch and torch sees a GPU — in an env worker, only where the worker itself already uses the
  GPU (its CUDA context is made), since PyTorch's emit_nvtx would make one; elsewhere only
  rlprof's block ranges are emitted (rlprof never imports torch into a program that did not).
* ``autograd=True``: required; an error says why not where torch or its GPU is missing.
* ``autograd=False``: rlprof's block ranges only.

PyTorch's profiler runs once per thread: its ``emit_nvtx`` cannot run while ``torch.profiler``
records operators (rlprof's operator recording, :mod:`profiler.gpu.torch_ops`), and the two are
refused together with one line. Tests and the GPU check inject the context with
:func:`set_autograd_ranges`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from profiler.gpu.torch_ops import is_recording_operators

__all__ = ["AutogradRanges", "AutogradRangesUnavailableError", "autograd_ranges_wanted", "set_autograd_ranges"]


class AutogradRangesUnavailableError(RuntimeError):
    """PyTorch's autograd ranges were required where they cannot run (``emit_nvtx`` turns this
    into its ``NvtxUnavailableError``)."""

AutogradRangesFactory = Callable[[bool], AbstractContextManager[Any]]
"""Makes the context that emits autograd ranges, given ``record_shapes``."""

_injected: AutogradRangesFactory | None = None


def set_autograd_ranges(factory: AutogradRangesFactory | None) -> None:
    """Use ``factory(record_shapes)`` instead of PyTorch's ``emit_nvtx`` (None: PyTorch's again).
    An injected factory counts as available wherever it runs."""
    global _injected
    _injected = factory


def _torch_unavailable_reason(torch_module: Any) -> str | None:
    """Why PyTorch's emit_nvtx cannot run here, or None when it can."""
    if torch_module is None:
        return "PyTorch is not installed"
    if not torch_module.cuda.is_available():
        build = getattr(torch_module.version, "cuda", None)
        if build is None:
            return (f"this torch ({torch_module.__version__}) is a CPU-only build: PyTorch's emit_nvtx "
                    "asserts 'Torch not compiled with CUDA enabled'")
        return f"torch {torch_module.__version__} sees no GPU (torch.cuda.is_available() is False)"
    return None


def autograd_ranges_wanted(autograd: bool | None, *, in_worker: bool = False) -> bool:
    """Whether PyTorch's ranges go with rlprof's, for ``emit_nvtx(autograd=...)``.

    Raises :class:`AutogradRangesUnavailableError` for ``autograd=True`` where they cannot run,
    and when torch's operator recording is on (one profiler per thread)."""
    if autograd is False:
        return False
    if _injected is not None:
        reason = None
    elif autograd is None:
        # Only a program that imported torch itself gets torch's ranges by default.
        torch_module = sys.modules.get("torch")
        if torch_module is None or _torch_unavailable_reason(torch_module) is not None:
            return False
        # An env worker that has not used the GPU itself is left without a CUDA context (which
        # PyTorch's emit_nvtx would make, and a worker forked from a CUDA trainer cannot have).
        if in_worker and not torch_module.cuda.is_initialized():
            return False
        reason = None
    else:
        try:
            import torch as torch_module
        except ImportError:
            torch_module = None
        reason = _torch_unavailable_reason(torch_module)
    if reason is not None:
        raise AutogradRangesUnavailableError(f"emit_nvtx(autograd=True): PyTorch's autograd ranges need a CUDA "
                                   f"build of torch and a GPU; {reason}")
    if is_recording_operators():
        raise AutogradRangesUnavailableError(
            "emit_nvtx: PyTorch's autograd ranges cannot run while rlprof records PyTorch's operators "
            "(torch.profiler runs once per thread); stop the operator recording or pass autograd=False")
    return True


class AutogradRanges:
    """PyTorch's ``emit_nvtx`` entered once however many rlprof ``emit_nvtx`` need it (PyTorch's
    is not reentrant), with ``record_shapes`` as the innermost asked."""

    def __init__(self) -> None:
        self.active: AbstractContextManager[Any] | None = None
        self.record_shapes = False

    def switch(self, wanted: bool, record_shapes: bool) -> None:
        """Have PyTorch's ranges on (with these ``record_shapes``) or off."""
        if self.active is not None and (not wanted or record_shapes != self.record_shapes):
            active, self.active = self.active, None
            active.__exit__(None, None, None)
        if wanted and self.active is None:
            context = _make_context(record_shapes)
            context.__enter__()
            self.active = context
            self.record_shapes = record_shapes

    def forget(self) -> None:
        """In a forked child: PyTorch's state is the parent's, which the child must not stop (that
        synchronises a CUDA context the child cannot use)."""
        self.active = None

    @property
    def on(self) -> bool:
        return self.active is not None


def _make_context(record_shapes: bool) -> AbstractContextManager[Any]:
    if _injected is not None:
        return _injected(record_shapes)
    import torch.autograd.profiler

    return torch.autograd.profiler.emit_nvtx(enabled=True, record_shapes=record_shapes)
