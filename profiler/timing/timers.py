"""Hierarchical timers: a tree of named blocks per thread, cheap enough to leave on.

The API is the whole public API of Unity ML-Agents' ``mlagents_envs.timers`` (mlagents-envs
1.1.0), names and semantics, so that code written against it ports by changing the import; the
few deliberate differences are listed in docs/from-mlagents.md. This module holds the functions
of that API and each thread's stack; the names ML-Agents' module also exports are defined beside
it and importable from here too: the node (:mod:`profiler.timing.timer_node`), the stack
(:mod:`profiler.timing.timer_stack`), gauges (:mod:`profiler.timing.gauges`). The design differs
where ML-Agents is slow or wrong:

* A block *is* its tree node, its own context manager (see :mod:`profiler.timing.timer_node`).
* Each thread times into its own :class:`TimerStack`, found through a ``threading.local`` without
  a lock, and a process started with ``fork`` starts with empty stacks instead of inheriting the
  parent's tree. Stacks of threads that ended are folded by name pattern
  (:mod:`profiler.timing.thread_registry`).

Optional companions hook in without costing the hot path anything while unused: timeline
recording, memory sampling, NVTX ranges and profiler scopes swap the blocks' methods
(:mod:`profiler.timing.block_hooks`), and worker trees merged from other processes
(``profiler.multiprocess.merge`` attaches its merger to a stack, and
:func:`profiler.tree.timer_tree.get_timer_tree` then dumps them in a ``workers`` section). This
package imports nothing of rlprof: the dump is assembled by ``profiler.tree.timer_tree``, above it.
"""

from __future__ import annotations

import functools
import os
import threading
from typing import Any, Callable, TypeVar, overload

from profiler.timing import timer_node
from profiler.timing.accelerator import extension as _accelerator
from profiler.timing.gauges import GaugeNode, gauge_value
from profiler.timing.thread_registry import ENDED_THREAD_GROUPS, StackRegistry
from profiler.timing.timer_node import (
    FOLDED_BLOCK_NAME,
    MAX_DEPTH,
    TIMER_FORMAT_VERSION,
    TimerNode,
    accelerated,
    current_clock,
    now,
    set_clock,
)
from profiler.timing.timer_stack import TimerStack

__all__ = [
    "ENDED_THREAD_GROUPS",
    "FOLDED_BLOCK_NAME",
    "MAX_DEPTH",
    "TIMER_FORMAT_VERSION",
    "GaugeNode",
    "TimerNode",
    "TimerStack",
    "accelerated",
    "add_metadata",
    "all_timer_stacks",
    "block_arguments",
    "call_in_each_timing_thread",
    "current_clock",
    "current_thread_stack",
    "disable",
    "enable",
    "gauge_value",
    "get_timer_root",
    "get_timer_stack_for_thread",
    "hierarchical_timer",
    "is_enabled",
    "merge_gauges",
    "now",
    "plain_blocks",
    "span_blocks",
    "reset_timers",
    "set_argument_describer",
    "set_clock",
    "set_device_block",
    "set_gauge",
    "timed",
]

FunctionType = TypeVar("FunctionType", bound=Callable[..., Any])

# The C accelerator's hierarchical_timer (_timer_core.c's BlockLookup) reads _DISABLED_BLOCK by
# name from this module's globals (rename it there too), and has _enabled and _thread_local handed
# over by _share_timing_state: set them only where it is called.
_registry = StackRegistry()
_thread_local = threading.local()
_enabled = os.environ.get("RLPROF_DISABLE", "").strip().lower() not in {"1", "true", "yes", "on"}
plain_blocks = _enabled
"""True while timing is on and no companion watches blocks (timeline recording, memory sampling,
NVTX ranges, profiler scopes): a block's run is then fully described by its start and end
stamps, so a hot path may time it from stamps it takes itself (see :class:`~profiler.timing.phased_block.PhasedBlock`) rather
than enter it. Read it as ``timers.plain_blocks`` each time: it changes as companions come and go."""


def _share_timing_state() -> None:
    """Hand the C lookup the switch and the local that the Python function reads as globals: it
    reads them as its own, without two lookups in this module's dict per block."""
    if _accelerator is not None:
        _accelerator.use_timing_state(_enabled, _thread_local)


_share_timing_state()


def _forget_parent_timers() -> None:
    """Give a forked child empty stacks, so that its payloads never repeat the parent's tree."""
    global _registry, _thread_local
    if _accelerator is not None:
        _accelerator.forget_thread_stack(_thread_local)  # what the C lookup remembered of it
    _registry = StackRegistry()
    _thread_local = threading.local()
    _share_timing_state()


os.register_at_fork(after_in_child=_forget_parent_timers)


# Called in each thread on its first timer call (see call_in_each_timing_thread).
_first_call_callbacks: list[Callable[[], None]] = []


def call_in_each_timing_thread(callback: Callable[[], None]) -> None:
    """Call ``callback()`` in each thread, from now on, the first time it times a block: how a
    recorder learns of a thread while it runs (``profiler.recording.scheduling`` keeps a thread's
    CPU figures past its end this way). Costs nothing once the thread has its stack."""
    _first_call_callbacks.append(callback)


def current_thread_stack() -> TimerStack:
    """The stack the calling thread times into (made on its first call)."""
    try:
        return _thread_local.stack  # type: ignore[no-any-return]
    except AttributeError:
        stack = _thread_local.stack = _registry.stack_for_thread(threading.current_thread())
        for callback in _first_call_callbacks:
            callback()
        return stack


def get_timer_stack_for_thread(thread: threading.Thread) -> TimerStack:
    """The stack that ``thread`` times into; created empty on first request.

    For a thread that has ended: the stack its timers are folded into, shared with the ended
    threads of the same name pattern (see :func:`all_timer_stacks`).
    """
    return _registry.stack_for_thread(thread)


def _resolve(timer_stack: TimerStack | None) -> TimerStack:
    return current_thread_stack() if timer_stack is None else timer_stack


class _DisabledBlock:
    """What ``hierarchical_timer`` returns while profiling is off: enters and exits, does nothing.

    ``as`` gives the block itself, which takes what ML-Agents' trainer code does to the node of
    an open block (``merge`` worker trees, ``add_time``) and records none of it, so that code
    runs unchanged with profiling off.
    """

    __slots__ = ()

    def __enter__(self) -> _DisabledBlock:
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        return None

    def merge(self, other: Any, root_name: str | None = None, is_parallel: bool = True) -> None:
        return None

    def add_time(self, elapsed: float) -> None:
        return None


_DISABLED_BLOCK = _DisabledBlock()


def hierarchical_timer(
    name: str, timer_stack: TimerStack | None = None, device: str | None = None, cuda_sync: bool = False
) -> Any:
    """Time the ``with`` block as the child ``name`` of whichever block is open in this thread.

    ``as`` gives the :class:`TimerNode` (while profiling is disabled, a stand-in whose ``merge``
    and ``add_time`` record nothing). Blocks must nest
    within a thread, as ``with`` statements do. An exception inside the block still closes it,
    counts it in the node's ``errors`` and propagates unchanged.

    ``device="cuda"`` (or ``"cuda:1"``) also times the block's work on that GPU, which the host
    time misses (it sees kernels launched, not run); ``cuda_sync=True`` synchronises the device
    instead, at a cost. See ``profiler.gpu.device_time``.
    """
    # The common case first, in as few steps as possible: timing on, the calling thread's stack
    # already made, a block that ran here before. Everything else takes the slow path.
    if _enabled and timer_stack is None and device is None:
        try:
            return _thread_local.stack.current.children[name]
        except (AttributeError, KeyError):
            pass
    if not _enabled:
        return _DISABLED_BLOCK
    node = _resolve(timer_stack).current.get_child(name)
    if device is None:
        return node
    return _device_block(node, device, cuda_sync)


python_hierarchical_timer = hierarchical_timer
"""The pure-Python ``hierarchical_timer``: the reference, and the fallback without the accelerator."""

if _accelerator is not None:
    # The same function, its common case (a block that ran before, here) found in C, everything
    # else through the Python function (see _timer_core.c's BlockLookup): the Python call's
    # frame was a fifth of what finding the node cost.
    hierarchical_timer = functools.update_wrapper(  # type: ignore[assignment]
        _accelerator.BlockLookup(python_hierarchical_timer), python_hierarchical_timer
    )


def _no_device_timing(node: TimerNode, device: str, cuda_sync: bool) -> Any:
    raise RuntimeError("hierarchical_timer(device=...) needs profiler.gpu, which was not imported")


# What times a block on a device: profiler.gpu.device_time's, set as it is imported (timers
# imports nothing of rlprof).
_device_block: Callable[[TimerNode, str, bool], Any] = _no_device_timing


def set_device_block(make_block: Callable[[TimerNode, str, bool], Any]) -> None:
    """Have ``hierarchical_timer(name, device=...)`` return ``make_block(node, device, cuda_sync)``."""
    global _device_block
    _device_block = make_block


def set_default_device(device: str | None, cuda_sync: bool = False) -> None:
    """Make ``device`` (and ``cuda_sync``) what ``hierarchical_timer`` uses when a call names no
    device; None: no device, as by default (see ``profiler.gpu.device_time.set_default_device``).

    The default is the Python function's own default argument, so the common case pays nothing
    for it: with a default device, ``device is None`` no longer holds and every call takes the
    slow path to the device block. The C lookup, which finds the common case without the Python
    function, is turned off meanwhile, and on again (where the C core runs) once no device is set.
    """
    python_hierarchical_timer.__defaults__ = (None, device, cuda_sync)
    if _accelerator is not None:
        _accelerator.use_compiled_lookup(device is None and timer_node.accelerated())


def default_device() -> str | None:
    """The device blocks are timed on when a call names none (None: none)."""
    return python_hierarchical_timer.__defaults__[1]  # type: ignore[index]


@overload
def timed(function: FunctionType, /) -> FunctionType: ...
@overload
def timed(*, name: str | None = None) -> Callable[[FunctionType], FunctionType]: ...


def timed(function: Any = None, /, *, name: str | None = None) -> Any:
    """Decorate a function so every call is a timer block named by its ``__qualname__``.

    Use bare (``@timed``) or with a name (``@timed(name="policy.forward")``). The wrapper keeps the
    function's name, docstring and signature, so tools that introspect it keep working.
    """

    def decorate(function: FunctionType) -> FunctionType:
        block_name = name or function.__qualname__

        @functools.wraps(function)
        def timed_function(*args: Any, **kwargs: Any) -> Any:
            describe = _describe_arguments
            if describe is None:
                with hierarchical_timer(block_name):
                    return function(*args, **kwargs)
            # What the block's enter observers read of its arguments (see set_argument_describer):
            # set just before the block opens and cleared as soon as it is open, so that no
            # block but this one sees it.
            local = _thread_local
            local.block_arguments = describe(args, kwargs)
            with hierarchical_timer(block_name):
                local.block_arguments = None
                return function(*args, **kwargs)

        return timed_function  # type: ignore[return-value]

    if function is None:
        return decorate
    return decorate(function)


def set_gauge(name: str, value: Any, timer_stack: TimerStack | None = None) -> None:
    """Record the latest ``value`` of a measurement, keeping its min, max and count.

    ``value`` may be any real number: a float or int, a NumPy scalar or 0-d array, a torch
    scalar tensor, a bool, a Fraction or Decimal. It is stored as a Python float; anything else
    raises ``TypeError`` naming the gauge (see :func:`gauge_value`).
    """
    if _enabled:
        _resolve(timer_stack).set_gauge(name, value)


def merge_gauges(gauges: dict[str, GaugeNode], timer_stack: TimerStack | None = None) -> None:
    """Fold gauges recorded elsewhere (another thread's or process's) into a stack's gauges.

    ML-Agents' trainer does this with each trainer thread's gauges after joining it. A gauge
    the stack already has keeps the value set later (see :meth:`GaugeNode.merge`); a new one is
    copied in, so that ``gauges`` stays independent of the stack it came from.
    """
    own = _resolve(timer_stack).gauges
    for name, gauge in list(gauges.items()):
        existing = own.get(name)
        if existing is None:
            own[name] = gauge.copy()
        else:
            existing.merge(gauge)


def add_metadata(key: str, value: Any, timer_stack: TimerStack | None = None) -> None:
    """Attach a string to the run's metadata (kept even while profiling is disabled)."""
    _resolve(timer_stack).add_metadata(key, value)


def get_timer_root(timer_stack: TimerStack | None = None) -> TimerNode:
    """The root node of a stack's tree, its total set to the run time so far (see
    :meth:`TimerStack.get_root`); its children are the outermost blocks."""
    return _resolve(timer_stack).get_root()


def reset_timers(timer_stack: TimerStack | None = None) -> None:
    """Forget everything a stack recorded (the calling thread's by default)."""
    _resolve(timer_stack).reset()


def all_timer_stacks() -> list[TimerStack]:
    """Every stack of this process: each live thread's, then those of threads that ended.

    Threads that have ended are folded first, one stack per group of thread names (see
    :class:`StackRegistry`); such a stack's ``ended_threads`` says how many threads it holds.
    """
    return _registry.all_stacks()


# How @timed describes its arguments for the enter observers (None: it does not; see below).
_describe_arguments: Callable[[tuple[Any, ...], dict[str, Any]], Any] | None = None


def set_argument_describer(describe: Callable[[tuple[Any, ...], dict[str, Any]], Any] | None) -> None:
    """Have every ``@timed`` call hand ``describe(args, kwargs)`` to the enter observers of its block
    (as :func:`block_arguments`), or stop that (None).

    For ``profiler.gpu``'s ``record_shapes``: describing arguments costs, so only a ``@timed``
    call made while a describer is set pays for it.
    """
    global _describe_arguments
    _describe_arguments = describe


def block_arguments() -> Any:
    """In an enter observer: what the describer made of the arguments of the ``@timed`` call
    whose block is opening in this thread; None for any other block."""
    return getattr(_thread_local, "block_arguments", None)



span_blocks = False
"""True while timing is on and the one companion watching blocks is timeline recording (as under
``rlprof run``): a block's run is then its start and end stamps and the span
``(name, start, end)`` that :meth:`TimerNode._exit_and_record` (or its C copy) appends to the stack's timeline, so
a hot path may count such a run from its own stamps too (a :class:`~profiler.timing.phased_block.PhasedBlock`
adds its runs' spans as they fold). Read it as ``timers.span_blocks``."""


def refresh_plain_blocks() -> None:
    """Recompute :data:`plain_blocks` and :data:`span_blocks` after timing was switched or a
    block's methods swapped."""
    global plain_blocks, span_blocks
    plain_enter = _enabled and TimerNode.__enter__ is timer_node.PLAIN_ENTER
    plain_blocks = plain_enter and TimerNode.__exit__ is timer_node.PLAIN_EXIT
    span_blocks = plain_enter and TimerNode.__exit__ is timer_node.RECORDING_EXIT


def enable() -> None:
    """Turn timing back on after :func:`disable`."""
    global _enabled
    _enabled = True
    _share_timing_state()
    refresh_plain_blocks()


def disable() -> None:
    """Turn timing off: every block, decorator and gauge becomes a no-op that records nothing."""
    global _enabled
    _enabled = False
    _share_timing_state()
    refresh_plain_blocks()


def is_enabled() -> bool:
    return _enabled
