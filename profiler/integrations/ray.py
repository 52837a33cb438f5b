"""Timers in any Ray code: tasks and actors whose blocks come back to the driver with their results.

    import ray
    from profiler import hierarchical_timer
    from profiler.integrations import ray as timed_ray

    @timed_ray.remote(num_cpus=1)             # instead of @ray.remote(num_cpus=1)
    def rollout(seed):
        with hierarchical_timer("simulate"):
            ...
        return trajectory

    with hierarchical_timer("collect"):
        refs = [rollout.remote(seed) for seed in range(8)]
        trajectories = timed_ray.get(refs)    # instead of ray.get(refs)

Each call of a timed function or actor method runs inside a block named after it (``rollout``,
``Learner.update``) in its worker's timer tree; when it returns, the worker's blocks since its
previous payload (:mod:`profiler.multiprocess.payload`) travel back *inside its result*, so shipping them
costs no extra message. :func:`get` unwraps the results and merges each payload into the driver's
tree under the block that was open when the call was launched (``collect`` above, even if the
result is fetched later), marked ``is_parallel``, and into a tree of its own per actor, or per
worker process for tasks, in the dump's ``workers`` section (each entry with ``host`` and a
``ray`` section saying which actor or process it was). The merger is a
:class:`~profiler.multiprocess.merge.TimerMerger`, the same that merges env workers.

Rules of use:

* Fetch timed results with :func:`get`. ``ray.get`` returns them still wrapped, as
  :class:`TimedResult`; ``ray.wait`` and passing the references on work as usual.
* A call returns one object (``num_returns=1``, the default); async actors are refused (their
  coroutines would interleave on one timer stack).
* A call that raises ships nothing: its blocks stay in its worker and travel with that worker's
  next result.
* A timed task that launches timed tasks merges their blocks into its own tree, and they reach the
  driver inside its own payload.
* While the driver records a timeline (:func:`profiler.recording.events.start_recording`), the workers record
  theirs, and each worker process appears on it as its own process.

Ray is imported when first used, never by ``import profiler``; ``pip install 'rlprof[ray]'``.
"""

from __future__ import annotations

import functools
import inspect
import os
import socket
import threading
import warnings
from collections import OrderedDict
from typing import Any, Callable

from profiler.recording import events
from profiler.timing import timers
from profiler.multiprocess.merge import PayloadError, TimerMerger
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.timing.timers import TimerNode, TimerStack

__all__ = [
    "LAUNCHES_KEPT",
    "TimedActorClass",
    "TimedActorHandle",
    "TimedRemoteFunction",
    "TimedResult",
    "get",
    "merger",
    "remote",
]

LAUNCHES_KEPT = 100_000
"""Launches remembered until their results are fetched; past this, the oldest are forgotten and
their blocks merge under the block open when they are fetched."""

_RECORD_KEYWORD = "_rlprof_record_timeline"  # added to a call while the driver records a timeline


class TimedResult:
    """A timed call's result and its worker's timer payload, until :func:`get` unwraps them.

    ``worker`` says where it ran: ``(kind, name, host, node id, pid, actor id)``, ``kind`` being
    ``"actor"`` or ``"task"``.
    """

    __slots__ = ("value", "payload", "worker")

    def __init__(self, value: Any, payload: tuple[Any, ...] | None, worker: tuple[Any, ...]) -> None:
        self.value = value
        self.payload = payload
        self.worker = worker

    def __reduce__(self) -> tuple[Any, ...]:
        return (TimedResult, (self.value, self.payload, self.worker))

    def __repr__(self) -> str:
        return (
            f"TimedResult({self.value!r:.60}): a timed Ray call's result, still wrapped; fetch it "
            "with profiler.integrations.ray.get instead of ray.get"
        )


# --- the worker side ---------------------------------------------------------------------------


def _run_timed(block: str, function: Callable[..., Any], args: tuple, kwargs: dict) -> TimedResult:
    """Run one call in a block of its own and return its result with the worker's payload."""
    _follow_driver_recording(kwargs.pop(_RECORD_KEYWORD, False))
    with timers.hierarchical_timer(block):
        value = function(*args, **kwargs)
    # Every payload declares every block name: Ray reuses this process for calls of other drivers,
    # and a driver may fetch the results in any order, or never (see profiler.multiprocess.payload).
    payload = snapshot_and_flush(declare_all=True) if timers.is_enabled() else None
    return TimedResult(value, payload, _this_worker())


_recording_for_the_driver = False  # this worker process records because a driver asked it to


def _follow_driver_recording(driver_records: bool) -> None:
    """Record this worker's timeline while the driver that launched the call records its own:
    Ray reuses worker processes, so one that recorded for an earlier call stops when asked no more."""
    global _recording_for_the_driver
    if driver_records and not events.is_recording():
        events.start_recording()
        _recording_for_the_driver = True
    elif not driver_records and _recording_for_the_driver:
        events.stop_recording()
        events.clear_recording()
        _recording_for_the_driver = False


@functools.lru_cache(maxsize=None)
def _worker_identity(actor_id: str | None) -> tuple[Any, ...]:
    import ray

    context = ray.get_runtime_context()
    kind = "task" if actor_id is None else "actor"
    return (kind, socket.gethostname(), context.get_node_id(), os.getpid(), actor_id)


def _this_worker() -> tuple[Any, ...]:
    import ray

    actor_id = ray.get_runtime_context().get_actor_id()
    kind, host, node_id, pid, actor_id = _worker_identity(actor_id)
    return (kind, _ACTOR_CLASS.get(actor_id, ""), host, node_id, pid, actor_id)


_ACTOR_CLASS: dict[str | None, str] = {}  # this worker's actor: its class name, for the dump


def _note_actor_class(name: str) -> None:
    """Called by a timed actor's constructor, in its own process. A module-level function, so the
    actor class (pickled by value) reaches this module's very dict, not a copy of it."""
    import ray

    _ACTOR_CLASS[ray.get_runtime_context().get_actor_id()] = name


def _timed_function(function: Callable[..., Any]) -> Callable[..., Any]:
    block = function.__qualname__

    def run(*args: Any, **kwargs: Any) -> TimedResult:
        return _run_timed(block, function, args, kwargs)

    # Named as the function (Ray shows it), but with a signature taking anything: the driver may
    # add its timeline keyword to a call.
    run.__name__, run.__qualname__, run.__module__ = function.__name__, function.__qualname__, function.__module__
    run.__doc__ = function.__doc__
    return run


def _timed_actor_class(cls: type) -> type:
    """A subclass of ``cls`` whose public methods return :class:`TimedResult`."""
    namespace: dict[str, Any] = {}
    for name, member in inspect.getmembers(cls, predicate=inspect.isfunction):
        if isinstance(inspect.getattr_static(cls, name), (staticmethod, classmethod)):
            continue  # called on the class, not through the actor
        if inspect.iscoroutinefunction(member) or inspect.isasyncgenfunction(member):
            raise TypeError(
                f"{cls.__name__}.{name} is async: timed actors run one call at a time per thread, "
                "and coroutines would interleave their blocks on one timer stack"
            )
        if not name.startswith("_"):
            namespace[name] = _timed_method(f"{cls.__name__}.{name}", member)

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        _note_actor_class(cls.__name__)
        cls.__init__(self, *args, **kwargs)

    namespace["__init__"] = __init__
    namespace["__module__"] = cls.__module__
    namespace["__qualname__"] = cls.__qualname__
    return type(cls.__name__, (cls,), namespace)


def _timed_method(block: str, method: Callable[..., Any]) -> Callable[..., Any]:
    def run(self: Any, *args: Any, **kwargs: Any) -> TimedResult:
        return _run_timed(block, method, (self, *args), kwargs)

    run.__name__, run.__qualname__ = method.__name__, method.__qualname__
    run.__doc__ = method.__doc__
    return run


# --- the driver side ---------------------------------------------------------------------------


class _Launches:
    """The block that was open when each timed call was launched, until its result is fetched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._anchors: OrderedDict[Any, tuple[TimerStack, TimerNode]] = OrderedDict()

    def note(self, ref: Any) -> None:
        stack = timers._resolve(None)
        with self._lock:
            self._anchors[ref] = (stack, stack.current)
            if len(self._anchors) > LAUNCHES_KEPT:
                self._anchors.popitem(last=False)

    def take(self, ref: Any) -> tuple[TimerStack, TimerNode] | None:
        with self._lock:
            return self._anchors.pop(ref, None)


_launches = _Launches()


class _RayMergers:
    """One merger per driver timer stack, and the driver's ids for the workers it heard from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._mergers: dict[int, TimerMerger] = {}
        self._worker_ids: dict[Any, int] = {}
        self._workers: dict[int, tuple[Any, ...]] = {}
        self.bad_payloads = 0

    def merger(self, stack: TimerStack) -> TimerMerger:
        with self._lock:
            merger = self._mergers.get(id(stack))
            if merger is None or merger.timer_stack is not stack:
                merger = self._mergers[id(stack)] = TimerMerger(stack, name="ray")
                merger.add_worker_section("host", self._host_section)
                merger.add_worker_section("ray", self._ray_section)
            return merger

    def worker_id(self, worker: tuple[Any, ...]) -> int:
        kind, _, _, node_id, pid, actor_id = worker
        key = actor_id if kind == "actor" else (node_id, pid)
        with self._lock:
            worker_id = self._worker_ids.get(key)
            if worker_id is None:
                worker_id = self._worker_ids[key] = len(self._worker_ids)
            self._workers[worker_id] = worker
            return worker_id

    def _host_section(self, entry: dict[str, Any]) -> str | None:
        worker = self._workers.get(entry["worker_id"])
        return None if worker is None else worker[2]

    def _ray_section(self, entry: dict[str, Any]) -> dict[str, Any] | None:
        worker = self._workers.get(entry["worker_id"])
        if worker is None:
            return None
        kind, name, _, node_id, pid, actor_id = worker
        section = {"kind": kind, "node_id": node_id, "pid": pid}
        if kind == "actor":
            section.update({"class": name, "actor_id": actor_id})
        return section

    def merge(self, result: TimedResult, launch: tuple[TimerStack, TimerNode] | None) -> None:
        if result.payload is None:
            return
        stack, anchor = launch if launch is not None else (timers._resolve(None), None)
        try:
            worker_id = self.worker_id(_checked_worker(result.worker))
            self.merger(stack).merge_payload(worker_id, result.payload, anchor)
        except PayloadError as error:
            # Timing data must never break the program: count it, say it once, go on.
            self.bad_payloads += 1
            if self.bad_payloads == 1:
                warnings.warn(f"rlprof: dropped a malformed timer payload from a Ray worker: {error}",
                              RuntimeWarning, stacklevel=3)


_mergers = _RayMergers()


def _checked_worker(worker: Any) -> tuple[Any, ...]:
    if not (isinstance(worker, tuple) and len(worker) == 6 and worker[0] in ("actor", "task")):
        raise PayloadError(f"a timed result names its worker as (kind, name, host, node, pid, actor), got {worker!r:.80}")
    return worker


def merger(timer_stack: TimerStack | None = None) -> TimerMerger:
    """The merger of the timed Ray calls launched from a thread (the calling thread by default):
    its per-worker trees, straggler summaries, worker entries."""
    return _mergers.merger(timers._resolve(timer_stack))


def get(refs: Any, *, timeout: float | None = None) -> Any:
    """``ray.get(refs)``, with every timed result unwrapped and its timers merged.

    ``refs`` is one reference or a list of them, as for ``ray.get``; results of calls that are not
    timed pass through unchanged. Each payload is merged under the block that was open when its
    call was launched (through a timed function or actor handle), else under the block open now.
    """
    import ray

    values = ray.get(refs, timeout=timeout)
    if isinstance(refs, (list, tuple)):
        return [_unwrap(ref, value) for ref, value in zip(refs, values)]
    return _unwrap(refs, values)


def _unwrap(ref: Any, value: Any) -> Any:
    launch = _launches.take(ref)
    if not isinstance(value, TimedResult):
        return value
    _mergers.merge(value, launch)
    return value.value


def _launched(call: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    import ray

    if events.is_recording():
        kwargs = {**kwargs, _RECORD_KEYWORD: True}
    ref = call(*args, **kwargs)
    if isinstance(ref, ray.ObjectRef):
        _launches.note(ref)
    return ref


class TimedRemoteFunction:
    """A remote function whose calls come back with their timers (see the module docstring)."""

    def __init__(self, remote_function: Any) -> None:
        self.remote_function = remote_function

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        """Launch a call, as ``RemoteFunction.remote``: its timers merge under the block open now."""
        return _launched(self.remote_function.remote, args, kwargs)

    def options(self, **options: Any) -> TimedRemoteFunction:
        """The same function with other Ray options (``num_returns`` must stay 1)."""
        _check_single_return(options)
        return TimedRemoteFunction(self.remote_function.options(**options))


class TimedActorMethod:
    """One method of a timed actor: ``.remote()`` launches a call whose timers come back."""

    def __init__(self, method: Any) -> None:
        self.method = method

    def remote(self, *args: Any, **kwargs: Any) -> Any:
        return _launched(self.method.remote, args, kwargs)

    def options(self, **options: Any) -> TimedActorMethod:
        _check_single_return(options)
        return TimedActorMethod(self.method.options(**options))


class TimedActorHandle:
    """A handle to a timed actor: its methods' calls come back with their timers.

    ``handle`` is Ray's own actor handle (for ``ray.kill`` and the like). It pickles, so it can be
    passed to other tasks and actors.
    """

    def __init__(self, handle: Any) -> None:
        self.handle = handle

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            return getattr(self.handle, name)  # Ray's own attributes, not the actor's methods
        return TimedActorMethod(getattr(self.handle, name))

    def __reduce__(self) -> tuple[Any, ...]:
        return (TimedActorHandle, (self.handle,))


class TimedActorClass:
    """A timed actor class: ``.remote(...)`` creates an actor and returns a :class:`TimedActorHandle`."""

    def __init__(self, actor_class: Any) -> None:
        self.actor_class = actor_class

    def remote(self, *args: Any, **kwargs: Any) -> TimedActorHandle:
        return TimedActorHandle(self.actor_class.remote(*args, **kwargs))

    def options(self, **options: Any) -> TimedActorClass:
        return TimedActorClass(self.actor_class.options(**options))


def remote(*args: Any, **options: Any) -> Any:
    """``ray.remote`` for functions and classes whose timer blocks come back with their results.

    Use it bare (``@remote``) or with Ray's options (``@remote(num_cpus=1)``).

    Raises:
        TypeError: an async actor class, or ``num_returns`` other than 1.
    """
    if len(args) == 1 and not options and callable(args[0]):
        return _make_remote(args[0], {})
    if args:
        raise TypeError("use @remote or @remote(option=value, ...), as ray.remote")
    _check_single_return(options)
    return lambda target: _make_remote(target, options)


def _make_remote(target: Any, options: dict[str, Any]) -> Any:
    import ray

    if inspect.isclass(target):
        timed = _timed_actor_class(target)
        return TimedActorClass(ray.remote(**options)(timed) if options else ray.remote(timed))
    timed = _timed_function(target)
    return TimedRemoteFunction(ray.remote(**options)(timed) if options else ray.remote(timed))


def _check_single_return(options: dict[str, Any]) -> None:
    if options.get("num_returns", 1) != 1:
        raise TypeError(
            "a timed Ray call returns one object (its result with its timers): num_returns must be 1"
        )
