"""``rlprof run`` with no flags: every environment the program builds, timed where it runs.

The program's vector env classes, pipes, start methods and results stay its own. rlprof only

* wraps the env factories given to Gymnasium's ``SyncVectorEnv``/``AsyncVectorEnv`` (which
  ``gymnasium.make_vec`` builds) and Stable-Baselines3's ``DummyVecEnv``/``SubprocVecEnv`` (which
  ``make_vec_env`` builds), so each env's ``step`` and ``reset`` are timed in the process that runs
  it (:mod:`.timed_env`, :mod:`.factories`), and times the envs ``gymnasium.make`` returns in the
  trainer;
* times the envs ``gymnasium.make`` builds in processes the program starts itself (a
  hand-written worker pool: :mod:`.own_processes`), forked or started with spawn or forkserver,
  each such process a worker of a record of its own (``Process``), with no critical path (they
  take part in no vector step rlprof knows);
* has worker processes ship their timers, finish stamps, CPU samples, waits for a core and
  samples of their stacks outside the env calls over a channel of its own (:mod:`.channel`), so
  the dump gets the ``workers`` section, the critical path, the env time and the scheduling
  figures that a ``SubprocessEnvManager`` gives, and where each worker's untimed time went
  (:mod:`.vector_env_record`);
* times the vector step of those classes on the trainer's side (:mod:`.known_classes`).

``profiler`` reaches this through the ``rlprof.environments`` entry point
(:func:`instrument_environments`); it never imports ``envmanager``.
"""

from __future__ import annotations

import functools
import math
import multiprocessing
import os
import threading
import time
import weakref
from typing import Any, Callable

from profiler.analysis.text_format import counted
from profiler.automatic import stack_sampler
from profiler.automatic.post_import import when_imported
from profiler.recording import events, memory
from profiler.timing import timers
from profiler.timing.timer_stack import TimerStack

from envmanager.instrumentation.channel import ChannelServer
from envmanager.instrumentation.factories import TimedFactory
from envmanager.instrumentation.known_classes import KnownClass, Patches
from envmanager.instrumentation.own_processes import (
    OWN_PROCESS_ID,
    mark_own_process,
    patch_gymnasium_make,
    started_in_fresh_interpreter,
    time_own_process_env,
)
from envmanager.instrumentation.pool_tasks import POOL_MODULE, is_pool_worker, patch_pool_worker
from envmanager.instrumentation.timed_env import WorkerIdentity, instrument_env, is_timed
from envmanager.instrumentation.vector_env_record import VectorEnvRecord

__all__ = ["FINAL_TIMERS_WAIT_SECONDS", "EnvironmentInstrumentation", "instrument_environments"]

FINAL_TIMERS_WAIT_SECONDS = 5.0
"""How long the end of the run waits for the workers' last timers once their envs are closed."""

NOTHING_INSTRUMENTED = (
    "no environment was instrumented: the program built none, in this process or in a process it "
    "started, through gymnasium.make/make_vec, Gymnasium's SyncVectorEnv/AsyncVectorEnv or "
    "Stable-Baselines3's DummyVecEnv/SubprocVecEnv (make_vec_env). Build the envs through one of "
    "those, time their calls with profiler.hierarchical_timer, or use --vector-env to run "
    "Gymnasium's vector envs as SubprocessEnvManagers"
)


class EnvironmentInstrumentation:
    """The known classes patched and ``gymnasium.make`` timed until :meth:`finish`."""

    def __init__(self) -> None:
        self.trainer_pid = os.getpid()
        self.records: list[VectorEnvRecord] = []
        self._made: list[Any] = []  # the timing of each env gymnasium.make returned in the trainer
        self._instances: weakref.WeakKeyDictionary[Any, VectorEnvRecord] = weakref.WeakKeyDictionary()
        self.last_found: tuple[weakref.ref[Any], VectorEnvRecord] | None = None
        self.named_apart = False  # a vector env's blocks were named apart (VectorEnvRecord.name_apart)
        self._vector_envs: list[weakref.ref[Any]] = []
        self._lock = threading.Lock()
        self._server: ChannelServer | None = None
        self._by_connection: dict[int, tuple[VectorEnvRecord, int]] = {}
        # Connections whose worker owes no timers now: it said goodbye (its last env closed), or it
        # is a daemon the program left running (see finish).
        self._settled: set[int] = set()
        self._own_processes: VectorEnvRecord | None = None
        self._own_identity: WorkerIdentity | None = None  # made as the trainer first starts a process
        self._patches = Patches(self)
        self._patches.install()
        import gymnasium.envs.registration as registration

        self._restore_make = patch_gymnasium_make(registration, self._made_env)
        self._restore_make_vec = patch_gymnasium_make(registration, self._made_vector_env, function="make_vec")
        self._restore_start = _mark_started_processes(self)
        self._restore_pool_worker = _patch_pool_workers()
        global _active
        _active = self

    # --- called by the patched classes (trainer thread) --------------------------------------

    def record_of(self, envs: Any) -> VectorEnvRecord | None:
        # Asked up to three times a vector step (its step, step_async and step_wait), most often
        # about the vector env asked about last: that one is kept, by a weak reference, where
        # the patched methods read it before calling this.
        last = self.last_found
        if last is not None and last[0]() is envs:
            return last[1]
        try:
            record = self._instances.get(envs)
        except TypeError:  # not weakly referable or not hashable: not one of ours
            return None
        if record is not None:
            self.last_found = (weakref.ref(envs), record)
        return record

    def new_record(self, cls: type, known: KnownClass, env_fns: Any) -> tuple[VectorEnvRecord, Any]:
        """A record for a vector env about to be built, and its factories wrapped."""
        factories = list(env_fns)
        record, vector_id = self._add_record(cls, len(factories), known.in_workers)
        if known.in_workers:
            _preload_in_forkserver()
            address = self._channel().address
            timeline, sampling = events.is_recording(), memory.sampling_settings()
            sample_stack = stack_sampler.is_sampled(record.stack)
            wrapped = [TimedFactory(factory, self.trainer_pid,
                                    WorkerIdentity(address, vector_id, index, timeline, sampling, sample_stack))
                       for index, factory in enumerate(factories)]
        else:
            wrapped = [TimedFactory(factory, self.trainer_pid, None) for factory in factories]
        return record, tuple(wrapped) if isinstance(env_fns, tuple) else wrapped

    def _add_record(self, cls: type, envs: int, in_workers: bool) -> tuple[VectorEnvRecord, int]:
        """A record for a vector env of ``cls``, named apart where the program's first vector env
        is of the other kind (:meth:`VectorEnvRecord.name_apart`), and its vector env id."""
        with self._lock:
            same = sum(1 for record in self.records if record.class_name == cls.__name__)
            name = cls.__name__ if not same else f"{cls.__name__} #{same + 1}"
            vector_id = len(self.records)
            stack = timers.get_timer_stack_for_thread(threading.current_thread())
            record = VectorEnvRecord(cls.__name__, name, envs, in_workers, stack)
            first = next((other for other in self.records if other is not self._own_processes), None)
            if first is not None and first.in_workers != in_workers:
                record.name_apart()
                self.named_apart = True
            self.records.append(record)
        return record, vector_id

    def _made_vector_env(self, envs: Any) -> None:
        """A vector env ``gymnasium.make_vec`` returned in the trainer. One of a class rlprof does
        not know is a natively vectorized env (``CartPoleVectorEnv``, which ``make_vec`` builds for
        CartPole by default): one call steps all its envs, in the trainer, so its class's ``step``
        and ``reset`` are timed as ``vector.step`` around that call (``Patches.time_natively_vectorized``)."""
        from gymnasium.vector import VectorEnv

        unwrapped = getattr(envs, "unwrapped", envs)
        if (os.getpid() != self.trainer_pid or not isinstance(unwrapped, VectorEnv)
                or self.record_of(unwrapped) is not None):  # a known class's: timed already
            return
        cls = type(unwrapped)
        record, _ = self._add_record(cls, getattr(unwrapped, "num_envs", 0), in_workers=False)
        record.natively_vectorized = True
        self._patches.time_natively_vectorized(cls)
        self.built(unwrapped, record)

    def built(self, envs: Any, record: VectorEnvRecord) -> None:
        record.built = True
        self.last_found = None  # an env built again over an old one: asked about afresh
        try:
            self._instances[envs] = record
            self._vector_envs.append(weakref.ref(envs))
        except TypeError:
            pass
        if record.in_workers:
            self._note_busy_processes(record.stack)
            vector_envs = [r for r in self.records if r.in_workers and r.built and r is not self._own_processes]
            # The verdicts advise about the pipe of the program's own class, not rlprof's manager.
            timers.add_metadata("vector_envs_in_place", ", ".join(sorted({r.class_name for r in vector_envs})),
                                record.stack)
            _note_shared_memory(vector_envs, record.stack)
            _note_observation_bytes(envs, record.stack)

    def _note_busy_processes(self, stack: TimerStack) -> None:
        """The trainer and every worker process so far, for the CPU verdicts."""
        workers = sum(r.envs for r in self.records if r.in_workers and r.built)
        timers.add_metadata("busy_processes", 1 + workers, stack)

    # --- processes the program starts itself (own_processes) -----------------------------------

    def _made_env(self, env: Any) -> None:
        """An env ``gymnasium.make`` returned: timed in the trainer, or in a process the program
        forked (which inherits this patch) as that process's."""
        if is_timed(env):
            return
        if os.getpid() == self.trainer_pid:
            timing = instrument_env(env, None)
            if timing is not None:
                self._made.append(timing)
        elif self._own_identity is not None:
            time_own_process_env(env, self._own_identity)

    def own_process_identity(self) -> WorkerIdentity:
        """Who a process the program starts is to the trainer, and the channel that its envs
        ship their timers on (made as the trainer first starts one; the settings are the run's)."""
        if self._own_identity is None:
            main_stack = timers.get_timer_stack_for_thread(threading.main_thread())
            self._own_identity = WorkerIdentity(
                self._channel().address, OWN_PROCESS_ID, -1, events.is_recording(),
                memory.sampling_settings(), stack_sampler.is_sampled(main_stack))
        return self._own_identity

    def _own_process_said_hello(self, connection: int, pid: int) -> None:
        with self._lock:
            record = self._own_processes
            if record is None:
                stack = timers.get_timer_stack_for_thread(threading.main_thread())
                record = self._own_processes = VectorEnvRecord.of_own_processes(stack)
                record.built = True
                self.records.append(record)
        index = record.add_worker(pid)
        self._by_connection[connection] = (record, index)
        self._note_busy_processes(record.stack)

    # --- the channel (its threads) -------------------------------------------------------------

    def _channel(self) -> ChannelServer:
        with self._lock:
            if self._server is None:
                self._server = ChannelServer(self._on_message, self._on_closed)
            return self._server

    def _on_message(self, connection: int, message: Any) -> None:
        if not isinstance(message, tuple) or not message:
            return
        if message[0] == "hello" and len(message) == 4:
            _, vector_id, index, pid = message
            if vector_id == OWN_PROCESS_ID and index == -1 and isinstance(pid, int):
                self._own_process_said_hello(connection, pid)
                return
            if not (isinstance(vector_id, int) and 0 <= vector_id < len(self.records)):
                return
            record = self.records[vector_id]
            if isinstance(index, int) and 0 <= index < record.envs and isinstance(pid, int):
                self._by_connection[connection] = (record, index)
                record.connected(index, pid)
            return
        known = self._by_connection.get(connection)
        if known is None:
            return
        record, index = known
        if message[0] == "timers":
            record.add_timers(index, message[1:])
        elif message[0] == "bye":
            record.said_goodbye(index)
            self._settled.add(connection)
        elif message[0] == "resumed":
            self._settled.discard(connection)
            record.resumed(index)

    def _on_closed(self, connection: int) -> None:
        self._by_connection.pop(connection, None)

    # --- the end of the run --------------------------------------------------------------------

    def finish(self, *, program_still_running: bool = False) -> list[str]:
        """Close the vector envs the program left open (their workers ship their last timers
        then), wait for those timers, put the classes back; the lines to tell the user.

        ``program_still_running``: the process ends next while the program's main thread may
        still be using its vector envs (another thread called ``os._exit``): they are neither
        closed nor waited for, and the lines say what each worker's last shipment left out.

        The closes and the wait share one :data:`FINAL_TIMERS_WAIT_SECONDS`: after a close that
        hung (a worker that died mid-step), waiting again for the timers its workers will never
        send doubled the end of such a run. A worker that said goodbye (its last env closed) owes
        nothing, though its process may live on (a pool's worker between tasks). Processes the
        program started as daemons and left running are not waited for at all: they send their
        last timers as they end, and ``multiprocessing`` ends them only at the exit, with SIGTERM."""
        deadline = time.monotonic() + (0.0 if program_still_running else FINAL_TIMERS_WAIT_SECONDS)
        problems = []
        for reference in [] if program_still_running else self._vector_envs:
            envs = reference()
            if envs is not None and not _is_closed(envs):
                try:
                    _close(envs, max(0.0, deadline - time.monotonic()))
                except CloseDidNotEnd as error:
                    problems.append(f"closing the program's {type(envs).__name__} {error}")
                except Exception as error:  # noqa: BLE001 - the timers merged so far are still written
                    problems.append(f"closing the program's {type(envs).__name__} failed: "
                                    f"{type(error).__name__}: {error}")
        if self._server is not None:
            self._settled |= self._daemons_left_running()
            self._server.wait_for_workers(max(0.0, deadline - time.monotonic()), settled=self._settled.__contains__)
            self._server.close()
        for record in self.records:
            if record.merger is not None:
                record.match_steps()
                record.merger.retire()
                record.replies.release()  # the program's pipes get their own recv back
        self._patches.restore()
        self._restore_make()
        self._restore_make_vec()
        self._restore_start()
        self._restore_pool_worker()
        global _active
        if _active is self:
            _active = None
        return [*self.summary(), *problems, *(line for record in self.records for line in record.lost())]

    def _daemons_left_running(self) -> set[int]:
        """The channel connections of the processes the program started as daemons and left
        running, each marked so in its record."""
        record = self._own_processes
        if record is None:
            return set()
        daemons = {process.pid for process in multiprocessing.active_children() if process.daemon}
        left_running = set()
        for connection, (worker_record, index) in list(self._by_connection.items()):
            if worker_record is record and record.pids[index] in daemons:
                record.left_running(index)
                left_running.add(connection)
        return left_running

    @property
    def made(self) -> int:
        """Envs from ``gymnasium.make`` timed on their own (not inside a vector env's factory)."""
        return sum(1 for timing in self._made if timing.active)

    def summary(self) -> list[str]:
        """What was instrumented, in one line (or the line that says nothing was, and what to do)."""
        built = [record for record in self.records if record.built]
        if not built and not self.made:
            return [NOTHING_INSTRUMENTED]
        parts = []
        for record in built:
            if record is self._own_processes:
                parts.append(f"gymnasium.make in {counted(record.envs, 'process', 'processes')} the program started")
                continue
            where = (counted(record.envs, "worker process", "worker processes") if record.in_workers
                     else "this process, stepped in one call" if record.natively_vectorized else "this process")
            apart = (f"; timed as {record.step_name}, apart from the other kind's vector.step"
                     if record.step_name != "vector.step" else "")
            parts.append(f"{record.name} ({counted(record.envs, 'env')}, in {where}{apart})")
        if self.made:
            parts.append(f"{counted(self.made, 'env')} from gymnasium.make (in this process)")
        return ["environments timed where they ran: " + ", ".join(parts)]


_WORKER_MODULE = "envmanager.instrumentation.factories"
"""What an env worker imports as it unpickles its factory (rlprof's timing of the env)."""


def _note_shared_memory(in_workers: list[VectorEnvRecord], stack: TimerStack) -> None:
    """Say in the run's metadata whether the program's vector envs put array observations in
    shared memory (``"True"``, ``"False"``, as a ``SubprocessEnvManager`` says it: the transport
    verdict then advises turning it on only where it was off); said for none when they differ.
    Classes without the setting (SB3's) do not count."""
    settings = {record.shared_memory for record in in_workers if record.shared_memory is not None}
    if len(settings) == 1:
        timers.add_metadata("shared_memory", str(settings.pop()), stack)
    elif settings:
        stack.metadata.pop("shared_memory", None)


def _note_observation_bytes(envs: Any, stack: TimerStack) -> None:
    """Say in the run's metadata how many bytes one env's observation takes, the largest of the
    program's vector envs in workers, where their observation space tells (Gymnasium's
    ``single_observation_space``, SB3's ``observation_space``): the transport verdict advises
    smaller observations only where their bytes can cost the pipe, not for CartPole's 16."""
    space = getattr(envs, "single_observation_space", None)
    if space is None:
        space = getattr(envs, "observation_space", None)
    size = _space_bytes(space)
    if size is not None:
        timers.add_metadata("observation_bytes", max(size, int(stack.metadata.get("observation_bytes", 0))), stack)


def _space_bytes(space: Any) -> int | None:
    """The bytes of one value of a Gymnasium space (a Dict's or Tuple's parts added up); None for a
    space that does not say its shape and dtype."""
    from gymnasium import spaces

    if isinstance(space, (spaces.Dict, spaces.Tuple)):
        parts = [_space_bytes(part) for part in (space.spaces.values() if isinstance(space, spaces.Dict)
                                                  else space.spaces)]
        return None if None in parts else sum(parts)  # type: ignore[arg-type]
    shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
    if shape is None or dtype is None:
        return None
    return math.prod(int(dimension) for dimension in shape) * dtype.itemsize


def _preload_in_forkserver() -> None:
    """Have multiprocessing's forkserver, if it is yet to start, import rlprof's worker side once.

    A worker started by forkserver (Stable-Baselines3's ``SubprocVecEnv`` by default) is forked
    from the server and imports what its factory needs, once a worker: rlprof's part was 36 M
    instructions each (callgrind, after torch, Gymnasium and SB3). Preloaded in the server (the
    way ``multiprocessing.set_forkserver_preload`` does for ``__main__``, the only module it
    preloads by default), each worker inherits it. A server already running, or preloading set
    by the program, is left as it is. Every later forkserver process of the program inherits the
    import too, idle: docs/run.md says so.
    """
    from multiprocessing import forkserver

    server = getattr(forkserver, "_forkserver", None)
    preload = getattr(server, "_preload_modules", None)
    if (server is None or getattr(server, "_forkserver_pid", None) is not None
            or preload != ["__main__"]):
        return
    forkserver.set_forkserver_preload([*preload, _WORKER_MODULE])


def _is_closed(envs: Any) -> bool:
    return bool(getattr(envs, "closed", False))


def _close(envs: Any, timeout: float) -> None:
    """Close a vector env the program left open, never waiting on it longer than ``timeout``
    seconds: a Gymnasium one stuck in a call (the program was interrupted mid-step) terminates its
    workers then; any other class's ``close`` runs on a daemon thread and is left there if it has
    not ended (SB3's waits forever for the reply of a worker that died mid-step), so the end of the
    run never hangs on it. Raises what the close raised, or :class:`CloseDidNotEnd`."""
    from gymnasium.vector import AsyncVectorEnv

    if isinstance(envs, AsyncVectorEnv):
        envs.close(timeout=timeout)
        return
    raised: list[BaseException] = []

    def close() -> None:
        try:
            envs.close()
        except BaseException as error:  # noqa: BLE001 - handed to the trainer's thread
            raised.append(error)

    closing = threading.Thread(target=close, name="rlprof-close-vector-env", daemon=True)
    closing.start()
    closing.join(timeout)
    if closing.is_alive():
        raise CloseDidNotEnd(f"did not end within the {FINAL_TIMERS_WAIT_SECONDS:g} seconds the end of the run "
                             "waits for the workers and was left running (a worker that died mid-step, or a slow "
                             "close): the last timers of its workers are missing")
    if raised:
        raise raised[0]


class CloseDidNotEnd(Exception):
    """A vector env's ``close`` at the end of the run was still waiting when rlprof stopped waiting."""


def _mark_started_processes(instrumentation: EnvironmentInstrumentation) -> Callable[[], None]:
    """Mark each ``multiprocessing`` process the trainer starts with spawn or forkserver
    (:func:`~envmanager.instrumentation.own_processes.mark_own_process`), so that the envs
    ``gymnasium.make`` builds there are timed; a forked process inherits the patched ``make``
    instead (:func:`_before_fork`). Returns what puts ``start`` back."""
    from multiprocessing import process

    original = process.BaseProcess.start

    def start(self: Any) -> None:
        if os.getpid() == instrumentation.trainer_pid and started_in_fresh_interpreter(self):
            mark_own_process(self, instrumentation.own_process_identity(),
                             pool_worker=is_pool_worker(getattr(self, "_target", None)))
        return original(self)

    functools.update_wrapper(start, original)
    process.BaseProcess.start = start

    def restore() -> None:
        if process.BaseProcess.start is start:
            process.BaseProcess.start = original

    return restore


def _patch_pool_workers() -> Callable[[], None]:
    """Have the workers of each ``multiprocessing.Pool`` the program starts ship before their
    tasks' results (:mod:`.pool_tasks`), once it imports ``multiprocessing.pool``; returns what
    undoes it."""
    restores: list[Callable[[], None]] = []
    watch = when_imported(POOL_MODULE, lambda module: restores.append(patch_pool_worker(module)))

    def restore() -> None:
        if watch is not None:
            watch.cancel()
        for undo in restores:
            undo()

    return restore


_active: EnvironmentInstrumentation | None = None
"""The instrumentation of this run, until its finish (a forked child holds its copy)."""


def _before_fork() -> None:
    """In the trainer, before any fork: a forked process that builds envs knows where to ship."""
    instrumentation = _active
    if instrumentation is not None and os.getpid() == instrumentation.trainer_pid:
        instrumentation.own_process_identity()


os.register_at_fork(before=_before_fork)


def instrument_environments() -> EnvironmentInstrumentation:
    """The ``rlprof.environments`` entry point: instrument until ``finish()``."""
    return EnvironmentInstrumentation()
