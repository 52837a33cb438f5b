"""The controls of MXNet's ``mxnet.profiler``, driving rlprof's one timer core.

Code written against MXNet's profiler ports by changing the import::

    from profiler import set_config, set_state, pause, resume, dump, dumps

* :func:`set_config` takes MXNet's keys and rlprof's own (:mod:`profiler.control.profiler_settings`
  checks them) and arms the end-of-run dump (:mod:`profiler.control.end_of_run`): from then on the
  configured files are written when the program ends, without a ``dump()`` call.
* :func:`set_state`, :func:`pause` and :func:`resume` switch the timers with
  :func:`profiler.timing.timers.enable` / :func:`~profiler.timing.timers.disable`, the switch the hot path
  already tests, so the MXNet surface adds nothing to a timed block's cost. rlprof's timers run
  from the start; a program using the MXNet surface gets MXNet's start instead: its first
  :func:`set_config`, unless :func:`set_state` came before, stops the profiler until
  ``set_state("run")`` (``MXNET_PROFILER_AUTOSTART=1`` keeps it running, as in MXNet).
* :func:`dump` writes the configured outputs now (:mod:`profiler.control.dump_outputs`), atomically;
  with ``continuous_dump=True`` a background thread (:mod:`profiler.control.periodic_thread`) rewrites
  them every ``dump_period`` seconds, so a process killed outright leaves its last dump.

**A block open across a pause.** A block belongs to the state it was opened in. Opened while
the profiler runs, it is recorded when it closes, whole, pause included: its children stay inside
it and its parent's figures stay consistent. Opened while paused, it records nothing, even if it
closes after :func:`resume`; blocks opened inside it after the resume are recorded under the
nearest recorded block that is open.

``profile_process="server"`` addresses the env workers whose timers are merged into this process
(``TimerMerger``): stopping or pausing it makes the mergers set aside the payloads that arrive
meanwhile (counted in each worker's ``paused_payloads``); their dumps are part of this process's.
"""

from __future__ import annotations

import os
import sys
import threading
import warnings
from pathlib import Path
from typing import Any

from profiler.control import end_of_run
from profiler.recording import events, memory
from profiler.multiprocess import merge
from profiler.timing import timers
from profiler.analysis.stats import dumps
from profiler.control.dump_outputs import write_outputs
from profiler.gpu import block_device_memory, device_memory, device_time, nvtx_bridge, torch_ops
from profiler.tree.atomic_file import write_atomically
from profiler.integrations import live_view
from profiler.control.periodic_thread import PeriodicThread
from profiler.control.profiler_settings import ProfilerSettings, profile_process_name, updated_settings
from profiler.timing.timers import TimerStack

__all__ = [
    "PROFILER_STATES",
    "dump",
    "dump_profile",
    "dumps",
    "get_settings",
    "get_state",
    "is_paused",
    "pause",
    "profiler_set_config",
    "profiler_set_state",
    "resume",
    "set_config",
    "set_kvstore_handle",
    "set_state",
]

PROFILER_STATES = ("run", "stop")

AUTOSTART_VARIABLE = "MXNET_PROFILER_AUTOSTART"
"""MXNet's environment variable: set to 1, the profiler runs from the start (set_config does not
stop it)."""


class _ProfilerControl:
    """The process's profiler: its settings, the state of each MXNet process, the dump thread."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.settings = ProfilerSettings()
        self.states = {"worker": "run" if timers.is_enabled() else "stop", "server": "run"}
        # Whether the program chose this process's state (set_state, or set_config's MXNet start).
        self.state_chosen = False
        self.paused = {"worker": False, "server": False}
        self.timer_stack: TimerStack | None = None
        self.periodic: PeriodicThread | None = None
        self.failed_periodic_dumps = 0
        # Set while profile_memory drives profiler.recording.memory's sampling (sampling the program
        # started itself is left alone).
        self.memory_sampling: memory.MemorySampling | None = None
        # Set while emit_nvtx makes NVTX ranges (an emit_nvtx block of the program's own is left
        # alone).
        self.nvtx_settings: nvtx_bridge.NvtxSettings | None = None
        # Set while profile_all / profile_imperative record PyTorch's operators.
        self.operators: torch_ops.OperatorRecording | None = None
        # The timeline is recorded (settings.timeline) only once the MXNet surface is in use:
        # a pause() alone must not start a recording nobody asked for.
        self.in_use = False
        # Set while live_view shows the view (a view the program started itself is left alone).
        self.settings_started_live_view = False

    def stack(self) -> TimerStack:
        """The stack dumps are taken from: the one of the thread that configured the profiler
        (the main thread's until one does)."""
        if self.timer_stack is None:
            return timers.get_timer_stack_for_thread(threading.main_thread())
        return self.timer_stack

    def running(self, process: str) -> bool:
        return self.states[process] == "run" and not self.paused[process]

    def apply_states(self) -> None:
        """Switch the timers and the mergers as the states say, then :meth:`apply_settings`.

        Only the state calls do this: ``set_config`` leaves a ``profiler.disable()`` in place.
        """
        if self.running("worker"):
            timers.enable()
        else:
            timers.disable()
        merge.set_merging(self.running("server"))
        self.apply_settings()

    def apply_settings(self) -> None:
        """Bring the timeline recording, the memory sampling and the dump thread in line with
        the settings."""
        if self.in_use:
            recording = self.settings.timeline and self.states["worker"] == "run"
            if recording and not events.is_recording():
                events.start_recording()
            elif not recording and events.is_recording():
                events.stop_recording()
            self._apply_memory_sampling()
            self._apply_emit_nvtx()
            self._apply_operators()
        self._apply_periodic_thread()
        self._apply_live_view()

    def _apply_live_view(self) -> None:
        """``live_view`` shows the live view (docs/live.md) while the profiler runs."""
        wanted = self.settings.live_view and self.states["worker"] == "run"
        if wanted and not live_view.is_showing():
            live_view.start(timer_stack=self.stack())
            self.settings_started_live_view = True
        elif not wanted and self.settings_started_live_view:
            live_view.stop()
            self.settings_started_live_view = False

    def _apply_memory_sampling(self) -> None:
        """``profile_memory`` samples this process's memory every ``dump_period`` seconds with
        ``profiler.recording.memory`` (env workers started afterwards sample too), while running."""
        settings = self.settings
        wanted = settings.profile_memory and self.running("worker")
        sampling = self.memory_sampling
        if sampling is not None and (not wanted or sampling.interval != settings.dump_period):
            memory.sample_now()  # the memory at the end of the profiled stretch
            memory.stop_sampling()
            self.memory_sampling = None
        if wanted and self.memory_sampling is None and not memory.is_sampling():
            self.memory_sampling = memory.start_sampling(interval=settings.dump_period)
            # The GPU's allocations too, for the snapshot each dump writes (where torch was
            # imported by the program and sees a GPU; elsewhere nothing is started).
            device_memory.start_memory_history()

    def _apply_emit_nvtx(self) -> None:
        """``emit_nvtx`` makes every block an NVTX range (``record_shapes``: with the shapes of
        ``@timed`` arguments), in env workers too, as ``profiler.gpu.emit_nvtx`` does."""
        settings = self.settings
        started = self.nvtx_settings
        if started is not None and (not settings.emit_nvtx or started.record_shapes != settings.record_shapes):
            if nvtx_bridge.nvtx_settings() is started:
                nvtx_bridge.stop_nvtx()
            self.nvtx_settings = None
        if settings.emit_nvtx and self.nvtx_settings is None and not nvtx_bridge.is_emitting():
            self.nvtx_settings = nvtx_bridge.start_nvtx(record_shapes=settings.record_shapes)

    def _apply_operators(self) -> None:
        """``profile_all`` / ``profile_imperative`` record PyTorch's operators into the tree while
        running (a recording the program started itself is left alone)."""
        wanted = self.settings.record_operators and self.running("worker")
        if self.operators is not None and (not wanted or self.operators.record_outputs != self.settings.record_shapes):
            torch_ops.stop_operators()
            self.operators = None
        if wanted and self.operators is None and not torch_ops.is_recording_operators():
            # record_shapes asks for the operators' output shapes too (PyTorch's execution trace).
            self.operators = torch_ops.start_operators(record_outputs=self.settings.record_shapes)

    def _apply_periodic_thread(self) -> None:
        settings = self.settings
        wanted = self.states["worker"] == "run" and settings.continuous_dump
        if self.periodic is not None and (not wanted or self.periodic.period != settings.dump_period):
            self.periodic.stop()
            self.periodic = None
        if wanted and self.periodic is None:
            self.periodic = PeriodicThread(
                "rlprof continuous dump", settings.dump_period, self.write_dump, self.report_failure
            )

    def stop_periodic_thread(self) -> None:
        if self.periodic is not None:
            self.periodic.stop()
            self.periodic = None

    def write_dump(self) -> list[Path]:
        """Write the configured outputs, with a memory sample first when ``profile_memory``.

        It takes no lock: the dump thread runs it while a state call may hold the lock and wait
        for that thread to stop, and a trainer pausing never waits for a dump being written. The
        settings are read once (they are replaced whole, never changed in place). Two dumps
        writing at once each replace the files whole: the later rename wins.
        """
        settings, stack = self.settings, self.stack()
        if self.memory_sampling is not None:
            memory.sample_now()
        written = write_outputs(settings, stack)
        snapshot = device_memory.memory_snapshot_file()
        if snapshot is not None:
            # MXNet's gpu_memory_profile_filename_prefix: the CUDA allocator's snapshot, every
            # allocation with its Python stack, for https://pytorch.org/memory_viz.
            path = Path(f"{settings.gpu_memory_profile_filename_prefix}-pid_{os.getpid()}.pickle")
            written.append(write_atomically(path, snapshot, named_by_user=True))
        return written

    def report_failure(self, error: BaseException) -> None:
        """A periodic dump that failed (a full disk): said once on stderr, tried again next period."""
        self.failed_periodic_dumps += 1
        if self.failed_periodic_dumps == 1:
            print(f"rlprof: a continuous dump failed ({error}); retrying every "
                  f"{self.settings.dump_period:g} s", file=sys.stderr)

    def dump_at_end(self) -> None:
        """The end-of-run dump: the dump thread is stopped first so that it cannot write after."""
        with self.lock:
            self.stop_periodic_thread()
        self.write_dump()


_control = _ProfilerControl()


def set_config(**kwargs: Any) -> None:
    """Configure the profiler (keywords only), as MXNet's ``set_config``.

    Every key and value is checked before anything changes: an unknown key or a bad value raises
    ``ValueError`` naming it and what it accepts. The keys are described in docs/from-mxnet.md.
    Dumps are taken from the calling thread's timers (and its threads' and merged workers'); the
    configured files are written when the program ends (normal exit, uncaught exception,
    SIGTERM) unless ``dump(finished=True)`` wrote them for good before.
    """
    with _control.lock:
        settings = updated_settings(_control.settings, kwargs)
        if settings.emit_nvtx and not _control.settings.emit_nvtx:
            nvtx_bridge.resolve_backend()  # no backend: the error, before anything changes
        if settings.record_operators and not _control.settings.record_operators:
            torch_ops.check_available()  # no PyTorch: the error, before anything changes
        block_memory_before, block_memory = _block_memory_device(_control.settings), _block_memory_device(settings)
        if block_memory is not None and block_memory != block_memory_before:
            block_device_memory.check_block_memory(block_memory)  # no GPU: the error, before anything changes
        if settings.device != _control.settings.device:
            # Every block without a device of its own is timed on this one; no GPU: the error,
            # before anything changes.
            device_time.set_default_device(settings.device)
        if block_memory != block_memory_before:
            if block_memory is None:
                block_device_memory.stop_tracking_block_memory()
            else:
                block_device_memory.track_block_memory(block_memory)
        _control.settings = settings
        _control.timer_stack = timers._resolve(None)
        _control.in_use = True
        if not _control.state_chosen:
            _start_as_mxnet_does()
        _control.apply_settings()
        end_of_run.arm(_control.dump_at_end)


def _block_memory_device(settings: ProfilerSettings) -> str | None:
    """The device whose memory ``device_memory_per_block`` measures per block: ``device``, the
    default device of device time, else ``"cuda"``; None when it is off."""
    return (settings.device or "cuda") if settings.device_memory_per_block else None


def _start_as_mxnet_does() -> None:
    """MXNet's profiler is stopped until ``set_state("run")`` (or from the start with
    ``MXNET_PROFILER_AUTOSTART=1``): the first ``set_config`` of a program that has not chosen a
    state puts it there, so the blocks before ``set_state("run")`` are not recorded."""
    _control.state_chosen = True
    if os.environ.get(AUTOSTART_VARIABLE, "0").strip() not in ("", "0"):
        return  # running, as rlprof's timers already are (a profiler.disable() stays in place)
    _control.states["worker"] = "stop"
    timers.disable()


def set_state(state: str = "stop", profile_process: str = "worker") -> None:
    """Run or stop the profiler of ``profile_process``, as MXNet's ``set_state``.

    ``"run"`` turns the timers on (unless paused) and, with ``timeline=True`` (the default),
    records the timeline; ``"stop"`` turns them off and stops the dump thread. What was recorded
    stays, to dump.
    """
    process = profile_process_name(profile_process, "set_state: profile_process")
    if state not in PROFILER_STATES:
        raise ValueError(f"set_state: state must be 'run' or 'stop', got {state!r}")
    with _control.lock:
        _control.states[process] = state
        _control.state_chosen = True
        _control.in_use = True
        _control.apply_states()


def pause(profile_process: str = "worker") -> None:
    """Record nothing until :func:`resume` (see the module docstring for blocks left open)."""
    process = profile_process_name(profile_process, "pause: profile_process")
    with _control.lock:
        _control.paused[process] = True
        _control.apply_states()


def resume(profile_process: str = "worker") -> None:
    """Record again after :func:`pause`; a stopped profiler stays stopped, as in MXNet."""
    process = profile_process_name(profile_process, "resume: profile_process")
    with _control.lock:
        _control.paused[process] = False
        _control.apply_states()


def dump(finished: bool = True, profile_process: str = "worker") -> list[Path]:
    """Write the configured outputs now, atomically; returns the paths written.

    ``finished=True`` (MXNet's default) makes these the final files: the dump thread stops and
    nothing is written at the end of the run. ``finished=False`` writes them and carries on
    profiling and dumping. The merged workers (``profile_process="server"``) are part of this
    process's dump, so both names write the same files.
    """
    profile_process_name(profile_process, "dump: profile_process")
    if not isinstance(finished, bool):
        raise ValueError(f"dump: finished must be True or False, got {finished!r}")
    if finished:
        # Stopped first: a periodic dump finishing after this one would replace the final files.
        with _control.lock:
            _control.stop_periodic_thread()
    written = _control.write_dump()
    if finished:
        end_of_run.disarm()
    return written


def get_settings() -> ProfilerSettings:
    """The settings in force (what :func:`set_config` changed, defaults elsewhere)."""
    return _control.settings


def get_state(profile_process: str = "worker") -> str:
    """``"run"`` or ``"stop"``, as last set by :func:`set_state` (pausing does not change it)."""
    return _control.states[profile_process_name(profile_process, "get_state: profile_process")]


def is_paused(profile_process: str = "worker") -> bool:
    return _control.paused[profile_process_name(profile_process, "is_paused: profile_process")]


def set_kvstore_handle(handle: Any) -> None:
    """Accepted so that MXNet code runs unchanged; does nothing.

    MXNet needs its distributed kvstore's handle to reach its ``server`` processes; rlprof's
    ``server`` is the env workers merged into this process, which it reaches without one.
    """


# --- MXNet's deprecated names: they work, and warn as MXNet's do --------------------------------


def profiler_set_config(mode: str = "symbolic", filename: str = "profile.json") -> None:
    """Deprecated (as in MXNet): use :func:`set_config`."""
    warnings.warn("profiler.profiler_set_config() is deprecated; use profiler.set_config()",
                  DeprecationWarning, stacklevel=2)
    if mode not in ("symbolic", "all"):
        raise ValueError(f"profiler_set_config: mode must be 'symbolic' or 'all', got {mode!r}")
    set_config(**{f"profile_{mode}": True, "filename": filename})


def profiler_set_state(state: str = "stop") -> None:
    """Deprecated (as in MXNet): use :func:`set_state`."""
    warnings.warn("profiler.profiler_set_state() is deprecated; use profiler.set_state()",
                  DeprecationWarning, stacklevel=2)
    set_state(state)


def dump_profile() -> list[Path]:
    """Deprecated (as in MXNet): use :func:`dump`."""
    warnings.warn("profiler.dump_profile() is deprecated; use profiler.dump()",
                  DeprecationWarning, stacklevel=2)
    return dump(True)
