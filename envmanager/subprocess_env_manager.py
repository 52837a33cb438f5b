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
:mod:`envmanager.transport.worker`, the messages in :mod:`envmanager.transport.protocol`.
"""

from __future__ import annotations

import dataclasses
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
from gymnasium.spaces import Box, MultiBinary, MultiDiscrete
from gymnasium.spaces.utils import is_space_dtype_shape_equiv
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_differing_spaces, batch_space, iterate

from profiler.recording import events, memory
from profiler.recording.cpu_cores import cores_available
from profiler.gpu import nvtx_bridge
from profiler.multiprocess.merge import TimerMerger
from profiler.timing.phased_block import FOLD_AT_RUNS
from profiler.timing.timers import TimerNode

from envmanager.transport import protocol
from envmanager.lifetime.close_at_exit import close_at_exit
from envmanager.measurement.critical_path import stamps_within
from envmanager.transport.envs_per_worker import AUTO, EnvsPerWorker, checked_envs_per_worker, worker_env_ranges
from envmanager.errors import WorkerDiedError, exception_from_failure
from envmanager.transport.observations import ObservationBatch, allocate_shared_buffer
from envmanager.transport.pool import REPLY_GRACE_SECONDS, WorkerHandle, WorkerPool
from envmanager.measurement.profiling import ManagerProfiling
from envmanager.transport.protocol import IN_SHARED_MEMORY, RemoteFailure, pack_array
from envmanager.lifetime.restart import RestartPolicy
from envmanager.transport.step_buffers import StepBuffers, shares_steps
from envmanager.transport.worker import EnvFactories, WorkerConfig

__all__ = ["SubprocessEnvManager"]

_T = TypeVar("_T")
_PERF_COUNTER = time.perf_counter


class _State(Enum):
    """Which split call (``*_async`` then ``*_wait``) is under way; values as Gymnasium's."""

    DEFAULT = "default"
    WAITING_RESET = "reset"
    WAITING_STEP = "step"
    WAITING_CALL = "call"


# Batched action spaces whose batch is one ndarray, so a worker's actions are a slice of it.
_ARRAY_ACTION_SPACES = (Box, MultiDiscrete, MultiBinary)


def _nothing_to_cancel() -> None:
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
            as the workers live.
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

    Raises:
        RuntimeError: the sub-environments' observation or action spaces differ.
        ValueError: an invalid option (``max_concurrency``, ``observation_mode``, ...).
        TypeError: an option of the wrong type (``envs_per_worker=1.5``, ...).
    """

    # Until the constructor has started the workers there is nothing to close: the process
    # that owns them, and the cancelling of the exit hook that closes them.
    _owner_pid: int | None = None
    _cancel_close_at_exit: Callable[[], None] = staticmethod(_nothing_to_cancel)

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
    ) -> None:
        self.env_fns = list(env_fns)
        self.shared_memory = shared_memory
        self.copy = copy
        self.context = context
        self.daemon = daemon
        self.worker = worker
        self.observation_mode = observation_mode
        self.autoreset_mode = _checked_autoreset_mode(autoreset_mode)
        self.max_concurrency = _checked_max_concurrency(max_concurrency)
        self.envs_per_worker = checked_envs_per_worker(envs_per_worker)
        self.timeout = timeout
        self._restart_policy = RestartPolicy(restart_on_failure)
        _check_flush_options(flush_every, flush_interval)
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

        self._describe_first_env()

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
        # Step replies per worker since its last payload: what a dump lacks if it never comes.
        self._unreported_steps = self._profiling.account_for(self._pool.workers).pending
        try:
            describe_sent_at = time.perf_counter()
            self._check_worker_spaces()
            # Every reply was stamped during this round trip, unless the workers' clock is not ours.
            self._pool.worker_clock_shared = stamps_within(
                self._pool.ready_at, describe_sent_at, time.perf_counter()
            )
            self._observations = ObservationBatch(
                self.single_observation_space, self.num_envs, copy, shared_buffer
            )
        except BaseException:
            self._pool.shutdown(graceful=False, timeout=None)
            self._profiling.workers_stopped()
            self.closed = True
            raise
        self._cancel_close_at_exit = close_at_exit(self)
        # Plain lists, filled slice by slice as replies arrive and made arrays once per step:
        # cheaper than a numpy conversion per worker.
        self._rewards: list[float] = [0.0] * self.num_envs
        self._terminations: list[bool] = [False] * self.num_envs
        self._truncations: list[bool] = [False] * self.num_envs
        self._array_actions = type(self.action_space) in _ARRAY_ACTION_SPACES
        # The workers whose latest step reply carried its values (they did not fit shared memory).
        self._values_in_body: list[WorkerHandle] = []
        self._all_in_shared_memory = [IN_SHARED_MEMORY] * len(self._pool.workers)
        # Per-call scratch, filled by the reply handlers as replies arrive.
        self._worker_infos: list[list | None] = [None] * len(self._pool.workers)
        self._failures: list[tuple[WorkerHandle, RemoteFailure]] = []
        self._call_results: list[list | None] = [None] * len(self._pool.workers)
        self._reset_bodies: list[Any] = []

    # -- construction ----------------------------------------------------------------------

    def _describe_first_env(self) -> None:
        """Metadata, render mode and spaces, from one env built here as Gymnasium does."""
        first_env = self.env_fns[0]()
        try:
            # A copy, so the env class's own metadata never gains our "autoreset_mode" key.
            self.metadata = dict(first_env.metadata)
            self.metadata["autoreset_mode"] = self.autoreset_mode
            self.render_mode = first_env.render_mode
            self.single_action_space = first_env.action_space
            self.action_space = batch_space(self.single_action_space, self.num_envs)
            mode = self.observation_mode
            if isinstance(mode, tuple) and len(mode) == 2:
                if not isinstance(mode[0], Space) or not isinstance(mode[1], Space):
                    raise TypeError(
                        f"Expected both elements of observation_mode to be Spaces, got {type(mode[0])} and {type(mode[1])}"
                    )
                self.observation_space, self.single_observation_space = mode
            elif mode == "same":
                self.single_observation_space = first_env.observation_space
                self.observation_space = batch_space(self.single_observation_space, self.num_envs)
            elif mode == "different":
                # The batched space needs every env's space; the workers report them later.
                self.single_observation_space = first_env.observation_space
            else:
                raise ValueError(
                    "Invalid `observation_mode`, expected: 'same' or 'different' or tuple of single and "
                    f"batch observation space, actual got {mode}"
                )
        finally:
            first_env.close()

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
                )
            )
        return configs, env_ranges

    def _check_worker_spaces(self) -> None:
        """Every sub-env must have the spaces the batch was built for (RuntimeError if not)."""
        spaces: list[tuple[Space, Space]] = [None] * self.num_envs  # type: ignore[list-item]

        def on_reply(handle: WorkerHandle, ok: bool, body: Any) -> None:
            if ok:
                spaces[handle.envs.start : handle.envs.stop] = body
            else:
                self._failures.append((handle, body))

        self._run_on_all(protocol.DESCRIBE, None, "describe", on_reply, self.timeout)
        self._raise_failures(shut_down=False)
        observation_spaces = [obs for obs, _ in spaces]
        if self.observation_mode == "different":
            self.observation_space = batch_differing_spaces(observation_spaces)
        for observation_space, action_space in spaces:
            if self.observation_mode == "same":
                if observation_space != self.single_observation_space:
                    raise RuntimeError(
                        f"{type(self).__name__}(..., observation_mode='same') however some of the sub-environments "
                        "observation spaces are not equivalent. If this is intentional, use "
                        "`observation_mode='different'` instead."
                    )
            elif not is_space_dtype_shape_equiv(observation_space, self.single_observation_space):
                raise RuntimeError(
                    f"{type(self).__name__}(..., observation_mode='different' or custom space) however the "
                    "sub-environment's observation spaces do not share a common shape and dtype."
                )
            if action_space != self.single_action_space:
                raise RuntimeError(
                    f"Some environments have an action space different from `{self.single_action_space}`. "
                    "In order to batch actions, the action spaces from all environments must be equal."
                )

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
        return self._observations.result(), self._collect_infos()

    def _on_reset_reply(self, handle: WorkerHandle, ok: bool, body: Any) -> None:
        if not ok:
            self._failures.append((handle, body))
            return
        observations, infos = body
        self._observations.store(handle.envs.start, handle.envs.stop, observations)
        self._worker_infos[handle.index] = infos

    # -- step ------------------------------------------------------------------------------

    def step(self, actions: ActType) -> tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """Step every sub-env with its action and batch the results."""
        profiling = self._profiling
        step_block = profiling.step_block
        if step_block is None:  # not profiled: nothing to time
            self._check_step_allowed()
            self._send_step(actions)
            try:
                self._pool.wait(self._pool.workers, self.timeout, "step_wait")
                return self._receive_replies("step", self._on_step_reply, self._step_results)
            finally:
                self._state = _State.DEFAULT
        self._check_step_allowed()
        clock = step_block.open()
        if clock is None:  # paused, or a companion watches every block: `with` blocks then
            with profiling.block("env_manager.step"):
                self.step_async(actions)
                return self.step_wait()
        # The step and its three parts are timed from clock stamps (see
        # ManagerProfiling.step_block): the same blocks as the `with` blocks above give.
        node = profiling.step_anchor = step_block.node
        sent = waited = None
        try:
            self._send_step(actions)
            sent = clock()
            # The workers stamp their replies on time.perf_counter: the timers' clock but in tests.
            waiting_since = sent if clock is _PERF_COUNTER else time.perf_counter()
            try:
                self._pool.wait(self._pool.workers, self.timeout, "step_wait")
                waited = clock()
                results = self._receive_replies("step", self._on_step_reply, self._step_results)
            finally:
                self._state = _State.DEFAULT
        except BaseException:
            step_block.fail(sent, waited)
            raise
        # PhasedBlock.close and CriticalPath.record_step, inline: the run and the step's
        # critical-path stamps are kept as they are and counted in bulk. Two calls here cost
        # more than all the rest that profiling adds to a step.
        end = clock()
        step_block.stack.current = step_block.parent
        runs = step_block.runs
        runs.append((node._start, sent, waited, end, waiting_since, *self._pool.ready_at))
        if len(runs) >= FOLD_AT_RUNS:
            step_block.fold()
        if profiling.resources is not None:
            profiling.sample_resources(self._pool.workers)
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
        if self._values_in_body:
            self._values_in_body = []
        self._send_to_all(protocol.STEP, self._split_actions(actions), "step")
        self._state = _State.WAITING_STEP

    def _split_actions(self, actions: ActType) -> list[Any]:
        """One body per worker: its slice of the batch, packed when it is an array; or
        ``IN_SHARED_MEMORY``, its slice written into the shared step buffers.

        A worker that still owes a reply (to a step the trainer gave up on) may yet read its
        rows for that step, so its actions travel in the message instead.
        """
        workers = self._pool.workers
        buffers = self._step_buffers
        if buffers is not None and buffers.fits(actions):
            for handle in workers:
                if handle.outstanding:
                    break
            else:
                buffers.actions[...] = actions
                return self._all_in_shared_memory
            bodies = []
            for handle in workers:
                rows = slice(handle.envs.start, handle.envs.stop)
                if handle.outstanding:
                    bodies.append(pack_array(actions[rows]))
                else:
                    buffers.actions[rows] = actions[rows]
                    bodies.append(IN_SHARED_MEMORY)
            return bodies
        if self._array_actions and isinstance(actions, np.ndarray):
            if actions.ndim == 0:
                raise TypeError(f"Expected a batch of {self.num_envs} actions, got a scalar {actions!r}.")
            if len(actions) != self.num_envs:
                raise ValueError(
                    f"Expected {self.num_envs} actions, one per sub-environment, got {len(actions)}."
                )
            return [pack_array(actions[h.envs.start : h.envs.stop]) for h in workers]
        per_env = list(iterate(self.action_space, actions))
        if len(per_env) != self.num_envs:
            raise ValueError(
                f"Expected {self.num_envs} actions, one per sub-environment, got {len(per_env)}."
            )
        return [per_env[h.envs.start : h.envs.stop] for h in workers]

    def step_wait(
        self, timeout: float | None = None
    ) -> tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
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

    def _step_results(self) -> tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        buffers = self._step_buffers
        if buffers is not None:
            return self._step_results_in_shared_memory(buffers)
        try:
            rewards = np.array(self._rewards, dtype=np.float64)
        except (TypeError, ValueError) as exc:
            raise self._reward_error(exc, range(self.num_envs)) from exc
        return (
            self._observations.result(),
            rewards,
            np.array(self._terminations, dtype=np.bool_),
            np.array(self._truncations, dtype=np.bool_),
            self._collect_infos(),
        )

    def _step_results_in_shared_memory(
        self, buffers: StepBuffers
    ) -> tuple[ObsType, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        """The results the workers wrote into shared memory, copies for the user (the next
        step overwrites the buffers); first, into their rows, those that came in a reply."""
        for handle in self._values_in_body:
            start, stop = handle.envs.start, handle.envs.stop
            try:
                buffers.rewards[start:stop] = np.array(self._rewards[start:stop], dtype=np.float64)
            except (TypeError, ValueError) as exc:
                raise self._reward_error(exc, handle.envs) from exc
            buffers.terminations[start:stop] = np.array(self._terminations[start:stop], dtype=np.bool_)
            buffers.truncations[start:stop] = np.array(self._truncations[start:stop], dtype=np.bool_)
        return (
            self._observations.result(),
            buffers.rewards.copy(),
            buffers.terminations.copy(),
            buffers.truncations.copy(),
            self._collect_infos(),
        )

    def _cut_short(self, envs: range) -> None:
        """The step results of envs whose worker died in the step and was replaced: their
        episode was cut short, so say so, as a time limit would."""
        buffers = self._step_buffers
        if buffers is not None:
            buffers.rewards[envs.start : envs.stop] = 0.0
            buffers.terminations[envs.start : envs.stop] = False
            buffers.truncations[envs.start : envs.stop] = True
            return
        count = len(envs)
        self._rewards[envs.start : envs.stop] = [0.0] * count
        self._terminations[envs.start : envs.stop] = [False] * count
        self._truncations[envs.start : envs.stop] = [True] * count

    def _reward_error(self, error: Exception, envs: range) -> Exception:
        """Numpy's error for a reward that is not a number, made to name the env and its worker.

        Looked into only once numpy refused the rewards of ``envs``, so the step path pays
        nothing for it.  The exception type stays numpy's (``ValueError`` for a string).
        """
        for env_index in envs:
            reward = self._rewards[env_index]
            try:
                fits = np.array(reward, dtype=np.float64).shape == ()
            except (TypeError, ValueError) as exc:
                fits, error = False, exc
            if not fits:
                worker_index = next(h.index for h in self._pool.workers if env_index in h.envs)
                return type(error)(
                    f"env {env_index} (worker {worker_index}) returned a reward of type "
                    f"{type(reward).__name__} ({reward!r:.80}); a reward must be a real number ({error})"
                )
        return error

    def _on_step_reply(self, handle: WorkerHandle, ok: bool, body: Any) -> None:
        self._unreported_steps[handle.index] += 1  # until a payload reports it
        if body is IN_SHARED_MEMORY:  # everything is in shared memory, and there were no infos
            self._worker_infos[handle.index] = None
            return
        if not ok:
            self._failures.append((handle, body))
            return
        observations, rewards, terminations, truncations, infos = body
        start, stop = handle.envs.start, handle.envs.stop
        self._observations.store(start, stop, observations)
        if rewards is not None:
            self._rewards[start:stop] = rewards
            self._terminations[start:stop] = terminations
            self._truncations[start:stop] = truncations
            if self._step_buffers is not None:
                self._values_in_body.append(handle)
        self._worker_infos[handle.index] = infos

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
            self._state = _State.DEFAULT

    def _receive_replies(self, call: str, on_reply: Callable, results: Callable[[], _T]) -> _T:
        """Read the replies the wait found ready, replace the workers that died, raise the
        envs' failures, and return ``results()``."""
        for handle in self._pool.collect(self._pool.workers, on_reply):
            self._replace(handle, call, self._reset_bodies[handle.index] if call == "reset" else None)
            if call == "step":
                self._cut_short(handle.envs)
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

    def _collect_infos(self) -> dict[str, Any]:
        """Gymnasium's vector infos, built in env order exactly as SyncVectorEnv builds them."""
        infos: dict[str, Any] = {}
        for handle in self._pool.workers:
            worker_infos = self._worker_infos[handle.index]
            if worker_infos is None:
                continue
            self._worker_infos[handle.index] = None
            for env_index, info in zip(handle.envs, worker_infos):
                if info:
                    infos = self._add_info(infos, info, env_index)
        return infos

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
        with self._profiling.block("env_manager.close"):
            if self._state is not _State.DEFAULT:
                logger.warn(
                    f"Calling `close` while waiting for a pending call to `{self._state.value}` to complete."
                )
                self._state = _State.DEFAULT  # its replies are read and dropped by the shutdown
            pool.shutdown(graceful=not terminate, timeout=timeout)
        self._profiling.workers_stopped()
        if self.summaries_dir is not None:
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


def _check_flush_options(flush_every: int | None, flush_interval: float | None) -> None:
    if flush_every is not None and (
        isinstance(flush_every, bool) or not isinstance(flush_every, int) or flush_every < 1
    ):
        raise ValueError(f"`flush_every` must be a whole number of steps >= 1 or None, got {flush_every!r}.")
    if flush_interval is not None and not flush_interval > 0:
        raise ValueError(f"`flush_interval` must be a number of seconds > 0 or None, got {flush_interval!r}.")


def _checked_autoreset_mode(value: str | AutoresetMode) -> AutoresetMode:
    """The enum for ``value``: a member, its value (``"NextStep"``) or its name (``"next_step"``)."""
    if isinstance(value, AutoresetMode):
        return value
    try:
        return AutoresetMode(value)
    except ValueError:
        if isinstance(value, str) and value.upper() in AutoresetMode.__members__:
            return AutoresetMode[value.upper()]
        allowed = ", ".join(f"{m.value!r}/{m.name.lower()!r}" for m in AutoresetMode)
        raise ValueError(
            f"Invalid `autoreset_mode` {value!r}, expected an AutoresetMode or one of {allowed}."
        ) from None


def _checked_max_concurrency(value: int | None) -> int | None:
    if value is None:
        return None
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool):
        raise ValueError(f"`max_concurrency` must be an integer or None, got {type(value)}.")
    if value < 1:
        raise ValueError(f"`max_concurrency` must be a positive or None, got {value}.")
    return int(value)


