"""A ``multiprocessing.Pool`` worker ships what its envs timed as its tasks end.

An evaluation pool often builds each worker's env once, in the pool's ``initializer``, and steps it
in every task; the env is never closed. ``with Pool(...) as pool:`` terminates the workers as the
block ends (SIGTERM), so a worker never reaches its exit's shipment, and a worker ships on its own
only once a second while it steps: a 40-episode evaluation under ``rlprof run`` showed none of its
832 env steps, and said its workers' channels ended before their last timers.

So, in the workers of a pool, rlprof wraps the pool's two queues as the worker function
(``multiprocessing.pool.worker``) receives them. Before a task's result goes back (the pool may
terminate the worker once it has its results), the worker ships what its envs timed, and says
goodbye (it owes nothing while idle, and the end of the run need not wait for it), when
:data:`TASK_SHIPMENT_SPACING_SECONDS` have passed since it last shipped; as its next task arrives,
it says it resumed. A worker terminated after tasks shorter than that lacks at most that long's
calls, and the dump says so. Shipping before every result instead cost a ``map`` of 2,000
one-step tasks five times its time (a shipment is about 0.2 ms); shipping when no task waited
was not exact either (another worker can take the task that was waiting) and cost a ``map`` of
twenty-step tasks 60%. Nothing changes in a process with no timed env, or in a ``ThreadPool``,
whose workers are threads of the trainer.
"""

from __future__ import annotations

import functools
import sys
import threading
import time
from typing import Any, Callable

from envmanager.instrumentation import timed_env

__all__ = ["POOL_MODULE", "TASK_SHIPMENT_SPACING_SECONDS", "is_pool_worker", "patch_pool_worker"]

POOL_MODULE = "multiprocessing.pool"

TASK_SHIPMENT_SPACING_SECONDS = 0.02
"""A worker ships before a task's result at most this often: a shipment costs about 0.2 ms, a
hundredth of this."""


def patch_pool_worker(pool_module: Any) -> Callable[[], None]:
    """Have the workers ``multiprocessing.pool`` (``pool_module``, imported) starts from now on
    ship before their tasks' results; returns what puts its worker function back."""
    original = pool_module.worker

    def worker(inqueue: Any, outqueue: Any, *args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():  # a ThreadPool's
            return original(inqueue, outqueue, *args, **kwargs)
        return original(_TaskArrivals(inqueue), _ShippedBeforeResults(outqueue), *args, **kwargs)

    # Its own name and module: a spawned pool pickles its target by reference, and the worker
    # finds this one there (the process's mark, unpickled first, patches it: own_processes).
    functools.update_wrapper(worker, original)
    pool_module.worker = worker

    def restore() -> None:
        if pool_module.worker is worker:
            pool_module.worker = original

    return restore


def is_pool_worker(target: Any) -> bool:
    """Whether ``target``, a process's, is the worker function of ``multiprocessing.pool``."""
    pool_module = sys.modules.get(POOL_MODULE)
    return target is not None and target is getattr(pool_module, "worker", None)


class _TaskArrivals:
    """The pool's task queue, as its worker reads it: a task that arrives after the worker said
    goodbye tells the trainer that it ships again."""

    __slots__ = ("_queue",)

    def __init__(self, queue: Any) -> None:
        self._queue = queue

    def get(self) -> Any:
        task = self._queue.get()
        shipping = timed_env.current_shipping()
        if shipping is not None and task is not None:
            shipping.resume()
        return task

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)


class _ShippedBeforeResults:
    """The pool's result queue, as its worker writes it: before a result goes back, what the
    task's envs timed is shipped, with a goodbye, once the last shipment is
    :data:`TASK_SHIPMENT_SPACING_SECONDS` old."""

    __slots__ = ("_queue", "_shipped_at")

    def __init__(self, queue: Any) -> None:
        self._queue = queue
        self._shipped_at = time.monotonic()

    def put(self, item: Any) -> None:
        shipping = timed_env.current_shipping()
        # A task that closed its env said goodbye already.
        if shipping is not None and not shipping.said_goodbye:
            now = time.monotonic()
            if now - self._shipped_at >= TASK_SHIPMENT_SPACING_SECONDS:
                shipping.ship(goodbye=True)
                self._shipped_at = now
        self._queue.put(item)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._queue, name)
