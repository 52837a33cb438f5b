"""SubprocessEnvManager: a drop-in for ``gymnasium.vector.AsyncVectorEnv``.

It accepts the same constructor and gives the same results (identical to ``SyncVectorEnv``
for the same seeds and actions), with these additions:

* ``envs_per_worker``: several envs stepped by one process, to cut inter-process traffic
  when an env step is cheap (CartPole); ``"auto"`` runs as many worker processes as the cores
  the run may use (see :mod:`envmanager.transport.envs_per_worker`); ``num_envs`` stays the total;
* ``timeout``: the default for every wait, so a hung env cannot hang training;
* ``restart_on_failure``: a worker that dies is replaced and training goes on;
* no worker, and no helper process its envs started, outlives ``close()``, the trainer's
  exit (a manager left open is closed then) or the trainer's death (see
  :mod:`envmanager.lifetime.lifeline` and :mod:`envmanager.lifetime.process_group`);
* faults are reported clearly: an env's exception is re-raised with its own type and
  message (worker index and remote traceback attached), a dead worker raises
  :class:`~envmanager.errors.WorkerDiedError` naming it and its exit signal;
* profiling built in: the trainer-side step is split into sending, waiting and receiving
  blocks, and each worker's timers (``env.step``, ``env.reset`` and the user's own blocks in
  env code) are merged under it (see :mod:`envmanager.measurement.profiling`); timer data travels apart
  from the infos, which stay exactly Gymnasium's.

Processes and pipes live in :mod:`envmanager.transport.pool`, the loop of a worker in
:mod:`envmanager.transport.worker`, the messages in :mod:`envmanager.transport.protocol`, the
spaces read from the first env in :mod:`envmanager.transport.env_spaces`, and a step's actions
and results in :mod:`envmanager.transport.step_batch`.

Why this module is long: what is left here is one concept, Gymnasium's vector env API (``reset``,
``step``, ``call`` and their split ``*_async``/``*_wait`` halves: one state machine) driven over
the pool, with the restarts and failures each call can meet. Cut further, the state machine would
be spread over several modules.
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import os
import time
import warnings
from enum import Enum
from pathlib import Path
from typing import Any, Callable, Sequence, TypeVar

import numpy as np
from gymnasium import Env, Space, logger
from gymnasium.core import ActType, ObsType, RenderFrame
from gymnasium.error import AlreadyPendingCallError, ClosedEnvironmentError, NoAsyncCallError
from gymnasium.vector import AutoresetMode, VectorEnv

from profiler.recording import events, memory
from profiler.recording.cpu_cores import cores_available
from profiler.gpu import nvtx_bridge, torch_ops
from profiler.multiprocess.merge import TimerMerger
from profiler.timing.timers import TimerNode

from envmanager.transport import protocol
from envmanager.lifetime.close_at_exit import close_at_exit
from envmanager.lifetime.interrupts import interrupts_held
from envmanager.lifetime.permits import checked_max_concurrency
from envmanager.measurement.critical_path import WAIT_BOUNDS_SECONDS, stamps_within
from envmanager.transport.envs_per_worker import AUTO, EnvsPerWorker, checked_envs_per_worker, worker_env_ranges
from envmanager.errors import WorkerDiedError, exception_from_failure
from envmanager.transport.observations import ObservationBatch, allocate_shared_buffer
from envmanager.transport.pool import REPLY_GRACE_SECONDS, WorkerHandle, WorkerPool
from envmanager.measurement.live_view_switch import check_live_view, start_live_view
from envmanager.measurement.profiling import ManagerProfiling, check_flush_options
from envmanager.transport.protocol import IN_SHARED_MEMORY, RemoteFailure
from envmanager.lifetime.restart import RestartPolicy
from envmanager.transport.autoreset import checked_autoreset_mode
from envmanager.transport.env_spaces import check_worker_spaces, describe_first_env
from envmanager.transport.first_env import read_first_env
from envmanager.transport.step_batch import StepBatch, VectorStepResult
from envmanager.transport.step_buffers import StepBuffers, shares_steps
from envmanager.transport.step_stamps import step_record, whole_steps_counter
from envmanager.transport.worker import EnvFactories, WorkerConfig

__all__ = ["SubprocessEnvManager"]

_T = TypeVar("_T")


class _State(Enum):
    """Which split call (``*_async`` then ``*_wait``) is under way; values as Gymnasium's."""

    DEFAULT = "default"
    WAITING_RESET = "reset"
    WAITING_STEP = "step"
    WAITING_CALL = "call"


# The states a step sets and tests, read once: in Python 3.11 a member read off its Enum class
# goes through EnumType.__getattr__, about what a Python call costs, three times a step.
_IDLE, _WAITING_STEP = _State.DEFAULT, _State.WAITING_STEP


def _nothing_to_cancel() -> None:
    pass


def _ignore_reply(handle: WorkerHandle, ok: bool, body: Any) -> None:
    pass


class SubprocessEnvManager(VectorEnv):
    """Vectorized environment running its sub-environments in worker subprocesses.

    Args:
        env_fns: zero-argument callables that build the envs (lambdas and closures are fine:
            they are sent with cloudpickle). One env per callable; ``num_envs = len(env_fns)``.
        shared_memory: observations travel through shared memory rather than the pipe. Best
            for large observations; custom spaces raise ``ValueError``, dynamic-shape spaces
            ``TypeError``, as in Gymnasium.
        copy: ``reset``/``step`` return a copy of the observations rather than the buffer the
            manager reuses.
        context: ``multiprocessing`` start method: None (platform default), ``"fork"``,
            ``"spawn"`` or ``"forkserver"``.
        daemon: the ``daemon`` flag of the worker processes.
        worker: accepted for signature compatibility; only None is supported, because the
            worker speaks this package's own protocol.
        observation_mode: ``"same"``, ``"different"`` or a tuple ``(batched_space, single_space)``.
        autoreset_mode: an ``AutoresetMode`` or its string value.
        max_concurrency: at most this many envs run ``reset``/``step`` at the same time.
        envs_per_worker: envs run by each worker process (the last one may get fewer), or
            ``"auto"``: as many worker processes as the cores this process may use (its
            affinity mask, capped by a cgroup CPU quota), never more than ``num_envs``, the envs
            spread evenly (8 envs on 3 cores: 3, 3, 2). ``worker_env_ranges`` tells which envs
            each worker got. The default stays 1, AsyncVectorEnv's layout, on measurements
            (``benchmarks/vector_throughput.py``, 2 cores): "auto" runs cheap CPU-bound envs that
            outnumber the cores faster (CartPole x8: 3.1x AsyncVectorEnv against 1.6x), but envs
            that wait off the CPU (a simulator in another process, a network call) about
            envs / cores times slower (an env sleeping 1 ms, x8: 0.37x AsyncVectorEnv against
            1.1x), and a machine other programs keep busy gives 2 workers less CPU than 8. The profiler's verdicts advise "auto" where it pays
            (docs/envmanager.md, *How many worker processes*).
        timeout: seconds a ``*_wait`` waits when called without a timeout; None waits as long
            as the workers live. It does not bound a worker's start-up (in the constructor, after a
            restart).
        restart_on_failure: False, True (up to 3 restarts) or the maximum number of restarts.
            A restarted worker's envs are reset and report ``truncated=True`` for that step.
        profiling: time the manager and its workers (also off when ``profiler.disable()`` was
            called before construction).
        flush_every: a worker ships its timers every this many requests (vector steps).
        flush_interval: ... and/or every this many seconds; with neither, every second.
        resource_interval: seconds between samples of CPU % and RSS of the trainer and each
            worker, recorded as gauges; None (default) records none.
        summaries_dir: if given, ``close()`` writes ``{summaries_dir}/{run_id}_timers.json``.
        run_id: the run's name in that file name.
        live_view: show where the run's time goes on stderr while the workers run, refreshed
            every second (docs/live.md); needs ``profiling``.

    Raises:
        RuntimeError: the sub-environments' observation or action spaces differ.
        ValueError: an invalid option (``max_concurrency``, ``observation_mode``, ...).
        TypeError: an option of the wrong type (``envs_per_worker=1.5``, ...).
    """

    # Until the constructor has started the workers there is nothing to close: the process
    # that owns them, and the cancelling of the exit hook that closes them.
    _owner_pid: int | None = None
    _cancel_close_at_exit: Callable[[], None] = staticmethod(_nothing_to_cancel)
    _stop_live_view: Callable[[], None] = staticmethod(_nothing_to_cancel)

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        shared_memory: bool = True,
        copy: bool = True,
        context: str | None = None,
        daemon: bool = True,
        worker: Callable[..., None] | None = None,
        observation_mode: str | tuple[Space, Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        max_concurrency: int | None = None,
        *,
        envs_per_worker: EnvsPerWorker = 1,
        timeout: float | None = None,
        restart_on_failure: bool | int = False,
        profiling: bool = True,
        flush_every: int | None = None,
        flush_interval: float | None = None,
        resource_interval: float | None = None,
        summaries_dir: str | os.PathLike[str] | None = None,
        run_id: str = "envmanager",
        live_view: bool = False,
    ) -> None:
        check_live_view(live_view, profiling)
        self.env_fns = list(env_fns)
        self.shared_memory = shared_memory
        self.copy = copy
        self.context = context
        self.daemon = daemon
        self.worker = worker
        self.observation_mode = observation_mode
        self.autoreset_mode = checked_autoreset_mode(autoreset_mode)
        self.max_concurrency = checked_max_concurrency(max_concurrency)
        self.envs_per_worker = checked_envs_per_worker(envs_per_worker)
        self.timeout = timeout
        self._restart_policy = RestartPolicy(restart_on_failure)
        check_flush_options(flush_every, flush_interval)
        self.flush_every, self.flush_interval = flush_every, flush_interval
        self.summaries_dir, self.run_id = summaries_dir, run_id
        self._profiling = ManagerProfiling(profiling, resource_interval, run_id)
        if worker is not None:
            raise ValueError(
                "SubprocessEnvManager does not support a custom `worker`: its workers speak the "
                "envmanager protocol. Use `gymnasium.vector.AsyncVectorEnv` for a custom worker."
            )
        if not self.env_fns:
            raise ValueError("`env_fns` must contain at least one environment factory.")
        self.num_envs = len(self.env_fns)

        # The first env is built in a process of its own, which ends with whatever it started.
        build_first_env = functools.partial(read_first_env, multiprocessing.get_context(context), self.env_fns[0])
        self._description = describe_first_env(
            build_first_env, self.num_envs, self.observation_mode, self.autoreset_mode
        )
        self.metadata = self._description.metadata
        self.render_mode = self._description.render_mode
        self.single_action_space = self._description.single_action_space
        self.action_space = self._description.action_space
        self.single_observation_space = self._description.single_observation_space
        if self._description.observation_space is not None:
            self.observation_space = self._description.observation_space

        ctx = multiprocessing.get_context(context)
        shared_buffer = (
            allocate_shared_buffer(self.single_observation_space, self.num_envs, ctx)
            if shared_memory
            else None
        )
        # A step's actions and results in shared memory too, where the action space allows it.
        self._step_buffers = (
            StepBuffers.allocate(self.single_action_space, self.num_envs, ctx)
            if shared_memory and shares_steps(self.single_action_space)
            else None
        )
        self._state = _State.DEFAULT
        # The emit_nvtx settings the workers have (see _send_nvtx_settings).
        self._nvtx_sent = nvtx_bridge.nvtx_settings()
        # Only this process owns the workers; a forked copy of it leaves them alone.
        self._owner_pid = os.getpid()
        self._pool = self._start_workers(*self._worker_configs(shared_buffer))
        self._pool.timers_sink = self._profiling.merge
        self._profiling.workers_started(len(self._pool.workers))
        critical_path = self._profiling.critical_path
        # The profiled step's own bookkeeping, its stamps and sums: in C where the step path's
        # helper was built (see envmanager.transport.step_stamps).
        self._step_record = None
        if critical_path is not None:
            critical_path.count_whole_steps = whole_steps_counter()
            if self._profiling.step_block is not None:
                self._step_record = step_record(self._profiling.step_block, self._pool.ready_at,
                                                WAIT_BOUNDS_SECONDS, critical_path.add_whole_steps)
        # What the run really ran with, so that advice fits it (profiler.analysis.run_settings).
        for key, value in (("env_manager_class", type(self).__name__),
                           ("shared_memory", shared_buffer is not None),
                           ("envs_per_worker", self.envs_per_worker), ("num_envs", self.num_envs)):
            self._profiling.keep_metadata(key, value)
        # Step replies per worker since its last payload: what a dump lacks if it never comes.
        self._unreported_steps = self._profiling.account_for(self._pool.workers).pending
        try:
            describe_sent_at = time.perf_counter()
            self._check_worker_spaces()
            # Every reply was stamped during this round trip, unless the workers' clock is not ours.
            self._pool.worker_clock_shared = stamps_within(
                self._pool.ready_at, describe_sent_at, time.perf_counter()
            )
            self._batch = StepBatch(
                self.action_space,
                self.num_envs,
                len(self._pool.workers),
                ObservationBatch(self.single_observation_space, self.num_envs, copy, shared_buffer),
                self._step_buffers,
                self._add_info,
            )
        except BaseException:
            self._pool.shutdown(graceful=False, timeout=None)
            self._profiling.workers_stopped()
            self.closed = True
            raise
        # What a step returns, without a method of ours in between (a call less every step).
        self._step_results: Callable[[], VectorStepResult] = functools.partial(
            self._batch.step_result, self._pool.workers
        )
        self._cancel_close_at_exit = close_at_exit(self)
        self._stop_live_view = start_live_view(live_view, self._profiling.enabled, self._profiling.timer_stack)
        self._failures: list[tuple[WorkerHandle, RemoteFailure]] = []
        # Per-call scratch, filled by the reply handlers as replies arrive.
        self._call_results: list[list | None] = [None] * len(self._pool.workers)
        self._reset_bodies: list[Any] = []

    # -- construction ----------------------------------------------------------------------

    def _check_worker_spaces(self) -> None:
        """Every sub-env must have the spaces the batch was built for (RuntimeError if not)."""
        spaces: list[tuple[Space, Space]] = [None] * self.num_envs  # type: ignore[list-item]

        def on_reply(handle: WorkerHandle, ok: bool, body: Any) -> None:
            if ok:
                spaces[handle.envs.start : handle.envs.stop] = body
            else:
                self._failures.append((handle, body))

        # No timeout: this reply waits for the workers' start-up (an interpreter and the user's
        # imports under spawn), which ``timeout`` is not about; a worker that dies is noticed.
        self._run_on_all(protocol.DESCRIBE, None, "describe", on_reply, None)
        self._raise_failures(shut_down=False)
        self.observation_space = check_worker_spaces(
            spaces, self._description, self.observation_mode, type(self).__name__
        )

    def _start_workers(self, configs: list[WorkerConfig], env_ranges: list[range]) -> WorkerPool:
        """One worker per config, running the envs of ``env_ranges``: here, subprocesses.

        The only step a manager whose workers live elsewhere does differently (the
        :class:`~envmanager.ray_env_manager.RayEnvManager` starts Ray actors); everything else
        talks to the pool it returns.
        """
        return WorkerPool(
            multiprocessing.get_context(self.context),
            configs,
            env_ranges,
            daemon=self.daemon,
            max_concurrency=self.max_concurrency,
        )

    def _cores_for_workers(self) -> int:
        """The cores ``envs_per_worker="auto"`` spreads the envs over: those this process may
        use, which its worker processes inherit."""
        return cores_available()

    def _worker_configs(self, shared_buffer: Any) -> tuple[list[WorkerConfig], list[range]]:
        cores = self._cores_for_workers() if self.envs_per_worker == AUTO else 1
        env_ranges = worker_env_ranges(self.num_envs, self.envs_per_worker, cores)
        configs = []
        for envs in env_ranges:
            configs.append(
                WorkerConfig(
                    worker_index=len(configs),
                    first_env=envs.start,
                    num_envs=self.num_envs,
                    factories=EnvFactories(self.env_fns[envs.start : envs.stop]),
                    autoreset_mode=self.autoreset_mode,
                    observation_space=self.single_observation_space,
                    shared_buffer=shared_buffer,
                    permits=None,  # the pool's own, set when it starts the worker
                    profiling=self._profiling.enabled,
                    flush_every=self.flush_every,
                    flush_interval=self.flush_interval,
                    record_timeline=events.is_recording(),
                    memory_sampling=memory.sampling_settings(),
                    nvtx=self._nvtx_sent,
                    inherited_connections=[],
                    lifeline=None,  # the pool's own, set when it starts the worker
                    signal_at_parent_death=False,
                    step_buffers=self._step_buffers,
                    record_operators=torch_ops.is_recording_operators(),
                )
            )
        return configs, env_ranges

    @property
    def worker_env_ranges(self) -> tuple[range, ...]:
        """The envs each worker runs, by worker index: worker ``i`` steps the consecutive envs
        ``worker_env_ranges[i]`` of the batch (what ``envs_per_worker="auto"`` chose, say)."""
        return tuple(handle.envs for handle in self._pool.workers)

    # -- seeds -----------------------------------------------------------------------------

    @property
    def np_random_seed(self) -> tuple[int, ...]:
        """The seed of every sub-env's ``np_random``, read from the workers."""
        return self.get_attr("np_random_seed")

    @property
    def np_random(self) -> tuple[np.random.Generator, ...]:
        """Every sub-env's ``np_random`` generator (copies, from the workers)."""
        return self.get_attr("np_random")

    # -- reset -----------------------------------------------------------------------------

    def reset(
        self, *, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[ObsType, dict[str, Any]]:
        """Reset all sub-envs (or those in ``options["reset_mask"]``) and batch the results."""
        with self._profiling.block("env_manager.reset"):
            self.reset_async(seed=seed, options=options)
            return self.reset_wait()

    def reset_async(
        self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> None:
        """Send the reset requests; collect the results with :meth:`reset_wait`."""
        self._assert_is_running()
        if seed is None:
            seed = [None] * self.num_envs
        elif isinstance(seed, int):
            seed = [seed + i for i in range(self.num_envs)]
        if len(seed) != self.num_envs:
            raise ValueError(
                f"If seeds are passed as a list the length must match num_envs={self.num_envs} but got length={len(seed)}."
            )
        if self._state is not _State.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `reset_async` while waiting for a pending call to `{self._state.value}` to complete",
                str(self._state.value),
            )
        mask = None
        if options is not None and "reset_mask" in options:
            mask = self._checked_reset_mask(options["reset_mask"])
            options = {key: value for key, value in options.items() if key != "reset_mask"}
        with self._profiling.block("send_resets") as node:
            if type(node) is TimerNode:  # not a stand-in: timed
                self._profiling.reset_anchor = node.parent
            self._reset_bodies = [
                (
                    seed[h.envs.start : h.envs.stop],
                    options,
                    None if mask is None else mask[h.envs.start : h.envs.stop].tolist(),
                )
                for h in self._pool.workers
            ]
            # The steps' timers not shipped yet go first, so they land under the step block and
            # the reset replies' timers hold the reset alone (see ManagerProfiling.merge).
            flush_first = self._profiling.step_anchor is not None
            sequence = self._send_to_all(protocol.RESET, self._reset_bodies, "reset", flush_first)
            self._profiling.reset_sent(sequence)
        self._state = _State.WAITING_RESET

    def _checked_reset_mask(self, reset_mask: Any) -> np.ndarray:
        if not isinstance(reset_mask, np.ndarray):
            raise TypeError(f"`options['reset_mask']` must be a numpy array, got {type(reset_mask)}")
        if reset_mask.shape != (self.num_envs,):
            raise ValueError(
                f"`options['reset_mask']` must have shape `({self.num_envs},)`, got {reset_mask.shape}"
            )
        if reset_mask.dtype != np.bool_:
            raise TypeError(f"`options['reset_mask']` must have `dtype=np.bool_`, got {reset_mask.dtype}")
        if not np.any(reset_mask):
            raise ValueError(
                f"`options['reset_mask']` must contain a boolean array with at least one True value, got reset_mask={reset_mask}"
            )
        return reset_mask

    def reset_wait(self, timeout: float | None = None) -> tuple[ObsType, dict[str, Any]]:
        """Wait for the resets sent by :meth:`reset_async` and return ``(observations, infos)``.

        Raises:
            multiprocessing.TimeoutError: the workers did not all answer within ``timeout``
                seconds (default: the manager's ``timeout``).
        """
        self._assert_is_running()
        if self._state is not _State.WAITING_RESET:
            raise NoAsyncCallError(
                "Calling `reset_wait` without any prior call to `reset_async`.", _State.WAITING_RESET.value
            )
        return self._gather("reset_wait", self._on_reset_reply, timeout, self._reset_results)

    def _reset_results(self) -> tuple[ObsType, dict[str, Any]]:
        return self._batch.reset_result(self._pool.workers)

    def _on_reset_reply(self, handle: WorkerHandle, ok: bool, body: Any) -> None:
        if not ok:
            self._failures.append((handle, body))
            return
        self._batch.store_reset(handle, body)

    # -- step ------------------------------------------------------------------------------

    def step(self, actions: ActType) -> VectorStepResult:
        """Step every sub-env with its action and batch the results."""
        record = self._step_record
        if self.closed or self._state is not _IDLE:
            self._check_step_allowed()  # raises
        if record is None:  # not profiled: nothing to time
            self._send_step(actions)
            try:
                self._pool.wait(self._pool.workers, self.timeout, "step_wait")
                return self._receive_replies("step", self._on_step_reply, self._step_results)
            finally:
                self._state = _IDLE
        core_waits = self._profiling.core_waits
        run_queue_before = core_waits.start() if core_waits is not None else None
        node = record.open()
        if node is None:  # paused, or a companion watches every block: `with` blocks then
            with self._profiling.block("env_manager.step"):
                self.step_async(actions)
                results = self.step_wait()
            if run_queue_before is not None:
                core_waits.end(run_queue_before)
            return results
        # The step and its three parts are timed from clock stamps (see
        # ManagerProfiling.step_block): the same blocks as the `with` blocks above give.
        self._profiling.step_anchor = node
        try:
            self._send_step(actions)
            record.sent()
            try:
                self._pool.wait(self._pool.workers, self.timeout, "step_wait")
                record.waited()
                results = self._receive_replies("step", self._on_step_reply, self._step_results)
            finally:
                self._state = _IDLE
        except BaseException:
            record.fail()
            raise
        # PhasedBlock.close and CriticalPath.record_step in one: the run and the step's
        # critical-path stamps counted (in C where built, else kept and counted in bulk).
        record.close()
        if run_queue_before is not None:
            core_waits.end(run_queue_before)
        if self._profiling.resources is not None:
            self._profiling.sample_resources(self._pool.workers)
        return results

    def step_async(self, actions: ActType) -> None:
        """Send each worker the actions of its envs; collect the results with :meth:`step_wait`."""
        self._check_step_allowed()
        with self._profiling.block("send_actions") as node:
            if type(node) is TimerNode:  # not a stand-in: timed
                self._profiling.step_anchor = node.parent
            self._send_step(actions)

    def _check_step_allowed(self) -> None:
        self._assert_is_running()
        if self._state is not _State.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `step_async` while waiting for a pending call to `{self._state.value}` to complete.",
                str(self._state.value),
            )

    def _send_step(self, actions: ActType) -> None:
        bodies = self._batch.split_actions(actions, self._pool.workers)
        # Every worker's actions in shared memory and nothing else to say (the common step): one
        # wake-up each (see WorkerPool.send_step_wakeups); else a body per worker.
        if bodies is self._batch.all_in_shared_memory and nvtx_bridge.nvtx_settings() is self._nvtx_sent:
            self._failures = []
            if self._pool.send_step_wakeups():
                self._state = _WAITING_STEP
                return
        self._send_to_all(protocol.STEP, bodies, "step")
        self._state = _WAITING_STEP

    def step_wait(
        self, timeout: float | None = None
    ) -> VectorStepResult:
        """Wait for the steps sent by :meth:`step_async` and return the batched results.

        Raises:
            multiprocessing.TimeoutError: the workers did not all answer within ``timeout``
                seconds (default: the manager's ``timeout``).
        """
        self._assert_is_running()
        if self._state is not _State.WAITING_STEP:
            raise NoAsyncCallError(
                "Calling `step_wait` without any prior call to `step_async`.", _State.WAITING_STEP.value
            )
        profiling = self._profiling
        waiting_since = time.perf_counter() if profiling.enabled else 0.0
        results = self._gather("step_wait", self._on_step_reply, timeout, self._step_results)
        profiling.record_step(self._pool.ready_at, waiting_since)
        profiling.sample_resources(self._pool.workers)
        return results

    def _on_step_reply(self, handle: WorkerHandle, ok: bool, body: Any) -> None:
        self._unreported_steps[handle.index] += 1  # until a payload reports it
        if body is IN_SHARED_MEMORY:  # StepBatch.store_step's first case, without its call
            self._batch.worker_infos[handle.index] = None
        elif ok:
            self._batch.store_step(handle, body)
        else:
            self._failures.append((handle, body))

    # -- call, attributes, render ----------------------------------------------------------

    def call(self, name: str, /, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` (or read attribute ``name``) on every sub-env; one result each."""
        self.call_async(name, *args, **kwargs)
        return self.call_wait()

    def call_async(self, name: str, /, *args: Any, **kwargs: Any) -> None:
        """Send the call requests; collect the results with :meth:`call_wait`."""
        self._assert_is_running()
        if self._state is not _State.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `call_async` while waiting for a pending call to `{self._state.value}` to complete.",
                str(self._state.value),
            )
        self._send_to_all(protocol.CALL, [(name, args, kwargs)] * len(self._pool.workers), "call")
        self._state = _State.WAITING_CALL

    def call_wait(self, timeout: float | None = None) -> tuple[Any, ...]:
        """Wait for the calls sent by :meth:`call_async`; a tuple of one result per env."""
        self._assert_is_running()
        if self._state is not _State.WAITING_CALL:
            raise NoAsyncCallError(
                "Calling `call_wait` without any prior call to `call_async`.", _State.WAITING_CALL.value
            )
        return self._gather("call_wait", self._on_call_reply, timeout, self._call_results_in_env_order)

    def _call_results_in_env_order(self) -> tuple[Any, ...]:
        return tuple(result for results in self._call_results for result in results)

    def _on_call_reply(self, handle: WorkerHandle, ok: bool, body: Any) -> None:
        if ok:
            self._call_results[handle.index] = body
        else:
            self._failures.append((handle, body))

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """The attribute ``name`` of every sub-env, as a tuple."""
        return self.call(name)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        """Set attribute ``name`` on every sub-env (created if missing).

        ``values`` is a list or tuple with one value per env, or any other object, given to
        every env.
        """
        self._assert_is_running()
        if not isinstance(values, (list, tuple)):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(
                "Values must be a list or tuple with length equal to the number of environments. "
                f"Got `{len(values)}` values for {self.num_envs} environments."
            )
        if self._state is not _State.DEFAULT:
            raise AlreadyPendingCallError(
                f"Calling `set_attr` while waiting for a pending call to `{self._state.value}` to complete.",
                str(self._state.value),
            )
        bodies = [(name, list(values[h.envs.start : h.envs.stop])) for h in self._pool.workers]
        self._run_on_all(protocol.SET_ATTR, bodies, "set_attr", self._on_set_attr_reply, self.timeout)
        self._raise_failures(shut_down=False)

    def _on_set_attr_reply(self, handle: WorkerHandle, ok: bool, body: Any) -> None:
        if not ok:
            self._failures.append((handle, body))

    def render(self) -> tuple[RenderFrame, ...] | None:
        """One frame per sub-env (see the envs' ``render_mode``)."""
        return self.call("render")

    # -- messaging -------------------------------------------------------------------------

    def _send_to_all(self, command: int, bodies: list[Any] | None, what: str, flush_first: bool = False) -> int:
        """Send ``command`` to every worker (after FLUSH if ``flush_first``); its sequence number."""
        self._revive_workers(what)
        self._failures = []
        if nvtx_bridge.nvtx_settings() is not self._nvtx_sent:
            self._send_nvtx_settings()
        if flush_first:
            self._pool.send(self._pool.workers, protocol.FLUSH, None)
        return self._pool.send(self._pool.workers, command, bodies)

    def _send_nvtx_settings(self) -> None:
        """Tell the workers the trainer's emit_nvtx settings changed (see profiler.gpu), ahead of
        the request about to go: they open ranges for that request's blocks. The reply is read
        and dropped like any earlier one; restarted workers get the settings in their config."""
        settings = nvtx_bridge.nvtx_settings()
        self._nvtx_sent = settings
        workers = self._pool.workers
        for handle in workers:
            handle.config = dataclasses.replace(handle.config, nvtx=settings)
        if self._profiling.enabled:
            body = None if settings is None else (settings.record_shapes, settings.backend)
            self._pool.send(workers, protocol.NVTX, [body] * len(workers))

    def _run_on_all(
        self, command: int, bodies: list[Any] | None, what: str, on_reply: Callable, timeout: float | None
    ) -> None:
        """Send and wait in one go, for the calls that are not split in two."""
        self._send_to_all(command, bodies, what)
        dead = self._pool.gather(self._pool.workers, timeout, what, on_reply)
        if dead:
            raise self._died_error(dead[0], what)

    def _gather(self, what: str, on_reply: Callable, timeout: float | None, results: Callable[[], _T]) -> _T:
        """Wait for and decode the replies of the pending split call, settle its faults and
        return ``results()``.

        The state machine is back to idle whatever happens, as in Gymnasium: after a timeout
        or an error the user may issue a new call (late replies are recognised and dropped).
        """
        workers = self._pool.workers
        try:
            with self._profiling.block("wait_for_workers"):
                self._pool.wait(workers, self.timeout if timeout is None else timeout, what)
            with self._profiling.block("receive_results"):
                return self._receive_replies(what.removesuffix("_wait"), on_reply, results)
        finally:
            self._state = _IDLE

    def _receive_replies(self, call: str, on_reply: Callable, results: Callable[[], _T]) -> _T:
        """Read the replies the wait found ready, replace the workers that died, raise the
        envs' failures, and return ``results()``."""
        if call == "step" and self._step_buffers is not None:  # wake-ups taken as on_reply takes them
            dead = self._pool.collect(self._pool.workers, on_reply, self._unreported_steps, self._batch.worker_infos)
        else:
            dead = self._pool.collect(self._pool.workers, on_reply)
        for handle in dead:
            self._replace(handle, call, self._reset_bodies[handle.index] if call == "reset" else None)
            if call == "step":
                self._batch.cut_short(handle.envs)
        if self._failures:
            self._raise_failures(shut_down=call in ("step", "reset"))
        return results()

    def _revive_workers(self, what: str) -> None:
        """Before a call: restart (and reset) any worker that is gone, or raise for it."""
        for handle in self._pool.workers:
            if not handle.alive:
                self._replace(handle, what, None)

    def _replace(self, handle: WorkerHandle, what: str, reset_body: Any) -> None:
        """Restart a gone worker and reset its fresh envs (with ``reset_body`` if given).

        A restarted worker that dies in that reset is restarted again, while the budget
        lasts; then WorkerDiedError is raised, naming the reset after restart.
        """
        repeats_users_reset = reset_body is not None
        if reset_body is None:
            reset_body = ([None] * len(handle.envs), None, None)
        failures: list = []

        def on_reply(handle: WorkerHandle, ok: bool, body: Any) -> None:
            if ok:
                self._on_reset_reply(handle, ok, body)
            else:
                failures.append((handle, body))

        while True:
            self._restart_or_raise(handle, what)
            # Its start-up (an interpreter under spawn, building its envs) is no part of the
            # reset that `timeout` bounds: waited for apart, as long as the new worker lives.
            self._pool.send([handle], protocol.DESCRIBE, None)
            if self._pool.gather([handle], None, "start after restart", _ignore_reply):
                what = "start after restart"
                continue
            sequence = self._pool.send([handle], protocol.RESET, [reset_body])
            if repeats_users_reset:
                self._profiling.reset_sent(sequence)
            if not self._pool.gather([handle], self.timeout, "reset after restart", on_reply):
                break
            what = "reset after restart"
        if failures:
            self._failures = failures
            self._raise_failures(shut_down=True)

    def _restart_or_raise(self, handle: WorkerHandle, what: str) -> None:
        """Replace a gone worker if the restart budget allows, else raise WorkerDiedError."""
        error = self._died_error(handle, what)
        if not self._restart_policy.allow():
            raise error
        policy = self._restart_policy
        warnings.warn(
            f"{error}; restarting it (restart {policy.restarts} of {policy.max_restarts}).",
            RuntimeWarning,
            stacklevel=6,
        )
        self._pool.restart(handle)
        self._profiling.record_restart(handle.index, policy.restarts)

    def _died_error(self, handle: WorkerHandle, what: str) -> WorkerDiedError:
        return WorkerDiedError(
            handle.index, handle.envs, handle.exitcode, what, handle.shut_down_after, handle.cut_off
        )

    def _raise_failures(self, shut_down: bool) -> None:
        """Re-raise the last env exception of this call, logging each, as Gymnasium does.

        After a failed ``step``/``reset`` the failing workers are shut down, as in Gymnasium:
        their envs may be half-stepped.  Other workers are untouched.
        """
        failures, self._failures = self._failures, []
        if not failures:
            return
        for handle, failure in failures:
            if shut_down:
                logger.error(f"Received the following error from Worker-{handle.index} - Shutting it down")
            else:
                logger.error(f"Received the following error from Worker-{handle.index}")
            logger.error("%s", failure.traceback)
            if shut_down and handle.alive:
                self._pool.retire(handle, f"{failure.type_name}: {failure.message}")
        logger.error("Raising the last exception back to the main process.")
        handle, failure = failures[-1]
        exc = exception_from_failure(failure, handle.index)
        raise exc from exc.__cause__

    # -- closing ---------------------------------------------------------------------------

    def close(self, **kwargs: Any) -> None:
        """Stop the workers (see :meth:`close_extras` for the arguments).

        The manager ends closed whatever happens, also when dumping the timers fails (that
        error is raised once the workers are stopped).  In a process forked from the trainer
        the workers are not this copy's: closing there only marks it closed.
        """
        if self.closed:
            return
        try:
            if self._owner_pid == os.getpid():
                self.close_extras(**kwargs)
        finally:
            self.closed = True
            self._cancel_close_at_exit()

    def close_extras(self, timeout: float | None = None, terminate: bool = False) -> None:
        """Stop the workers; no child process outlives this call.

        Their last timer data is merged first (unless ``terminate``), and the timers are
        dumped if the manager was given a ``summaries_dir``.

        Ctrl-C during the close stops the waiting: the workers are stopped at once (a second
        Ctrl-C waits until they are), the timers are dumped, and the KeyboardInterrupt goes on.

        A call still pending (``step_async`` without ``step_wait``) is abandoned, as one that
        Ctrl-C cut short: its workers get ``REPLY_GRACE_SECONDS`` (one second, or ``timeout``
        if shorter) to answer, so their timer data is kept, and a worker stuck in it is then
        terminated: SIGTERM, on which it closes its envs, then SIGKILL for its process group
        if it is not gone a second later.

        Args:
            timeout: seconds the workers get to close their envs before they are terminated
                (default ``CLOSE_GRACE_SECONDS``); a pending call gets this long at most.
            terminate: terminate the workers at once instead of asking them to close.
        """
        pool = getattr(self, "_pool", None)
        if pool is None:
            return
        try:
            with self._profiling.block("env_manager.close"):
                if self._state is not _State.DEFAULT:
                    logger.warn(
                        f"Calling `close` while waiting for a pending call to `{self._state.value}` to complete."
                    )
                    self._state = _State.DEFAULT  # its replies are read and dropped by the shutdown
                pool.shutdown(graceful=not terminate, timeout=timeout)
        finally:
            # Also after a Ctrl-C that cut the waiting short (the workers are stopped then too):
            # the timers gathered so far are written, with Ctrl-C held meanwhile.
            with interrupts_held():
                self._stop_live_view()
                self._profiling.workers_stopped()
                if self.summaries_dir is not None:
                    self._dump_at_close()

    def _dump_at_close(self) -> None:
        try:
            self._profiling.dump(self.summaries_dir, self.run_id)
        except Exception as exc:
            if hasattr(exc, "add_note"):  # Python >= 3.11
                exc.add_note(
                    "(raised writing the timers in close(); the workers are stopped and the manager is "
                    "closed; dump_timers(summaries_dir=...) can still write the timers elsewhere)"
                )
            raise

    # -- timers ----------------------------------------------------------------------------

    def dump_timers(
        self,
        summaries_dir: str | os.PathLike[str] | None = None,
        run_id: str | None = None,
        *,
        timeout: float = REPLY_GRACE_SECONDS,
    ) -> Path:
        """Write the timer tree, worker blocks merged, to ``{summaries_dir}/{run_id}_timers.json``.

        While the workers run, they are first asked for the timer data they have not shipped
        yet, so the file is complete up to now.  A worker that does not answer within
        ``timeout`` seconds (hung, or busy with a long call) is not waited for: the file is
        written without its latest timers, its entry in the ``workers`` section says so
        (``unreported_reason``), and a ``RuntimeWarning`` names it.  Defaults: the
        constructor's ``summaries_dir`` (else the current directory) and ``run_id``.  Returns
        the path written.
        """
        if not self.closed and self._state is _State.DEFAULT and self._profiling.enabled:
            live = [h for h in self._pool.workers if h.alive]
            self._pool.send(live, protocol.FLUSH, None)
            owing = self._pool.receive_outstanding(live, timeout)
            silent = [h for h in live if h in owing or not h.alive]
            self._profiling.note_unanswered(silent, f"the request for its timers within {timeout} s")
        directory = summaries_dir if summaries_dir is not None else (self.summaries_dir or ".")
        return self._profiling.dump(directory, run_id or self.run_id)

    @property
    def timer_merger(self) -> TimerMerger | None:
        """The merger of the workers' timers (per-worker trees, straggler summaries), if profiling."""
        return self._profiling.merger

    def _assert_is_running(self) -> None:
        if self.closed:
            raise ClosedEnvironmentError(
                f"Trying to operate on `{type(self).__name__}`, after a call to `close()`."
            )

    def __enter__(self) -> SubprocessEnvManager:
        """``with SubprocessEnvManager(...) as envs:`` closes the workers on the way out."""
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    def __del__(self) -> None:
        if not self.closed and self._owner_pid is not None:
            self.close(terminate=True)

