"""What a worker does: its envs and its answers (:class:`EnvRunner`), and the loop that runs it
inside each worker subprocess.

A worker owns ``k >= 1`` consecutive envs of the batch (``envs_per_worker``).  It waits for a
request, runs it on all of its envs, and sends one reply: one round trip per worker per
step, however many envs it holds.  The message layouts are in :mod:`envmanager.transport.protocol`.

:class:`EnvRunner` knows nothing of pipes: it turns a request into a reply.  The subprocess
loop here carries requests and replies over two one-way pipes; a Ray actor
(:mod:`envmanager.ray.ray_worker`) carries the very same ones as method calls and their results.

A failing env never kills the worker: the exception goes back in the reply, and the worker
keeps serving until the trainer decides what to do (it shuts it down after a failed step or
reset, as Gymnasium does).

Ending: after CLOSE (or EOF on the pipe) the worker closes its envs and returns.  SIGTERM
(from the trainer's ``terminate``, or sent to itself when its trainer died, see
:mod:`envmanager.lifetime.lifeline`) interrupts whatever the worker is doing, even an env call that
hangs in Python code, closes the envs, so the helper processes they started are stopped,
and ends the process with SIGTERM's exit code.  The worker leads a process group of its own
(:mod:`envmanager.lifetime.process_group`): whatever the envs leave running is killed with that group,
by the trainer, or by the worker itself when it learns, by any route, that no trainer is left.

Profiling: every env ``reset`` and ``step`` is a timer block (``env.reset``, ``env.step``) in
the worker's own timer tree, and so is any ``@timed``/``hierarchical_timer`` block in the env's
code.  A :class:`~profiler.multiprocess.payload.WorkerTimers` decides when the tree is due to ship; the
payload rides on the next step reply, in the reply's own ``timers`` field, on every reset reply
(the trainer merges those under its reset block), on a FLUSH reply, and once more on the CLOSE
reply so nothing is lost.  Beside it travels the wall and CPU time of the env calls sampled
since the previous payload (:mod:`envmanager.measurement.env_time`), and every reply is stamped with
the moment the worker finished it, from which the trainer learns whom each step waited for
last (:mod:`envmanager.measurement.critical_path`).
"""

from __future__ import annotations

import contextlib
import functools
import os
import pickle
import select
import signal
import sys
import time
import warnings
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Callable, Sequence

from gymnasium import Env, Space
from gymnasium.vector import AutoresetMode

from profiler.recording import events, memory
from profiler.timing import timers
from profiler.gpu import nvtx_bridge, torch_ops
from profiler.gpu.nvtx_bridge import NvtxSettings
from profiler.recording.memory import MemorySampling
from profiler.multiprocess.payload import WorkerTimers

from envmanager.transport import protocol
from envmanager.transport.autoreset import SubEnv
from envmanager.transport.env_calls import make_env_calls
from envmanager.measurement.env_time import CpuSampler
from profiler.recording.scheduling import SchedulingSampler
from envmanager.lifetime.lifeline import (
    PARENT_DEATH_SIGNAL,
    TRAINER_EXIT_SECONDS,
    ask_for_signal_at_parent_death,
    end_after_trainer_death,
    terminate_after_trainer_death,
    trainer_is_gone,
    watch_trainer,
)
from envmanager.transport.observations import ObservationMismatch, ObservationPacker
from envmanager.lifetime.permits import ConcurrencyPermits
from envmanager.lifetime.process_group import lead_new_process_group
from envmanager.transport.protocol import IN_SHARED_MEMORY, RemoteFailure
from envmanager.transport.rlprof_worker import mark_as_rlprof_worker
from envmanager.transport.step_buffers import StepBuffers, WorkerRows

__all__ = ["EnvFactories", "EnvRunner", "WorkerConfig", "configure_profiling", "run_worker"]


class EnvFactories:
    """The env factories of one worker, pickled with cloudpickle when they cross processes.

    Under ``spawn``/``forkserver`` the standard pickler cannot send the lambdas and closures
    users write (``lambda: gym.make(...)``); cloudpickle can.  Under ``fork`` nothing is
    pickled at all.
    """

    __slots__ = ("factories",)

    def __init__(self, factories: Sequence[Callable[[], Env]]) -> None:
        self.factories = list(factories)

    def __getstate__(self) -> bytes:
        import cloudpickle

        return cloudpickle.dumps(self.factories)

    def __setstate__(self, state: bytes) -> None:
        self.factories = pickle.loads(state)


@dataclass
class WorkerConfig:
    """Everything a worker needs, handed over once as the process argument."""

    worker_index: int
    first_env: int
    num_envs: int  # in the whole manager, to lay out the shared observation buffer
    factories: EnvFactories
    autoreset_mode: AutoresetMode
    observation_space: Space
    shared_buffer: Any
    permits: ConcurrencyPermits | None  # the pool's max_concurrency permits; None: no limit
    profiling: bool
    flush_every: int | None
    flush_interval: float | None
    record_timeline: bool
    # The trainer's memory sampling (None: off), which the worker does on itself and ships.
    memory_sampling: MemorySampling | None
    # The trainer's profiler.gpu.emit_nvtx settings when the worker starts (None: off); the
    # manager sends later changes as NVTX requests.
    nvtx: NvtxSettings | None
    # Under fork the child inherits the trainer's end of every pipe made so far; holding them
    # would keep those pipes open, so a worker would never see EOF if the trainer died.
    inherited_connections: list[Connection]
    # The read end of the pool's lifeline (set by the pool), and whether to ask the kernel for
    # SIGTERM when the parent dies (only when the thread that starts the worker lives as long
    # as the trainer).
    lifeline: Connection | None
    signal_at_parent_death: bool
    # The manager's shared step buffers, when a step's actions and results travel in shared
    # memory (shared_memory=True and an array-like action space); None: in the messages.
    step_buffers: StepBuffers | None = None
    # Whether the trainer recorded PyTorch's operators when the worker started: the worker then
    # records its own (profiler.gpu.torch_ops), folded into its tree, which its payloads carry.
    record_operators: bool = False


class _Terminated(BaseException):
    """Raised by SIGTERM in the worker's main thread, so the envs are closed on the way out.

    A BaseException, so that an env's ``except Exception`` does not swallow it.
    """


class _TrainerGone(_Terminated):
    """Raised by the parent-death signal: the trainer is dying (see :mod:`envmanager.lifetime.lifeline`)."""


# Set once, for good, as the worker starts to end (``run_worker``'s ``finally``); the death
# signals' handlers then return without raising. A handler runs at the next instruction that
# checks for signals, which can be the first one of a function called to end the group,
# before any ``try`` in it: raised there, the exception would end the process with its group,
# and the helpers its envs left, alive. The flag is set by a plain store, which no signal
# handler can run before.
_ending = False


def _on_sigterm(signum: int, frame: Any) -> None:
    if _ending:
        return
    # A second SIGTERM must not cut closing the envs short.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _Terminated


def _on_parent_death(signum: int, frame: Any) -> None:
    if _ending:
        return
    signal.signal(PARENT_DEATH_SIGNAL, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise _TrainerGone


def run_worker(config: WorkerConfig, requests: Connection, replies: Connection) -> None:
    """Process entry point: build the envs, then serve requests until CLOSE or EOF."""
    global _ending
    mark_as_rlprof_worker()
    parent_pid = os.getppid()
    lead_new_process_group()
    for inherited in config.inherited_connections:
        inherited.close()
    # The trainer stops its workers itself when interrupted; Ctrl-C is not for them.  The
    # trainer started this process with SIGINT blocked (see pool.py), so that a Ctrl-C meant
    # for the trainer could not reach it before this line: a pending one is discarded here.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    signal.signal(PARENT_DEATH_SIGNAL, _on_parent_death)
    if config.signal_at_parent_death:
        ask_for_signal_at_parent_death(PARENT_DEATH_SIGNAL)
    watch_trainer(config.lifeline, functools.partial(terminate_after_trainer_death, config.permits))
    configure_profiling(config)
    signal.signal(signal.SIGTERM, _on_sigterm)
    trainer_gone = False
    try:
        try:
            trainer_gone = _WorkerLoop(config, requests, replies, parent_pid).serve()
        except _TrainerGone:
            trainer_gone = True
        except _Terminated:
            trainer_gone = trainer_is_gone(config.lifeline, parent_pid)
            if not trainer_gone:
                # The trainer kills the rest of the group, and sees SIGTERM's own exit code.
                _flush_standard_streams()  # the kill below skips the interpreter's own flushing
                signal.signal(signal.SIGTERM, signal.SIG_DFL)
                os.kill(os.getpid(), signal.SIGTERM)
    finally:
        _ending = True
        _end_if_trainer_gone(trainer_gone, config, parent_pid)
    # Closed normally: a late SIGTERM now just ends the process.
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _end_if_trainer_gone(told: bool, config: WorkerConfig, parent_pid: int) -> None:
    """End the worker's group if the trainer is gone (``told`` so, or the lifeline says so): stop
    what the envs left running and remove the permits, since nobody else is left to.  Then it
    never returns: its last step kills this process.

    A death signal can cut any step of :func:`run_worker` short, even the handling of another
    death signal (the lifeline's SIGTERM, then the parent-death signal), so this runs from its
    ``finally``, whatever happened, once ``_ending`` is set: no signal cuts it short.
    """
    if told or trainer_is_gone(config.lifeline, parent_pid):
        _flush_standard_streams()
        end_after_trainer_death(config.permits)


def configure_profiling(config: WorkerConfig) -> None:
    """Set up this worker process's timers as the trainer asked, before any env is built."""
    if not config.profiling:
        timers.disable()  # this process only: user blocks in env code cost nothing either
        memory.stop_sampling()  # a forked process inherits the trainer's; nothing would ship it
    else:
        if config.record_timeline and not events.is_recording():
            events.start_recording()  # a spawned process does not inherit the trainer's recording
        if config.memory_sampling is not None:
            # Spawned: start sampling; forked: the sampler thread did not survive the fork.
            memory.apply_sampling(config.memory_sampling)
    # Also when off: a forked worker inherits the trainer's bridge, which names the trainer.
    _apply_nvtx(config.nvtx if config.profiling else None, config.worker_index)
    if config.profiling and config.record_operators:
        _start_operators(config.worker_index)


def _start_operators(worker_index: int) -> None:
    """Record this worker's PyTorch operators as the trainer does (in the thread that runs its
    envs). Without PyTorch here it is said on stderr (a warning) and the envs run without."""
    try:
        torch_ops.start_operators()
    except (torch_ops.OperatorsUnavailableError, RuntimeError) as error:
        warnings.warn(f"env worker {worker_index}: no PyTorch operators recorded: {error}",
                      RuntimeWarning, stacklevel=1)


def _apply_nvtx(settings: NvtxSettings | None, worker_index: int) -> None:
    """Open NVTX ranges as the trainer does. A backend this process cannot load is said on
    stderr (as a warning) rather than ending the worker: its envs still run, without ranges."""
    try:
        nvtx_bridge.apply_nvtx(settings, worker_index)
    except (nvtx_bridge.NvtxUnavailableError, ValueError) as error:
        warnings.warn(f"env worker {worker_index}: no NVTX ranges: {error}", RuntimeWarning, stacklevel=1)


def _flush_standard_streams() -> None:
    for stream in (sys.stdout, sys.stderr):
        if stream is not None:
            with contextlib.suppress(Exception):
                stream.flush()


class _WorkerLoop:
    """One worker subprocess: an :class:`EnvRunner` answering the requests of one pipe on another."""

    def __init__(self, config: WorkerConfig, requests: Connection, replies: Connection, parent_pid: int) -> None:
        self.requests = requests
        self.replies = replies
        # Read once: Connection.fileno() is two Python calls, on every reply. The end stays open
        # for as long as the loop sends on it.
        self.replies_fd = replies.fileno()
        self.lifeline = config.lifeline
        self.parent_pid = parent_pid
        self.runner = EnvRunner(config)

    def serve(self) -> bool:
        """Answer requests until CLOSE or end-of-file; True if it ended seeing the trainer gone."""
        runner = self.runner
        requests = protocol.MessageReader(self.requests.fileno())
        try:
            runner.build_envs()
            while True:
                try:
                    sequence, command, body = protocol.decode(requests.read())
                except (EOFError, OSError):
                    return self._trainer_gone_after_end_of_requests()
                if command == protocol.CLOSE:
                    runner.close_envs()
                    try:
                        self._send(sequence, True, None, runner.last_timers(), time.perf_counter())
                    except OSError:
                        return True  # the trainer died after asking: its envs' leftovers are ours to end
                    return False
                try:
                    self._send(sequence, *runner.answer(command, body))
                except OSError:  # no reader left: a live trainer closes its end only once we are stopped
                    return True
        finally:
            runner.close_envs()

    def _trainer_gone_after_end_of_requests(self) -> bool:
        """The trainer stopped writing to us: it is gone, or an interrupt cut us off and it
        still reads our replies (then it stops us itself).  Offer the last timers, and ask the
        lifeline which it is."""
        if not self._offer_last_timers():
            return True  # our replies have no reader left: the trainer is gone
        self.replies.close()  # a trainer reading the rest sees the end of it at once
        return trainer_is_gone(self.lifeline, self.parent_pid, TRAINER_EXIT_SECONDS)

    def _offer_last_timers(self) -> bool:
        """Send the last timer data without ever blocking, when the trainer stopped writing;
        False if the reply pipe has no reader any more.

        Usually the trainer is gone and this fails at once.  But a trainer that an interrupt
        caught while it was writing to us closes its end of our requests pipe and still
        reads our replies, so these timers are not lost.  Never blocking matters: a pipe end that
        nobody reads must not keep this process from exiting.
        """
        fd = self.replies.fileno()
        if not _has_reader(fd):
            return False
        if self.runner.timers is None:
            return True
        try:
            os.set_blocking(fd, False)
            self._send(0, True, None, self.runner.last_timers(), time.perf_counter())
        except BrokenPipeError:
            return False
        except OSError:
            pass  # not reading now (a full pipe): nothing to be done about it
        return True

    def _send(self, sequence: int, ok: bool, body: Any, timer_payload: Any, finished_at: float) -> None:
        try:
            data = protocol.encode((sequence, ok, body, timer_payload, finished_at))
        except Exception as exc:
            # An info or a result that does not pickle (its class refuses, it nests too deep):
            # nothing was written, so the reply reports that instead.
            failure = RemoteFailure(exc, None, f"its reply could not be pickled in worker {self.runner.config.worker_index}")
            data = protocol.encode((sequence, False, failure, timer_payload, finished_at))
        protocol.write_message(self.replies_fd, data)


def _has_reader(pipe_fd: int) -> bool:
    """Whether the read end of the pipe we write to is still open somewhere (no POLLERR)."""
    poller = select.poll()
    poller.register(pipe_fd, select.POLLOUT)
    return not any(events & select.POLLERR for _, events in poller.poll(0))


class EnvRunner:
    """A worker's envs and its answer to each request, whatever carries the requests.

    It holds the envs, how they pack observations, the worker's timers and its env time meter;
    :meth:`answer` runs one request and returns the ``(ok, body, timers, finished_at)`` of its
    reply (see :mod:`envmanager.transport.protocol`).  An env's exception is answered, never raised.
    """

    def __init__(self, config: WorkerConfig) -> None:
        self.config = config
        self.first_env = config.first_env
        self.envs: list[SubEnv] = []
        self.creation_failure: RemoteFailure | None = None
        self._failing_env: int | None = None  # the env being run, named in a failure reply
        self.timers = WorkerTimers(config.flush_every, config.flush_interval) if config.profiling else None
        # The timers' clock, read directly: timers.now() would add a call to every reply.
        self.clock = timers.current_clock()
        self.cpu_sampler = CpuSampler()
        # The kernel's count of this worker's waits for a core, shipped beside each payload.
        self.scheduling = SchedulingSampler() if config.profiling else None
        self.packer = ObservationPacker(
            config.observation_space, config.shared_buffer, self.first_env, config.num_envs
        )
        self.step_rows = (
            None
            if config.step_buffers is None
            else WorkerRows(config.step_buffers, self.first_env, len(config.factories.factories))
        )

    def build_envs(self) -> None:
        """Build the envs; a factory that raises is answered to every request that follows."""
        config = self.config
        guard_reset, guard_step = make_env_calls(config.permits, config.profiling, self.cpu_sampler)
        for j, factory in enumerate(config.factories.factories):
            try:
                env = factory()
            except Exception as exc:
                self.creation_failure = RemoteFailure(exc, self.first_env + j)
                break
            self.envs.append(SubEnv(env, config.autoreset_mode, guard_reset, guard_step))

    def answer(self, command: int, body: Any) -> tuple[bool, Any, Any, float]:
        """Run one request (any command but CLOSE): the ``(ok, body, timers, finished_at)`` of its
        reply, ``finished_at`` being the moment it was ready."""
        if self.creation_failure is not None:
            return False, self.creation_failure, None, time.perf_counter()
        try:
            if command == protocol.STEP:  # _handle's first case, without its call
                self._failing_env = None
                ok, reply = True, self._step(body)
            else:
                ok, reply = True, self._handle(command, body)
        except (Exception, KeyboardInterrupt, SystemExit) as exc:
            # Also an env's own KeyboardInterrupt or sys.exit: the worker ignores Ctrl-C, so
            # these are the env's, and the trainer must hear of them rather than of an exit code.
            ok, reply = False, RemoteFailure(exc, self._failing_env)
        worker_timers = self.timers
        if worker_timers is None:
            return ok, reply, None, time.perf_counter()
        # One read of the timers' clock (time.perf_counter, unless a test set another) both
        # stamps the reply and tells whether the timers are due to ship: between flushes a step
        # pays one comparison for it, no second read, no call.
        finished_at = self.clock()
        if command == protocol.STEP:
            if finished_at < worker_timers.quiet_until:
                return ok, reply, None, finished_at
            payload = worker_timers.step_done(finished_at)
        elif command == protocol.RESET or command == protocol.FLUSH:
            # Always on a reset: the trainer merges a reset reply's timers under its reset block,
            # so they must hold the reset's time (it flushed the steps' time just before).
            payload = worker_timers.final_payload()
        else:
            payload = None
        if payload is None:
            return ok, reply, None, finished_at
        # With the env time measured since the previous payload; the reply is ready only now.
        # A reset's or a flush's reply reads the kernel's figures always: a dump may follow.
        return ok, reply, self._with_figures(payload, final=command != protocol.STEP), timers.now()

    def last_timers(self) -> Any:
        """Everything timed since the previous payload, with its env time: the ``timers`` of a
        worker's last reply (None when not profiling)."""
        if self.timers is None:
            return None
        return self._with_figures(self.timers.final_payload(), final=True)

    def _with_figures(self, payload: Any, final: bool = False) -> tuple[Any, float, float, int, Any]:
        """A reply's ``timers``: the payload, the env time and the waits for a core since the
        previous payload (see :mod:`envmanager.transport.protocol`)."""
        scheduling = self.scheduling.take(final) if self.scheduling is not None else None
        return (payload, *self.cpu_sampler.take(), scheduling)

    def _handle(self, command: int, body: Any) -> Any:
        self._failing_env = None
        if command == protocol.STEP:
            return self._step(body)
        if command == protocol.RESET:
            return self._reset(*body)
        if command == protocol.CALL:
            return self._call(*body)
        if command == protocol.SET_ATTR:
            return self._set_attr(*body)
        if command == protocol.DESCRIBE:
            return [(e.env.observation_space, e.env.action_space) for e in self.envs]
        if command == protocol.FLUSH:
            return None
        if command == protocol.NVTX:
            if self.config.profiling:
                settings = None if body is None else NvtxSettings(*body)
                _apply_nvtx(settings, self.config.worker_index)
            return None
        raise RuntimeError(f"worker received unknown command {command!r}")

    def _step(self, actions: Sequence[Any] | protocol.PackedArray | Any) -> Any:
        step_rows = self.step_rows
        if actions is IN_SHARED_MEMORY:
            actions = step_rows.read_actions()
        elif type(actions) is tuple:  # a packed array; iterating it gives numpy scalars or rows
            actions = protocol.unpack_array(actions)
        envs = self.envs
        observations = [None] * len(envs)
        rewards = [0.0] * len(envs)
        terminations = [False] * len(envs)
        truncations = [False] * len(envs)
        infos = None
        for j, env in enumerate(envs):
            self._failing_env = self.first_env + j
            obs, rewards[j], terminations[j], truncations[j], info = env.step(actions[j])
            observations[j] = obs
            if info:
                if infos is None:
                    infos = [None] * len(envs)
                infos[j] = info
        try:  # _pack, without its call
            packed_observations = self.packer.pack(observations, None)
        except ObservationMismatch as exc:
            self._failing_env = exc.env_index  # the env that returned it, not the last one run
            raise
        if step_rows is not None and step_rows.write_results(rewards, terminations, truncations):
            if infos is None and packed_observations is None:
                return IN_SHARED_MEMORY  # nothing else to say: the reply is a wake-up
            return (packed_observations, None, None, None, infos)
        return (
            packed_observations,
            tuple(rewards),
            tuple(terminations),
            tuple(truncations),
            infos,
        )

    def _reset(self, seeds: Sequence[int | None], options: dict | None, mask: Sequence[bool] | None) -> tuple:
        envs = self.envs
        observations = [None] * len(envs)
        infos = None
        for j, env in enumerate(envs):
            if mask is None or mask[j]:
                self._failing_env = self.first_env + j
                obs, info = env.reset(seed=seeds[j], options=options)
                if info:
                    if infos is None:
                        infos = [None] * len(envs)
                    infos[j] = info
            else:
                # Not reset: the env keeps its last observation, as Gymnasium's "reset-noop".
                obs = env.last_obs
            observations[j] = obs
        return (self._pack(observations, mask), infos)

    def _pack(self, observations: list, written: Sequence[bool] | None) -> Any:
        try:
            return self.packer.pack(observations, written)
        except ObservationMismatch as exc:
            self._failing_env = exc.env_index  # the env that returned it, not the last one run
            raise

    def _call(self, name: str, args: tuple, kwargs: dict) -> list:
        if name in ("reset", "step", "close"):
            raise ValueError(f"Trying to call function `{name}` with `call`, use `{name}` directly instead.")
        results = []
        for j, env in enumerate(self.envs):
            self._failing_env = self.first_env + j
            attr = env.env.get_wrapper_attr(name)
            results.append(attr(*args, **kwargs) if callable(attr) else attr)
        return results

    def _set_attr(self, name: str, values: Sequence[Any]) -> None:
        for j, env in enumerate(self.envs):
            self._failing_env = self.first_env + j
            env.env.set_wrapper_attr(name, values[j])

    def close_envs(self) -> None:
        """Close every env (best effort); closing twice is harmless."""
        # One at a time off the list: if SIGTERM cuts a CLOSE short, the SIGTERM path's own
        # call closes the envs still on it.
        envs = self.envs
        while envs:
            try:
                envs.pop(0).env.close()
            except Exception:
                pass  # closing is best effort; the process is about to end anyway
