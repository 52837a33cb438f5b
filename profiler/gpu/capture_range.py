"""Start and stop an Nsight Systems capture around the steps worth looking at.

``nsys profile --capture-range=cudaProfilerApi python train.py`` records nothing until the program
calls ``cudaProfilerStart()`` and stops at ``cudaProfilerStop()``: a capture of steps 100 to 110
instead of the whole run (whose warm-up and start-up would drown them, and whose report would be
too large to open). PyTorch reaches those calls as ``torch.cuda.profiler.start()`` / ``stop()``
(``torch.cuda.profiler.profile()`` is its context manager).

Two forms:

* ``with capture_range(): ...`` captures what the block runs;
* ``capture = capture_steps(first=100, last=110)`` then ``capture.step()`` at the start of each
  training step: the capture starts as step 100 begins and stops as step 111 begins (or when the
  loop ends and ``capture.close()`` / the ``with capture_steps(...)`` ends).

Without CUDA (no torch, or a CPU-only build, or no GPU) the helper raises
:class:`CaptureUnavailableError` when it is made, not at step 100 of a long run. Tests and the GPU
check pass their own ``backend`` (an object with ``start()`` and ``stop()``).
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["CaptureBackend", "CaptureUnavailableError", "StepCapture", "capture_range", "capture_steps"]


class CaptureUnavailableError(RuntimeError):
    """A capture range was asked for where CUDA cannot be reached."""


class CaptureBackend(Protocol):
    """What starts and stops the capture: ``cudaProfilerStart`` / ``cudaProfilerStop``."""

    def start(self) -> None: ...

    def stop(self) -> None: ...


class TorchCudaProfiler:
    """``torch.cuda.profiler.start()`` / ``stop()``: cudaProfilerStart / cudaProfilerStop."""

    def __init__(self) -> None:
        try:
            import torch
        except ImportError:
            raise CaptureUnavailableError(
                "capture_range needs CUDA through PyTorch (torch.cuda.profiler.start, which calls "
                "cudaProfilerStart): PyTorch is not installed") from None
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else "a CUDA build that sees no GPU"
            raise CaptureUnavailableError(
                f"capture_range needs CUDA (cudaProfilerStart): this torch ({torch.__version__}) is {build}")
        import torch.cuda.profiler

        self._profiler = torch.cuda.profiler

    def start(self) -> None:
        self._profiler.start()

    def stop(self) -> None:
        self._profiler.stop()


def _resolve(backend: CaptureBackend | None) -> CaptureBackend:
    return TorchCudaProfiler() if backend is None else backend


class capture_range:
    """Capture what the ``with`` block runs under ``nsys --capture-range=cudaProfilerApi``.

    ``enabled=False`` does nothing (keep the ``with``, switch it by a flag). Raises
    :class:`CaptureUnavailableError` when made where CUDA is absent.
    """

    def __init__(self, enabled: bool = True, *, backend: CaptureBackend | None = None) -> None:
        if not isinstance(enabled, bool):
            raise TypeError(f"capture_range: enabled must be True or False, got {enabled!r}")
        self.enabled = enabled
        self._backend = _resolve(backend) if enabled else None

    def __enter__(self) -> capture_range:
        if self._backend is not None:
            self._backend.start()
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        if self._backend is not None:
            self._backend.stop()


class StepCapture:
    """Captures steps ``first`` to ``last`` (inclusive, counted from 0 by :meth:`step` calls)."""

    def __init__(self, first: int, last: int, backend: CaptureBackend | None = None) -> None:
        for name, value in (("first", first), ("last", last)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"capture_steps: {name} must be a step number >= 0, got {value!r}")
        if last < first:
            raise ValueError(f"capture_steps: last ({last}) is before first ({first})")
        self.first = first
        self.last = last
        self._backend = _resolve(backend)
        self.steps_begun = 0
        self.capturing = False
        self.done = False

    def step(self) -> None:
        """Call as each step begins: step ``first`` starts the capture, step ``last + 1`` stops it."""
        index = self.steps_begun
        self.steps_begun += 1
        if index == self.first and not self.done:
            self._backend.start()
            self.capturing = True
        if index == self.last + 1:
            self.close()

    def close(self) -> None:
        """Stop the capture if it is running (the loop ended before step ``last`` did)."""
        if self.capturing:
            self.capturing = False
            self._backend.stop()
        if self.steps_begun > self.first:
            self.done = True

    def __enter__(self) -> StepCapture:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        self.close()


def capture_steps(first: int, last: int, *, backend: CaptureBackend | None = None) -> StepCapture:
    """Capture steps ``first`` to ``last`` of a loop that calls ``.step()`` as each step begins;
    e.g. ``capture_steps(100, 110)``. Raises :class:`CaptureUnavailableError` without CUDA and
    ``ValueError`` for steps that are not a range."""
    return StepCapture(first, last, backend)
