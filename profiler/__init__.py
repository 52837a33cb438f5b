"""rlprof's profiler: hierarchical timers that follow a trainer into its subprocesses.

Everything a user needs day to day is importable from here; the modules hold the details.
"""

import importlib
from typing import TYPE_CHECKING

from profiler.version import __version__
from profiler.gpu import device_memory  # noqa: F401 - GPU memory at every memory sample, as before

if TYPE_CHECKING:  # for type checkers and readers: where each name comes from
    from profiler.control.controls import (
        dump,
        dump_profile,
        pause,
        profiler_set_config,
        profiler_set_state,
        resume,
        set_config,
        set_kvstore_handle,
        set_state,
    )
    from profiler.control.domain import Counter, Domain, Event, Frame, Marker, Task
    from profiler.gpu import emit_nvtx
    from profiler.recording.events import mark, record_counter, start_recording, stop_recording
    from profiler.control.scopes import scope
    from profiler.multiprocess.merge import PayloadError, TimerMerger
    from profiler.multiprocess.payload import WorkerTimers, snapshot_and_flush
    from profiler.analysis import dumps
    from profiler.analysis.event_list import load_nvprof
    from profiler.tree.timer_json import (
        TimerFileError,
        load_timing_tree,
        timers_json_path,
        write_timing_tree,
    )
    from profiler.tree.timer_tree import get_timer_tree
    from profiler.integrations.scalar_figures import scalars
    from profiler.integrations import live_view  # profiler.live_view.start() / stop(): docs/live.md
    from profiler.control.session import Profiler, profile
    from profiler.timing.timers import (
        TIMER_FORMAT_VERSION,
        GaugeNode,
        TimerNode,
        TimerStack,
        add_metadata,
        disable,
        enable,
        get_timer_root,
        get_timer_stack_for_thread,
        hierarchical_timer,
        is_enabled,
        merge_gauges,
        reset_timers,
        set_gauge,
        timed,
    )

# Each name is imported when first asked for (PEP 562), not by ``import profiler``: a program that
# uses the timers alone, an env worker of ``rlprof run`` and ``rlprof run`` itself would otherwise
# import all of rlprof (the MXNet and MegEngine surfaces, the live view, the analysis behind them):
# a tenth of a second and more of CPU in every process, for what most of them never call.
_HOMES = {
    "dump": "profiler.control.controls",
    "dump_profile": "profiler.control.controls",
    "pause": "profiler.control.controls",
    "profiler_set_config": "profiler.control.controls",
    "profiler_set_state": "profiler.control.controls",
    "resume": "profiler.control.controls",
    "set_config": "profiler.control.controls",
    "set_kvstore_handle": "profiler.control.controls",
    "set_state": "profiler.control.controls",
    "Counter": "profiler.control.domain",
    "Domain": "profiler.control.domain",
    "Event": "profiler.control.domain",
    "Frame": "profiler.control.domain",
    "Marker": "profiler.control.domain",
    "Task": "profiler.control.domain",
    "emit_nvtx": "profiler.gpu",
    "mark": "profiler.recording.events",
    "record_counter": "profiler.recording.events",
    "start_recording": "profiler.recording.events",
    "stop_recording": "profiler.recording.events",
    "scope": "profiler.control.scopes",
    "PayloadError": "profiler.multiprocess.merge",
    "TimerMerger": "profiler.multiprocess.merge",
    "WorkerTimers": "profiler.multiprocess.payload",
    "snapshot_and_flush": "profiler.multiprocess.payload",
    "dumps": "profiler.analysis",
    "load_nvprof": "profiler.analysis.event_list",
    "TimerFileError": "profiler.tree.timer_json",
    "load_timing_tree": "profiler.tree.timer_json",
    "timers_json_path": "profiler.tree.timer_json",
    "write_timing_tree": "profiler.tree.timer_json",
    "get_timer_tree": "profiler.tree.timer_tree",
    "scalars": "profiler.integrations.scalar_figures",
    "live_view": "profiler.integrations.live_view",
    "Profiler": "profiler.control.session",
    "profile": "profiler.control.session",
    "TIMER_FORMAT_VERSION": "profiler.timing.timers",
    "GaugeNode": "profiler.timing.timers",
    "TimerNode": "profiler.timing.timers",
    "TimerStack": "profiler.timing.timers",
    "add_metadata": "profiler.timing.timers",
    "disable": "profiler.timing.timers",
    "enable": "profiler.timing.timers",
    "get_timer_root": "profiler.timing.timers",
    "get_timer_stack_for_thread": "profiler.timing.timers",
    "hierarchical_timer": "profiler.timing.timers",
    "is_enabled": "profiler.timing.timers",
    "merge_gauges": "profiler.timing.timers",
    "reset_timers": "profiler.timing.timers",
    "set_gauge": "profiler.timing.timers",
    "timed": "profiler.timing.timers",
}


def __getattr__(name: str) -> object:
    if name not in _HOMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(_HOMES[name])
    value = module if _HOMES[name].rsplit(".", 1)[-1] == name else getattr(module, name)
    globals()[name] = value  # asked once: later lookups find it without coming here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_HOMES})


__all__ = [
    "TIMER_FORMAT_VERSION",
    "Counter",
    "Domain",
    "Event",
    "Frame",
    "GaugeNode",
    "Marker",
    "PayloadError",
    "Profiler",
    "Task",
    "TimerFileError",
    "TimerMerger",
    "TimerNode",
    "TimerStack",
    "WorkerTimers",
    "__version__",
    "add_metadata",
    "disable",
    "dump",
    "dump_profile",
    "dumps",
    "emit_nvtx",
    "enable",
    "get_timer_root",
    "get_timer_stack_for_thread",
    "get_timer_tree",
    "hierarchical_timer",
    "is_enabled",
    "load_nvprof",
    "load_timing_tree",
    "mark",
    "merge_gauges",
    "pause",
    "profile",
    "profiler_set_config",
    "profiler_set_state",
    "record_counter",
    "reset_timers",
    "resume",
    "scalars",
    "live_view",
    "scope",
    "set_config",
    "set_gauge",
    "set_kvstore_handle",
    "set_state",
    "snapshot_and_flush",
    "start_recording",
    "stop_recording",
    "timed",
    "timers_json_path",
    "write_timing_tree",
]
