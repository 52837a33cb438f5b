"""The vector env classes rlprof knows, timed on the trainer's side without replacing them.

Each known class keeps its own code; rlprof sets, on the class, methods that call the class's own:

* ``__init__`` wraps the env factories it is given (:class:`~envmanager.instrumentation.factories.TimedFactory`),
  so each env is timed where it runs, and registers the vector env;
* ``step`` is the block ``vector.step`` (``<class>.step`` for a vector env of the other kind than
  the program's first, named apart: see ``VectorEnvRecord.name_apart``; for SB3, the ``step`` of
  the outermost ``VecEnvWrapper``
  around a known class); for classes whose envs run in worker processes,
  ``step_async`` is ``vector.send_actions``, and ``step_wait`` is ``vector.wait_for_workers`` (the
  time the class's own ``step_wait`` was blocked on a worker's pipe, counted by the pipes' ``recv``:
  :mod:`.reply_reads`) and ``vector.receive_results`` (the rest of it: reading, unpickling,
  stacking) — the generic layout ``profiler.analysis.step_time`` splits into env compute, waiting
  and transport. The class reads each reply as soon as it is there, in its own order, as under
  python, so the two phases' lengths are exact but not their order: each step's waiting is put
  first, its receiving after. A ``step_wait`` given a timeout waits for every reply before the
  class reads any (:mod:`.reply_wait`), as the class's own does then;
* ``reset`` is the block ``vector.reset`` (or ``<class>.reset``, named apart).

A step of a class whose envs run in workers, called on the vector env itself (not through an SB3
wrapper, whose own work around the calls would fall into the phases), is timed as one
:class:`~profiler.timing.phased_block.PhasedBlock` (the record's ``step_block``): the class's own
``step`` calls ``step_async`` and ``step_wait``, which, while the step's run is open, stamp where
sending and waiting ended instead of opening blocks of their own; the run closes as the step
returns, and the block folds the runs into the same tree and timeline spans as the ``with`` blocks
give, and hands them to the record, which takes each step's window from them. Where the class's
own ``step`` is its ``step_async`` then its ``step_wait`` (``AsyncVectorEnv``), the run calls those
two itself and stamps their ends, without the three Python frames. ``step_async`` and
``step_wait`` called by the program itself, a step through a wrapper, a step inside the open run
of the same vector env, and every step while :meth:`PhasedBlock.open` declines (timing off or
paused, a companion watching every block) keep the ``with`` blocks.

Gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv`` (which ``gymnasium.make_vec`` builds) are
patched at once. Stable-Baselines3's ``DummyVecEnv`` and ``SubprocVecEnv`` are patched when the
program imports them (an import hook: SB3 and torch are never imported by rlprof), or at once if
they are already imported. :meth:`Patches.restore` puts every original back.
"""

from __future__ import annotations

import functools
import sys
import time
from operator import attrgetter
from types import ModuleType
from typing import Any, Callable, NamedTuple

from profiler.automatic.post_import import PostImportWatch, when_imported
from profiler.timing import timers
from profiler.timing.phased_block import FOLD_AT_RUNS, add_run, span_timeline
from profiler.timing.timers import TimerNode

from envmanager.instrumentation.reply_wait import wait_for_replies
from envmanager.instrumentation.timed_env import own_attribute

__all__ = ["KNOWN_CLASSES", "KnownClass", "Patches", "sends_then_waits"]


class KnownClass(NamedTuple):
    """Where a known vector env class lives and how rlprof reaches its workers' pipes (a named
    tuple: it costs less to make than a frozen dataclass, whose methods are compiled as it is made,
    before every rlprof run's program starts)."""

    module: str
    name: str
    in_workers: bool
    pipes: Callable[[Any], list[Any]] | None = None  # the trainer's ends, one per worker
    # step_wait has replies to wait for while this attribute of the vector env equals the value
    # ``waiting_value`` gives for the class's module (read once, as the class is patched).
    waiting_attribute: str = ""
    waiting_value: Callable[[ModuleType], Any] | None = None
    timeout_argument: bool = False  # step_wait takes a timeout
    # Whether an instance puts array observations in shared memory (None: the class has no such
    # setting): the verdicts then do not advise turning it on where it was on.
    shared_memory: Callable[[Any], Any] | None = None


# Read at every vector step: attrgetter reads an attribute without a Python frame of its own.
KNOWN_CLASSES = (
    KnownClass("gymnasium.vector.sync_vector_env", "SyncVectorEnv", in_workers=False),
    KnownClass("gymnasium.vector.async_vector_env", "AsyncVectorEnv", in_workers=True,
               pipes=attrgetter("parent_pipes"), waiting_attribute="_state",
               waiting_value=lambda module: module.AsyncState.WAITING_STEP, timeout_argument=True,
               shared_memory=attrgetter("shared_memory")),
    KnownClass("stable_baselines3.common.vec_env.dummy_vec_env", "DummyVecEnv", in_workers=False),
    KnownClass("stable_baselines3.common.vec_env.subproc_vec_env", "SubprocVecEnv", in_workers=True,
               pipes=attrgetter("remotes"), waiting_attribute="waiting", waiting_value=lambda module: True),
)


class Patches:
    """Methods set on known classes, and how to put the originals back."""

    def __init__(self, registry: Any) -> None:
        """``registry`` is the :class:`~envmanager.instrumentation.EnvironmentInstrumentation`:
        ``new_record(cls, known, env_fns)``, ``built(envs, record)``, ``record_of(envs)``,
        ``last_found``: (a weak reference to the vector env, its record) that ``record_of`` found
        last, or None, and ``named_apart``: whether a vector env's blocks were named apart."""
        self.registry = registry
        self.patched: list[str] = []
        self._originals: list[tuple[type, str, Any]] = []
        self._watches: list[PostImportWatch] = []

    def install(self) -> None:
        """Patch the known classes imported now (Gymnasium's: imported here if need be); the
        others when the program imports them (:func:`profiler.automatic.post_import.when_imported`)."""
        for known in KNOWN_CLASSES:
            if known.module.startswith("gymnasium") and known.module not in sys.modules:
                __import__(known.module, fromlist=[known.name])
            watch = when_imported(known.module, self._patcher(known))
            if watch is not None:
                self._watches.append(watch)

    def _patcher(self, known: KnownClass) -> Callable[[Any], None]:
        def patch(module: Any) -> None:
            self._patch(_defining_class(getattr(module, known.name), known), known, module)

        return patch

    def restore(self) -> None:
        for watch in self._watches:
            watch.cancel()
        self._watches.clear()
        for owner, name, original in reversed(self._originals):
            if original is _ABSENT:
                delattr(owner, name)
            else:
                setattr(owner, name, original)
        self._originals.clear()

    def _set(self, cls: type, name: str, method: Any) -> None:
        original = getattr(cls, name)
        self._originals.append((cls, name, cls.__dict__.get(name, _ABSENT)))
        # The original's doc, __wrapped__ (inspect.signature follows it) and attributes; named
        # where it now is, so that pickle finds it by that name as it finds the original.
        functools.update_wrapper(method, original)
        method.__module__ = cls.__module__
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)

    def _patch(self, cls: type, known: KnownClass, module: ModuleType) -> None:
        if known.name in self.patched:
            return
        self.patched.append(known.name)
        registry = self.registry
        phased: tuple[Any, Any] | None = None
        parts: tuple[Any, Any, Any, Any] | None = None  # for _timed_step: the class's own two, then rlprof's
        if known.in_workers:
            phased = (_timed_send(cls.step_async, registry), _timed_wait(cls.step_wait, known, module, registry))
            if sends_then_waits(cls.step):  # Gymnasium's AsyncVectorEnv: its phased run calls them
                parts = (cls.step_async, cls.step_wait, *phased)
            self._set(cls, "step_async", phased[0])
            self._set(cls, "step_wait", phased[1])
        self._set(cls, "__init__", _timed_init(cls.__init__, known, registry, phased))
        if known.module.startswith("stable_baselines3"):
            self._time_sb3_step(cls)
        elif known.in_workers:
            self._set(cls, "step", _timed_step(cls.step, registry, through_wrappers=False, parts=parts))
        else:
            self._set(cls, "step", _timed_block(cls.step, registry, "vector.step", _STEP_NAME))
        self._set(cls, "reset", _timed_block(cls.reset, registry, "vector.reset", _RESET_NAME))

    def time_natively_vectorized(self, cls: type) -> None:
        """Time a natively vectorized env's class (one call steps all its envs, in the trainer:
        ``CartPoleVectorEnv``): its ``step`` and ``reset`` as ``vector.step`` and ``vector.reset``
        (or named apart) around one block of env compute each, ``env.step (vectorized)`` and
        ``env.reset (vectorized)``, which the analysis counts as the envs' compute in the trainer."""
        name = f"{cls.__module__}.{cls.__qualname__}"
        if name in self.patched:
            return
        self.patched.append(name)
        registry = self.registry
        self._set(cls, "step", _timed_block(cls.step, registry, "vector.step", _STEP_NAME, "env.step (vectorized)"))
        self._set(cls, "reset", _timed_block(cls.reset, registry, "vector.reset", _RESET_NAME,
                                             "env.reset (vectorized)"))

    def _time_sb3_step(self, cls: type) -> None:
        """SB3's ``step`` is its base class's, called on the outermost ``VecEnvWrapper``
        (``VecNormalize``, ``VecMonitor``...), which calls the wrapped env's ``step_async`` and
        ``step_wait``, never its ``step``: so the base's is timed, for a known env however wrapped."""
        base = next(klass for klass in cls.__mro__ if klass.__name__ == "VecEnv")
        if "VecEnv.step" not in self.patched:
            self.patched.append("VecEnv.step")
            self._set(base, "step", _timed_step(base.step, self.registry, through_wrappers=True))


_ABSENT = object()


def _defining_class(found: type, known: KnownClass) -> type:
    """The known class itself, where ``--vector-env`` put a stand-in of the same name in its
    module: the first class of that name that defines its own ``__init__`` (a stand-in does not)."""
    for cls in found.__mro__:
        if cls.__name__ == known.name and "__init__" in cls.__dict__:
            return cls
    return found


def _timed_init(original: Any, known: KnownClass, registry: Any, phased: tuple[Any, Any] | None) -> Any:
    """``phased``: the timed ``step_async`` and ``step_wait`` of a class whose envs run in workers;
    a vector env whose class has both (no subclass put its own in their place, which would do its
    work inside the phases) has its steps timed as one phased block."""

    def __init__(self: Any, env_fns: Any, *args: Any, **kwargs: Any) -> None:
        record, wrapped = registry.new_record(type(self), known, env_fns)
        original(self, wrapped, *args, **kwargs)
        if known.shared_memory is not None:
            setting = known.shared_memory(self)
            record.shared_memory = setting if isinstance(setting, bool) else None
        registry.built(self, record)
        if known.pipes is not None:  # its replies' reads, timed where they block (reply_reads)
            record.replies.attach(self, known.pipes(self))
        cls = type(self)
        if phased is not None and cls.step_async is phased[0] and cls.step_wait is phased[1]:
            record.time_steps_in_phases()

    return __init__


_STEP_NAME = attrgetter("step_name")
_RESET_NAME = attrgetter("reset_name")


def _timed_block(original: Any, registry: Any, default: str, name_of: Callable[[Any], str],
                 inner: str | None = None) -> Any:
    """A method timed as a block named by the vector env's record (``vector.step``, or its own
    name when it is named apart: :meth:`VectorEnvRecord.name_apart`); ``default`` for a vector env
    without one. With ``inner``, the call is also a block of that name inside it (the env compute
    of a natively vectorized env)."""
    hierarchical_timer = timers.hierarchical_timer
    record_of = registry.record_of

    def timed(self: Any, *args: Any, **kwargs: Any) -> Any:
        name = default
        if registry.named_apart:  # only then is a record's name looked up: a step of every program pays none
            last = registry.last_found  # as in _timed_step
            record = last[1] if last is not None and last[0]() is self else record_of(self)
            if record is not None:
                name = name_of(record)
        with hierarchical_timer(name):
            if inner is None:
                return original(self, *args, **kwargs)
            with hierarchical_timer(inner):
                return original(self, *args, **kwargs)

    return timed


def _timed_step(original: Any, registry: Any, *, through_wrappers: bool,
                parts: tuple[Any, Any, Any, Any] | None = None) -> Any:
    """The ``step`` of a class whose envs run in workers (``through_wrappers``: SB3's ``VecEnv.step``,
    also called on the wrappers around a known env, and on ``DummyVecEnv``).

    ``parts``: for a class whose own ``step`` is its ``step_async`` then its ``step_wait``, those
    two (the class's own) and rlprof's timed ones. A phased run then calls the class's own two
    itself, stamping the phase ends where rlprof's would (:func:`_timed_send`, :func:`_timed_wait`),
    while the vector env's ``step_async`` and ``step_wait`` are rlprof's (none set on the instance
    or by a subclass): three Python frames a step fewer (``benchmarks/instrumented_step_instructions.py``)."""
    hierarchical_timer = timers.hierarchical_timer
    record_of = registry.record_of
    monotonic = time.monotonic

    def step(self: Any, actions: Any) -> Any:
        last = registry.last_found  # the vector env asked about last, without record_of's frame
        record = last[1] if last is not None and last[0]() is self else record_of(self)
        wrapped = record is None
        if wrapped:
            if not through_wrappers:  # an instance never registered: a plain block
                with hierarchical_timer("vector.step"):
                    return original(self, actions)
            record = _wrapped_record(self, record_of)
            if record is None:  # around no known class: not timed
                return original(self, actions)
        core_waits = record.core_waits  # the trainer's waits for a core and time on one, in its steps
        run_queue_before = core_waits.start() if core_waits is not None else None
        if not wrapped:
            block = record.step_block
            # A step inside this vector env's open run (a wrapper of the program's stepping it
            # again) is timed with `with` blocks, as are all while open() declines.
            clock = block.open() if block is not None and record.phase_clock is None else None
            if clock is not None:
                # The class's own step calls step_async and step_wait, which stamp where sending
                # and waiting end (_timed_send, _timed_wait); receiving ends as it returns.
                record.phase_clock = clock
                record.sent_stamp = record.waited_stamp = None
                record.step_node = block.node  # the workers' payloads merge under it
                try:
                    if parts is not None and _calls_timed_parts(self, parts):
                        # The class's own step inline: sending ends as its step_async returns,
                        # waiting after the time the reads blocked (put first, as _timed_wait does).
                        parts[0](self, actions)
                        record.sent_stamp = sent = clock()
                        waits = record.replies.waits
                        waits.begin(clock)
                        try:
                            result = parts[1](self)
                        finally:
                            record.waited_stamp = sent + waits.end()
                    else:
                        result = original(self, actions)
                    end = clock()  # inside the try: an interrupt here still closes the run
                    record.phase_clock = None
                except BaseException:
                    record.phase_clock = None
                    block.fail(record.sent_stamp, record.waited_stamp)
                    raise
                if run_queue_before is not None:
                    core_waits.end(run_queue_before)
                start, sent, waited = block.node._start, record.sent_stamp, record.waited_stamp
                if waited is None:  # the step went around rlprof's step_wait (a method set on the instance)
                    waited = end
                    if sent is None:
                        sent = end
                elif sent is None:  # around rlprof's step_async only: waiting from the start
                    sent = start
                # PhasedBlock.close inline, as the manager's step record closes it: no call.
                block.stack.current = block.parent
                runs = block.runs
                runs.append((start, sent, waited, end))
                if len(runs) >= FOLD_AT_RUNS:
                    block.fold()  # the record takes each step's window from the runs (its on_fold)
                if monotonic() >= record.resources.next_sample_at:  # once a second: no call the other steps
                    record.resources.maybe_sample(enumerate(record.pids))
                return result
        with hierarchical_timer(record.step_name) as node:
            if record.in_workers and isinstance(node, TimerNode):
                record.step_node = node  # the workers' payloads merge under it
            result = original(self, actions)
        if run_queue_before is not None:
            core_waits.end(run_queue_before)
        return result

    return step


def sends_then_waits(step: Any) -> bool:
    """Whether ``step`` is a function whose body can only be ``self.step_async(actions)`` then
    ``return self.step_wait()``: the only names its code uses are those two methods, its only
    variables ``self`` and ``actions``. A Gymnasium whose ``AsyncVectorEnv.step`` did anything more
    (another call, an attribute, a check) keeps its own ``step``, called as it is, in the phased run."""
    code = getattr(step, "__code__", None)
    return (code is not None and code.co_names == ("step_async", "step_wait")
            and code.co_varnames == ("self", "actions") and not code.co_freevars)


def _calls_timed_parts(envs: Any, parts: tuple[Any, Any, Any, Any]) -> bool:
    """Whether ``envs.step_async`` and ``envs.step_wait`` are rlprof's timed ones (``parts[2:]``):
    none set on the instance, or by a subclass, in their place."""
    try:
        return envs.step_async.__func__ is parts[2] and envs.step_wait.__func__ is parts[3]
    except AttributeError:  # one that is no method
        return False


def _wrapped_record(envs: Any, record_of: Callable[[Any], Any]) -> Any:
    """The record of the known vector env that SB3 wrappers (``envs`` outermost) wrap; None if none."""
    for _ in range(16):
        envs = own_attribute(envs, "venv")  # not envs.__dict__: that would unspecialize the wrapper
        if envs is None:
            return None
        record = record_of(envs)
        if record is not None:
            return record
    return None


def _timed_send(original: Any, registry: Any) -> Any:
    hierarchical_timer = timers.hierarchical_timer
    record_of = registry.record_of

    def step_async(self: Any, actions: Any) -> None:
        last = registry.last_found  # as in _timed_step
        record = last[1] if last is not None and last[0]() is self else record_of(self)
        if record is not None:
            clock = record.phase_clock
            if clock is not None:  # inside the step's phased run: sending ends here
                original(self, actions)
                record.sent_stamp = clock()
                return
        with hierarchical_timer("vector.send_actions") as node:
            if record is not None:  # the actions are sent as the block begins: its start is read once
                record.sent_at = node._start if isinstance(node, TimerNode) else timers.now()
            return original(self, actions)

    return step_async


def _timed_wait(original: Any, known: KnownClass, module: ModuleType, registry: Any) -> Any:
    """The ``step_wait`` of a class whose envs run in workers: the class's own reads each reply as
    soon as it is there, as under python, its pipes' ``recv`` counting the time they blocked
    (:mod:`.reply_reads`): that is the step's wait, the rest of it the receiving. A ``step_wait``
    given a timeout waits for every reply first (:func:`.reply_wait.wait_for_replies`), as the
    class itself does then."""
    hierarchical_timer = timers.hierarchical_timer
    record_of = registry.record_of
    pipes, timeout_argument = known.pipes, known.timeout_argument
    # Whether replies are pending, without a Python call: the state read by attrgetter, the value
    # it is compared with read from the class's module once, here.
    state, waiting = attrgetter(known.waiting_attribute), known.waiting_value(module)

    def step_wait(self: Any, *args: Any, **kwargs: Any) -> Any:
        last = registry.last_found  # as in _timed_step
        record = last[1] if last is not None and last[0]() is self else record_of(self)
        if record is None or state(self) != waiting:  # nothing pending: the class raises its own error
            return original(self, *args, **kwargs)
        timeout = kwargs.get("timeout", args[0] if args else None) if timeout_argument else None
        clock = record.phase_clock
        if timeout is not None:
            return _wait_then_receive(self, original, args, kwargs, record, pipes(self), timeout, clock)
        waits = record.replies.waits
        if clock is not None:  # inside the step's phased run: its waiting is the time the reads blocked
            sent = record.sent_stamp
            waits.begin(clock)
            try:
                return original(self, *args, **kwargs)
            finally:
                # The phases' lengths are exact, not their order: the waiting is put first, from
                # the end of sending (or of the step's start: sent around rlprof's step_async).
                record.waited_stamp = (sent if sent is not None else record.step_block.node._start) + waits.end()
        # `with` blocks: the receiving is the block around the class's step_wait, less the time its
        # reads blocked, which is counted as one run of the waiting, put first on the timeline.
        wait_node = hierarchical_timer("vector.wait_for_workers")  # made first: the phases' order
        with hierarchical_timer("vector.receive_results") as node:
            timed = isinstance(node, TimerNode)
            waiting_since = node._start if timed else timers.now()
            waits.begin(timers.current_clock())
            try:
                result = original(self, *args, **kwargs)
            finally:
                blocked = waits.end()
                if timed:
                    node._start += blocked
                    _count_wait(wait_node, waiting_since, blocked)
        record.step_done(waiting_since, timers.now())
        return result

    return step_wait


def _count_wait(node: TimerNode, start: float, blocked: float) -> None:
    """Count a run of the waiting block ``node`` lasting ``blocked`` from ``start``, and its span
    while the timeline records, as its ``with`` block would have (the companions that watch every
    block see the receiving's block only: the waiting is known once it is over)."""
    add_run(node, blocked)
    timeline = span_timeline(node._stack)
    if timeline is not None:
        timeline.add_spans([(node.name, start, start + blocked)])


def _wait_then_receive(envs: Any, original: Any, args: tuple, kwargs: dict, record: Any, pipes: list[Any],
                       timeout: float, clock: Any) -> Any:
    """A ``step_wait`` given a timeout: every reply waited for (the class's own polls all of its
    pipes before it reads any), then read; the program's timeout waited out once."""
    if clock is not None:  # inside the step's phased run: waiting ends here, receiving as the step returns
        if not wait_for_replies(pipes, timeout):
            args, kwargs = _no_time_left(args, kwargs)
        record.waited_stamp = clock()
        return original(envs, *args, **kwargs)
    with timers.hierarchical_timer("vector.wait_for_workers") as node:
        waiting_since = node._start if isinstance(node, TimerNode) else timers.now()
        answered = wait_for_replies(pipes, timeout)
    if not answered:
        args, kwargs = _no_time_left(args, kwargs)
    with timers.hierarchical_timer("vector.receive_results"):
        result = original(envs, *args, **kwargs)
    record.step_done(waiting_since, timers.now())
    return result


def _no_time_left(args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """``step_wait``'s arguments with no time left in its timeout: the program's timeout ran out in
    the trainer's wait, and the class's own wait must not wait it out a second time (a reply after
    the timeout would then let the step through, where the program gets the class's
    ``TimeoutError``)."""
    if args:
        return (_SpentTimeout(args[0]), *args[1:]), kwargs
    return args, {**kwargs, "timeout": _SpentTimeout(kwargs["timeout"])}


class _SpentTimeout(float):
    """A timeout with no time left (0.0, to every sum and comparison the class's wait makes) that
    reads as the program's own: the class's ``TimeoutError`` then says it timed out after the
    program's seconds, as without rlprof, not after 0.0."""

    def __new__(cls, program_timeout: Any) -> _SpentTimeout:
        spent = super().__new__(cls, 0.0)
        spent.program_timeout = program_timeout
        return spent

    def __repr__(self) -> str:
        return repr(self.program_timeout)

    def __str__(self) -> str:
        return str(self.program_timeout)

    def __format__(self, spec: str) -> str:
        return format(self.program_timeout, spec)
