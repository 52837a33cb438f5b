"""One environment's ``step`` and ``reset`` timed in the process that runs them.

The env object the program built is kept as it is: its ``step``, ``reset`` and ``close`` are
shadowed by instance attributes that time the original bound methods, so its class, its wrappers,
its attributes and what it returns stay the program's own (no wrapper is added, ``isinstance``
and ``env.spec`` are unchanged, an attribute set on it lands where it did).

In the trainer's process the calls are blocks ``env.step`` and ``env.reset`` under whichever
block is open (the vector step of a ``SyncVectorEnv``, say). In a worker process they are the
top-level blocks of the worker's own tree, as in a ``SubprocessEnvManager`` worker, and the process
also keeps each call's finish stamp (for the critical path), a CPU-time sample of its env
calls (:class:`~envmanager.measurement.env_time.CpuSampler`), the kernel's count of its waits for
a core (:class:`~profiler.recording.scheduling.SchedulingSampler`) and, when the trainer's stack is
sampled, a sample of its own stack outside the env calls
(:class:`~profiler.automatic.stack_sampler.StackSampler`, in worker mode); it ships them over
rlprof's channel (:mod:`envmanager.instrumentation.channel`) every :data:`FLUSH_INTERVAL_SECONDS`
and when the env closes.

An env built inside another instrumented build (``gymnasium.make`` inside a factory that a vector
env's wrapper also times) is timed once, by the outermost instrumentation.

The timed methods carry the env's own ``__name__``, ``__qualname__``, ``__doc__``, ``__module__`` and
``__wrapped__`` (so ``inspect.signature`` gives the env's), and copy and pickle on their own as the
env's bound methods (:mod:`.timed_method`). They hold those bound methods, so a ``step`` the
program took from the env keeps the env alive, as a bound method does; the reference cycle this
makes through the env's attributes is broken as the env closes (:func:`_closing`), so a closed env
the program drops is freed at once, not at a garbage collection. A copy of the env (``copy.copy``,
``copy.deepcopy``) and a pickle of it (``pickle``, cloudpickle) are those of the env as the program
built it: the env's own ``__reduce_ex__`` is shadowed too (:class:`PlainReduce`, which copy and
pickle look up on the instance) and leaves rlprof's attributes out of the state. So a copy steps
itself, untimed, exactly as under plain python, and an unpickled env holds nothing of rlprof's
(no channel to a trainer that may be gone, no import of rlprof where it is unpickled).
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from typing import Any, Callable

from profiler.automatic.stack_sampler import WORKER_INTERVAL, StackSampler
from profiler.multiprocess.payload import WorkerTimers
from profiler.recording import events, memory
from profiler.recording.memory import MemorySampling
from profiler.recording.scheduling import SchedulingSampler
from profiler.timing import timers

from envmanager.instrumentation.channel import WorkerEnd, connect
from envmanager.instrumentation.step_path import finish_stamps, timed_step
from envmanager.instrumentation.timed_method import timed_method
from envmanager.measurement.env_time import CpuSampler

__all__ = ["FLUSH_INTERVAL_SECONDS", "PlainReduce", "WorkerIdentity", "WorkerShipping", "instrument_env",
           "is_instrumented", "is_timed", "own_attribute", "ship_at_exit"]

FLUSH_INTERVAL_SECONDS = 1.0
"""A worker ships its timers at most this often while stepping (and always when its env closes)."""

_TIMED = "_rlprof_timing"  # the instance attribute that marks an instrumented env
_REDUCE = "__reduce_ex__"  # copy and pickle look it up on the instance: see PlainReduce
_OWN = (_TIMED, "step", "reset", "close", _REDUCE)  # every instance attribute rlprof may set


class WorkerIdentity:
    """Who a worker process is to the trainer: which vector env, which index, where to ship."""

    __slots__ = ("address", "vector_id", "index", "record_timeline", "memory_sampling", "sample_stack")

    def __init__(
        self, address: str, vector_id: int, index: int, record_timeline: bool, memory_sampling: MemorySampling | None,
        sample_stack: bool = False,
    ) -> None:
        self.address = address
        self.vector_id = vector_id
        self.index = index
        self.record_timeline = record_timeline
        self.memory_sampling = memory_sampling
        self.sample_stack = sample_stack  # as the trainer's stack is sampled

    def __getstate__(self) -> tuple[Any, ...]:
        return (self.address, self.vector_id, self.index, self.record_timeline, self.memory_sampling,
                self.sample_stack)

    def __setstate__(self, state: tuple[Any, ...]) -> None:
        (self.address, self.vector_id, self.index, self.record_timeline, self.memory_sampling,
         self.sample_stack) = state


class WorkerShipping:
    """A worker process's timers, stamps, CPU sample, waits for a core and stack samples, and its
    end of the channel.

    One per process (the first instrumented env of a worker decides who it is). When the channel
    cannot be reached or breaks, the process keeps stepping and drops what it measures once per
    flush, so nothing grows; its stack sampler stops.
    """

    __slots__ = ("connection", "timers", "cpu_sampler", "scheduling", "stack_sampler", "stamps", "lost",
                 "open_envs", "said_goodbye", "ships_at_exit")

    def __init__(self, identity: WorkerIdentity) -> None:
        if identity.record_timeline and not events.is_recording():
            events.start_recording()  # a spawned process does not inherit the trainer's recording
        if identity.memory_sampling is not None:
            memory.apply_sampling(identity.memory_sampling)
        self.timers = WorkerTimers(flush_interval=FLUSH_INTERVAL_SECONDS)
        self.cpu_sampler = CpuSampler()
        self.scheduling = SchedulingSampler()
        self.stamps = finish_stamps()  # in C where the step path's helper is: see step_path
        self.open_envs = 0
        self.said_goodbye = False
        self.ships_at_exit = False
        self.connection: WorkerEnd | None = connect(
            identity.address, ("hello", identity.vector_id, identity.index, os.getpid())
        )
        self.lost = self.connection is None
        self.stack_sampler: StackSampler | None = None
        if identity.sample_stack and not self.lost:
            self.stack_sampler = StackSampler(interval=WORKER_INTERVAL, in_worker=True).start()
            if self.stack_sampler.native_id is not None:  # rlprof's thread: its waits are not the program's
                self.scheduling.ignore_thread(self.stack_sampler.native_id)

    def env_opened(self) -> None:
        """Count one more env timed here. One opened after the goodbye of the process's last env
        (a pool worker's next task builds its own) tells the trainer that this worker ships again:
        the channel stayed open for it."""
        self.open_envs += 1
        self.resume()

    def resume(self) -> None:
        """After a goodbye, tell the trainer that this worker ships again (an env opened, or a
        pool worker's next task arrived: :mod:`.pool_tasks`)."""
        if self.said_goodbye:
            self.said_goodbye = False
            self._send(("resumed",))

    def ship(self, goodbye: bool = False, last: bool = False) -> None:
        """Send what was measured since the previous shipment. ``goodbye``: the process's last env
        closed, and nothing more is due unless it opens another (:meth:`env_opened`); ``last``: the
        process ends, so the channel closes too. Without a channel (never reached, broken, closed)
        it is dropped."""
        payload = self.timers.final_payload()
        cpu_figures = self.cpu_sampler.take()
        waits = self.scheduling.take(final=goodbye or last)
        stamps = self.stamps.take()  # in place: the step path holds them
        connection = self.connection
        if connection is None:
            return
        sampler = self.stack_sampler
        if sampler is not None and last:
            sampler.stop()
        untimed = sampler.section() if sampler is not None else None
        if self._send(("timers", payload, *cpu_figures, stamps, waits, untimed)) and (goodbye or last):
            self.said_goodbye = self._send(("bye",))
        if last or self.lost:
            if sampler is not None:
                sampler.stop()
                self.stack_sampler = None
            self.connection = None
            try:
                connection.close()
            except OSError:
                pass

    def _send(self, message: tuple[Any, ...]) -> bool:
        """Send one message; False, the channel then lost, if it could not be."""
        connection = self.connection
        if connection is None:
            return False
        try:
            connection.send(message)
        except Exception:  # noqa: BLE001 - the trainer is gone or not reading: step on without it
            self.lost = True
            return False
        return True


_shipping: WorkerShipping | None = None
_shipping_lock = threading.Lock()


def _forget_parent_shipping() -> None:
    global _shipping
    _shipping = None


os.register_at_fork(after_in_child=_forget_parent_shipping)


def worker_shipping(identity: WorkerIdentity) -> WorkerShipping:
    """This process's shipping, started by its first instrumented env."""
    global _shipping
    with _shipping_lock:
        if _shipping is None:
            _shipping = WorkerShipping(identity)
        return _shipping


def current_shipping() -> WorkerShipping | None:
    """This process's shipping, if an env timed here started one."""
    return _shipping


def ship_at_exit() -> None:
    """Have this process's shipping send its last timers as the process ends, whether or not its
    envs are closed: at the exit of a ``multiprocessing`` process (its finalizers; ``atexit`` does
    not run there) or of the interpreter. Once per process; nothing without a shipping."""
    shipping = _shipping
    if shipping is None or shipping.ships_at_exit:
        return
    shipping.ships_at_exit = True
    from multiprocessing import util

    util.Finalize(None, shipping.ship, kwargs={"last": True}, exitpriority=0)
    atexit.register(shipping.ship, last=True)


def _takes_attributes(env: Any) -> bool:
    """Whether ``env``'s instances keep attributes of their own (a ``__dict__``)."""
    return type(env).__dictoffset__ != 0


def own_attribute(env: Any, name: str) -> Any:
    """``env``'s own (instance) attribute ``name``, an attribute that no class of ``env`` defines
    (``env``, ``venv``, rlprof's mark); None if it has none.

    Read without asking for ``env.__dict__``: on Python 3.11 and later an object keeps its
    attributes inline until something asks for its ``__dict__``, which then becomes a real dict
    for good, and from then on the interpreter no longer specializes the attribute and method
    lookups on it (``self.env.step(action)`` in every wrapper layer): the program's own steps got
    slower by that (about 4,000 instructions a CartPole step, ``benchmarks/worker_step_cost.py``).
    ``object.__getattribute__`` also bypasses a ``__getattr__`` that forwards to a wrapped object.
    """
    klass = type(env)
    if not klass.__dictoffset__ or any(name in base.__dict__ for base in klass.__mro__):
        return None
    try:
        return object.__getattribute__(env, name)
    except AttributeError:
        return None


def _remove_own(env: Any, names: tuple[str, ...]) -> None:
    """Take ``env``'s own attributes ``names`` away (those it has), its class's showing again."""
    for name in names:
        with contextlib.suppress(AttributeError):
            object.__delattr__(env, name)


def is_timed(env: Any) -> bool:
    """Whether ``env`` itself is timed (not an env it wraps: an env built inside another build,
    ``gymnasium.make`` in a registered entry point, is timed again by the outer build, which
    silences it)."""
    return own_attribute(env, _TIMED) is not None


def is_instrumented(env: Any) -> bool:
    """Whether ``env`` or an env it wraps is timed already."""
    seen = 0
    while env is not None and seen < 64:
        if own_attribute(env, _TIMED) is not None:
            return True
        env = own_attribute(env, "env")
        seen += 1
    return False


class _Timing:
    """Whether an instrumented env still times its calls (an outer instrumentation takes over),
    and the worker shipping it counts in (None in the trainer)."""

    __slots__ = ("active", "shipping")

    def __init__(self, shipping: WorkerShipping | None) -> None:
        self.active = True
        self.shipping = shipping
        if shipping is not None:
            shipping.env_opened()

    def stop(self) -> bool:
        """Time no more; True if this was the worker's last env that timed (its timers are due)."""
        if not self.active:
            return False
        self.active = False
        if self.shipping is None:
            return False
        self.shipping.open_envs -= 1
        return self.shipping.open_envs <= 0


def _silence_inner(env: Any) -> None:
    """Give every env this one wraps its own methods back: the outermost build times the calls
    once, and the inner envs are again exactly as the program built them."""
    seen = 0
    while env is not None and seen < 64:
        timing = own_attribute(env, _TIMED)
        if timing is not None:
            timing.stop()
            _remove_own(env, _OWN)
        env = own_attribute(env, "env")
        seen += 1


def instrument_env(env: Any, identity: WorkerIdentity | None) -> _Timing | None:
    """Time ``env``'s ``step`` and ``reset`` here: in the trainer (``identity`` None) or as worker
    ``identity``. Returns the switch of its timing (``active`` is false once an outer build took
    over); None, changing nothing, for an object that takes no instance attributes."""
    if not _takes_attributes(env) or not callable(getattr(env, "step", None)):
        return None
    _silence_inner(env)
    step, reset, close = env.step, env.reset, getattr(env, "close", None)
    if identity is None:
        timing = _Timing(None)
        timed = _trainer_methods(timing, step, reset)
    else:
        shipping = worker_shipping(identity)
        timing = _Timing(shipping)
        timed = _worker_methods(timing, shipping, step, reset, close)
    if close is not None:  # (without one, a worker's env keeps rlprof's timed_close: nothing to show)
        timed["close"] = timed_method(_closing(env, timed.get("close", close)), close)
    own = {_TIMED: timing, **timed}
    own[_REDUCE] = PlainReduce(env, dict(own))  # not itself: a cycle of rlprof's own, which would hold env
    # Set as ``object`` sets them (a ``__setattr__`` of the env's class is not the program's
    # business here), inline, without making the instance's ``__dict__`` (see own_attribute).
    try:
        for name, value in own.items():
            object.__setattr__(env, name, value)
    except (AttributeError, TypeError):
        _remove_own(env, tuple(own))
        timing.stop()
        return None
    return timing


class PlainReduce:
    """An instrumented env's ``__reduce_ex__``: the env's own, with rlprof's attributes left out
    of the state it gives.

    ``copy.copy``, ``copy.deepcopy``, ``pickle`` and cloudpickle all ask the instance for its
    ``__reduce_ex__``, so this one attribute makes every copy, and every pickle, of the env those of
    the env as the program built it. Without it the copy's ``step`` and ``reset`` would be the
    original's (bound to the original env, timing into the original's block), and the pickle would
    fail on them. Whatever the env's class defines (``__getstate__``, ``__reduce__``,
    ``__reduce_ex__``) still makes the state: only attributes that are rlprof's own objects are
    left out of it, in a new dict (the env's own ``__dict__`` may be the state itself).
    """

    __slots__ = ("env", "own")

    def __init__(self, env: Any, own: dict[str, Any]) -> None:
        self.env = env
        self.own = own  # rlprof's other attributes of env

    def __call__(self, protocol: int) -> Any:
        reduced = type(self.env).__reduce_ex__(self.env, protocol)
        if not isinstance(reduced, tuple) or len(reduced) < 3:
            return reduced
        state = reduced[2]
        if isinstance(state, dict):
            plain = self._without_own(state)
        elif isinstance(state, tuple) and len(state) == 2 and isinstance(state[0], dict):
            plain = (self._without_own(state[0]), state[1])  # (__dict__, __slots__ values)
        else:
            return reduced
        return (*reduced[:2], plain, *reduced[3:])

    def _without_own(self, state: dict[str, Any]) -> dict[str, Any]:
        own = self.own
        return {name: value for name, value in state.items()
                if value is not self and own.get(name, _NOT_OWN) is not value}


_NOT_OWN = object()


def _trainer_methods(timing: _Timing, step: Any, reset: Any) -> dict[str, Any]:
    """``step`` timed by :func:`~envmanager.instrumentation.step_path.timed_step` (a
    SyncVectorEnv of cheap envs makes several calls per vector step); ``reset`` through
    ``hierarchical_timer``, so the companions see every call."""
    hierarchical_timer = timers.hierarchical_timer

    def timed_reset(*args: Any, **kwargs: Any) -> Any:
        if not timing.active:
            return reset(*args, **kwargs)
        with hierarchical_timer("env.reset"):
            return reset(*args, **kwargs)

    return {"step": timed_step(timing, step, None), "reset": timed_method(timed_reset, reset)}


def _worker_methods(timing: _Timing, shipping: WorkerShipping, step: Any, reset: Any, close: Any) -> dict[str, Any]:
    """``step`` timed, sampled, stamped and shipped by
    :func:`~envmanager.instrumentation.step_path.timed_step`; ``reset`` the same through
    ``hierarchical_timer``; ``close`` ships the last timers once the worker's last env closes."""
    hierarchical_timer = timers.hierarchical_timer
    sampler = shipping.cpu_sampler
    stamp = shipping.stamps.append
    clock = timers.current_clock()

    def timed_reset(*args: Any, **kwargs: Any) -> Any:
        if not timing.active:
            return reset(*args, **kwargs)
        with hierarchical_timer("env.reset"):
            result = sampler.measure(reset, *args, **kwargs)
        stamp(clock())
        return result

    def timed_close(*args: Any, **kwargs: Any) -> Any:
        try:
            return close(*args, **kwargs) if close is not None else None
        finally:
            if timing.stop():
                shipping.ship(goodbye=True)

    return {"step": timed_step(timing, step, shipping), "reset": timed_method(timed_reset, reset),
            "close": timed_close}


def _closing(env: Any, close: Callable[..., Any]) -> Callable[..., Any]:
    """``close`` (the env's own, or the worker's ``timed_close`` around it), after which ``env``
    holds none of rlprof's attributes.

    The timed methods hold the env's bound methods, and so the env, while the env holds them: a
    reference cycle, which only a garbage collection frees (never, in a worker that exits, or with
    the collector off). Closing the env breaks it, so a closed env the program drops is freed at
    once, by its count, as under python; a timed method the program took from the env still holds
    the env and works (as a bound method keeps its object alive).
    """

    def closing(*args: Any, **kwargs: Any) -> Any:
        try:
            return close(*args, **kwargs)
        finally:
            _release(env)

    return closing


def _release(env: Any) -> None:
    """Take rlprof's attributes off ``env``, an instrumented env closed (those the program
    did not replace since: a method it set on the env stays its own): the
    reference cycle between the env and its timed methods is broken, and the env is freed when
    the program drops it. A timed method the program holds still works (it holds the env)."""
    if own_attribute(env, _TIMED) is None:  # given back already (closed twice, an outer build)
        return
    reduce = _instance_value(env, _REDUCE)
    ours = {**reduce.own, _REDUCE: reduce} if isinstance(reduce, PlainReduce) else {}
    ours[_TIMED] = own_attribute(env, _TIMED)
    _remove_own(env, tuple(name for name, value in ours.items() if _instance_value(env, name) is value))


def _instance_value(env: Any, name: str) -> Any:
    """``env``'s attribute ``name`` as the instance gives it (its own shadows its class's method)."""
    try:
        return object.__getattribute__(env, name)
    except AttributeError:
        return None
