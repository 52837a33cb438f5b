"""The trainer's side of one vector env the program built: its steps, its workers' figures.

For a vector env whose envs run in worker processes (``AsyncVectorEnv``, ``SubprocVecEnv``), the
record is what a ``SubprocessEnvManager`` keeps about its workers, fed by rlprof's channel instead
of the vector env's pipes:

* a :class:`~profiler.multiprocess.merge.TimerMerger` named after the class, which merges each
  worker's payload under the trainer's ``vector.step`` block and keeps the worker's own tree for
  the dump's ``workers`` section;
* the critical path (:class:`~envmanager.measurement.critical_path.CriticalPath`): the trainer
  notes each vector step's window (actions sent, wait begun, results read), the workers ship the
  finish stamps of their env calls, and the stamp of each worker's last env call inside a step's
  window is its reply to that step (one monotonic clock for every process of the machine);
* the vector step's own timing, where the class's ``step`` calls rlprof's timed ``step_async``
  and ``step_wait``: a :class:`~profiler.timing.phased_block.PhasedBlock` ``vector.step`` whose
  phases are sending, waiting and receiving (:attr:`VectorEnvRecord.step_block`), the stamps of
  the run open now (``phase_clock``, ``sent_stamp``, ``waited_stamp``: set by the patched methods
  of :mod:`.known_classes`), and each step's window taken from the runs as the block folds them;
* env time (:class:`~envmanager.measurement.env_time.EnvTime`), from the CPU samples the workers
  ship with their payloads; CPU and memory gauges of every worker process
  (:class:`~envmanager.measurement.resources.ResourceGauges`);
* the trainer's own waits for a core, and time on one, inside its steps, read around its first
  512 steps, then one in 31 (:class:`~profiler.recording.block_waits.BlockWaits`: the dump's
  ``scheduling.in_blocks``), which the pipe's verdict leaves out of the pipe's time;
* each worker's waits for a core, as its kernel counted them
  (:class:`~envmanager.measurement.cpu_waits.CpuWaits`: the worker's ``scheduling`` entry, which
  the CPU verdicts quote), and where its time outside the env calls went (its ``untimed_samples``
  entry: the last section its stack sampler shipped, cumulative);
* per worker, what the channel delivered: ``complete``, or what was lost and why.

The steps are matched with the stamps in bulk, with numpy: every :data:`MATCH_EVERY_STEPS` steps
for the steps every worker has shipped past, and for the rest when the dump is written.
"""

from __future__ import annotations

import math
import threading
import time
import warnings
from typing import Any

import numpy as np

from profiler.analysis.text_format import counted
from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.recording.block_waits import BlockWaits
from profiler.timing.phased_block import PhasedBlock
from profiler.timing.timers import TimerNode, TimerStack
from profiler.tree.timer_text import TimerFileError
from profiler.tree.tree_reader import normalize_untimed_samples

from envmanager.instrumentation.reply_reads import ReplyReads
from envmanager.measurement.cpu_waits import CpuWaits, CpuWaitsError, validate_cpu_waits
from envmanager.measurement.critical_path import CriticalPath
from envmanager.measurement.env_time import EnvTime, EnvTimeError, validate_env_time
from envmanager.measurement.resources import ResourceGauges

__all__ = ["FORCE_MATCH_AFTER_STEPS", "MATCH_EVERY_STEPS", "RESOURCE_INTERVAL_SECONDS", "STEP_PHASES",
           "VectorEnvRecord"]

MATCH_EVERY_STEPS = 4096
"""Steps held before those every worker has shipped past are matched with their stamps."""

FORCE_MATCH_AFTER_STEPS = 16 * MATCH_EVERY_STEPS
"""Steps held at most while a worker's stamps lag (several of its one-second shipments at any step rate)."""

RESOURCE_INTERVAL_SECONDS = 1.0
"""Seconds between two samples of the workers' CPU and memory, taken at the end of a step."""

STEP_PHASES = ("vector.send_actions", "vector.wait_for_workers", "vector.receive_results")
"""The phases of a vector step whose envs run in workers, the children of its ``vector.step`` block."""

COMPLETE = "complete"
NEVER_CONNECTED = "never connected to rlprof's channel: this worker's timers are lost"
CUT_SHORT = "its channel ended before its last timers: the dump lacks what it timed since its last shipment"
LEFT_RUNNING = ("a daemon process still running as the program ended, which multiprocessing ends at the exit: "
                "the dump lacks what it timed since its last shipment")


class VectorEnvRecord:
    """One vector env: its class, its envs, and (for worker processes) their merged figures."""

    def __init__(self, class_name: str, name: str, envs: int, in_workers: bool, stack: TimerStack) -> None:
        self.class_name = class_name
        self.name = name
        self.envs = 0  # the workers' per-worker state is grown to ``envs`` below (_add_workers)
        self.in_workers = in_workers
        self.stack = stack
        self.built = False
        self.shared_memory: bool | None = None  # the class's setting, where it has one
        self.natively_vectorized = False  # one call steps all its envs (CartPoleVectorEnv)
        # The blocks of its steps and resets: the generic names, which the analysis splits, unless
        # the program's first vector env is of the other kind (envs in the trainer / in workers):
        # see name_apart.
        self.step_name = "vector.step"
        self.reset_name = "vector.reset"
        self.step_node: TimerNode | None = None
        self.sent_at: float | None = None
        # The step timed as one phased block (see time_steps_in_phases; None: `with` blocks), and
        # the run open now: the clock to stamp its phase ends with (None: no run open), the ends
        # of its sending and waiting phases (None: not reached).
        self.step_block: PhasedBlock | None = None
        self.phase_clock: Any = None
        self.sent_stamp: float | None = None
        self.waited_stamp: float | None = None
        self._lock = threading.Lock()
        # Per vector step: actions sent, wait begun, results read (the trainer's clock).
        self._steps: list[Any] = []
        # Per worker (see _add_workers): what its channel delivered, its pid, and its env calls whose
        # finish stamps arrived.
        self.channel: list[str] = []
        self.pids: list[int | None] = []
        self.shipped_calls: list[int] = []
        self.refused = 0
        self.vector_steps = 0
        self._generation = stack.generation  # the stack's reset last seen by the matching of steps
        self.keeps_stamps = True  # for the critical path: not where no vector step is taken
        self.core_waits: BlockWaits | None = None
        if not in_workers:
            self.merger = None
            self._add_workers(envs)
            return
        self.merger = TimerMerger(stack, name=name)
        self.replies = ReplyReads()  # the trainer's reads of its workers' replies, timed where they block
        self.core_waits = BlockWaits(self.step_name, stack)  # the trainer's waits for a core inside its steps
        self.critical_path = CriticalPath(envs, stack)
        self.env_times: list[EnvTime] = []
        self.cpu_waits: list[CpuWaits] = []
        self.untimed_samples: list[dict[str, Any] | None] = []
        self._stamps: list[list[np.ndarray]] = []
        self._latest_stamp: list[float] = []
        self.resources = ResourceGauges(RESOURCE_INTERVAL_SECONDS, stack)
        self._add_workers(envs)
        self.merger.add_worker_section("critical_path", self._critical_path_section)
        self.merger.add_worker_section("env_time", self._env_time_section)
        self.merger.add_worker_section("scheduling", lambda entry: self.cpu_waits[entry["worker_id"]].section()
                                       if 0 <= entry["worker_id"] < self.envs else None)
        self.merger.add_worker_section("untimed_samples", lambda entry: self.untimed_samples[entry["worker_id"]]
                                       if 0 <= entry["worker_id"] < self.envs else None)
        self.merger.add_worker_section("channel", lambda entry: self.channel_state(entry["worker_id"])
                                       if 0 <= entry["worker_id"] < self.envs else None)

    # --- the trainer's thread ----------------------------------------------------------------

    def time_steps_in_phases(self) -> None:
        """Time this vector env's steps as one phased block, wherever they can be: its class's
        ``step`` calls the ``step_async`` and ``step_wait`` that stamp the block's phases."""
        self.step_block = PhasedBlock(self.step_name, STEP_PHASES, on_fold=self._add_folded_steps)

    def step_done(self, waiting_since: float, end: float) -> None:
        """A vector step's results were read at ``end``; the trainer began waiting at ``waiting_since``."""
        block = self.step_block
        if block is not None and block.runs:  # its steps come first: the steps are held in order
            block.fold()
        self.vector_steps += 1
        steps = self._steps
        steps.append((self.sent_at if self.sent_at is not None else waiting_since, waiting_since, end))
        self.sent_at = None
        if time.monotonic() >= self.resources.next_sample_at:  # once a second: no call the other steps
            self.resources.maybe_sample(enumerate(self.pids))
        if len(steps) >= MATCH_EVERY_STEPS:
            self._match_held_steps(self._matched_up_to())

    def _add_folded_steps(self, runs: np.ndarray) -> None:
        """The step block's ``on_fold``: its runs, a row each (opened, sending ended, waiting ended,
        closed), are steps whose actions were sent after the block opened, whose wait began as
        sending ended and whose results were read by its close."""
        self.vector_steps += len(runs)
        steps = self._steps
        steps.extend(runs[:, (0, 1, 3)].tolist())
        if len(steps) >= MATCH_EVERY_STEPS:
            self._match_held_steps(self._matched_up_to())

    # --- the channel's threads ---------------------------------------------------------------

    def connected(self, index: int, pid: int) -> None:
        self.channel[index] = CUT_SHORT
        self.pids[index] = pid

    def name_apart(self) -> None:
        """Time this vector env's steps and resets as ``<name>.step`` and ``<name>.reset``
        (``SyncVectorEnv.step``), apart from ``vector.step``: the program's first vector env, of
        the other kind, has those. A block holds one kind of step: an ``env.step`` under it is the
        trainer's own call or the workers' merged calls, never both, and the analysis's split of
        ``vector.step`` (env compute, waiting, transport) reads one layout."""
        self.step_name = f"{self.name}.step"
        self.reset_name = f"{self.name}.reset"
        if self.core_waits is not None:
            self.core_waits.block = self.step_name

    @classmethod
    def of_own_processes(cls, stack: TimerStack) -> VectorEnvRecord:
        """The record of the processes the program started itself that built envs through
        ``gymnasium.make`` (:mod:`.own_processes`): no worker until one says hello
        (:meth:`add_worker`), and, since they take part in no vector step, no finish stamps kept
        and no critical path."""
        record = cls("Process", "Process", 0, True, stack)
        record.keeps_stamps = False
        return record

    def add_worker(self, pid: int) -> int:
        """One worker more, connected now (a process of :meth:`of_own_processes`); its index."""
        index = self._add_workers(1)
        self.connected(index, pid)
        return index

    def _add_workers(self, count: int) -> int:
        """The per-worker state of ``count`` workers more (the one place that lists it: the record's
        first workers and each process of :meth:`of_own_processes` alike); the first one's index."""
        with self._lock:
            first = self.envs
            self.channel += [NEVER_CONNECTED] * count
            self.pids += [None] * count
            self.shipped_calls += [0] * count
            if self.merger is not None:
                self.env_times += [EnvTime() for _ in range(count)]
                self.cpu_waits += [CpuWaits() for _ in range(count)]
                self.untimed_samples += [None] * count
                self._stamps += [[] for _ in range(count)]
                self._latest_stamp += [-math.inf] * count
            self.envs += count  # last: a reader that sees the new count finds every list grown
        if self.merger is not None:
            for index in range(first, first + count):
                self.merger.expect_worker(index)
        return first

    def said_goodbye(self, index: int) -> None:
        """Worker ``index`` shipped its last timers (its last env closed); a refused shipment
        stays what the dump says of it."""
        if self.channel[index] == CUT_SHORT:
            self.channel[index] = COMPLETE

    def resumed(self, index: int) -> None:
        """Worker ``index`` opened an env again after its goodbye (a pool's worker, its next task):
        timers are due from it again."""
        if self.channel[index] == COMPLETE:
            self.channel[index] = CUT_SHORT

    def left_running(self, index: int) -> None:
        """Worker ``index`` is a daemon process the program left running: the end of the run does
        not wait for its last timers, which it would send only as it ends (see
        :meth:`.EnvironmentInstrumentation.finish`)."""
        if self.channel[index] == CUT_SHORT:
            self.channel[index] = LEFT_RUNNING

    def add_timers(self, index: int, message: tuple[Any, ...]) -> None:
        """Merge one shipment: ``(payload, measured wall, measured cpu, measured calls, stamps,
        scheduling figures or None, untimed samples section or None)``."""
        try:
            payload, wall, cpu, calls, stamp_bytes, waits, untimed = message
            validate_env_time(wall, cpu, calls)
            validate_cpu_waits(waits)
            if untimed is not None:
                untimed = normalize_untimed_samples(untimed, f"{self.name} worker {index}: untimed_samples")
            if not isinstance(stamp_bytes, bytes) or len(stamp_bytes) % 8:
                raise PayloadError("the finish stamps are not a whole number of float64")
            stamps = np.frombuffer(stamp_bytes, dtype=np.float64)
            if stamps.size and (not np.isfinite(stamps).all() or (np.diff(stamps) < 0).any()):
                raise PayloadError("the finish stamps are not finite and ascending")
            anchor = self.step_node if self.step_node is not None else self.stack.root
            self.merger.merge_payload(index, payload, anchor)
        except (PayloadError, EnvTimeError, CpuWaitsError, TimerFileError, TypeError, ValueError) as error:
            self.refused += 1
            self.channel[index] = f"a shipment was refused ({error}): the dump lacks what it held"
            if self.refused == 1:
                warnings.warn(f"rlprof: dropped the timers of {self.name} worker {index}: {error}",
                              RuntimeWarning, stacklevel=1)
            return
        self.env_times[index].add(wall, cpu, calls)
        self.cpu_waits[index].add(waits)
        if untimed is not None:
            self.untimed_samples[index] = untimed  # cumulative: the latest holds every sample
        self.shipped_calls[index] += int(stamps.size)
        if stamps.size and self.keeps_stamps:
            with self._lock:
                self._stamps[index].append(stamps)
                self._latest_stamp[index] = float(stamps[-1])

    # --- matching steps with stamps -----------------------------------------------------------

    @property
    def held_steps(self) -> int:
        """Vector steps not yet matched with the workers' stamps (the step block's runs among them)."""
        return len(self._steps) + (len(self.step_block.runs) if self.step_block is not None else 0)

    def _matched_up_to(self) -> float:
        """Where every worker that ships has shipped past (a worker that never shipped holds
        nothing back: its replies are missing). A worker whose stamps lag
        :data:`FORCE_MATCH_AFTER_STEPS` steps is not waited for any longer, so the steps held stay
        bounded; its replies to those steps count as missing."""
        shipped = [at for at in self._latest_stamp if at > -math.inf]
        up_to = min(shipped) if shipped else math.inf
        steps = self._steps
        if len(steps) > FORCE_MATCH_AFTER_STEPS:
            up_to = max(up_to, steps[-MATCH_EVERY_STEPS][2])
        return up_to

    def match_steps(self, up_to: float = math.inf) -> None:
        """Count on the critical path the steps that ended by ``up_to``, each worker's reply
        being its last env call inside the step's window (the step block's runs folded first)."""
        if self.step_block is not None:
            self.step_block.fold()
        self._match_held_steps(up_to)

    def _match_held_steps(self, up_to: float) -> None:
        with self._lock:
            steps = self._steps
            if self.stack.generation != self._generation:
                # The timers were reset: the steps before go with the tree and the critical path
                # (which forgets the steps it counted), and so do the windows of the steps
                # that `with` blocks timed and the critical path has not counted yet; a phased
                # step's runs held then were dropped with the tree (PhasedBlock.discard).
                self._generation = self.stack.generation
                reset_at = self.stack.start_time
                steps[:] = [step for step in steps if step[0] >= reset_at]
            ready = 0
            while ready < len(steps) and steps[ready][2] <= up_to:
                ready += 1
            if not ready:
                return
            windows = np.array(steps[:ready], dtype=np.float64)
            del steps[:ready]
            stamps = [np.concatenate(arrays) if arrays else np.empty(0) for arrays in self._stamps]
            keep_from = steps[0][0] if steps else math.inf
            for index, worker_stamps in enumerate(stamps):
                kept = worker_stamps[worker_stamps >= keep_from]
                self._stamps[index] = [kept] if kept.size else []
        table = np.empty((len(windows), self.envs + 1))
        table[:, 0] = windows[:, 1]
        for index, worker_stamps in enumerate(stamps):
            last = np.searchsorted(worker_stamps, windows[:, 2], side="right") - 1
            found = last >= 0
            values = worker_stamps[np.maximum(last, 0)] if worker_stamps.size else np.zeros(len(windows))
            table[:, index + 1] = np.where(found & (values >= windows[:, 0]), values, np.nan)
        if np.isnan(table).any():
            missing = np.isnan(table)
            table = table.astype(object)
            table[missing] = None
        self.critical_path.count_steps(table)

    def _critical_path_section(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        self.match_steps()
        return self.critical_path.section(entry["worker_id"])

    def _env_time_section(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        worker = entry["worker_id"]
        if not 0 <= worker < self.envs:
            return None
        return self.env_times[worker].section(entry["children"])

    def lost(self) -> list[str]:
        """One line per worker whose timers did not all arrive."""
        if not self.in_workers or not self.built:
            return []
        return [f"{self.name} worker {index}: {self.channel_state(index)}"
                for index, state in enumerate(self.channel) if state != COMPLETE]

    def channel_state(self, index: int) -> str | None:
        """What worker ``index``'s channel delivered, in the dump's words; a channel cut short
        says how much arrived against the steps the trainer took, so the reader sees how much is
        missing."""
        if not 0 <= index < self.envs:
            return None
        state = self.channel[index]
        if state not in (CUT_SHORT, LEFT_RUNNING):
            return state
        arrived = f"{counted(self.shipped_calls[index], 'env call')} arrived"
        if not self.keeps_stamps:  # a process the program started: no vector step to count against
            return f"{state} ({arrived})"
        if self.step_block is not None:
            self.step_block.fold()  # the steps its runs hold count too
        return f"{state} ({arrived}; the trainer took {counted(self.vector_steps, 'vector step')})"
