"""RayEnvManager: the vector env of :class:`~envmanager.SubprocessEnvManager`, its workers Ray actors.

When a trainer outgrows one machine, its environment workers move to a Ray cluster. This manager
keeps everything a :class:`~envmanager.SubprocessEnvManager` user relies on — the Gymnasium
``VectorEnv`` front, results identical to ``SyncVectorEnv``, ``envs_per_worker``, ``timeout``,
``restart_on_failure``, the autoreset modes, the timer blocks, payloads, merged worker trees,
critical path and env CPU time — and changes only where the workers run: each is a Ray actor
(:mod:`envmanager.ray.ray_worker`) placed by Ray's scheduler with the resources, placement group or
scheduling strategy given here. The actors and the calls to them live in
:mod:`envmanager.ray.ray_pool`.

What Ray adds is recorded too: each worker's host, Ray node and actor, its process id and its
clock offset from the driver (estimated from round trips, with its uncertainty) are in the
worker's ``host`` and ``ray`` entries of the dump, and each worker is its own process on the
timeline, its events put on the driver's clock.

Ray is imported when a manager is built, not when this module is imported: ``import envmanager``
works without Ray installed (``pip install 'rlprof[ray]'`` brings it).
"""

from __future__ import annotations

import math
import os
from typing import Any, Callable, Sequence

from gymnasium import Env, Space
from gymnasium.vector import AutoresetMode

from profiler.multiprocess.clock_offset import ClockOffset

from envmanager.transport.envs_per_worker import EnvsPerWorker
from envmanager.errors import NodeLostError, WorkerDiedError
from envmanager.subprocess_env_manager import SubprocessEnvManager
from envmanager.transport.worker import WorkerConfig

__all__ = ["DEFAULT_CLOCK_SYNC_INTERVAL", "DEFAULT_START_TIMEOUT", "RayEnvManager", "cores_of_worker_nodes"]

DEFAULT_START_TIMEOUT = 300.0
"""Seconds the manager waits for the cluster to place and start its actors."""

DEFAULT_CLOCK_SYNC_INTERVAL = 30.0
"""Seconds between clock offset estimates of actors on other machines."""

# Actor options the manager sets itself: its actors must run their calls one at a time and in
# order (requests and replies pair up like a pipe's), be replaced by the manager's own restart
# policy rather than Ray's (a Ray restart would silently bring back fresh envs), and end with it.
_OPTIONS_OF_THE_MANAGER = ("max_restarts", "max_task_retries", "max_concurrency", "lifetime", "concurrency_groups")
# Actor options that have their own argument here.
_OPTIONS_WITH_ARGUMENTS = ("num_cpus", "num_gpus", "resources", "scheduling_strategy")


class RayEnvManager(SubprocessEnvManager):
    """Vectorized environment whose sub-environments run in Ray actors, profiled.

    The same front, options and behaviour as :class:`~envmanager.SubprocessEnvManager` (see its
    documentation for every argument they share), with these differences:

    * observations travel in the replies, through Ray's object store (there is no shared memory
      across machines), and ``max_concurrency``, ``context``, ``daemon`` and
      ``resource_interval`` do not apply: Ray's resources bound what runs where;
    * a dead actor (killed, its node lost) raises :class:`~envmanager.errors.WorkerDiedError`
      naming the worker, its host, its pid and Ray's cause — a
      :class:`~envmanager.errors.NodeLostError` naming the node and every worker on it when its
      whole node is gone — or is replaced under ``restart_on_failure``;
    * ``close()`` kills the actors (after they closed their envs and sent their last timers);
    * ``envs_per_worker="auto"`` counts the cluster's cores, not the driver's: one actor per CPU
      Ray counts in the cluster when the manager is built (``ray.cluster_resources()``; nodes an
      autoscaler adds later are not counted), no more than fit at ``num_cpus`` each, and with a
      ``placement_group`` one actor per bundle; never more actors than envs.

    Ray must be initialised (``ray.init(...)``) to reach a cluster; if it is not, it is
    initialised with Ray's defaults, as Ray itself does on first use.

    Args:
        env_fns: zero-argument callables that build the envs; sent to the actors with
            cloudpickle, so lambdas work (the modules they use must be importable there).
        num_cpus: CPUs each worker's actor reserves (fractions allowed). An env worker keeps a
            core busy, hence 1; with more workers than the cluster's CPUs, lower it.
        num_gpus: GPUs each actor reserves.
        resources: custom resources each actor asks for, e.g. ``{"env_node": 1}``.
        scheduling_strategy: Ray's scheduling strategy for every actor (``"SPREAD"``,
            ``NodeAffinitySchedulingStrategy(...)``, ...).
        placement_group: a Ray placement group to place the workers in, worker ``i`` in bundle
            ``i % bundle_count`` (use ``scheduling_strategy`` for any other layout).
        actor_options: any other ``.options()`` of the actors (``runtime_env``, ``memory``,
            ``accelerator_type``, ...), except those the manager sets itself.
        start_timeout: seconds to wait for the cluster to place and start the actors before
            raising :class:`~envmanager.errors.WorkerPlacementError`.
        clock_sync_interval: seconds between clock offset estimates of actors on other
            machines (None: only when each actor starts).
        merge_per_node: merge the payloads of the workers of each node that runs two or more of
            them on that node, in an aggregator actor (no CPU reserved), so that the driver
            merges one payload per node (:mod:`envmanager.ray.node_merging`): for thousands of
            workers, where merging every payload takes a share of the driver's core (it costs
            the nodes a message per payload and the merging; see docs/ray.md). The aggregated
            workers' timeline events and memory samples are then not kept; their trees and
            figures are.

    Raises:
        ImportError: Ray is not installed.
        ValueError: an invalid option, or an actor option the manager sets itself.
    """

    def __init__(
        self,
        env_fns: Sequence[Callable[[], Env]],
        copy: bool = True,
        observation_mode: str | tuple[Space, Space] = "same",
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        *,
        envs_per_worker: EnvsPerWorker = 1,
        timeout: float | None = None,
        restart_on_failure: bool | int = False,
        profiling: bool = True,
        flush_every: int | None = None,
        flush_interval: float | None = None,
        summaries_dir: str | os.PathLike[str] | None = None,
        run_id: str = "envmanager",
        num_cpus: float = 1,
        num_gpus: float = 0,
        resources: dict[str, float] | None = None,
        scheduling_strategy: Any = None,
        placement_group: Any = None,
        actor_options: dict[str, Any] | None = None,
        start_timeout: float = DEFAULT_START_TIMEOUT,
        clock_sync_interval: float | None = DEFAULT_CLOCK_SYNC_INTERVAL,
        live_view: bool = False,
        merge_per_node: bool = False,
    ) -> None:
        ray = _import_ray()
        self._actor_options = _checked_actor_options(
            num_cpus, num_gpus, resources, scheduling_strategy, placement_group, actor_options
        )
        self.placement_group = placement_group
        if not start_timeout > 0:
            raise ValueError(f"`start_timeout` must be a number of seconds > 0, got {start_timeout!r}.")
        if clock_sync_interval is not None and not clock_sync_interval > 0:
            raise ValueError(
                f"`clock_sync_interval` must be a number of seconds > 0 or None, got {clock_sync_interval!r}."
            )
        self.start_timeout = start_timeout
        self.clock_sync_interval = clock_sync_interval
        self._lost_nodes: dict[str, list[int]] = {}  # node id -> the workers it ran when lost
        self.node_merging: Any = None  # envmanager.ray.node_merging.NodeMerging, with merge_per_node
        if not ray.is_initialized():
            ray.init()
        super().__init__(
            env_fns,
            shared_memory=False,
            copy=copy,
            observation_mode=observation_mode,
            autoreset_mode=autoreset_mode,
            envs_per_worker=envs_per_worker,
            timeout=timeout,
            restart_on_failure=restart_on_failure,
            profiling=profiling,
            flush_every=flush_every,
            flush_interval=flush_interval,
            summaries_dir=summaries_dir,
            run_id=run_id,
            live_view=live_view,
        )
        # The verdicts' transport advice is Ray's, not the pipe's.
        self._profiling.keep_metadata("worker_transport", "ray")
        merger = self._profiling.merger
        if merger is not None:
            workers = self._pool.workers
            merger.add_worker_section("host", lambda entry: _host_of(workers, entry))
            merger.add_worker_section("ray", lambda entry: _section_of(workers, entry))
            self._note_machines(ray)
            if merge_per_node:
                self._merge_per_node()

    def _merge_per_node(self) -> None:
        """Start the aggregators, and route the workers' payloads through them from now on."""
        from envmanager.ray.node_merging import NodeMerging

        pool = self._pool
        node_merging = NodeMerging(self._profiling, pool.node_is_lost)
        merge = self._profiling.merge

        def merge_timers(worker_index: int, sequence: int, timers_field: Any) -> None:
            merge(worker_index, sequence, timers_field)
            if type(timers_field) is tuple and len(timers_field) == 5 and timers_field[0] is None:
                node_merging.shipped(worker_index)

        try:
            node_merging.start(pool.workers)
        except BaseException:
            node_merging.close()
            self.close(terminate=True)
            raise
        pool.timers_sink = merge_timers
        pool.on_started = node_merging.started
        pool.before_end = node_merging.close
        self.node_merging = node_merging

    def _cores_for_workers(self) -> int:
        """What ``envs_per_worker="auto"`` spreads the envs over: the bundles of the placement
        group, else the cluster's CPUs, as many as actors of ``num_cpus`` CPUs fit in."""
        if self.placement_group is not None:
            return self.placement_group.bundle_count
        import ray

        cluster_cpus = ray.cluster_resources().get("CPU", 0.0)
        cores = math.floor(cluster_cpus)
        num_cpus = self._actor_options["num_cpus"]
        if num_cpus > 0:
            cores = min(cores, math.floor(cluster_cpus / num_cpus))
        return max(1, cores)

    def _start_workers(self, configs: list[WorkerConfig], env_ranges: list[range]) -> Any:
        """One Ray actor per config (see :mod:`envmanager.ray.ray_pool`)."""
        from envmanager.ray.ray_pool import RayWorkerPool

        merger = self._profiling.merger
        return RayWorkerPool(
            configs,
            env_ranges,
            [self._options_of_worker(index) for index in range(len(configs))],
            start_timeout=self.start_timeout,
            clock_sync_interval=self.clock_sync_interval,
            clock_sink=None if merger is None else merger.set_clock,
        )

    def _options_of_worker(self, index: int) -> dict[str, Any]:
        if self.placement_group is None:
            return self._actor_options
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        bundle = index % self.placement_group.bundle_count
        strategy = PlacementGroupSchedulingStrategy(self.placement_group, placement_group_bundle_index=bundle)
        return {**self._actor_options, "scheduling_strategy": strategy}

    @property
    def actors(self) -> tuple[Any, ...]:
        """Each worker's Ray actor handle, by worker index (None where its actor is gone), for
        your own calls to them: Ray's state API, or ``ray.kill`` in a fault drill."""
        return tuple(handle.actor for handle in self._pool.workers)

    def estimate_clock(self, worker_index: int, round_trips: int = 5) -> ClockOffset:
        """A fresh estimate of an idle worker's clock offset from ``round_trips`` round trips,
        made one after another (even for a worker on this machine, whose clock is known to be
        ours): how far its timestamps are from the driver's now, and how sure that is."""
        self._assert_is_running()
        handle = self._pool.workers[worker_index]
        if not handle.alive or handle.pending:
            raise RuntimeError(f"worker {worker_index} is not idle: its clock cannot be asked now")
        clock = ClockOffset()
        clock.update(self._pool.measure_round_trips(handle, round_trips))
        return clock

    def _note_machines(self, ray: Any) -> None:
        """When the workers run on machines other than the driver's, the cores they compete for
        are those machines' (as Ray counts them), not the driver's."""
        worker_nodes = {handle.node_id for handle in self._pool.workers}
        cores = cores_of_worker_nodes(worker_nodes, ray.get_runtime_context().get_node_id(), ray.nodes())
        if cores is not None:
            self._profiling.keep_metadata("cores_available", cores)
            self._profiling.keep_metadata("ray_nodes", len(worker_nodes))

    def _died_error(self, handle: Any, what: str) -> WorkerDiedError:
        """The error naming a dead worker; when its whole node is gone, a :class:`NodeLostError`
        naming the node and every worker that ran there, since they all died with it."""
        if handle.shut_down_after is None and self._pool.node_is_lost(handle.node_id):
            # The workers it ran when it was lost: those restarted since have moved elsewhere.
            lost_workers = self._lost_nodes.setdefault(
                handle.node_id, [other.index for other in self._pool.workers if other.node_id == handle.node_id]
            )
            return NodeLostError(
                handle.index,
                handle.envs,
                what,
                host=handle.host,
                pid=handle.pid,
                cause=handle.death_cause or "its actor is gone",
                node_address=handle.node_address,
                node_id=handle.node_id,
                lost_workers=lost_workers,
            )
        return WorkerDiedError(
            handle.index,
            handle.envs,
            None,
            what,
            handle.shut_down_after,
            host=handle.host,
            pid=handle.pid,
            cause=handle.death_cause or "its actor is gone",
        )


def cores_of_worker_nodes(worker_nodes: set[Any], driver_node: Any, nodes: list[dict[str, Any]]) -> int | None:
    """The CPUs of the Ray nodes that run workers (``ray.nodes()`` entries), when any of them is
    not the driver's node; None when they all run beside the driver, whose own count holds."""
    if worker_nodes <= {driver_node}:
        return None
    cpus = {node.get("NodeID"): node.get("Resources", {}).get("CPU", 0.0) for node in nodes}
    return max(1, math.ceil(sum(cpus.get(node, 0.0) for node in worker_nodes)))


def _import_ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise ImportError(
            "RayEnvManager needs Ray: pip install 'rlprof[ray]' (or pip install 'ray>=2.9')"
        ) from error
    return ray


def _checked_actor_options(
    num_cpus: float,
    num_gpus: float,
    resources: dict[str, float] | None,
    scheduling_strategy: Any,
    placement_group: Any,
    actor_options: dict[str, Any] | None,
) -> dict[str, Any]:
    """The ``.options()`` every worker's actor is made with."""
    for name, value in (("num_cpus", num_cpus), ("num_gpus", num_gpus)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value < math.inf:
            raise ValueError(f"`{name}` must be a number >= 0, got {value!r}.")
    if resources is not None and (
        not isinstance(resources, dict)
        or not all(isinstance(key, str) and isinstance(amount, (int, float)) for key, amount in resources.items())
    ):
        raise ValueError(f"`resources` must map resource names to amounts, got {resources!r}.")
    if placement_group is not None and scheduling_strategy is not None:
        raise ValueError("Give `placement_group` or `scheduling_strategy`, not both.")
    extra = dict(actor_options or {})
    for name in extra:
        if name in _OPTIONS_OF_THE_MANAGER:
            raise ValueError(
                f"actor option {name!r} is set by RayEnvManager itself: its actors run one call at "
                "a time, end with the manager, and are restarted by its own restart_on_failure."
            )
        if name in _OPTIONS_WITH_ARGUMENTS:
            raise ValueError(f"give {name!r} as RayEnvManager's own `{name}` argument, not in `actor_options`.")
    options: dict[str, Any] = {"num_cpus": num_cpus, "num_gpus": num_gpus, **extra}
    if resources:
        options["resources"] = dict(resources)
    if scheduling_strategy is not None:
        options["scheduling_strategy"] = scheduling_strategy
    return options


def _host_of(workers: list[Any], entry: dict[str, Any]) -> str | None:
    index = entry["worker_id"]
    return workers[index].host if 0 <= index < len(workers) else None


def _section_of(workers: list[Any], entry: dict[str, Any]) -> dict[str, Any] | None:
    index = entry["worker_id"]
    return workers[index].section() if 0 <= index < len(workers) else None
