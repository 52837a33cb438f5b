"""rlprof's profiler: hierarchical timers that follow a trainer into its subprocesses.

Everything a user needs day to day is importable from here; the modules hold the details.
"""

from profiler.version import __version__
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
