"""Which ``__enter__`` and ``__exit__`` a block runs: the plain ones, or ones its companions watch.

The plain methods do only what every block needs. Companions need more, only while in use:
timeline recording (profiler.recording.events: the span of every run), profiler scopes
(profiler.control.scopes: the scope each run happened in), memory sampling
(profiler.recording.memory: a sample every N blocks, the allocations of each block) and NVTX
ranges (profiler.gpu). Rather than test flags on every block, the methods in force are swapped
whenever what is needed changes, so that what is off costs nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from profiler.timing import timer_node, timers
from profiler.timing.timer_node import TimerNode

__all__ = ["observe_blocks", "records_spans", "set_exit_hook", "set_span_recording", "use_compiled_core"]

# Whether blocks record their spans (timeline recording is on): then their exit is
# timer_node.RECORDING_EXIT, else the plain one.
_recording_spans = False
_after_exit: Callable[[TimerNode], None] | None = None
# Each companion's (on_enter, on_exit) observers, by companion name, in the order they came.
_block_observers: dict[str, tuple[Callable[[TimerNode], None] | None, Callable[[TimerNode], None] | None]] = {}


def set_span_recording(recording: bool) -> None:
    """Make every block's exit record its span on the thread's timeline (``profiler.recording.events``)."""
    global _recording_spans
    if recording != _recording_spans:
        # A phased block's held runs record their spans as they fold, if spans are recorded then:
        # fold the runs taken under the old setting before it changes.
        for stack in timers.all_timer_stacks():
            stack.settle()
    _recording_spans = recording
    _install_block_methods()


def records_spans() -> bool:
    """Whether blocks record their spans on their thread's timeline now."""
    return _recording_spans


def use_compiled_core(compiled: bool) -> None:
    """Have blocks run the C accelerator's ``__enter__`` and ``__exit__`` (``True``) or the
    pure-Python ones (``False``), companions still wrapping them. The accelerator is in force
    from import where it is built; this switch is for comparing the two cores in one process."""
    timer_node.use_compiled_core(compiled)
    _install_block_methods()


def set_exit_hook(hook: Callable[[TimerNode], None] | None) -> None:
    """Call ``hook(node)`` after every block's exit (None: no hook), for ``profiler.control.scopes``."""
    global _after_exit
    _after_exit = hook
    _install_block_methods()


def observe_blocks(
    on_enter: Callable[[TimerNode], None] | None,
    on_exit: Callable[[TimerNode], None] | None,
    *,
    companion: str,
) -> None:
    """Call ``on_enter(node)`` as each block opens, before its clock starts, and ``on_exit(node)``
    as it closes, after its clock stops, so that what they do is not timed as the block's own.

    ``companion`` names who observes (``"memory"`` for ``profiler.recording.memory``, ``"nvtx"`` for
    ``profiler.gpu``): several companions observe at once, each replacing only its own observers.
    ``None`` for both takes the companion's observers out, and then nothing of them is left on
    the path a block takes. Observers that came later wrap those before them: the first to see a
    block open is the last to see it close, so that what they open nests.
    """
    if on_enter is None and on_exit is None:
        _block_observers.pop(companion, None)
    else:
        _block_observers[companion] = (on_enter, on_exit)
    _install_block_methods()


def _install_block_methods() -> None:
    """Put the cheapest ``__enter__`` and ``__exit__`` that do what is switched on onto TimerNode."""
    exit_method = timer_node.RECORDING_EXIT if _recording_spans else timer_node.PLAIN_EXIT
    if _after_exit is not None:
        exit_method = _observed_exit(exit_method, _after_exit)
    enter_method = timer_node.PLAIN_ENTER
    for on_enter, on_exit in _block_observers.values():
        if on_enter is not None:
            enter_method = _observed_enter(enter_method, on_enter)
        if on_exit is not None:
            exit_method = _observed_exit(exit_method, on_exit)
    TimerNode.__enter__ = enter_method  # type: ignore[method-assign]
    TimerNode.__exit__ = exit_method  # type: ignore[method-assign]
    timers.refresh_plain_blocks()



def _observed_enter(
    timed_enter: Callable[[TimerNode], TimerNode], observer: Callable[[TimerNode], None]
) -> Callable[[TimerNode], TimerNode]:
    def __enter__(self: TimerNode) -> TimerNode:
        observer(self)
        return timed_enter(self)

    return __enter__


def _observed_exit(
    timed_exit: Callable[..., None], observer: Callable[[TimerNode], None]
) -> Callable[..., None]:
    def __exit__(self: TimerNode, exc_type: Any, exc_value: Any, traceback: Any) -> None:
        timed_exit(self, exc_type, exc_value, traceback)
        observer(self)

    return __exit__
