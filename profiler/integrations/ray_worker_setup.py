"""What runs in every Ray worker process of a program under ``rlprof run``, without its edit.

:mod:`profiler.integrations.ray_workers` gives the program's ``ray.init`` a
``worker_process_setup_hook`` (Ray's own hook, run once in each worker process of the job before
its first task): a :class:`WorkerSetup`, pickled into the job's ``runtime_env``. In each worker it

* times every task and actor method the worker runs as a block named after it (``rollout``,
  ``Runner.run``, ``Runner.__init__`` for an actor's construction), around the program's own
  blocks (``@timed``, ``hierarchical_timer``) and what ``rlprof run`` times without edits: the
  environments built there (the ``rlprof.environments`` entry point, once the worker imports
  Gymnasium) and PyTorch's phases (:mod:`profiler.automatic`). It does so by wrapping the function
  Ray's function manager hands the worker for each task (``FunctionActorManager.
  get_execution_info``: Ray's private API, checked by the tests on the Ray version they run);
* connects back to the driver and ships the worker's timers after a task once a second has passed
  since its last shipment, and all of them when the driver asks (before ``ray.shutdown`` and at
  the end of the run) and when the process exits. A shipment is taken on the thread that ran the
  task, or, when the driver asks, while that thread is between tasks (a lock per thread that runs
  tasks), so a block is never read while it is being timed.

rlprof's own Ray code is left as it is: ``RayEnvManager``'s env actors and the tasks and actors of
:mod:`profiler.integrations.ray` ship their timers with their replies, to mergers of their own, so
their calls are not wrapped, and a process's envs and torch phases are timed from its first
wrapped call on (a process that runs only rlprof's own code is exactly as without ``rlprof run``).

Nothing here may break the worker: if the driver cannot be reached the worker runs on untimed, and
the program's own setup hook, if it passed one, runs after rlprof's, as it would have alone.
Coroutine and generator tasks are not wrapped (their block would close before their work), nor
Ray's internal actor methods (``__ray_ready__``, ...).
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import socket
import sys
import threading
from importlib.metadata import entry_points
from multiprocessing.connection import Connection, answer_challenge, deliver_challenge
from typing import Any, Callable

from profiler.automatic import AutomaticPhases
from profiler.automatic.post_import import when_imported
from profiler.multiprocess.payload import snapshot_and_flush
from profiler.recording import events, memory
from profiler.recording.memory import MemorySampling
from profiler.timing import timers

__all__ = ["CONNECT_TIMEOUT_SECONDS", "FLUSH_WAIT_SECONDS", "SHIP_INTERVAL_SECONDS", "WorkerSetup"]

SHIP_INTERVAL_SECONDS = 1.0
"""A worker ships its timers after a task at most this often (and always when asked, and at exit)."""

CONNECT_TIMEOUT_SECONDS = 5.0
"""How long a worker tries to reach the driver before it runs on without shipping."""

FLUSH_WAIT_SECONDS = 2.0
"""How long a flush the driver asked for waits for a task still running on a thread."""

ENVIRONMENTS_GROUP = "rlprof.environments"  # the same entry point ``rlprof run`` loads in the driver


class WorkerSetup:
    """Ray's ``worker_process_setup_hook`` for a program under ``rlprof run``.

    ``address`` and ``authkey`` are where the driver listens (:mod:`.ray_workers`), ``user_hook``
    the hook the program itself gave ``ray.init`` (a callable or an import path), run after;
    ``memory_sampling`` the driver's (``rlprof run --memory``), which the worker applies as it
    starts timing, so that its samples travel home with its timers.
    """

    __name__ = "rlprof_worker_setup"  # Ray names the hook by it in the job's runtime_env

    def __init__(self, address: tuple[str, int], authkey: bytes, record_timeline: bool,
                 framework_phases: bool, user_hook: Callable[[], Any] | str | None = None, *,
                 memory_sampling: MemorySampling | None = None) -> None:
        self.address = address
        self.authkey = authkey
        self.record_timeline = record_timeline
        self.framework_phases = framework_phases
        self.user_hook = user_hook
        self.memory_sampling = memory_sampling

    def __call__(self) -> None:
        try:
            _start_worker(self)
        except Exception as error:  # noqa: BLE001 - profiling never stops the worker
            print(f"rlprof: this Ray worker is not timed ({type(error).__name__}: {error})", file=sys.stderr)
        if self.user_hook is not None:
            _run_user_hook(self.user_hook)


def _run_user_hook(hook: Callable[[], Any] | str) -> None:
    """The program's own setup hook, called as Ray would have: an import path is imported first."""
    if isinstance(hook, str):
        from ray._common.utils import load_class

        hook = load_class(hook)
    hook()


class _TaskThread:
    """One thread that runs tasks: its timer stack, and the lock it holds while running one."""

    __slots__ = ("lock", "stack", "quiet_until", "running", "flushes")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.stack = timers.get_timer_stack_for_thread(threading.current_thread())
        self.quiet_until = -1.0  # the first task ships at once: the driver learns of the worker early
        self.running: str | None = None
        self.flushes = self.stack.flushes  # the stack's flushes as of this thread's last shipment


class _WorkerProcess:
    """This worker process's end of the channel to the driver, and the threads it ships for."""

    def __init__(self, connection: Connection | None, framework_phases: bool = True,
                 memory_sampling: MemorySampling | None = None) -> None:
        self.connection = connection
        self.framework_phases = framework_phases
        self.memory_sampling = memory_sampling
        self.send_lock = threading.Lock()
        self.threads: dict[int, _TaskThread] = {}
        self.identity_sent = False
        self.instrumented = False

    def instrument(self) -> None:
        """Time the envs and torch phases of this process from its first timed call on.

        Not before: a process that runs only rlprof's own Ray code (a ``RayEnvManager`` worker,
        ``profiler.integrations.ray`` tasks) times and ships its blocks itself, and must be left as
        it would be without ``rlprof run``.
        """
        self.instrumented = True
        if self.memory_sampling is not None:
            memory.apply_sampling(self.memory_sampling)
        AutomaticPhases(framework_phases=self.framework_phases, stack_sampler=False).start()
        when_imported("gymnasium", _instrument_environments)

    def task_thread(self) -> _TaskThread:
        ident = threading.get_ident()
        task_thread = self.threads.get(ident)
        if task_thread is None:
            task_thread = self.threads[ident] = _TaskThread()
        return task_thread

    def send(self, message: tuple[Any, ...]) -> None:
        """Send, or drop once the driver is gone (the worker runs on, shipping nothing)."""
        connection = self.connection
        if connection is None:
            return
        try:
            with self.send_lock:
                connection.send(message)
        except Exception:  # noqa: BLE001 - the driver is gone or not reading
            self.connection = None

    def ship(self, task_thread: _TaskThread) -> None:
        """Send one thread's timers since its last shipment (called with its lock held)."""
        stack = task_thread.stack
        # Another shipper took a payload of this stack since (a profiler.integrations.ray task ran
        # on this thread): its names may have gone with it, so this payload declares them all.
        payload = snapshot_and_flush(stack, declare_all=stack.flushes != task_thread.flushes)
        task_thread.flushes = stack.flushes
        task_thread.quiet_until = payload[6] + SHIP_INTERVAL_SECONDS
        self.send(("timers", payload))

    def note_identity(self, class_name: str) -> None:
        """Tell the driver, once, which actor this process is (a task worker never says)."""
        if self.identity_sent:
            return
        self.identity_sent = True
        import ray

        self.send(("actor", class_name, ray.get_runtime_context().get_actor_id()))

    def flush(self) -> tuple[str, ...]:
        """Ship every thread's timers; the blocks of the tasks still running past the wait."""
        busy = []
        for task_thread in list(self.threads.values()):
            if task_thread.lock.acquire(timeout=FLUSH_WAIT_SECONDS):
                try:
                    self.ship(task_thread)
                finally:
                    task_thread.lock.release()
            else:
                busy.append(task_thread.running or "a task")
        return tuple(busy)

    def listen(self) -> None:
        """The driver's requests: ship everything now (before ``ray.shutdown``, at the run's end)."""
        while self.connection is not None:
            try:
                request = self.connection.recv()
            except Exception:  # noqa: BLE001 - the driver closed the channel
                return
            if request == ("flush",):
                self.send(("flushed", self.flush()))

    def at_exit(self) -> None:
        """The process ends (Ray ends a worker between tasks): its last timers, and goodbye."""
        if self.connection is None:
            return
        self.send(("bye", self.flush()))
        connection, self.connection = self.connection, None
        with contextlib.suppress(OSError):
            connection.close()


_process: _WorkerProcess | None = None


def _start_worker(setup: WorkerSetup) -> None:
    global _process
    if setup.record_timeline and not events.is_recording():
        events.start_recording()
    _process = _WorkerProcess(_connect(setup), setup.framework_phases, setup.memory_sampling)
    _wrap_ray_tasks(_process)
    if _process.connection is not None:
        threading.Thread(target=_process.listen, name="rlprof-ray-channel", daemon=True).start()
        atexit.register(_process.at_exit)


def _connect(setup: WorkerSetup) -> Connection | None:
    """Connected to the driver and introduced, or None (the worker then runs untimed)."""
    import ray

    try:
        peer = socket.create_connection(setup.address, timeout=CONNECT_TIMEOUT_SECONDS)
    except OSError as error:
        print(f"rlprof: this Ray worker cannot reach the driver at {setup.address[0]}:{setup.address[1]} "
              f"({error.strerror or error}); its timers are not shipped", file=sys.stderr)
        return None
    peer.settimeout(None)  # blocking from here: a Connection reads and writes whole messages
    connection = Connection(peer.detach())
    try:
        answer_challenge(connection, setup.authkey)
        deliver_challenge(connection, setup.authkey)
        connection.send(("hello", os.getpid(), socket.gethostname(), ray.get_runtime_context().get_node_id()))
    except Exception:  # noqa: BLE001 - a wrong key or a channel closed at once: run untimed
        connection.close()
        return None
    return connection


def _instrument_environments(gymnasium: Any) -> None:
    """Time the envs this worker builds where they run, as ``rlprof run`` does in the driver."""
    try:
        next(iter(entry_points(group=ENVIRONMENTS_GROUP))).load()()
    except StopIteration:
        pass
    except Exception as error:  # noqa: BLE001 - the worker runs on with its envs untimed
        print(f"rlprof: this Ray worker's environments are not timed ({type(error).__name__}: {error})",
              file=sys.stderr)


def _wrap_ray_tasks(process: _WorkerProcess) -> None:
    """Have every task function Ray hands this worker run as a timed block that ships its timers."""
    from ray._private.function_manager import FunctionActorManager

    original = FunctionActorManager.get_execution_info

    def get_execution_info(self: Any, job_id: Any, function_descriptor: Any) -> Any:
        info = original(self, job_id, function_descriptor)
        function = getattr(info, "function", None)
        if function is None or getattr(function, "_rlprof_timed", False):
            return info
        # A class made inside a function (RLlib's learner actors are) is named by its last part.
        class_name = (function_descriptor.class_name or "").rsplit(".", 1)[-1]
        name = function_descriptor.function_name
        if name == "__ray_terminate__":  # Ray ends the actor gracefully: its last timers first
            return info._replace(function=_shipping_first(process, function))
        target = _unwrapped(getattr(function, "method", function))
        if name.startswith("__ray") or not _is_plain(target) or _ships_its_own_timers(target, function_descriptor):
            return info
        block = f"{class_name}.{name}" if class_name else name
        return info._replace(function=_timed_task(process, function, block, class_name))

    FunctionActorManager.get_execution_info = get_execution_info


def _shipping_first(process: _WorkerProcess, terminate: Callable[..., Any]) -> Callable[..., Any]:
    """Ray's ``__ray_terminate__``, after the actor's last timers are shipped: the actor's process
    then ends at once, without running ``atexit`` functions."""

    def run(*args: Any, **kwargs: Any) -> Any:
        process.at_exit()
        return terminate(*args, **kwargs)

    return _standing_for(run, terminate)


_OWN_PACKAGES = ("profiler.", "envmanager.")


def _unwrapped(function: Any) -> Any:
    """The function under the decorators that say what they wrap (Ray's tracing wraps every task
    and actor method, ``functools.wraps``-style)."""
    try:
        return inspect.unwrap(function)
    except ValueError:  # a cycle of __wrapped__
        return function


def _ships_its_own_timers(function: Any, function_descriptor: Any) -> bool:
    """rlprof's own Ray code — ``RayEnvManager``'s env workers, the tasks and actors of
    ``profiler.integrations.ray`` — ships its timers with its replies, to mergers of its own."""
    module = getattr(function, "__globals__", {}).get("__name__", "") + "."
    return (module.startswith(_OWN_PACKAGES)
            or (function_descriptor.module_name + ".").startswith(_OWN_PACKAGES))


def _is_plain(function: Any) -> bool:
    """Whether its work is done by the time it returns (not a coroutine or a generator)."""
    return not (inspect.iscoroutinefunction(function) or inspect.isasyncgenfunction(function)
                or inspect.isgeneratorfunction(function))


def _timed_task(process: _WorkerProcess, function: Callable[..., Any], block: str,
                class_name: str) -> Callable[..., Any]:
    hierarchical_timer = timers.hierarchical_timer
    now = timers.now

    def run(*args: Any, **kwargs: Any) -> Any:
        if not process.instrumented:
            process.instrument()
        if class_name:
            process.note_identity(class_name)
        task_thread = process.task_thread()
        with task_thread.lock:
            task_thread.running = block
            try:
                with hierarchical_timer(block):
                    return function(*args, **kwargs)
            finally:
                task_thread.running = None
                if now() >= task_thread.quiet_until:
                    process.ship(task_thread)

    return _standing_for(run, function)


def _standing_for(run: Callable[..., Any], function: Callable[..., Any]) -> Callable[..., Any]:
    """``run`` marked as rlprof's, with the names Ray reads from the function it replaces."""
    run._rlprof_timed = True  # type: ignore[attr-defined]
    for attribute in ("name", "method", "__name__", "__qualname__", "__doc__"):
        if hasattr(function, attribute):
            with contextlib.suppress(AttributeError, TypeError):
                setattr(run, attribute, getattr(function, attribute))
    return run
